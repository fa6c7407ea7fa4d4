"""OpenSim 4.6 as the referee of jaxmb's OpenSim import: the measurements that
``docs/make_osim_coverage.py`` tabulates and ``tests/io/test_osim_zoo.py`` asserts.

For a model (a file of ``tests/data/osim/``), at random poses of its independent, unlocked
coordinates (uniform within their ranges, rotations clipped to ±π; coupled coordinates from
OpenSim's own coupling functions, locked ones at their values) and random rates:

- :func:`opensim_reference` asks OpenSim (``import opensim``) for body poses in ground, muscle
  lengths, the mass matrix ``calcM`` and gravity ``Jᵀ m g`` over all mobilities u projected onto the
  model's coordinates by ``B = ∂u/∂q̇`` (couplers, locks, and ``u = E(θ) θ̇`` at ball and free joint
  rotations), and forward-dynamics accelerations with every muscle's ``appliesForce`` off (at
  ball/free rotations converted to Euler-angle accelerations, ``θ̈ = E⁻¹ (u̇ − Ė θ̇)``);
- :func:`jaxmb_errors` computes the same with ``jaxmb.io.load_osim``/``read_osim``,
  ``body_transforms``, ``muscle_lengths``, ``mass_matrix``, ``gravity_forces`` and
  ``forward_dynamics`` and returns the largest errors: pose (m, and rotation-matrix entries),
  muscle length (m), M, G and accelerations relative to their largest entry (G and accelerations
  absolute where that entry is below 1, e.g. a horizontal slider's zero gravity force).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxmb as mb

DATA = Path(__file__).resolve().parents[1] / "data" / "osim"
MODELS = {
    "arm26": ("arm26.osim", ()),
    "double_pendulum": ("double_pendulum.osim", ()),
    "gait2354_simbody": ("gait2354_simbody.osim", ()),
    "leg6dof9musc": ("leg6dof9musc.osim", ()),
    "MoBL_ARMS": ("MoBL_ARMS_module6_7_CMC.osim", ("clavphant", "scapphant", "humphant", "humphant1")),
    "joints_and_forces": ("joints_and_forces.osim", ()),
    "ellipsoid_joint": ("ellipsoid_joint.osim", ()),
    "closed_loops": ("closed_loops.osim", ()),
    "coupler_of_two": ("coupler_of_two.osim", ()),
    **{
        p.stem: (f"zoo/{p.name}", ())
        for p in sorted((DATA / "zoo").glob("*.osim"), key=lambda p: p.name.lower())
    },
}

# OpenSim 4.6's MultivariatePolynomialFunction returns first derivatives where Simbody asks for
# second ones, so its coupler's acceleration constraint is wrong at nonzero speeds: compared at
# zero speeds (gravity, M and the coupling's Jacobian; the curvature is checked without OpenSim).
ZERO_SPEEDS = {"coupler_of_two": "OpenSim's MultivariatePolynomialFunction has no 2nd derivative"}


def model_speed(key: str) -> float:
    """The range of random speeds for ``key``'s comparison (0 where OpenSim's are wrong)."""
    return 0.0 if key in ZERO_SPEEDS else 1.0


# --------------------------------------------------------------------------------------------
# OpenSim's side
# --------------------------------------------------------------------------------------------


def opensim_reference(
    path: Path, phantoms, n_poses: int, seed: int, speed: float = 1.0, independent=None
) -> dict:
    """OpenSim's answers at ``n_poses`` random poses, rates uniform in ±``speed``.

    ``independent``: the coordinates that stay free in a model with Weld, Point, PointOnLine or
    ConstantDistance constraints (OpenSim has no such choice; jaxmb's ``coordinate_names``). The
    others are then assembled by OpenSim: Newton steps on OpenSim's position errors ``perr`` with
    its constraint Jacobian ``G`` (``∂perr/∂Q = G N``, ``u = N Q̇``), independent coordinates held;
    a random pose where this does not converge (no assembly there) is drawn again closer to the
    default pose. Speeds solve ``G u = 0`` with the independent rates given."""
    import opensim as osim

    osim.Logger.setLevelString("error")
    model = osim.Model(str(path))
    for b in phantoms:
        model.updBodySet().get(b).setInertia(osim.Inertia(0, 0, 0, 0, 0, 0))
    ms = model.updMuscles()
    for k in range(ms.getSize()):  # FD "with muscles removed"; lengths are geometry
        ms.get(k).set_appliesForce(False)
    state = model.initSystem()
    cs = model.getCoordinateSet()
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    nq, nu = state.getNQ(), state.getNU()
    # q and u index of every coordinate
    # u index of every coordinate (a speed set alone moves one u)
    uidx = {}
    for n in names:
        for k in names:
            cs.get(k).setSpeedValue(state, 0.0)
        cs.get(n).setSpeedValue(state, 1.0)
        (hit,) = [i for i in range(nu) if state.getU().get(i) != 0.0]
        uidx[n] = hit
    for k in names:
        cs.get(k).setSpeedValue(state, 0.0)
    # ball and free joints: u is the angular velocity in the parent frame, q̇ the Euler rates
    euler = []
    js = model.getJointSet()
    for i in range(js.getSize()):
        j = js.get(i)
        if j.getConcreteClassName() in ("BallJoint", "FreeJoint", "EllipsoidJoint"):
            euler.append([j.get_coordinates(k).getName() for k in range(3)])
    coup = {}
    cons = model.getConstraintSet()
    for i in range(cons.getSize()):
        c = osim.CoordinateCouplerConstraint.safeDownCast(cons.get(i))
        if c is None or not c.isEnforced(state):
            continue
        ind = c.getIndependentCoordinateNames()
        coup[c.getDependentCoordinateName()] = (
            [ind.get(k) for k in range(ind.getSize())],
            c.getFunction(),
            osim.PropertyHelper.getValueDouble(c.getPropertyByName("scale_factor")),
        )
    locked = [n for n in names if cs.get(n).getLocked(state)]
    indep = [n for n in names if n not in coup and n not in locked]
    loops = any(
        cons.get(i).getConcreteClassName() != "CoordinateCouplerConstraint"
        and cons.get(i).isEnforced(state)
        for i in range(cons.getSize())
    )
    if loops:
        if independent is None:
            raise ValueError(f"{path}: a model with closed loops needs `independent`")
        indep = list(independent)
        coup = {}  # couplers are constraints of G like the loops'
    default = {n: cs.get(n).getDefaultValue() for n in names}
    matter = model.getMatterSubsystem()
    g = model.getGravity()
    gravity = [g.get(i) for i in range(3)]
    bodies = [model.getBodySet().get(i).getName() for i in range(model.getBodySet().getSize())]
    muscles = model.getMuscles()
    rng = np.random.default_rng(seed)
    poses = []
    for _ in range(n_poses):
        Q = {n: cs.get(n).getValue(state) for n in locked}
        P = {n: np.zeros(len(indep)) for n in locked}
        for k, n in enumerate(indep):
            c = cs.get(n)
            lo, hi = c.getRangeMin(), c.getRangeMax()
            if c.getMotionType() == 1:
                lo, hi = max(lo, -np.pi), min(hi, np.pi)
            Q[n] = float(rng.uniform(lo, hi))
            P[n] = np.eye(len(indep))[k]
        if loops:
            Q, P = _assemble(model, state, names, indep, locked, Q, default, uidx, euler)
        todo = dict(coup)
        while todo:
            for d, (ind, f, s) in list(todo.items()):
                if all(i in Q for i in ind):
                    x = osim.Vector(len(ind), 0.0)
                    for k, i in enumerate(ind):
                        x.set(k, Q[i])
                    Q[d] = s * f.calcValue(x)
                    P[d] = sum(
                        s * f.calcDerivative(osim.StdVectorInt([k]), x) * P[i]
                        for k, i in enumerate(ind)
                    )
                    del todo[d]
        for n in names:
            if n not in locked:
                cs.get(n).setValue(state, Q[n], False)
        model.realizePosition(state)
        qdot = rng.uniform(-speed, speed, len(indep))
        B = np.zeros((nu, len(indep)))  # ∂u/∂q̇
        for n in names:
            B[uidx[n]] = P[n]
        Edot = {}
        for trio in euler:
            E, dE = euler_rates([Q[n] for n in trio], [P[n] @ qdot for n in trio])
            rows = [uidx[n] for n in trio]
            B[rows] = E @ np.array([P[n] for n in trio])
            Edot[tuple(trio)] = (E, dE)
        u = B @ qdot
        for n in names:
            cs.get(n).setSpeedValue(state, float(u[uidx[n]]))
        model.realizeAcceleration(state)
        ud = {n: cs.get(n).getAccelerationValue(state) for n in names}
        qdd_all = dict(ud)
        for trio, (E, dE) in Edot.items():  # ẇ = E θ̈ + Ė θ̇
            th = np.linalg.solve(E, np.array([ud[n] for n in trio]) - dE)
            qdd_all.update(zip(trio, th.tolist()))
        qdd = np.array([qdd_all[n] for n in indep])
        M = osim.Matrix()
        matter.calcM(state, M)
        M = np.array([[M.get(i, j) for j in range(nu)] for i in range(nu)])
        G = np.zeros(nu)
        for b in bodies:
            body = model.getBodySet().get(b)
            gv = osim.Vector()
            force = osim.Vec3(*[body.getMass() * gravity[i] for i in range(3)])
            matter.multiplyByStationJacobianTranspose(
                state, body.getMobilizedBodyIndex(), body.getMassCenter(), force, gv
            )
            G += np.array([gv.get(i) for i in range(nu)])
        T = {}
        for b in bodies:
            X = model.getBodySet().get(b).getTransformInGround(state)
            R = np.array([[X.R().get(i, j) for j in range(3)] for i in range(3)])
            p = np.array([X.p().get(i) for i in range(3)])
            T[b] = np.vstack([np.hstack([R, p[:, None]]), [[0, 0, 0, 1]]]).tolist()
        L = {muscles.get(k).getName(): muscles.get(k).getLength(state) for k in range(muscles.getSize())}
        poses.append(
            dict(
                q=[Q[n] for n in indep],
                qdot=qdot.tolist(),
                qdd=qdd.tolist(),
                M=(B.T @ M @ B).tolist(),
                G=(B.T @ G).tolist(),
                T=T,
                L=L,
            )
        )
    return dict(
        coordinates=names,
        independent=indep,
        locked=locked,
        coupled=sorted(coup),
        n_muscles=muscles.getSize(),
        n_forces=model.getForceSet().getSize() - muscles.getSize(),
        n_constraints=cons.getSize(),
        poses=poses,
    )


def energy_rates(path, n_poses: int = 2, seed: int = 20):
    """The power balance of a conservative model (no forces but gravity once muscles are removed)
    at random states with speeds: ``dE/dt = q̇ᵀ M q̈ + ½ q̇ᵀ Ṁ q̇ − q̇ᵀ G`` must vanish.

    Per pose: (dE/dt for jaxmb's q̈, for OpenSim's q̈, q̇ᵀG, max |M − M_OpenSim| / max |M|,
    max |G − G_OpenSim| / max |G|), in W and relative units; M and G are jaxmb's (Ṁ by forward
    mode), checked against OpenSim's in the last two entries."""
    ref = opensim_reference(path, (), n_poses=n_poses, seed=seed, speed=1.0,
                            independent=loop_independent(path, ()))  # fmt: skip
    bare = mb.io.load_osim(path, muscles="none")
    out = []
    for pose in ref["poses"]:
        q, qd = jnp.asarray(pose["q"]), jnp.asarray(pose["qdot"])
        M, Mdot = jax.jvp(lambda x: mb.mass_matrix(bare, x), (q,), (qd,))
        G = mb.gravity_forces(bare, q)

        def rate(qdd):
            return float(qd @ M @ qdd + 0.5 * qd @ Mdot @ qd - qd @ G)

        Mr, Gr = np.asarray(pose["M"]), np.asarray(pose["G"])
        out.append((
            rate(mb.forward_dynamics(bare, q, qd)),
            rate(jnp.asarray(pose["qdd"])),
            float(qd @ G),
            float(np.abs(np.asarray(M) - Mr).max() / np.abs(Mr).max()),
            float(np.abs(np.asarray(G) - Gr).max() / np.abs(Gr).max()),
        ))  # fmt: skip
    return out


