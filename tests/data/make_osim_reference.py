"""Build ``tests/data/osim_reference.json`` with OpenSim 4.6 (``pip install opensim``).

For each model in ``tests/data/osim/`` and a few random poses of its independent coordinates
(uniform within each coordinate's range, rotations clipped to ±π): OpenSim's body poses in ground,
its mass matrix ``matter.calcM`` and the generalized gravity force ``Jᵀ F_gravity``
(``matter.multiplyBySystemJacobianTranspose`` of ``Force::Gravity``'s body forces), all in OpenSim's
mobility order over *all* coordinates, and the same projected onto the independent coordinates with
``P = ∂Q/∂q`` built from OpenSim's own coupling functions: ``M_q = Pᵀ M P``, ``G_q = Pᵀ G``.
Coupled coordinates are set from OpenSim's functions (``Function.calcValue``), not assembled, so the
pose is exactly the one jaxmb is given. Coordinates are unlocked first so every value is kept.
MoBL-ARMS's phantom bodies get zero inertia (their diag(1, 1, 1) kg·m² is a placeholder).

Run from the repository root: ``python tests/data/make_osim_reference.py``.
"""

from __future__ import annotations

import datetime
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import opensim as osim

osim.Logger.setLevelString("error")

HERE = Path(__file__).parent
MODELS = {
    "arm26": ("arm26.osim", ()),
    "double_pendulum": ("double_pendulum.osim", ()),
    "gait2354_simbody": ("gait2354_simbody.osim", ()),
    "leg6dof9musc": ("leg6dof9musc.osim", ()),
    "mobl_arms": (
        "MoBL_ARMS_module6_7_CMC.osim",
        ("clavphant", "scapphant", "humphant", "humphant1"),
    ),
}
N_POSES = 3


def to_np(M) -> np.ndarray:
    return np.array([[M.get(i, j) for j in range(M.ncol())] for i in range(M.nrow())])


def file_inertias(path: Path) -> dict[str, list[float]]:
    """Body inertias (xx yy zz xy xz yz) exactly as written in the file (3.0 or 4.x layout)."""
    out = {}
    for b in ET.parse(path).getroot().iter("Body"):
        if b.find("inertia") is not None:
            out[b.get("name")] = [float(v) for v in b.find("inertia").text.split()]
        elif b.find("inertia_xx") is not None:
            out[b.get("name")] = [
                float(b.find(f"inertia_{k}").text) for k in ("xx", "yy", "zz", "xy", "xz", "yz")
            ]
    return out


def osim_state(path: Path, phantoms):
    model = osim.Model(str(path))
    # OpenSim's 3.0 -> 4.x upgrade rounds inertias to 6 significant digits (MoBL-ARMS' humerus
    # 0.01227763 becomes 0.0122776); put the file's values back so both sides use the same numbers
    for name, i6 in file_inertias(path).items():
        if model.getBodySet().contains(name):
            model.updBodySet().get(name).setInertia(osim.Inertia(*i6))
    for b in phantoms:
        model.updBodySet().get(b).setInertia(osim.Inertia(0, 0, 0, 0, 0, 0))
    cs = model.getCoordinateSet()
    for i in range(cs.getSize()):
        cs.get(i).setDefaultLocked(False)
    state = model.initSystem()
    return model, state


def couplings(model):
    """``{dependent: (independent, Function, scale)}`` of the enforced CoordinateCouplers."""
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
            osim.PropertyHelper.getValueDouble(c.getPropertyByName("scale_factor")),
        )
    return out


