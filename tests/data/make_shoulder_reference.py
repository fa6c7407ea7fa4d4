"""Build ``tests/data/shoulder_opensim_reference.json`` with OpenSim 4.6 (``pip install opensim``).

The MoBL-ARMS model (``tests/data/osim/MoBL_ARMS_module6_7_CMC.osim``, Saul et al. 2015) reduced
to what ``jaxmb.models.shoulder(rhythm="mobl")`` describes:

* the inertias of the clavicle, scapula and humerus set again from the file: OpenSim 4.6's updater
  of 3.0 files rounds them to 6 significant digits (humerus I_xx 0.01227763 -> 0.0122776, I_zz
  0.01257888 -> 0.0125789), which alone moves the mass matrix by up to 6e-7 relative;
* the thorax tilt ``r_z`` of ``groundthorax`` set to 0 (jaxmb's thorax is the ground);
* the four phantom bodies' placeholder inertia diag(1, 1, 1) kg·m² set to zero (mass kept);
* the bodies distal to the humerus (ulna, radius, proximal_row, hand) given zero mass and
  inertia, so they do not load the shoulder;
* every force element disabled (muscles, reserve actuators), so only gravity acts;
* every coordinate unlocked.

At random poses q = (elv_angle, shoulder_elv, shoulder_rot) the coupled coordinates are set from
OpenSim's own coupler functions (``Function.calcValue``) and the model is realized to position.
Recorded per pose:

* ``transforms``: each shoulder body's pose in ground, ``Body.getTransformInGround`` (4×4);
* ``coordinates``: every coordinate value OpenSim holds (the joint variables);
* ``mass_matrix``: ``Jᵀ M J`` with ``M`` Simbody's mobility-space mass matrix (``calcM``) and
  ``J = ∂u/∂q̇`` by central differences of the assembled coordinate vector (the couplers are
  straight lines, so the difference is exact to rounding, step 1e-3 rad);
* ``gravity``: ``−Jᵀ τ`` with τ from ``InverseDynamicsSolver`` at zero velocity and zero
  acceleration (τ = −G in mobility space, constraints ignored; Jᵀ removes their forces anyway).

Run from the repository root: ``python tests/data/make_shoulder_reference.py``.
"""

from __future__ import annotations

import datetime
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import opensim as osim

osim.Logger.setLevelString("error")

HERE = Path(__file__).parent
OSIM = HERE / "osim" / "MoBL_ARMS_module6_7_CMC.osim"
OUT = HERE / "shoulder_opensim_reference.json"
INDEPENDENT = ("elv_angle", "shoulder_elv", "shoulder_rot")
BODIES = ("clavicle", "clavphant", "scapula", "scapphant", "humphant", "humphant1", "humerus")
PHANTOMS = ("clavphant", "scapphant", "humphant", "humphant1")
DISTAL = ("ulna", "radius", "proximal_row", "hand")
N_POSES = 12
H = 1e-3


def file_inertias() -> dict[str, list[float]]:
    """The bodies' inertias as written in the .osim (3.0 format: inertia_xx ... inertia_yz)."""
    out = {}
    for b in ET.parse(OSIM).getroot().iter("Body"):
        vals = [b.findtext(f"inertia_{k}") for k in ("xx", "yy", "zz", "xy", "xz", "yz")]
        if all(v is not None for v in vals):
            out[b.get("name")] = [float(v) for v in vals]
    return out


def build():
    model = osim.Model(str(OSIM))
    bs = model.updBodySet()
    exact = file_inertias()
    for name in ("clavicle", "scapula", "humerus"):
        bs.get(name).setInertia(osim.Inertia(*exact[name]))
    for name in PHANTOMS:
        bs.get(name).setInertia(osim.Inertia(0.0))
    for name in DISTAL:
        b = bs.get(name)
        b.setMass(0.0)
        b.setInertia(osim.Inertia(0.0))
    fs = model.updForceSet()
    for i in range(fs.getSize()):
        fs.get(i).set_appliesForce(False)
    cs = model.updCoordinateSet()
    for i in range(cs.getSize()):
        cs.get(i).setDefaultLocked(False)
    cs.get("r_z").setDefaultValue(0.0)
    state = model.initSystem()
    return model, state