def _speed_map(names, uidx, euler, Q, nu):
    """``N`` (nu, n_coordinates) with ``u = N Q̇`` (Euler-angle rates at ball/free joints)."""
    N = np.zeros((nu, len(names)))
    for k, n in enumerate(names):
        N[uidx[n], k] = 1.0
    for trio in euler:
        E, _ = euler_rates([Q[n] for n in trio], [0.0, 0.0, 0.0])
        rows, cols = [uidx[n] for n in trio], [names.index(n) for n in trio]
        N[np.ix_(rows, cols)] = E
    return N


def _assemble(model, state, names, indep, locked, Q, default, uidx, euler):
    """OpenSim's assembly of the dependent coordinates at given independent ones (see
    :func:`opensim_reference`): continuation in 8 steps from the default pose, Newton at each; if
    a step fails, the whole target is drawn closer to the default. Returns Q and ``∂Q/∂q``."""
    import opensim as osim

    cs = model.getCoordinateSet()
    matter = model.getMatterSubsystem()
    dep = [k for k, n in enumerate(names) if n not in indep and n not in locked]
    ind = [names.index(n) for n in indep]

    def newton(x):
        for _ in range(50):
            for k, n in enumerate(names):
                if n not in locked:
                    cs.get(n).setValue(state, float(x[k]), False)
            model.realizePosition(state)
            pe = state.getQErr()
            perr = np.array([pe.get(i) for i in range(pe.size())])
            G = osim.Matrix()
            matter.calcG(state, G)
            G = np.array([[G.get(i, j) for j in range(G.ncol())] for i in range(G.nrow())])
            A = G[: len(perr)] @ _speed_map(names, uidx, euler, dict(zip(names, x)), G.shape[1])
            if np.abs(perr).max() < 1e-14:
                break
            x[dep] -= np.linalg.lstsq(A[:, dep], perr, rcond=None)[0]
        return x, A, np.abs(perr).max() < 1e-12

    for shrink in range(12):
        x = np.array([default[n] for n in names])
        for s in np.arange(1, 9) / 8 * 0.5**shrink:
            for n in indep:
                x[names.index(n)] = default[n] + (Q[n] - default[n]) * s
            x, A, ok = newton(x)
            if not ok:
                break
        if ok:
            break
    else:
        raise RuntimeError("OpenSim's assembly did not converge")
    Pm = np.zeros((len(names), len(indep)))
    Pm[ind] = np.eye(len(indep))
    Pm[dep] = -np.linalg.solve(A[:, dep], A[:, ind])
    return dict(zip(names, x.tolist())), {n: Pm[k] for k, n in enumerate(names)}


