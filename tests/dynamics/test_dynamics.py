"""Equations of motion: three independent routes agree; structure (SPD, skew, round trips); energy.

Tolerances: the routes are exact in exact arithmetic, so they must agree to 1e-10 relative to the
largest entry of the referee (measured ≈1e-15 in float64).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_rel
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, random_bodies, random_coupling, random_models

import jaxmb as mb
from jaxmb import dynamics as dy
from jaxmb import matcalc
from jaxmb.kinematics import kron_derivatives
from jaxmb.models.chain import chain

REL = 1e-10


def _state(model, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.normal(size=model.nq) * scale) for _ in range(3))


@st.composite
def massive_models(draw, max_bodies=8, max_nq=5, chain=False):
    """Random trees where every body has mass and nq ≤ nb, so M is positive definite."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    nb = draw(st.integers(1, max_bodies))
    nq = draw(st.integers(1, min(nb, max_nq)))
    bodies = random_bodies(rng, nb, massless_fraction=0.0, chain=chain)
    return mb.build_model(bodies, random_coupling(rng, nq, nb), gravity=tuple(rng.normal(size=3)))


# ---------------------------------------------------------------------------------------------
# three routes


@eqx.filter_jit
def _all_routes(model, q, qd):
    return {
        m: (
            dy.mass_matrix(model, q, method=m),
            dy.bias_forces(model, q, qd, method=m),
            dy.gravity_forces(model, q, method=m),
        )
        for m in dy.METHODS
    }


def _check_routes(model, seed):
    q, qd, _ = _state(model, seed)
    out = _all_routes(model, q, qd)
    ref = out["lagrangian"]
    for method in ("tree", "closed_form"):
        for name, a, b in zip(("M", "N q̇", "G"), out[method], ref, strict=True):
            assert_rel(a, b, what=f"{name} ({method} vs lagrangian)")


# each example compiles three routes for a new tree structure: keep the counts small
@settings(max_examples=examples(5))
@given(random_models(max_bodies=8, max_nq=5), st.integers(0, 2**31 - 1))
def test_three_routes_agree_random_trees_and_couplings(model, seed):
    _check_routes(model, seed)


@settings(max_examples=examples(3))
@given(random_models(max_bodies=8, coupled=False), st.integers(0, 2**31 - 1))
def test_three_routes_agree_identity_maps(model, seed):
    _check_routes(model, seed)


@eqx.filter_jit
def _kronecker_terms(model, q, qd):
    nb, nq = model.nb, model.nq
    D, Dp = kron_derivatives(model, q)
    Jp = dy.pseudo_inertia(model)
    I4 = jnp.eye(4)
    U = matcalc.commutation_matrix(nq, 4)
    U2 = matcalc.commutation_matrix(nq * nq, 4)
    C1 = jnp.kron(matcalc.vec(I4)[:, None], jnp.eye(nq))
    C2 = jnp.kron(matcalc.vec(I4)[:, None], jnp.eye(nq * nq))
    M = sum(
        C1.T @ jnp.kron(Jp[i], U.T) @ jnp.kron(D[i] @ D[i].T, I4) @ jnp.kron(I4, U) @ C1
        for i in range(nb)
    )
    Nqd = sum(
        C1.T
        @ jnp.kron(Jp[i], U.T)
        @ jnp.kron(D[i] @ Dp[i].T, I4)
        @ jnp.kron(I4, U2)
        @ C2
        @ jnp.kron(qd, qd)
        for i in range(nb)
    )
    return (
        M,
        Nqd,
        dy.mass_matrix(model, q, method="lagrangian"),
        dy.bias_forces(model, q, qd, method="lagrangian"),
    )