def reference(key: str, rng) -> dict:
    fname, phantoms = MODELS[key]
    model, state = osim_state(HERE / "osim" / fname, phantoms)
    cs = model.getCoordinateSet()
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    coup = couplings(model)
    indep = [n for n in names if n not in coup]
    nu = state.getNU()
    # u index of every coordinate: set its speed alone and see which u moves
    uidx = {}
    for n in names:
        for k in names:
            cs.get(k).setSpeedValue(state, 0.0)
        cs.get(n).setSpeedValue(state, 1.0)
        u = state.getU()
        hits = [i for i in range(nu) if u.get(i) != 0.0]
        assert len(hits) == 1, (n, hits)
        uidx[n] = hits[0]
    for k in names:
        cs.get(k).setSpeedValue(state, 0.0)
    matter = model.getMatterSubsystem()
    gvec = model.getGravity()
    gravity = osim.Vec3(gvec.get(0), gvec.get(1), gvec.get(2))
    bodies = [model.getBodySet().get(i).getName() for i in range(model.getBodySet().getSize())]
    poses = []
    for _ in range(N_POSES):
        q = {}
        for n in indep:
            c = cs.get(n)
            lo, hi = c.getRangeMin(), c.getRangeMax()
            if c.getMotionType() == 1:  # rotational
                lo, hi = max(lo, -np.pi), min(hi, np.pi)
            q[n] = float(rng.uniform(lo, hi))
        Q = dict(q)
        P = {n: np.eye(len(indep))[indep.index(n)] for n in indep}
        todo = dict(coup)
        while todo:
            for d, (i, f, s) in list(todo.items()):
                if i in Q:
                    x = osim.Vector(1, Q[i])
                    Q[d] = s * f.calcValue(x)
                    P[d] = s * f.calcDerivative(osim.StdVectorInt([0]), x) * P[i]
                    del todo[d]
        for n in names:
            cs.get(n).setValue(state, Q[n], False)
        model.realizeDynamics(state)
        for n in names:  # setValue must not have moved anything
            assert abs(cs.get(n).getValue(state) - Q[n]) < 1e-15, n
        M = osim.Matrix()
        matter.calcM(state, M)
        M = to_np(M)
        G = np.zeros(nu)
        for b in bodies:  # G = Σ_b J_com(b)ᵀ m_b g, with OpenSim's station Jacobians
            body = model.getBodySet().get(b)
            g = osim.Vector()
            force = osim.Vec3(*[body.getMass() * gravity.get(i) for i in range(3)])
            matter.multiplyByStationJacobianTranspose(
                state, body.getMobilizedBodyIndex(), body.getMassCenter(), force, g
            )
            G += np.array([g.get(i) for i in range(nu)])
        Pm = np.zeros((nu, len(indep)))
        for n in names:
            Pm[uidx[n]] = P[n]
        points = {}
        muscles = model.getMuscles()
        for k in range(muscles.getSize()):
            gp = osim.GeometryPath.safeDownCast(muscles.get(k).getGeometryPath())
            pps = gp.getPathPointSet()
            for i in range(pps.getSize()):
                pp = pps.get(i)
                x = pp.getLocationInGround(state)
                points[f"{muscles.get(k).getName()}/{i}"] = [x.get(j) for j in range(3)]
        lengths = {}
        for k in range(muscles.getSize()):
            lengths[muscles.get(k).getName()] = muscles.get(k).getLength(state)
        # -dL/dq by central differences of OpenSim's path length (coupled coordinates follow)
        h = 1e-6
        dLdq = np.zeros((len(indep), muscles.getSize()))
        for j, n in enumerate(indep):
            Ls = []
            for sgn in (1.0, -1.0):
                qq = dict(q)
                qq[n] += sgn * h
                Qh = dict(qq)
                todo = dict(coup)
                while todo:
                    for d, (i, f, s) in list(todo.items()):
                        if i in Qh:
                            Qh[d] = s * f.calcValue(osim.Vector(1, Qh[i]))
                            del todo[d]
                for m2 in names:
                    cs.get(m2).setValue(state, Qh[m2], False)
                model.realizePosition(state)
                Ls.append([muscles.get(k).getLength(state) for k in range(muscles.getSize())])
            dLdq[j] = (np.asarray(Ls[0]) - np.asarray(Ls[1])) / (2 * h)
        for n in names:
            cs.get(n).setValue(state, Q[n], False)
        model.realizeDynamics(state)
        T = {}
        for b in bodies:
            X = model.getBodySet().get(b).getTransformInGround(state)
            R = np.array([[X.R().get(i, j) for j in range(3)] for i in range(3)])
            p = np.array([X.p().get(i) for i in range(3)])
            T[b] = np.vstack([np.hstack([R, p[:, None]]), [[0, 0, 0, 1]]]).tolist()
        poses.append(
            dict(
                q=[q[n] for n in indep],
                Q_full={n: Q[n] for n in names},
                M_full=M.tolist(),
                G_full=G.tolist(),
                P=Pm.tolist(),
                M=(Pm.T @ M @ Pm).tolist(),
                G=(Pm.T @ G).tolist(),
                body_transforms=T,
                path_points_in_ground=points,
                muscle_lengths=lengths,
                moment_arms_fd=(-dLdq).tolist(),
            )
        )
    return dict(
        file=fname,
        phantoms=list(phantoms),
        coordinates=names,
        independent=indep,
        u_index=[uidx[n] for n in names],
        poses=poses,
    )