def euler_rates(angles, rates):
    """``E`` with ``ω_F = E θ̇`` for body-fixed X-Y-Z angles θ, and ``Ė θ̇`` (rad/s²)."""
    a, b, _ = angles
    ad, bd, _ = rates

    def rx(t):
        return np.array([[1, 0, 0], [0, np.cos(t), -np.sin(t)], [0, np.sin(t), np.cos(t)]])

    def ry(t):
        return np.array([[np.cos(t), 0, np.sin(t)], [0, 1, 0], [-np.sin(t), 0, np.cos(t)]])

    x, y, z = np.eye(3)
    e2 = rx(a) @ y
    e3 = rx(a) @ ry(b) @ z
    E = np.stack([x, e2, e3], axis=1)
    w1 = ad * x
    w2 = w1 + bd * e2
    dE = rates[1] * np.cross(w1, e2) + rates[2] * np.cross(w2, e3)
    return E, dE


# --------------------------------------------------------------------------------------------
# jaxmb's side
# --------------------------------------------------------------------------------------------


def loop_independent(path: Path, phantoms) -> list[str] | None:
    """jaxmb's independent coordinates of a model with closed loops (None without): the choice
    :func:`opensim_reference` needs to assemble the same coordinates in OpenSim."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = mb.io.read_osim(path, zero_inertia=tuple(phantoms), unsupported="warn")
    return list(imp.model.coordinate_names) if imp.constrained else None


def worst(a, b) -> float:
    """The larger error, a NaN counted as infinite (``max`` would drop it)."""
    b = float(b)
    return float("inf") if not np.isfinite(b) else max(a, b)


def jaxmb_errors(path: Path, phantoms, ref: dict, lengths: bool = True) -> dict:
    """jaxmb's largest errors against ``ref``; ``lengths=False`` skips the muscle lengths (their
    compile takes minutes for the big models)."""
    kw = dict(zero_inertia=tuple(phantoms))
    try:
        mb.io.read_osim(path, **kw)
        refused = None
    except mb.io.osim.OsimImportError as e:  # measured anyway, without what it leaves out
        refused = str(e).replace(str(DATA) + "/", "")
        kw["unsupported"] = "warn"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imp = mb.io.read_osim(path, **kw)
        model = mb.io.load_osim(path, **kw)
        bare = mb.io.load_osim(path, muscles="none", **kw)
    left_out = sorted({str(w.message).replace(str(DATA) + "/", "") for w in caught})
    names = list(model.coordinate_names)
    if names != ref["independent"]:
        raise RuntimeError(f"coordinates differ: jaxmb {names}, OpenSim {ref['independent']}")
    transforms = eqx.filter_jit(mb.body_transforms)
    fd = eqx.filter_jit(mb.forward_dynamics)
    mm = eqx.filter_jit(mb.mass_matrix)
    gg = eqx.filter_jit(mb.gravity_forces)
    lengths = (
        eqx.filter_jit(mb.muscle_lengths) if model.muscles is not None and lengths else None
    )
    err = dict(pose=0.0, L=None, M=0.0, G=0.0, FD=0.0)
    for pose in ref["poses"]:
        q = jnp.asarray(pose["q"])
        A = np.asarray(transforms(model, q))
        for b, Tref in pose["T"].items():
            i, X = imp.body_frames[b]
            Tb = X if i < 0 else A[i] @ X
            err["pose"] = worst(err["pose"], float(np.abs(Tb - np.asarray(Tref)).max()))
        if lengths is not None:
            L = np.asarray(lengths(model, q))
            e = max(
                (abs(L[k] - pose["L"][m]) for k, m in enumerate(model.muscle_names)), default=0.0
            )
            err["L"] = worst(err["L"] or 0.0, float(e))
        Mref, Gref = np.asarray(pose["M"]), np.asarray(pose["G"])
        M, G = np.asarray(mm(bare, q)), np.asarray(gg(bare, q))
        err["M"] = worst(err["M"], float(np.abs(M - Mref).max() / max(np.abs(Mref).max(), 1e-300)))
        err["G"] = worst(err["G"], float(np.abs(G - Gref).max() / max(np.abs(Gref).max(), 1.0)))
        qdd_ref = np.asarray(pose["qdd"])
        if not np.all(np.isfinite(qdd_ref)):  # OpenSim has no accelerations (e.g. all massless)
            err["FD"] = None
            continue
        qdd = np.asarray(fd(bare, q, jnp.asarray(pose["qdot"])))
        err["FD"] = worst(err["FD"] or 0.0, float(np.abs(qdd - qdd_ref).max() / max(np.abs(qdd_ref).max(), 1.0)))
    n_imported = 0 if model.muscles is None else len(model.muscle_names)
    return dict(errors=err, muscles_imported=n_imported, warnings=left_out, refused=refused)


