"""Newton–Euler matrix formalism (seed 000): against the seed's literal matrices, a sequential
segment-by-segment solution, the equations of motion of a jaxmb model, and its input checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, slow_twin

import jaxmb
from jaxmb import newton_euler as ne
from jaxmb.kinematics import (
    body_angular_acceleration,
    body_angular_velocity,
    body_transforms,
    point_acceleration,
    point_position,
)

G = np.array(ne.GRAVITY_Y_UP)


def _rotation(rng, n=()):
    q = rng.normal(size=n + (4,))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def _spd(rng, n):
    """Physically possible inertia tensors: principal moments (b+c, a+c, a+b), random axes."""
    abc = rng.uniform(0.002, 0.05, size=(n, 3))
    ev = abc.sum(-1, keepdims=True) - abc
    Q = _rotation(rng, (n,))
    return np.einsum("sab,sb,scb->sac", Q, ev, Q)


def _random_problem(seed, ns, nt):
    rng = np.random.default_rng(seed)
    names = [f"seg{i}" for i in range(ns)]
    chain = ne.segment_chain(names, rng.uniform(0.5, 8.0, ns), _spd(rng, ns))
    R = _rotation(rng, (nt, ns))
    motion = ne.ChainMotion(
        R=jnp.asarray(R),
        com=jnp.asarray(rng.normal(size=(nt, ns, 3))),
        acc=jnp.asarray(rng.normal(size=(nt, ns, 3)) * 5),
        omega=jnp.asarray(rng.normal(size=(nt, ns, 3)) * 3),
        alpha=jnp.asarray(rng.normal(size=(nt, ns, 3)) * 30),
        joint=jnp.asarray(rng.normal(size=(nt, ns, 3))),
    )
    load = ne.ground_load(
        rng.normal(size=(nt, 3)) * 300, rng.normal(size=(nt, 3)), rng.normal(size=(nt, 3))
    )
    return chain, motion, load


def _sequential(chain, motion, load):
    """Independent route: solve segment by segment from the ground contact upwards (world frame)."""
    m, I = np.asarray(chain.mass), np.asarray(chain.inertia)
    R, c, a = (np.asarray(x) for x in (motion.R, motion.com, motion.acc))
    w, al, J = (np.asarray(x) for x in (motion.omega, motion.alpha, motion.joint))
    nt, ns = R.shape[:2]
    F = np.zeros((nt, ns, 3))
    M = np.zeros((nt, ns, 3))
    for t in range(nt):
        for i in range(ns):
            Rwb = R[t, i].T
            dH = Rwb @ (I[i] @ al[t, i] + np.cross(w[t, i], I[i] @ w[t, i]))
            if i == 0:
                Fd = -np.asarray(load.force[t])
                Md = -np.cross(np.asarray(load.cop[t]) - c[t, 0], np.asarray(load.force[t]))
                Md = Md - np.asarray(load.free_moment[t])
            else:
                Fd = F[t, i - 1]
                Md = R[t, i - 1].T @ M[t, i - 1] + np.cross(J[t, i - 1] - c[t, i], F[t, i - 1])
            F[t, i] = m[i] * a[t, i] - m[i] * G + Fd
            Mw = dH - np.cross(J[t, i] - c[t, i], F[t, i]) + Md
            M[t, i] = R[t, i] @ Mw
    return F, M


@settings(max_examples=examples(4))
@given(st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_matches_sequential_solution(ns, seed):
    chain, motion, load = _random_problem(seed, ns, nt=4)
    F, M = _sequential(chain, motion, load)
    for method in ("lu", "triangular"):
        out = ne.joint_loads(chain, motion, load, method=method)
        for got, want in ((out.force, F), (out.moment, M)):
            err = np.abs(np.asarray(got) - want).max()
            assert err <= 1e-10 * max(1.0, np.abs(want).max()), (method, err)
    res = ne.residual(chain, motion, load, out)
    assert np.abs(np.asarray(res)).max() <= 1e-10 * max(1.0, np.abs(F).max())
    mg = np.einsum("tsba,tsb->tsa", np.asarray(motion.R), np.asarray(out.moment))
    np.testing.assert_allclose(
        np.asarray(out.moment_ground), mg, rtol=0, atol=1e-12 * np.abs(mg).max()
    )


def test_seed_matrices_foot_shank():
    """The seed's foot–shank system written literally (its final equation), block by block."""
    rng = np.random.default_rng(3)
    chain, motion, load = _random_problem(7, 2, 1)
    R, c, a, w, al, J = (np.asarray(getattr(motion, f))[0] for f in ne.ChainMotion.__annotations__)
    F_, S_ = 0, 1
    mF, mS = np.asarray(chain.mass)
    IF, IS = np.asarray(chain.inertia)
    RF, RS = R[F_], R[S_]
    grf, cop, T = (np.asarray(x)[0] for x in (load.force, load.cop, load.free_moment))

    def S(v):
        return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])

    I3, Z = np.eye(3), np.zeros((3, 3))
    M = np.block([[mF * I3, Z, Z, Z], [Z, IF, Z, Z], [Z, Z, mS * I3, Z], [Z, Z, Z, IS]])
    rA_F, rA_S, rK_S = J[F_] - c[F_], J[F_] - c[S_], J[S_] - c[S_]
    B = np.block(
        [
            [I3, Z, Z, Z],
            [RF @ S(rA_F), I3, Z, Z],
            [-I3, Z, I3, Z],
            [-RS @ S(rA_S), -RS @ np.linalg.inv(RF), RS @ S(rK_S), I3],
        ]
    )
    C = np.concatenate(
        [np.zeros(3), -np.cross(w[F_], IF @ w[F_]), np.zeros(3), -np.cross(w[S_], IS @ w[S_])]
    )
    Gv = np.concatenate([mF * G, np.zeros(3), mS * G, np.zeros(3)])
    E = np.concatenate([grf, RF @ (np.cross(cop - c[F_], grf) + T), np.zeros(3), np.zeros(3)])
    acc = np.concatenate([a[F_], al[F_], a[S_], al[S_]])
    sys = ne.newton_euler_system(chain, R, c, a, w, al, J, grf, cop, T, G)
    for name, want in (("M", M), ("B", B), ("C", C), ("G", Gv), ("E", E), ("acc", acc)):
        np.testing.assert_allclose(np.asarray(getattr(sys, name)), want, rtol=1e-14, atol=1e-13)
    x = np.linalg.inv(B) @ (M @ acc - C - E - Gv)
    out = ne.joint_loads(chain, motion, load)
    got = np.concatenate([np.asarray(out.force[0, 0]), np.asarray(out.moment[0, 0]),
                          np.asarray(out.force[0, 1]), np.asarray(out.moment[0, 1])])  # fmt: skip
    np.testing.assert_allclose(got, x, rtol=1e-11, atol=1e-11 * np.abs(x).max())
    del rng