def function_samples(rng) -> list[dict]:
    """OpenSim's value, first and second derivative of each function type at random abscissae."""
    out = []
    for n in (2, 3, 4, 7, 12):
        x = np.sort(rng.uniform(-2.0, 2.0, n))
        y = rng.normal(size=n)
        for tag in ("SimmSpline", "NaturalCubicSpline", "PiecewiseLinearFunction"):
            xml = (
                f'<?xml version="1.0"?><OpenSimDocument Version="40000"><{tag} name="f">'
                f"<x>{' '.join(map(repr, x.tolist()))}</x>"
                f"<y>{' '.join(map(repr, y.tolist()))}</y></{tag}></OpenSimDocument>"
            )
            out.append(dict(tag=tag, x=x.tolist(), y=y.tolist(), xml=xml))
    c = rng.normal(size=4)
    xml = (
        '<?xml version="1.0"?><OpenSimDocument Version="40000"><PolynomialFunction name="f">'
        f"<coefficients>{' '.join(map(repr, c.tolist()))}</coefficients>"
        "</PolynomialFunction></OpenSimDocument>"
    )
    out.append(dict(tag="PolynomialFunction", coefficients=c.tolist(), xml=xml))
    xml = (
        '<?xml version="1.0"?><OpenSimDocument Version="40000"><MultiplierFunction name="f">'
        "<function><SimmSpline><x>-1 0 0.5 2</x><y>0.1 -0.3 0.2 0.7</y></SimmSpline></function>"
        "<scale>-2.5</scale></MultiplierFunction></OpenSimDocument>"
    )
    out.append(dict(tag="MultiplierFunction", xml=xml))
    tmp = HERE / "_function.xml"
    for f in out:
        tmp.write_text(f["xml"])
        fn = osim.Function.safeDownCast(osim.OpenSimObject.makeObjectFromFile(str(tmp)))
        xs = np.concatenate([rng.uniform(-3.0, 3.0, 12), np.asarray(f.get("x", []))])
        f["at"] = xs.tolist()
        f["value"] = [fn.calcValue(osim.Vector(1, float(t))) for t in xs]
        f["d1"] = [fn.calcDerivative(osim.StdVectorInt([0]), osim.Vector(1, float(t))) for t in xs]
        f["d2"] = [
            fn.calcDerivative(osim.StdVectorInt([0, 0]), osim.Vector(1, float(t))) for t in xs
        ]
    tmp.unlink()
    return out


def main() -> None:
    rng = np.random.default_rng(20261121)
    out = dict(
        generator="tests/data/make_osim_reference.py",
        opensim_version=osim.__version__,
        python=sys.version.split()[0],
        date=datetime.date.today().isoformat(),
        models={k: reference(k, rng) for k in MODELS},
        functions=function_samples(rng),
    )
    (HERE / "osim_reference.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