def test_literal_kronecker_eqs_145_and_corrected_147():
    """Eq. 145 as printed, and Eq. 147 with D_i D'_iᵀ (the printed one repeats Eq. 145)."""
    rng = np.random.default_rng(0)
    nb, nq = 4, 3
    model = mb.build_model(random_bodies(rng, nb), random_coupling(rng, nq, nb))
    q, qd, _ = _state(model, 10)
    M, Nqd, M_ref, N_ref = _kronecker_terms(model, q, qd)
    assert_rel(M, M_ref, what="Eq. 145")
    assert_rel(Nqd, N_ref, what="Eq. 147")


def test_pseudo_inertia_is_the_mass_moment_integral():
    """J = ∫ r̄ r̄ᵀ dm for a cloud of point masses, whose inertia about the com is known exactly."""
    rng = np.random.default_rng(0)
    r = rng.normal(size=(7, 3))
    w = rng.uniform(0.1, 1.0, size=7)
    m = w.sum()
    c = (w[:, None] * r).sum(0) / m
    d = r - c
    Ic = np.sum(
        w[:, None, None]
        * ((d * d).sum(1)[:, None, None] * np.eye(3) - d[:, :, None] * d[:, None, :]),
        0,
    )
    model = mb.build_model([mb.Body("b", mass=m, com=c, inertia=Ic)])
    rbar = np.concatenate([r, np.ones((7, 1))], 1)
    expect = np.einsum("n,na,nb->ab", w, rbar, rbar)
    np.testing.assert_allclose(dy.pseudo_inertia(model)[0], expect, rtol=0, atol=1e-13)


def test_unknown_method_raises():
    model = chain(2)
    with pytest.raises(ValueError, match="unknown method 'crba'"):
        dy.mass_matrix(model, jnp.zeros(2), method="crba")


# ---------------------------------------------------------------------------------------------
# structure


@settings(max_examples=examples(4))
@given(massive_models(), st.integers(0, 2**31 - 1))
def test_mass_matrix_symmetric_positive_definite(model, seed):
    q, _, _ = _state(model, seed)
    M = np.asarray(dy.mass_matrix(model, q))
    np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-13 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() > 0.0


@settings(max_examples=examples(4))
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_mdot_minus_2c_skew_symmetric(model, seed):
    q, qd, _ = _state(model, seed)
    C, Mdot, Nqd = eqx.filter_jit(
        lambda m, q, qd: (
            dy.christoffel_matrix(m, q, qd),
            jax.jvp(lambda x: dy.mass_matrix(m, x), (q,), (qd,))[1],
            dy.bias_forces(m, q, qd),
        )
    )(model, q, qd)
    S = np.asarray(Mdot - 2 * C)
    scale = max(np.abs(Mdot).max(), 1e-12)
    assert np.abs(S + S.T).max() <= REL * scale
    assert_rel(C @ qd, Nqd, what="C q̇ = N q̇")


@eqx.filter_jit
def _round_trip(model, q, qd, tau, qdd2):
    qdd = dy.forward_dynamics(model, q, qd, tau)
    return dict(
        qdd=qdd,
        id_fd=dy.inverse_dynamics(model, q, qd, qdd),
        lhs=dy.mass_matrix(model, q) @ qdd + dy.bias_forces(model, q, qd),
        rhs=dy.gravity_forces(model, q) + tau,
        fd_id=dy.forward_dynamics(model, q, qd, dy.inverse_dynamics(model, q, qd, qdd2)),
    )


@settings(max_examples=examples(4))
@given(massive_models(), st.integers(0, 2**31 - 1))
def test_forward_inverse_round_trip(model, seed):
    q, qd, tau = _state(model, seed)
    qdd2 = _state(model, seed + 1)[2]
    r = _round_trip(model, q, qd, tau, qdd2)
    assert_rel(r["id_fd"], tau, what="ID(FD(τ)) = τ")
    assert_rel(r["lhs"], r["rhs"], what="M q̈ + N q̇ = G + τ")
    # FD(ID(q̈)) loses the condition number of M
    assert_rel(r["fd_id"], qdd2, rel=1e-8, what="FD(ID(q̈)) = q̈")