def test_mapping_input_and_segment_errors():
    chain, motion, load = _random_problem(1, 3, 5)
    seg = {
        n: ne.SegmentMotion(*(getattr(motion, f)[:, i] for f in ne.ChainMotion.__annotations__))
        for i, n in enumerate(chain.names)
    }
    a = ne.joint_loads(chain, seg, load)
    b = ne.joint_loads(chain, motion, load)
    np.testing.assert_array_equal(np.asarray(a.force), np.asarray(b.force))
    with pytest.raises(ne.NewtonEulerError, match=r"missing segment\(s\) \['seg1'\]"):
        ne.joint_loads(chain, {k: v for k, v in seg.items() if k != "seg1"}, load)
    with pytest.raises(ne.NewtonEulerError, match=r"unknown segment\(s\) \['pelvis'\]"):
        ne.joint_loads(chain, {**seg, "pelvis": seg["seg0"]}, load)
    short = eqx.tree_at(lambda m: m.acc, seg["seg2"], seg["seg2"].acc[:4])
    with pytest.raises(ne.NewtonEulerError, match=r"segment 'seg2': acc has 4 frames"):
        ne.joint_loads(chain, {**seg, "seg2": short}, load)
    with pytest.raises(
        ne.NewtonEulerError, match=r"ground load force has shape \(3, 3\).*5 frames"
    ):
        ne.joint_loads(chain, motion, ne.ground_load(load.force[:3], load.cop[:3]))
    with pytest.raises(ne.NewtonEulerError, match="frame counts differ"):
        ne.ground_load(load.force, load.cop[:2])


