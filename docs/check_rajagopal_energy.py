"""OpenSim 4.6's forward dynamics of Rajagopal2016 do not conserve energy; jaxmb's do.

With every force off but gravity (muscles removed, the reserve actuators at zero control) the
model is conservative, so along any motion ``dE/dt = q̇ᵀ M q̈ + ½ q̇ᵀ Ṁ q̇ − q̇ᵀ G = 0``. At two random
states with speeds (``tests/reference/opensim_zoo.py``, the comparison of
``tests/io/test_osim_zoo.py``) this prints that rate for OpenSim's accelerations and for jaxmb's,
with M and G jaxmb's (equal to OpenSim's ``calcM`` and ``Jᵀ m g`` to 1e-15 there, printed too)
and Ṁ = dM/dq · q̇ by forward-mode autodiff. OpenSim's rate is ~6e-4 J/s against q̇ᵀG of 90–490 W;
jaxmb's is ~1e-13. The two differ only at nonzero speed (at rest they agree to 1e-10) and on the
knees, whose CustomJoint rotations are SimmSplines of the knee angle, so jaxmb's forward dynamics
cannot match OpenSim's there (``docs/osim_import.md``, Rajagopal row). Run from the repository
root: ``python docs/check_rajagopal_energy.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from reference.opensim_zoo import energy_rates  # noqa: E402

PATH = ROOT / "tests" / "data" / "osim" / "zoo" / "Rajagopal2016.osim"


def main():
    for k, (rj, ro, p, dm, dg) in enumerate(energy_rates(PATH)):
        print(f"pose {k}: dE/dt jaxmb {rj:+.3e} W, OpenSim {ro:+.3e} W  (q̇ᵀG {p:+.2f} W; "
              f"M agrees to {dm:.1e}, G to {dg:.1e})")  # fmt: skip


if __name__ == "__main__":
    main()
