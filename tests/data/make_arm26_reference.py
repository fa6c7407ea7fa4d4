"""Precompute OpenSim 4.6 reference values for arm26 (run once; needs ``pip install opensim``).

For a grid of poses (shoulder elevation × elbow flexion) it records every muscle's path length
(``Muscle.getLength``) and the moment arms −dL/dq by central differences of OpenSim's own length
(step 1e-6 rad; OpenSim's ``computeMomentArm`` is not used, see opensim-core#3805), plus the names
of the wrap objects in each muscle's current path. Writes ``arm26_opensim_reference.json`` next to
this script.

    python tests/data/make_arm26_reference.py
"""

import datetime
import json
import pathlib

import numpy as np
import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent
OSIM = HERE.parent.parent / "jaxmb" / "data" / "arm26.osim"
H = 1e-6


def main():
    model = osim.Model(str(OSIM))
    state = model.initSystem()
    coords = model.getCoordinateSet()
    muscles = model.getMuscles()
    names = [muscles.get(i).getName() for i in range(muscles.getSize())]
    cnames = [coords.get(i).getName() for i in range(coords.getSize())]

    def lengths(q):
        for i, v in enumerate(q):
            coords.get(i).setValue(state, float(v), False)
        model.realizePosition(state)
        return np.array([muscles.get(i).getLength(state) for i in range(len(names))])

    def wraps(q):
        lengths(q)
        out = []
        for i in range(len(names)):
            path = muscles.get(i).getGeometryPath().getCurrentPath(state)
            objs = []
            for k in range(path.getSize()):
                wo = path.get(k).getWrapObject()
                if wo is not None and wo.getName() not in objs:
                    objs.append(wo.getName())
            out.append(objs)
        return out

    shoulder = np.linspace(-1.2, 2.8, 9)
    elbow = np.linspace(0.05, 2.2, 8)
    poses, L, R, W = [], [], [], []
    for a in shoulder:
        for b in elbow:
            q = np.array([a, b])
            poses.append(q.tolist())
            L.append(lengths(q).tolist())
            cols = []
            for k in range(2):
                e = np.zeros(2)
                e[k] = H
                cols.append(-(lengths(q + e) - lengths(q - e)) / (2 * H))
            R.append(np.stack(cols).tolist())  # (nq, nm)
            W.append(wraps(q))
    out = {
        "source": "OpenSim " + osim.__version__ + ", arm26.osim (opensim-org/opensim-models)",
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "script": "tests/data/make_arm26_reference.py",
        "coordinates": cnames,
        "muscles": names,
        "fd_step_rad": H,
        "poses": poses,
        "lengths_m": L,
        "moment_arms_m": R,
        "wrap_objects_in_path": W,
    }
    (HERE / "arm26_opensim_reference.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