def test_rotation_and_value_errors():
    chain, motion, load = _random_problem(2, 3, 6)
    bad = motion.R.at[4, 1].multiply(1.01)
    with pytest.raises(ne.NewtonEulerError, match=r"segment 'seg1', frame 4: R is not a proper"):
        ne.joint_loads(chain, eqx.tree_at(lambda m: m.R, motion, bad), load)
    refl = motion.R.at[2, 2].multiply(-1.0)
    with pytest.raises(ne.NewtonEulerError, match=r"segment 'seg2', frame 2.*det = -1"):
        ne.joint_loads(chain, eqx.tree_at(lambda m: m.R, motion, refl), load)
    nan = motion.alpha.at[3, 0, 1].set(jnp.nan)
    with pytest.raises(ne.NewtonEulerError, match=r"segment 'seg0', frame 3: alpha is not finite"):
        ne.joint_loads(chain, eqx.tree_at(lambda m: m.alpha, motion, nan), load)
    with pytest.raises(ne.NewtonEulerError, match="ground load cop, frame 1"):
        ne.joint_loads(
            chain, motion, eqx.tree_at(lambda l: l.cop, load, load.cop.at[1].set(np.inf))
        )
    # inside jit the eager checks cannot run: equinox.error_if raises instead of returning NaN
    f = jax.jit(lambda R: ne.joint_loads(chain, eqx.tree_at(lambda m: m.R, motion, R), load).force)
    assert np.all(np.isfinite(np.asarray(f(motion.R))))
    with pytest.raises(Exception, match="not orthonormal"):
        f(bad).block_until_ready()
    with pytest.raises(ne.NewtonEulerError, match="segment 'b': mass must be positive"):
        ne.segment_chain(["a", "b"], [1.0, 0.0], [0.1, 0.1])
    with pytest.raises(ne.NewtonEulerError, match="segment 'a': inertia is not positive"):
        ne.segment_chain(["a"], [1.0], [-np.eye(3)])
    with pytest.raises(ne.NewtonEulerError, match="method must be 'triangular' or 'lu'"):
        ne.joint_loads(chain, motion, load, method="qr")
    with pytest.raises(ne.NewtonEulerError, match="not unique"):
        ne.segment_chain(["a", "a"], [1.0, 1.0], [0.1, 0.1])


def test_differentiable_in_inertial_parameters():
    """Loads are affine in the masses: the autodiff gradient equals a finite difference."""
    chain, motion, load = _random_problem(4, 3, 3)

    def knee(mass):
        c = eqx.tree_at(lambda c: c.mass, chain, mass)
        return jnp.sum(ne.joint_loads(c, motion, load).moment[:, 1] ** 1)

    g = jax.grad(knee)(chain.mass)
    h = 1e-3
    fd = np.array([(knee(chain.mass.at[k].add(h)) - knee(chain.mass.at[k].add(-h))) / (2 * h)
                   for k in range(3)])  # fmt: skip
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-8, atol=1e-8)


# ------------------------------------------------------------------------------------------------
# item 4: agreement with the equations of motion of a jaxmb model


def _six_dof(prefix, parent, position):
    """3 prismatic + 3 revolute (z, x, y) joints through massless bodies, centred at ``position``
    (in the parent frame); returns the bodies and the index offset of its revolute z body."""
    B = jaxmb.Body
    return [
        B(f"{prefix}_tx", parent, "prismatic", offset_axis=(1, 0, 0)),
        B(f"{prefix}_ty", f"{prefix}_tx", "prismatic", offset_axis=(0, 1, 0)),
        B(f"{prefix}_tz", f"{prefix}_ty", "prismatic", offset_axis=(0, 0, 1)),
        B(f"{prefix}_rz", f"{prefix}_tz", "revolute", axis=(0, 0, 1), position=position),
        B(f"{prefix}_rx", f"{prefix}_rz", "revolute", axis=(1, 0, 0)),
    ]


