"""Build ``tests/data/shoulder_muscle_reference.json`` with OpenSim 4.6 (``pip install opensim``).

The 14 shoulder muscles of the seed (§4-4 C, Table 5) in MoBL-ARMS (``tests/data/osim/
MoBL_ARMS_module6_7_CMC.osim``, Saul et al. 2015). The seed's protocol: each of ``elv_angle``,
``shoulder_elv``, ``shoulder_rot`` swept over its range at 1° steps (both ends included) with every
other independent coordinate at zero. At each pose, OpenSim's assembled path length ``L`` and the
referee moment arm ``r_j = −dL/dq_j`` for the three shoulder coordinates by central differences
(``h = 1e-6`` rad). OpenSim's ``computeMomentArm`` is not used: it disagrees with −dL/dq for
muscles with moving points under coupling constraints (LAT1, PECM3; see the data README).

Coupled coordinates are set from OpenSim's own coupler functions (``Function.calcValue``), not by
the assembler, so the pose is exactly the one jaxmb is given; coordinates are unlocked first.

Two variants: ``wrapped`` (the model as written) and ``nowrap`` (every wrap object inactive), so
the path points, moving points and kinematics can be checked independently of wrap geometry.

Run from the repository root: ``python tests/data/make_shoulder_muscle_reference.py``.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import opensim as osim

osim.Logger.setLevelString("error")

HERE = Path(__file__).parent
OSIM = HERE / "osim" / "MoBL_ARMS_module6_7_CMC.osim"
OUT = HERE / "shoulder_muscle_reference.json"
MUSCLES = (
    "DELT1", "DELT2", "DELT3", "SUPSP", "INFSP", "SUBSC", "TMIN", "TMAJ",
    "PECM1", "PECM2", "PECM3", "LAT1", "LAT2", "LAT3",
)  # fmt: skip
SWEPT = ("elv_angle", "shoulder_elv", "shoulder_rot")
H = 1e-6


def build(wrapping: bool):
    model = osim.Model(str(OSIM))
    if not wrapping:
        bs = model.updBodySet()
        for i in range(bs.getSize()):
            ws = bs.get(i).upd_WrapObjectSet()
            for k in range(ws.getSize()):
                ws.get(k).set_active(False)
    cs = model.getCoordinateSet()
    for i in range(cs.getSize()):
        cs.get(i).setDefaultLocked(False)
    state = model.initSystem()
    return model, state


def couplings(model):
    """``{dependent: (independent, Function, scale)}`` of the CoordinateCouplerConstraints."""
    out = {}
    cons = model.getConstraintSet()
    for i in range(cons.getSize()):
        c = osim.CoordinateCouplerConstraint.safeDownCast(cons.get(i))
        if c is None:
            continue
        ind = c.getIndependentCoordinateNames()
        assert ind.getSize() == 1, c.getName()
        out[c.getDependentCoordinateName()] = (
            ind.get(0),
            c.getFunction(),
            osim.PropertyHelper.getValueDouble(c.getPropertyByName("scale_factor")),
        )
    return out


class Lengths:
    """OpenSim's path lengths of the 14 muscles at a pose of the independent coordinates."""

    def __init__(self, wrapping: bool):
        self.model, self.state = build(wrapping)
        cs = self.model.getCoordinateSet()
        self.cs = cs
        self.names = [cs.get(i).getName() for i in range(cs.getSize())]
        self.coup = couplings(self.model)
        self.indep = [n for n in self.names if n not in self.coup]
        self.muscles = [self.model.getMuscles().get(m) for m in MUSCLES]

    def __call__(self, q: dict) -> np.ndarray:
        Q = {n: q.get(n, 0.0) for n in self.indep}
        todo = dict(self.coup)
        while todo:
            for d, (i, f, s) in list(todo.items()):
                if i in Q:
                    Q[d] = s * f.calcValue(osim.Vector(1, Q[i]))
                    del todo[d]
        for n in self.names:
            self.cs.get(n).setValue(self.state, Q[n], False)
        self.model.realizePosition(self.state)
        for n in self.names:
            assert abs(self.cs.get(n).getValue(self.state) - Q[n]) < 1e-15, n
        return np.array([m.getLength(self.state) for m in self.muscles])


def sweep(lengths: Lengths) -> dict:
    out = {}
    for c in SWEPT:
        co = lengths.cs.get(c)
        lo, hi = co.getRangeMin(), co.getRangeMax()
        deg = np.arange(np.ceil(np.degrees(lo) - 1e-9), np.floor(np.degrees(hi) + 1e-9) + 1)
        qs = np.radians(deg)
        L, R = [], []
        for x in qs:
            L.append(lengths({c: x}))
            r = []
            for j in SWEPT:
                base = {c: x}
                plus, minus = dict(base), dict(base)
                plus[j] = base.get(j, 0.0) + H
                minus[j] = base.get(j, 0.0) - H
                r.append(-(lengths(plus) - lengths(minus)) / (2 * H))
            R.append(np.stack(r))  # (3, nm)
        out[c] = {
            "range": [lo, hi],
            "q": qs.tolist(),
            "length": np.round(np.asarray(L), 15).tolist(),  # (n, nm) m
            "moment_arm": np.round(np.asarray(R), 14).tolist(),  # (n, 3, nm) m
        }
    return out


def main():
    data = {
        "generator": "tests/data/make_shoulder_muscle_reference.py",
        "model": "tests/data/osim/MoBL_ARMS_module6_7_CMC.osim",
        "opensim_version": osim.GetVersion(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "protocol": "one coordinate swept at 1 deg steps over its range, other independent"
        " coordinates 0; moment_arm[i, j, m] = -dL_m/dq_j by central differences, h = 1e-6 rad,"
        " for j over the swept coordinates",
        "h": H,
        "muscles": list(MUSCLES),
        "coordinates": list(SWEPT),
    }
    for variant, wrapping in (("wrapped", True), ("nowrap", False)):
        data[variant] = sweep(Lengths(wrapping))
    OUT.write_text(json.dumps(data, separators=(",", ":")))
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