def couplers(model):
    """``{dependent: (independent, Function, scale)}``."""
    out = {}
    cons = model.getConstraintSet()
    for i in range(cons.getSize()):
        c = osim.CoordinateCouplerConstraint.safeDownCast(cons.get(i))
        if c is None:
            continue
        ind = c.getIndependentCoordinateNames()
        out[c.getDependentCoordinateName()] = (
            ind.get(0),
            c.getFunction(),
            float(c.getPropertyByName("scale_factor").toString()),
        )
    return out


def set_pose(model, state, cpl, q):
    cs = model.getCoordinateSet()
    vals = dict(zip(INDEPENDENT, q, strict=True))
    for name, v in vals.items():
        cs.get(name).setValue(state, float(v), False)
    for dep, (ind, fn, scale) in cpl.items():
        if ind in vals:
            x = osim.Vector(1, float(vals[ind]))
            cs.get(dep).setValue(state, scale * fn.calcValue(x), False)
    model.realizePosition(state)


def compute(poses) -> tuple[list[dict], list[float]]:
    """OpenSim's records at each pose (see the module docstring) and the gravity vector."""
    model, state = build()
    cpl = couplers(model)
    cs = model.getCoordinateSet()
    cnames = [cs.get(i).getName() for i in range(cs.getSize())]
    matter = model.getMatterSubsystem()
    ids = osim.InverseDynamicsSolver(model)

    def qvec(q):
        set_pose(model, state, cpl, q)
        return np.array([state.getQ().get(i) for i in range(state.getNQ())])

    records = []
    for q in map(np.asarray, poses):
        J = np.stack([(qvec(q + H * e) - qvec(q - H * e)) / (2 * H) for e in np.eye(3)], axis=1)
        set_pose(model, state, cpl, q)
        if state.getNQ() != state.getNU():
            raise RuntimeError("expected q̇ = u for every mobilizer")
        M = osim.Matrix()
        matter.calcM(state, M)
        Mf = np.array([[M.get(i, j) for j in range(M.ncol())] for i in range(M.nrow())])
        model.realizeVelocity(state)
        tau = ids.solve(state, osim.Vector(state.getNU(), 0.0))
        tau = np.array([tau.get(i) for i in range(tau.size())])
        T = {}
        for b in BODIES:
            X = model.getBodySet().get(b).getTransformInGround(state)
            R, p = X.R(), X.p()
            A = np.eye(4)
            A[:3, :3] = [[R.get(i, j) for j in range(3)] for i in range(3)]
            A[:3, 3] = [p.get(i) for i in range(3)]
            T[b] = A.tolist()
        records.append(
            {
                "q": q.tolist(),
                "coordinates": {n: cs.get(n).getValue(state) for n in cnames},
                "transforms": T,
                "mass_matrix": (J.T @ Mf @ J).tolist(),
                "gravity": (-(J.T @ tau)).tolist(),
            }
        )
    return records, [model.getGravity().get(i) for i in range(3)]


def main():
    rng = np.random.default_rng(20261121)
    lo = np.array([-1.5, 0.0, -1.5])
    hi = np.array([2.2, 3.1, 0.3])
    poses = [np.zeros(3)] + [lo + (hi - lo) * rng.random(3) for _ in range(N_POSES - 1)]
    records, gravity = compute(poses)
    out = {
        "source": (
            "OpenSim 4.6 on tests/data/osim/MoBL_ARMS_module6_7_CMC.osim, reduced as described in "
            "tests/data/make_shoulder_reference.py"
        ),
        "opensim_version": osim.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "coordinates": list(INDEPENDENT),
        "units": "rad, m, kg·m² (mass matrix), N·m (gravity)",
        "gravity_vector": gravity,
        "poses": records,
    }
    OUT.write_text(json.dumps(out, indent=1))
    print(f"wrote {OUT} ({len(records)} poses)")


if __name__ == "__main__":
    main()