@eqx.filter_jit
def _energy_terms(model, q, qd):
    return (
        dy.kinetic_energy(model, q, qd),
        0.5 * qd @ dy.mass_matrix(model, q, method="closed_form") @ qd,
        -jax.grad(lambda x: dy.potential_energy(model, x))(q),
        dy.gravity_forces(model, q, method="closed_form"),
    )


@settings(max_examples=examples(4))
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_energies(model, seed):
    q, qd, _ = _state(model, seed)
    T, T_ref, G, G_ref = _energy_terms(model, q, qd)
    assert_rel(T, T_ref, what="T from twists = ½ q̇ᵀ M q̇")
    assert_rel(G, G_ref, what="G = −∂V/∂q")


def test_simple_pendulum_closed_form():
    """A point-like bob on a massless rod: M = m l² + I, G = −m g l sin q (textbook)."""
    m, l, g, Iz = 2.0, 0.7, 9.81, 0.01
    model = mb.build_model(
        [mb.Body("bob", axis=(0, 0, 1), mass=m, com=(l, 0, 0), inertia=np.diag([Iz, Iz, Iz]))],
        gravity=(0.0, -g, 0.0),
    )
    q, qd = jnp.array([0.4]), jnp.array([1.3])
    assert_rel(dy.mass_matrix(model, q), jnp.array([[m * l * l + Iz]]))
    assert_rel(dy.gravity_forces(model, q), jnp.array([-m * g * l * np.cos(0.4)]))
    np.testing.assert_allclose(dy.bias_forces(model, q, qd), 0.0, atol=1e-14)


def test_forward_dynamics_singular_mass_matrix_raises():
    """A coordinate that moves no mass: M is singular, and the error says so (no silent NaN)."""
    model = mb.build_model([mb.Body("massless", mass=0.0)])
    with pytest.raises(Exception, match="mass matrix is not positive definite"):
        jax.block_until_ready(dy.forward_dynamics(model, jnp.zeros(1), jnp.zeros(1)))


def test_tau_shape_checked():
    model = chain(2)
    with pytest.raises(ValueError, match=r"forward_dynamics: tau must have shape \(nq,\) = \(2,\).*got shape \(3,\)"):
        dy.forward_dynamics(model, jnp.zeros(2), jnp.zeros(2), jnp.zeros(3))


# ---------------------------------------------------------------------------------------------
# jit / vmap / grad


def test_jit_vmap_grad():
    model = chain(4)
    rng = np.random.default_rng(0)
    Q, QD, TAU = (jnp.asarray(rng.normal(size=(5, 4))) for _ in range(3))
    fd = eqx.filter_jit(jax.vmap(dy.forward_dynamics, in_axes=(None, 0, 0, 0)))
    batched = fd(model, Q, QD, TAU)
    one = eqx.filter_jit(dy.forward_dynamics)  # compiled once for the five single states
    for b in range(5):
        assert_rel(batched[b], one(model, Q[b], QD[b], TAU[b]), rel=1e-12)

    # gradient of a scalar of q̈ with respect to a body mass: against central differences
    @jax.jit
    def loss(mass):
        m = eqx.tree_at(lambda x: x.mass, model, mass)
        return jnp.sum(dy.forward_dynamics(m, Q[0], QD[0], TAU[0]) ** 2)

    g = jax.jit(jax.grad(loss))(model.mass)
    h = 1e-4  # central differences: truncation ~h² ≈ 1e-8, rounding ~1e-12 relative
    fdiff = [
        (loss(model.mass.at[i].add(h)) - loss(model.mass.at[i].add(-h))) / (2 * h) for i in range(4)
    ]
    np.testing.assert_allclose(g, fdiff, rtol=1e-6)
    # jit with the model as an argument: a second model of the same structure does not retrace
    traces = []

    @eqx.filter_jit
    def mm(m, q):
        traces.append(1)
        return dy.mass_matrix(m, q)

    mm(model, Q[0])
    mm(eqx.tree_at(lambda x: x.mass, model, model.mass * 2), Q[0])
    assert len(traces) == 1


