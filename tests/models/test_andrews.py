"""Andrews' squeezer: the closed-form joint map, the tree model against the test set's DAE, and the
published reference solution at t = 0.03 s (IVP test set, problem 'andrews')."""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxmb as mb
from jaxmb.kinematics import compose_transforms, local_transforms
from jaxmb.models import andrews as an

DATA = an.andrews_data()
P = DATA["p"]
Y0 = np.asarray(DATA["initial_values_t0"]["angles"])
HAVE_DYNAMICS = importlib.util.find_spec("jaxmb.dynamics.terms") is not None
HAVE_SIMULATE = importlib.util.find_spec("jaxmb.simulation.driver") is not None


KIN = an.andrews_squeezer(forces=False)  # the mechanism without its force elements


@pytest.fixture(scope="module")
def jmap():
    return KIN.joint_map


@jax.jit
def _loop_check(beta):
    q = jnp.reshape(beta, (1,))
    g = KIN.joint_map.constraint_residual(KIN.joint_map(q))
    E = jnp.stack([mb.point_position(KIN, k, None, q) for k in ("E_K2", "E_K3", "E_K4", "E_K6")])
    return g, E


@jax.jit
def _derivative_check(beta):
    q = jnp.reshape(beta, (1,))
    f, J, H = KIN.joint_map.derivatives(q)
    y, Y, Ypp = an.to_test_set(f), an.to_test_set(J[:, 0]), an.to_test_set(H[:, 0, 0])
    G = an.dae_constraint_jacobian(P, y)
    return (
        Y,
        Ypp,
        G @ Y,
        G @ Ypp + an.dae_gqq(P, y, Y),
        J,
        H,
        jax.jacfwd(KIN.joint_map)(q),
        (jax.hessian(KIN.joint_map)(q)),
    )


MODEL = an.andrews_squeezer() if HAVE_DYNAMICS else None  # with spring and motor


@pytest.fixture(scope="module")
def model():
    return MODEL


betas = st.floats(-20.0, 40.0, allow_nan=False)


class _Hashable(dict):
    """The parameter dict as a static jit argument."""

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


def test_built_in_route_and_structure():
    m = mb.models.andrews_squeezer(forces=False)
    assert m.nb == 7 and m.nq == 1 and m.body_names == an.BODY_NAMES
    assert np.all(np.asarray(m.axis_theta) == np.array([0.0, 0.0, 1.0]))
    assert np.all(np.asarray(m.gravity) == 0.0)
    assert m.parent == (-1, 0, -1, -1, 3, -1, 5)


def test_initial_angles_are_the_test_sets(jmap):
    f = jmap(jnp.array([an.BETA0]))
    np.testing.assert_allclose(np.asarray(an.to_test_set(f)), Y0, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(an.from_test_set(an.to_test_set(f))), np.asarray(f))


@settings(max_examples=25)
@given(betas)
def test_loops_closed_to_1e12(beta):
    g, E = (np.asarray(a) for a in _loop_check(beta))
    assert np.max(np.abs(g)) < 1e-12 * P["ss"]
    # and the same with the body poses of the tree: all four copies of E coincide
    assert np.max(np.abs(E[1:] - E[0])) < 1e-16 + 1e-13 * P["ss"]


