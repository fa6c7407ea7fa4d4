"""Record OpenSim 4.6's De Groote–Fregly 2016 muscle curves on grids (needs ``opensim``).

``DeGrooteFregly2016Muscle`` with default properties (passive strain at F_max 0.6, tendon strain at
F_max 0.049, active width scale 1): the active and passive fibre force–length multipliers, the
force–velocity multiplier and its inverse, the tendon force multiplier and its inverse. Writes
``degroote_opensim_reference.json`` next to this script.

    python tests/data/make_degroote_reference.py
"""

import datetime
import json
import pathlib

import numpy as np
import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent


def main():
    m = osim.DeGrooteFregly2016Muscle()
    lm = np.linspace(0.2, 1.8, 81)
    v = np.linspace(-1.0, 1.0, 81)
    fv = np.linspace(0.0, 1.75, 36)
    lt = np.linspace(1.0, 1.06, 31)
    ft = np.linspace(0.0, 1.5, 31)
    out = {
        "source": "OpenSim " + osim.GetVersionAndDate(),
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "script": "tests/data/make_degroote_reference.py",
        "lm_norm": lm.tolist(),
        "active": [m.calcActiveForceLengthMultiplier(x) for x in lm],
        "passive": [m.calcPassiveForceMultiplier(x) for x in lm],
        "v_norm": v.tolist(),
        "force_velocity": [m.calcForceVelocityMultiplier(x) for x in v],
        "fv": fv.tolist(),
        "force_velocity_inverse": [m.calcForceVelocityInverseCurve(x) for x in fv],
        "lt_norm": lt.tolist(),
        "tendon": [m.calcTendonForceMultiplier(x) for x in lt],
        "ft": ft.tolist(),
        "tendon_inverse": [m.calcTendonForceLengthInverseCurve(x) for x in ft],
    }
    (HERE / "degroote_opensim_reference.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