@pytest.mark.parametrize("method", dy.METHODS)
def test_methods_jit_under_float64(method):
    model = chain(3)
    q, qd, _ = _state(model, 3)
    f = eqx.filter_jit(lambda m, q, qd: dy.bias_forces(m, q, qd, method=method))
    assert_rel(f(model, q, qd), dy.bias_forces(model, q, qd, method="lagrangian"))


def test_deep_tree_poses_match_body_by_body():
    """The pose pass (a lax.scan beyond 16 bodies) equals Eq. 40 composed body by body (an
    independent loop)."""
    rng = np.random.default_rng(5)
    model = mb.build_model(random_bodies(rng, 37, chain=False))
    q = jnp.asarray(rng.normal(size=37))
    np.testing.assert_allclose(
        mb.body_transforms(model, q),
        dy.referee_poses(model, q),
        rtol=0,
        atol=1e-13,
    )


# ---------------------------------------------------------------------------------------------
# energy conservation in free motion


def _energy_drift(model, q0, t1, n=21, rtol=1e-12, atol=1e-12, solver="dopri8"):
    from jaxmb.simulation import simulate

    ts = jnp.linspace(0.0, t1, n)
    tr = simulate(
        model,
        q0,
        jnp.zeros_like(q0),
        t1,
        ts,
        solver=solver,
        rtol=rtol,
        atol=atol,
        max_steps=200_000,
    )
    E = jax.vmap(lambda q, qd: dy.total_energy(model, q, qd))(tr.q, tr.qd)
    T = jax.vmap(lambda q, qd: dy.kinetic_energy(model, q, qd))(tr.q, tr.qd)
    scale = float(jnp.abs(T).max() + jnp.abs(E[0]))
    return float(jnp.abs(E - E[0]).max()) / scale


def test_energy_conserved_pendulum_chain_short():
    drift = _energy_drift(chain(3), jnp.array([0.8, -0.5, 0.3]), 1.0)
    assert drift < 1e-9, drift


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_energy_conserved_pendulum_chains_10s(n):
    q0 = jnp.asarray(np.linspace(0.9, -0.6, n))
    drift = _energy_drift(chain(n), q0, 10.0, n=101)
    assert drift < 1e-9, drift


@pytest.mark.slow
@pytest.mark.parametrize("name", ["four_bar", "five_bar"])
def test_energy_conserved_closed_chains_10s(name):
    mod = pytest.importorskip(f"jaxmb.models.{name}")
    model = getattr(mod, name)()
    if any(not hasattr(f, "potential_energy") for f in model.forces):
        pytest.skip(f"{name} carries non-conservative force elements")
    if name == "four_bar":
        # q is the coupler's centre-of-mass height: under the model's gravity (−y) the free swing
        # runs into the extremum of q, where the chart ends (test_four_bar_leaving_its_chart...);
        # gravity along +x keeps the motion inside it (measured q ∈ [0.35, 0.58])
        model = eqx.tree_at(lambda m: m.gravity, model, jnp.array([9.81, 0.0, 0.0]))
    # start a little off the mechanism's reference configuration, at rest
    q0 = jnp.asarray(np.broadcast_to(np.asarray(mod.Q_REF, dtype=float), (model.nq,))) + 0.05
    drift = _energy_drift(model, q0, 10.0, n=101)
    assert drift < 1e-9, drift


@pytest.mark.slow
def test_four_bar_leaving_its_chart_is_reported():
    """Free fall of the four-bar under −y gravity drives q = coupler height to its extremum."""
    mod = pytest.importorskip("jaxmb.models.four_bar")
    from jaxmb.simulation import SimulationError, simulate

    model = mod.four_bar()
    with pytest.raises(SimulationError, match="ImplicitMap: Newton's method did not converge"):
        simulate(model, jnp.array([mod.Q_REF + 0.05]), jnp.zeros(1), 1.0, rtol=1e-10, atol=1e-10)