def test_same_branch_over_cycles_and_smooth(jmap):
    """f(β + 2π) = f(β) + 2π (1, −1, 0, …): Θ follows β, every other variable is periodic; the
    absolute angles that the closed form differences stay far from atan2's cut at ±π."""
    b = jnp.linspace(-2 * np.pi, 6 * np.pi, 4001)
    F = jax.vmap(lambda x: jmap(x[None]))(b)
    F2 = jax.vmap(lambda x: jmap(x[None]))(b + 2 * np.pi)
    shift = np.array([2 * np.pi, -2 * np.pi, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(np.asarray(F2 - F), np.broadcast_to(shift, F.shape), atol=1e-12)
    absolute = np.stack([F[:, 0] + F[:, 1], F[:, 2], F[:, 3], F[:, 3] + F[:, 4], F[:, 5],
                         F[:, 5] + F[:, 6]], axis=1)  # fmt: skip
    assert np.max(np.abs(absolute)) < np.pi - 1.0
    # the step-to-step change is small everywhere: no jump of an assembly branch
    assert np.max(np.abs(np.diff(np.asarray(F), axis=0))) < 0.05
    # the mirror symmetry of the two chains (README §3.7): Φ = −Ω
    np.testing.assert_allclose(np.asarray(F[:, 4]), -np.asarray(F[:, 6]), atol=1e-13)


@settings(max_examples=25)
@given(betas)
def test_gradient_and_hessian_satisfy_the_constraints(beta):
    """Independent route: the test set's G and g_qq. With y(β) on the constraint manifold,
    G Y = 0 and G Y'' + g_qq(Y, Y) = 0 (d/dβ and d²/dβ² of g(y(β)) = 0), Y = (1, …)."""
    Y, Ypp, GY, res, J, H, Jd, Hd = (np.asarray(a) for a in _derivative_check(beta))
    assert Y[0] == 1.0 and Ypp[0] == 0.0
    # each term of G Y is at most d·|Y|; of G Y'' + g_qq at most d·(|Y''| + |Y|²)
    assert np.max(np.abs(GY)) < 1e-13 * P["ss"] * np.max(np.abs(Y))
    assert np.max(np.abs(res)) < 1e-13 * P["ss"] * (np.max(np.abs(Ypp)) + np.max(Y**2))
    # and the overridden derivatives equal autodiff of the closed form
    np.testing.assert_allclose(J, Jd, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(H, Hd, rtol=1e-12, atol=1e-13 * np.abs(Hd).max())


def _tree_joint_space_mass_matrix(model, f):
    """Σ m Jpᵀ Jp + I_zz Jφᵀ Jφ over the bodies, by autodiff of the tree's com positions and
    absolute angles in the joint variables f (no jaxmb.dynamics involved)."""

    def com_and_angle(f):
        A = compose_transforms(model.parent, local_transforms(model, f))
        com = jnp.einsum("iab,ib->ia", A[:, :3, :3], model.com) + A[:, :3, 3]
        phi = jnp.arctan2(A[:, 1, 0], A[:, 0, 0])
        return com[:, :2], phi

    Jp, Jphi = jax.jacfwd(com_and_angle)(f)
    Izz = model.inertia[:, 2, 2]
    return jnp.einsum("i,iak,ial->kl", model.mass, Jp, Jp) + jnp.einsum(
        "i,ik,il->kl", Izz, Jphi, Jphi
    )


@jax.jit
def _mass_matrices(y):
    Mt = _tree_joint_space_mass_matrix(KIN, an.from_test_set(y))
    return an.to_test_set(an.to_test_set(Mt).T), an.dae_mass_matrix(P, y)


@settings(max_examples=15)
@given(st.lists(st.floats(-4.0, 4.0, allow_nan=False), min_size=7, max_size=7))
def test_tree_bodies_give_the_test_set_mass_matrix(y):
    """The body-by-body tree reproduces the test set's 7×7 M(y) (§3.3) at any 7 angles."""
    Mt, Md = _mass_matrices(jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(Mt), np.asarray(Md), rtol=0, atol=1e-12 * Md.max())


def test_mass_matrix_at_t0_matches_readme_values():
    Md = np.asarray(an.dae_mass_matrix(P, jnp.asarray(Y0)))
    want = {(0, 0): 2.7455193e-06, (1, 0): 6.298875e-07, (1, 1): 9.237125e-07,
            (2, 2): 1.6170147425e-05, (3, 3): 8.03380146e-07, (4, 3): 1.1644631672447e-06,
            (4, 4): 6.79812821885e-05, (6, 6): 4.13408445185e-05}  # fmt: skip
    for (i, j), v in want.items():
        assert Md[i, j] == pytest.approx(v, rel=1e-7)
    np.testing.assert_array_equal(Md, Md.T)
    f0 = np.asarray(an.dae_forces(P, jnp.asarray(Y0), jnp.zeros(7)))
    np.testing.assert_allclose(f0, [0.033, 0, -3.0042048572133506, 0, 0, 0, 0], rtol=1e-12)


def test_projected_dae_initial_acceleration(jmap):
    """The test set's equations projected on the joint map give its consistent ÿ(0)."""
    q = jnp.array([an.BETA0])
    qdd = jax.jit(an.dae_projected_acceleration, static_argnums=0)(
        _Hashable(P), jmap, q, jnp.zeros(1)
    )
    _, J, _ = jmap.derivatives(q)
    ydd = np.asarray(an.to_test_set(J[:, 0] * qdd[0]))
    want = np.asarray(DATA["initial_values_t0"]["accelerations"])
    np.testing.assert_allclose(ydd, want, rtol=1e-11, atol=1e-9)


@pytest.mark.skipif(not HAVE_DYNAMICS, reason="jaxmb.dynamics not available yet")
@settings(max_examples=10)
@given(betas, st.floats(-2000.0, 2000.0, allow_nan=False))
def test_tree_dynamics_equals_projected_dae(beta, beta_dot):
    """jaxmb's mass matrix and forward dynamics (spring and motor as model force elements) equal the
    test set's DAE projected on the joint map."""
    M, Mw, got, want = (np.asarray(a) for a in _dynamics_check(jnp.array([beta]),
                                                               jnp.array([beta_dot])))  # fmt: skip
    np.testing.assert_allclose(M, Mw, rtol=1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@jax.jit
def _dynamics_check(q, qd):
    from jaxmb.dynamics import forward_dynamics, mass_matrix

    f, J, _ = MODEL.joint_map.derivatives(q)
    Y = an.to_test_set(J[:, 0])
    Md = an.dae_mass_matrix(P, an.to_test_set(f))
    want = an.dae_projected_acceleration(P, MODEL.joint_map, q, qd)
    return mass_matrix(MODEL, q), (Y @ Md @ Y)[None, None], forward_dynamics(MODEL, q, qd), want


# --- forward simulation ------------------------------------------------------------------------


def _simulate(*args, **kw):
    from jaxmb.simulation import simulate

    return simulate(*args, **kw)


def _test_set_state(model, q, qd):
    f, J, _ = model.joint_map.derivatives(jnp.asarray(q))
    return np.asarray(an.to_test_set(f)), np.asarray(an.to_test_set(J[:, 0])) * float(qd[0])


@pytest.mark.skipif(not HAVE_SIMULATE, reason="jaxmb.simulate not available yet")
def test_reference_solution_at_t003(model):
    """The IVP test set's published reference at t = 0.03: all 7 angles within 1e-7 rad.

    Measured: 1.8e-9 rad (Dopri8, tol 1e-10; the reference itself is good to ~3e-10 relative).
    """
    ya, yv = an.reference_solution()
    traj = _simulate(model, jnp.array([an.BETA0]), jnp.zeros(1), 0.03,
                     ts=jnp.linspace(0.0, 0.03, 51), solver="dopri8", rtol=1e-10,
                     atol=1e-10)  # fmt: skip
    y, yd = _test_set_state(model, traj.q[-1], traj.qd[-1])
    assert np.max(np.abs(y - ya)) < 1e-7
    assert np.max(np.abs(yd - yv)) < 1e-6 * np.max(np.abs(yv))
    np.testing.assert_allclose(y[3], -y[5], atol=1e-12)  # Φ = −Ω


@pytest.mark.skipif(not HAVE_SIMULATE, reason="jaxmb.simulate not available yet")
def test_seed_case_work_energy_balance(model):
    """The seed's case q(0) = −0.0620 rad, q̇(0) = 0 over 0.05 s. No reference data exists for it,
    so check the work–energy balance T + V_spring − mom·β = const (the motor's work) along the
    solution, which the embedded ODE must keep to the integration tolerance."""
    from jaxmb.dynamics import total_energy

    ts = jnp.linspace(0.0, 0.05, 51)
    traj = _simulate(model, jnp.array([-0.0620]), jnp.zeros(1), 0.05, ts=ts, solver="dopri8",
                     rtol=1e-10, atol=1e-10)  # fmt: skip
    E = jax.jit(jax.vmap(lambda q, qd: total_energy(model, q, qd) - P["mom"] * q[0]))(
        traj.q, traj.qd
    )
    E = np.asarray(E)
    scale = np.max(np.abs(E - E[0])) + abs(P["mom"]) * float(np.max(np.abs(traj.q)))
    assert np.max(np.abs(E - E[0])) < 1e-8 * scale
    assert float(traj.q[-1, 0]) > 10.0  # the crank has turned more than once


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_SIMULATE, reason="jaxmb.simulate not available yet")
def test_reference_tight_and_seed_case_against_projected_dae(model):
    """Tight tolerance (Dopri8, 1e-12): angles and velocities at t = 0.03 against the published
    reference, and the seed's case to 0.05 s against an independent integration of the test set's
    equations projected on the joint map (same solver)."""
    import diffrax as dfx

    ya, yv = an.reference_solution()
    traj = _simulate(model, jnp.array([an.BETA0]), jnp.zeros(1), 0.03, solver="dopri8",
                     rtol=1e-12, atol=1e-12)  # fmt: skip
    y, yd = _test_set_state(model, traj.q[-1], traj.qd[-1])
    assert np.max(np.abs(y - ya)) < 5e-9
    assert np.max(np.abs(yd - yv)) < 1e-8 * np.max(np.abs(yv))

    jm = model.joint_map

    def rhs(t, s, args):
        return jnp.concatenate([s[1:], an.dae_projected_acceleration(P, jm, s[:1], s[1:])])

    ts = jnp.linspace(0.0, 0.05, 11)
    sol = dfx.diffeqsolve(dfx.ODETerm(rhs), dfx.Dopri8(), 0.0, 0.05, None,
                          jnp.array([-0.0620, 0.0]), saveat=dfx.SaveAt(ts=ts),
                          stepsize_controller=dfx.PIDController(rtol=1e-12, atol=1e-12),
                          max_steps=100_000)  # fmt: skip
    traj = _simulate(model, jnp.array([-0.0620]), jnp.zeros(1), 0.05, ts=ts, solver="dopri8",
                     rtol=1e-12, atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(np.asarray(traj.q[:, 0]), np.asarray(sol.ys[:, 0]), atol=1e-8)
    np.testing.assert_allclose(np.asarray(traj.qd[:, 0]), np.asarray(sol.ys[:, 1]), rtol=1e-8,
                               atol=1e-6)  # fmt: skip


def test_unassemblable_geometry_raises_naming_the_loop():
    import equinox as eqx

    jm = KIN.joint_map
    bad = an.AndrewsJointMap(jm.lengths.at[2].set(1.0), jm.A, jm.B, jm.sides)  # ss = 1 m: no E
    with pytest.raises(eqx.EquinoxRuntimeError, match="loop cannot be closed"):
        jax.block_until_ready(bad(jnp.array([0.1])))
    with pytest.raises(ValueError, match="sides"):
        an.AndrewsJointMap(jm.lengths, jm.A, jm.B, (1, 0, 1))


# ------------------------------------------- premodel of the squeezer's dynamics, lean RK solver


@pytest.fixture(scope="module")
def premodel(model):
    return mb.dynamics.premodel_dynamics(model, period=2 * np.pi, n=96)


def test_premodel_reproduces_exact_dynamics(model, premodel):
    """The Fourier premodel of β̈ = a(β) + b(β) β̇² against forward_dynamics off the fit nodes."""
    assert max(premodel.fit_error) < 1e-13, premodel.fit_error
    rng = np.random.default_rng(4)
    # several turns (the fit is 2π-periodic); 384 points: the shape the fit itself compiled
    qs = jnp.asarray(rng.uniform(-20.0, 20.0, 384))
    qds = jnp.asarray(rng.uniform(-1500.0, 1500.0, 384))
    fit = np.asarray(jax.jit(jax.vmap(lambda q, qd: premodel(q[None], qd[None])[0]))(qs, qds))
    # the tree route's q̈, no fit
    exact = np.asarray(
        jax.jit(
            lambda q, qd: jax.lax.map(
                lambda x: mb.forward_dynamics(model, x[0][None], x[1][None], jnp.zeros(1))[0],
                (q, qd),
            )
        )(qs, qds)
    )
    np.testing.assert_allclose(fit, exact, rtol=0, atol=1e-12 * np.max(np.abs(exact)))


def test_premodel_erk_reaches_published_reference(model, premodel):
    """Premodel ODE integrated by erk_solve (Dopri8, 1e-12): all 7 angles at t = 0.03 within
    1e-7 rad of the test set's published reference — the accuracy the issue asks of the ODE."""
    from jaxmb.simulation import erk_solve

    rhs = lambda t, s: jnp.concatenate([s[1:], premodel(s[:1], s[1:])])
    r = jax.jit(lambda s0: erk_solve(rhs, s0, 0.0, 0.03, method="dopri8", rtol=1e-12,
                                     atol=1e-12))(jnp.array([an.BETA0, 0.0]))  # fmt: skip
    assert bool(r.ok)
    y, yd = _test_set_state(model, r.y1[:1], r.y1[1:])
    ya, yv = an.reference_solution()
    assert np.max(np.abs(y - ya)) < 1e-7, np.max(np.abs(y - ya))
    assert np.max(np.abs(yd - yv)) < 1e-6 * np.max(np.abs(yv))


# ---------------------------------------------------- the default simulate route: auto premodel


def test_default_simulate_takes_the_checked_premodel(model):
    """mb.simulate picks the premodel by itself for the squeezer (nq = 1, a declared period,
    position-only forces) and reports it: fit exact to 1e-12, run-time deviation ≤ 1e-12, and the
    published reference reached as with the exact route (test above: 1e-7 rad)."""
    traj = mb.simulate(model, jnp.array([an.BETA0]), jnp.zeros(1), 0.03, solver="dopri8",
                       rtol=1e-10, atol=1e-10)  # fmt: skip
    assert traj.stats["route"] == "premodel", traj.stats
    assert traj.stats["premodel_fit_error"] <= 1e-12
    assert float(traj.stats["premodel_deviation"]) <= 1e-12
    assert traj.stats["premodel_verified_states"] == 4 * 96  # checked once, with the fit
    y, _ = _test_set_state(model, traj.q[-1], traj.qd[-1])
    assert np.max(np.abs(y - an.reference_solution()[0])) < 1e-7


@pytest.mark.slow
def test_default_simulate_equals_the_exact_route(model):
    """route='auto' (premodel) and route='exact' (tree dynamics at every step) give the same
    trajectory: same steps, states within 1e-10 (Tsit5, tol 1e-8, t = 0.03)."""
    run = lambda route: mb.simulate(model, jnp.array([an.BETA0]), jnp.zeros(1), 0.03,
                                    ts=jnp.linspace(0, 0.03, 7), rtol=1e-8, atol=1e-8,
                                    solver="tsit5", route=route)  # fmt: skip
    auto, exact = run("auto"), run("exact")
    assert auto.stats["route"] == "premodel" and exact.stats["route"] == "exact"
    assert int(auto.stats["num_steps"]) == int(exact.stats["num_steps"])
    np.testing.assert_allclose(auto.q, exact.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(auto.qd, exact.qd, rtol=0, atol=1e-10 * np.max(np.abs(exact.qd)))
