"""Build ``tests/data/osim_muscles_reference.json`` with OpenSim 4.6 (``pip install opensim``).

For every model with muscles in ``tests/data/osim/`` and random poses of its independent
coordinates (uniform in each coordinate's range, rotations clipped to ±π; coupled coordinates set
from OpenSim's own coupling functions, as in ``make_osim_reference.py``): each muscle's path length
``GeometryPath.getLength`` (m), the moment arms as ``−dL/dq`` by central differences of that length
(h = 1e-6; truncation ~h²·L''' < 1e-12 m, rounding ~1e-16/h = 1e-10 m) over the independent
coordinates, and how many wrap points (``PathWrapPoint``) OpenSim's current path holds, i.e. which
wrap objects are active at that pose. Poses within 1e-5 of a ConditionalPathPoint's range end are
redrawn, so no difference straddles a switch.

Run from the repository root: ``python tests/data/make_osim_muscles_reference.py``.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import numpy as np
import opensim as osim

sys.path.insert(0, str(Path(__file__).parent))
from make_osim_reference import MODELS, couplings, osim_state  # noqa: E402

HERE = Path(__file__).parent
N_POSES = {"arm26": 12, "leg6dof9musc": 8, "gait2354_simbody": 4, "mobl_arms": 36}
H = 1e-6


def _full(q: dict, coup: dict) -> dict:
    Q = dict(q)
    todo = dict(coup)
    while todo:
        for d, (i, f, s) in list(todo.items()):
            if i in Q:
                Q[d] = s * f.calcValue(osim.Vector(1, Q[i]))
                del todo[d]
    return Q


def _conditional_ranges(model) -> list[tuple[str, float, float]]:
    out = []
    ms = model.getMuscles()
    for k in range(ms.getSize()):
        pps = ms.get(k).getGeometryPath().getPathPointSet()
        for i in range(pps.getSize()):
            c = osim.ConditionalPathPoint.safeDownCast(pps.get(i))
            if c is not None:
                out.append((c.getCoordinate().getName(), c.get_range(0), c.get_range(1)))
    return out


def reference(key: str, rng, n_poses: int) -> dict:
    fname, phantoms = MODELS[key]
    model, state = osim_state(HERE / "osim" / fname, phantoms)
    cs = model.getCoordinateSet()
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    coup = couplings(model)
    indep = [n for n in names if n not in coup]
    ms = model.getMuscles()
    mnames = [ms.get(k).getName() for k in range(ms.getSize())]
    cond = _conditional_ranges(model)

    def lengths(q):
        Q = _full(q, coup)
        for n in names:
            cs.get(n).setValue(state, Q[n], False)
        model.realizePosition(state)
        return np.array([ms.get(k).getLength(state) for k in range(ms.getSize())])

    def wrap_points():
        out = []
        for k in range(ms.getSize()):
            cur = ms.get(k).getGeometryPath().getCurrentPath(state)
            out.append(
                sum(
                    osim.PathWrapPoint.safeDownCast(cur.get(i)) is not None
                    for i in range(cur.getSize())
                )
            )
        return out

    poses = []
    while len(poses) < n_poses:
        q = {}
        for n in indep:
            c = cs.get(n)
            lo, hi = c.getRangeMin(), c.getRangeMax()
            if c.getMotionType() == 1:  # rotational
                lo, hi = max(lo, -np.pi), min(hi, np.pi)
            q[n] = float(rng.uniform(lo, hi))
        if any(c in q and min(abs(q[c] - a), abs(q[c] - b)) < 1e-5 for c, a, b in cond):
            continue
        L = lengths(q)
        nwrap = wrap_points()
        dL = np.zeros((len(indep), len(mnames)))
        for j, n in enumerate(indep):
            up, down = dict(q), dict(q)
            up[n] += H
            down[n] -= H
            dL[j] = (lengths(up) - lengths(down)) / (2 * H)
        poses.append(
            dict(
                q=[q[n] for n in indep],
                muscle_lengths=L.tolist(),
                moment_arms_fd=(-dL).tolist(),
                wrap_points=nwrap,
            )
        )
    return dict(file=fname, phantoms=list(phantoms), independent=indep, muscles=mnames, poses=poses)


def main() -> None:
    rng = np.random.default_rng(20261122)
    out = dict(
        generator="tests/data/make_osim_muscles_reference.py",
        opensim_version=osim.__version__,
        python=sys.version.split()[0],
        date=datetime.date.today().isoformat(),
        step=H,
        models={k: reference(k, rng, n) for k, n in N_POSES.items()},
    )
    (HERE / "osim_muscles_reference.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