def _leg_model():
    rng = np.random.default_rng(11)
    inert = _spd(rng, 3)
    B = jaxmb.Body
    bodies = _six_dof("hip", None, None)
    bodies.append(B("thigh", "hip_rx", "revolute", axis=(0, 1, 0), mass=7.1,
                    com=(0.01, -0.18, 0.004), inertia=inert[0]))  # fmt: skip
    bodies += _six_dof("knee", "thigh", (0.005, -0.41, 0.002))
    bodies.append(B("shank", "knee_rx", "revolute", axis=(0, 1, 0), mass=3.2,
                    com=(-0.004, -0.17, 0.003), inertia=inert[1]))  # fmt: skip
    bodies += _six_dof("ankle", "shank", (0.0, -0.42, -0.003))
    bodies.append(B("foot", "ankle_rx", "revolute", axis=(0, 1, 0), mass=1.05,
                    com=(0.06, -0.04, 0.001), inertia=inert[2]))  # fmt: skip
    return jaxmb.build_model(bodies, gravity=tuple(G), name="foot_shank_thigh")


# NE segment order (ground contact first), body index of each segment and of its joint centre
_SEGMENTS = (("foot", 17, 15, 12), ("shank", 11, 9, 6), ("thigh", 5, 3, 0))


def _motion(t):
    """Smooth synthetic motion q(t) and its derivatives (hip above the ground, moderate angles)."""
    k = np.arange(18)
    A = np.where(k % 6 < 3, 0.03, 0.5)
    w = 2.0 + 0.37 * k
    ph = 0.3 * k
    q0 = np.zeros(18)
    q0[1] = 0.9
    q0[10] = -0.3
    q = q0 + A * np.sin(w * t + ph)
    return q, A * w * np.cos(w * t + ph), -A * w * w * np.sin(w * t + ph)


def _ground(t):
    grf = np.array([40 * np.sin(3 * t), 600 + 100 * np.cos(2 * t), 15 * np.sin(t)])
    cop = np.array([0.1 + 0.05 * t, 0.0, 0.02 * np.cos(t)])
    return grf, cop, np.array([0.0, 2.0 * np.sin(4 * t), 0.0])


def _ne_inputs(model, q, qd, qdd):
    A = body_transforms(model, q)
    w = body_angular_velocity(model, q, qd, frame="body")
    al = body_angular_acceleration(model, q, qd, qdd, frame="body")
    fields = {k: [] for k in ("R", "com", "acc", "omega", "alpha", "joint")}
    for _, b, jc, _ in _SEGMENTS:
        fields["R"].append(A[b, :3, :3].T)
        fields["com"].append(point_position(model, b, model.com[b], q))
        fields["acc"].append(point_acceleration(model, b, model.com[b], q, qd, qdd))
        fields["omega"].append(w[b])
        fields["alpha"].append(al[b])
        fields["joint"].append(A[jc, :3, 3])
    return {k: jnp.stack(v) for k, v in fields.items()}


def _wrenches_from_tau(model, q, tau):
    """Joint forces (ground frame) and moments about the joint centres from the generalized forces
    of each 6-DOF joint: ``τ_prismatic = Uᵀ F`` and ``τ_revolute = Aᵀ M`` (virtual work)."""
    A = body_transforms(model, q)
    Rp = lambda b: jnp.eye(3) if model.parent[b] < 0 else A[model.parent[b], :3, :3]
    F, M = [], []
    for _, _, _, j0 in _SEGMENTS:
        U = jnp.stack([Rp(b) @ model.axis_d[b] for b in range(j0, j0 + 3)], 1)
        Ax = jnp.stack([Rp(b) @ model.axis_theta[b] for b in range(j0 + 3, j0 + 6)], 1)
        F.append(jnp.linalg.solve(U.T, tau[j0 : j0 + 3]))
        M.append(jnp.linalg.solve(Ax.T, tau[j0 + 3 : j0 + 6]))
    return jnp.stack(F), jnp.stack(M)


def _ground_generalized_force(model, q, qd, grf, cop, free):
    """Virtual work of the ground load on the foot: ``J_copᵀ GRF + J_ωᵀ T``."""
    foot = 17
    A = body_transforms(model, q)
    r = A[foot, :3, :3].T @ (cop - A[foot, :3, 3])
    Jp = jax.jacfwd(lambda q_: point_position(model, foot, r, q_))(q)
    Jw = jax.jacfwd(lambda qd_: body_angular_velocity(model, q, qd_)[foot])(qd)
    return Jp.T @ grf + Jw.T @ free


def _chain_of(model):
    return ne.segment_chain(
        [s for s, *_ in _SEGMENTS],
        [model.mass[b] for _, b, *_ in _SEGMENTS],
        [model.inertia[b] for _, b, *_ in _SEGMENTS],
    )


def _frames(ts):
    q, qd, qdd = (jnp.asarray(np.stack(x)) for x in zip(*(_motion(t) for t in ts), strict=True))
    grf, cop, free = (jnp.asarray(np.stack(x)) for x in zip(*(_ground(t) for t in ts), strict=True))
    return q, qd, qdd, grf, cop, free


@eqx.filter_jit
def _both_routes(model, base, chain, q, qd, qdd, grf, cop, free, virtual_work):
    """Matrix-formalism loads and the loads implied by jaxmb's inverse dynamics, for all frames.

    ``base`` (no force elements) gives the kinematics; ``model`` the inverse dynamics. With
    ``virtual_work`` the ground load's generalized force is subtracted here instead of being
    carried by ``model.forces``."""
    from jaxmb import dynamics

    motion = ne.ChainMotion(**jax.vmap(lambda *a: _ne_inputs(base, *a))(q, qd, qdd))
    out = ne.joint_loads(chain, motion, ne.GroundLoad(grf, cop, free))

    def id_route(q, qd, qdd, grf, cop, free):
        tau = dynamics.inverse_dynamics(model, q, qd, qdd)
        if virtual_work:
            tau = tau - _ground_generalized_force(base, q, qd, grf, cop, free)
        return _wrenches_from_tau(base, q, tau)

    F, Mw = jax.vmap(id_route)(q, qd, qdd, grf, cop, free)
    return out.force, out.moment_ground, F, Mw


def _relative_error(a, b):
    F1, M1, F2, M2 = (np.asarray(x) for x in a + b)
    scale = max(np.abs(F2).max(), np.abs(M2).max())
    return max(np.abs(F1 - F2).max(), np.abs(M1 - M2).max()) / scale, scale


def test_agrees_with_equations_of_motion():
    """Item 4: joint loads of the matrix formalism = loads implied by jaxmb's inverse dynamics
    (ground load mapped to generalized forces here by virtual work)."""
    pytest.importorskip("jaxmb.dynamics")
    model = _leg_model()
    F1, M1, F2, M2 = _both_routes(
        model, model, _chain_of(model), *_frames(np.linspace(0, 1, 6)), True
    )
    err, scale = _relative_error((F1, M1), (F2, M2))
    assert scale > 100.0  # the loads are not trivially small
    assert err <= 1e-10, err


def test_agrees_with_equations_of_motion_force_elements():
    """Same, with the ground load as jaxmb force elements (PointForce + BodyTorque) in the model."""
    pytest.importorskip("jaxmb.dynamics")
    forces = pytest.importorskip("jaxmb.forces")
    if not (hasattr(forces, "PointForce") and hasattr(forces, "BodyTorque")):
        pytest.skip("jaxmb.forces.PointForce/BodyTorque not available yet")
    base = _leg_model()
    chain = _chain_of(base)
    for t in (0.7,):
        q, qd, qdd, grf, cop, free = _frames([t])
        A = body_transforms(base, q[0])
        r = A[17, :3, :3].T @ (cop[0] - A[17, :3, 3])
        elems = (forces.PointForce(17, r, grf[0]), forces.BodyTorque(17, free[0]))
        model = eqx.tree_at(lambda m: m.forces, base, elems)
        F1, M1, F2, M2 = _both_routes(model, base, chain, q, qd, qdd, grf, cop, free, False)
        err, _ = _relative_error((F1, M1), (F2, M2))
        assert err <= 1e-10, err


# the property at the suite profile's former depth (op by op, each chain length compiles anew)
test_matches_sequential_solution_deep = slow_twin(
    test_matches_sequential_solution, 8, st.integers(1, 5), st.integers(0, 2**31 - 1)
)
