"""Closed-form kinematics (seed 001 §3-2) against autodiff on random trees.

Models come from ``tests/strategies.random_models``: branching trees of up to 12 bodies, mixed
revolute/prismatic joints, massless bodies, nq up to 6 and a nonlinear joint map
``f(q) = A q + b + c ⊙ sin(P q) + e ⊙ (Q q)²``. All in float64.

Tolerance: ``max |closed form − reference| ≤ 1e-10 · max(1, max |reference|)``, the maximum taken
over the whole compared array (all bodies, all entries), unless a test says otherwise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from helpers import rel_err
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from strategies import examples, random_models, slow_twin

import jaxmb as mb
from jaxmb import kinematics as kin
from jaxmb import matcalc

RTOL = 1e-10
seeds = st.integers(0, 2**31 - 1)
trees = random_models(max_bodies=12, max_nq=6)


def assert_rel(x, ref, tol=RTOL, what=""):
    e = rel_err(x, ref)
    assert e <= tol, f"{what}: relative error {e:.3e} > {tol:.0e}"


def _state(seed, nq, scale=1.0):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=nq) * scale), rng


def _B(model):
    """``B_i(q) = ⁰ᵢA₄ᵀ`` of every body, (nb, 4, 4)."""
    return lambda q: jnp.swapaxes(mb.body_transforms(model, q), 1, 2)


# ---------------------------------------------------------------------------------------------
# poses
# ---------------------------------------------------------------------------------------------


@given(model=trees, seed=seeds)
@settings(max_examples=examples(10))
def test_body_transforms_are_rigid(model, seed):
    q, _ = _state(seed, model.nq, 2.0)
    A = np.asarray(jax.jit(lambda q: mb.body_transforms(model, q))(q))
    R = A[:, :3, :3]
    assert np.max(np.abs(R @ np.swapaxes(R, 1, 2) - np.eye(3))) < 1e-13
    assert np.max(np.abs(np.linalg.det(R) - 1.0)) < 1e-13
    np.testing.assert_array_equal(A[:, 3], np.broadcast_to([0.0, 0.0, 0.0, 1.0], (model.nb, 4)))


@given(model=trees, seed=seeds)
@settings(max_examples=examples(6))
def test_poses_from_the_definition(model, seed):
    """Eqs. 38–40 rebuilt in numpy/scipy: translate d along V_d, rotate θ about V_θ, compose."""
    q, _ = _state(seed, model.nq)
    A, f = jax.jit(lambda q: (mb.body_transforms(model, q), model.joint_map(q)))(q)
    A, f = np.asarray(A), np.asarray(f)
    world = {-1: np.eye(4)}
    for i, p in enumerate(model.parent):
        rev = model.joint_type[i] == "revolute"
        theta = f[i] if rev else float(model.theta[i])
        d = float(model.d[i]) if rev else f[i]
        L = np.eye(4)
        L[:3, :3] = Rotation.from_rotvec(np.asarray(model.axis_theta[i]) * theta).as_matrix()
        L[:3, 3] = d * np.asarray(model.axis_d[i])
        world[i] = world[p] @ L
        assert_rel(A[i], world[i], 1e-13, f"body {i}")


# ---------------------------------------------------------------------------------------------
# D_i and D'_i against autodiff
# ---------------------------------------------------------------------------------------------


@given(model=trees, seed=seeds)
@settings(max_examples=examples(4))
def test_closed_form_derivatives_match_autodiff(model, seed):
    """dA, ddA (tensor form) and D_i, D'_i (Definition 1) equal jacfwd / hessian of B_i(q)."""
    q, _ = _state(seed, model.nq)
    nb, nq = model.nb, model.nq

    @jax.jit
    def both(q):
        A, dA, ddA = mb.transform_derivatives(model, q)
        D, Dp = mb.kron_derivatives(model, q)
        B = _B(model)
        dB_ref = jax.jacfwd(B)(q)  # (nb, 4, 4, nq): dB[i, a, b, l] = ∂B_i[a, b]/∂q_l
        ddB_ref = jax.hessian(B)(q)  # (nb, 4, 4, nq, nq)
        return A, dA, ddA, D, Dp, B(q), dB_ref, ddB_ref

    A, dA, ddA, D, Dp, B0, dB_ref, ddB_ref = both(q)
    assert_rel(jnp.swapaxes(A, 1, 2), B0, 1e-14, "A")
    assert_rel(jnp.swapaxes(dA, 1, 2), dB_ref, RTOL, "dA")
    assert_rel(jnp.swapaxes(ddA, 1, 2), ddB_ref, RTOL, "ddA")
    # ∂²A/∂q_l∂q_m is symmetric in (l, m)
    assert_rel(ddA, jnp.swapaxes(ddA, 3, 4), 1e-12, "ddA symmetry")
    # Definition 1 arrangement: D_i[a·nq + l, b] and D'_i[(a·nq + l)·nq + m, b] (test_matcalc checks
    # tensor_to_kron and this reshape against the literal sum of Eq. 3 applied once and twice)
    D_ref = jnp.stack([matcalc.tensor_to_kron(dB_ref[i]) for i in range(nb)])
    Dp_ref = jnp.reshape(jnp.transpose(ddB_ref, (0, 1, 3, 4, 2)), (nb, 4 * nq * nq, 4))
    assert D.shape == (nb, 4 * nq, 4) and Dp.shape == (nb, 4 * nq * nq, 4)
    assert_rel(D, D_ref, RTOL, "D_i")
    assert_rel(Dp, Dp_ref, RTOL, "D'_i")


@given(model=random_models(max_bodies=8, max_nq=4), seed=seeds)
@settings(max_examples=examples(6))
def test_recursive_kronecker_formulas_match_closed_form(model, seed):
    """The literal Eqs. 77 / 89 (Kronecker and commutation matrices) equal the closed form."""
    q, _ = _state(seed, model.nq)
    D, Dp, Dr, Dpr = jax.jit(
        lambda q: mb.kron_derivatives(model, q) + kin.kron_derivatives_recursive(model, q)
    )(q)
    assert_rel(Dr, D, RTOL, "D_i recursive")
    assert_rel(Dpr, Dp, RTOL, "D'_i recursive")


def test_recursive_formulas_on_the_largest_trees():
    """One 12-body, nq = 6 tree through the literal recursion (the hypothesis test stops at 8)."""
    rng = np.random.default_rng(12)
    from strategies import random_bodies, random_coupling

    model = mb.build_model(random_bodies(rng, 12), random_coupling(rng, 6, 12))
    q = jnp.asarray(rng.normal(size=6))
    D, Dp = mb.kron_derivatives(model, q)
    Dr, Dpr = kin.kron_derivatives_recursive(model, q)
    assert_rel(Dr, D, RTOL, "D_i recursive")
    assert_rel(Dpr, Dp, RTOL, "D'_i recursive")


def test_identity_map_derivatives_are_sparse():
    """With f = q on a chain, ∂A_i/∂q_l vanishes for joints l that are not ancestors of i."""
    model = chain(5)
    q = jnp.asarray(np.random.default_rng(3).normal(size=5))
    _, dA, ddA = jax.jit(lambda q: mb.transform_derivatives(model, q))(q)
    for i in range(5):
        assert np.all(np.asarray(dA[i, ..., i + 1 :]) == 0.0)
        assert np.all(np.asarray(ddA[i, ..., i + 1 :, :]) == 0.0)
        assert np.max(np.abs(np.asarray(dA[i, ..., : i + 1]))) > 0


def chain(n):
    from jaxmb.models.chain import chain as _chain

    return _chain(n)


# ---------------------------------------------------------------------------------------------
# point motion and angular velocity along smooth trajectories
# ---------------------------------------------------------------------------------------------


def _trajectory(rng, nq):
    """``q(t) = a + b sin(ωt) + c t²`` with random a, b, c, ω, and a random time t0."""
    a, b, c = (jnp.asarray(rng.normal(size=nq)) for _ in range(3))
    w = float(rng.uniform(0.5, 3.0))
    t0 = float(rng.uniform(-1.0, 1.0))
    return (lambda t: a + b * jnp.sin(w * t) + c * t**2), t0


def _derivs(fn, t0):
    """``fn(t0)``, its first and second time derivatives by nested jax.jvp."""
    d1 = lambda t: jax.jvp(fn, (t,), (jnp.ones_like(t),))[1]
    x, v = jax.jvp(fn, (t0,), (jnp.ones_like(t0),))
    a = jax.jvp(d1, (t0,), (jnp.ones_like(t0),))[1]
    return x, v, a


@given(model=trees, data=st.data(), seed=seeds)
@settings(max_examples=examples(10))
def test_point_velocity_and_acceleration_match_time_derivatives(model, data, seed):
    """Eqs. 44 and 57 equal d/dt and d²/dt² of the point position (Eq. 41) along q(t)."""
    body = data.draw(st.integers(-1, model.nb - 1), label="body")
    rng = np.random.default_rng(seed)
    r = jnp.asarray(rng.uniform(-0.5, 0.5, size=3))
    qt, t0 = _trajectory(rng, model.nq)

    @jax.jit
    def check(t0):
        q, qd, qdd = _derivs(qt, t0)
        p, v_ref, a_ref = _derivs(lambda t: mb.point_position(model, body, r, qt(t)), t0)
        v = mb.point_velocity(model, body, r, q, qd)
        a = mb.point_acceleration(model, body, r, q, qd, qdd)
        return p, v, v_ref, a, a_ref

    p, v, v_ref, a, a_ref = check(jnp.asarray(t0))
    assert_rel(v, v_ref, RTOL, "velocity")
    assert_rel(a, a_ref, RTOL, "acceleration")
    if body == -1:
        np.testing.assert_array_equal(p, r)
        np.testing.assert_array_equal(v, np.zeros(3))
        np.testing.assert_array_equal(a, np.zeros(3))


@given(model=trees, seed=seeds)
@settings(max_examples=examples(4))
def test_body_angular_velocity_and_acceleration(model, seed):
    """ω̃ = Ṙ Rᵀ and dω̃/dt = R̈ Rᵀ + Ṙ Ṙᵀ with Ṙ, R̈ by nested jvp; body axes ω_b = Rᵀ ω."""
    rng = np.random.default_rng(seed)
    qt, t0 = _trajectory(rng, model.nq)

    @jax.jit
    def check(t0):
        q, qd, qdd = _derivs(qt, t0)
        R, Rd, Rdd = _derivs(lambda t: mb.body_transforms(model, qt(t))[:, :3, :3], t0)
        RT = jnp.swapaxes(R, 1, 2)
        W = Rd @ RT
        Wd = Rdd @ RT + Rd @ jnp.swapaxes(Rd, 1, 2)
        out = dict(
            W=W,
            Wd=Wd,
            R=R,
            w=mb.body_angular_velocity(model, q, qd),
            wb=mb.body_angular_velocity(model, q, qd, frame="body"),
            al=mb.body_angular_acceleration(model, q, qd, qdd),
            alb=mb.body_angular_acceleration(model, q, qd, qdd, frame="body"),
        )
        return out

    o = check(jnp.asarray(t0))
    # Ṙ Rᵀ is skew-symmetric; so is its time derivative
    assert_rel(o["W"], -jnp.swapaxes(o["W"], 1, 2), 1e-12, "skew W")
    assert_rel(o["Wd"], -jnp.swapaxes(o["Wd"], 1, 2), 1e-12, "skew dW")
    w_ref = matcalc.unskew(o["W"])
    assert_rel(o["w"], w_ref, RTOL, "omega")
    assert_rel(o["wb"], jnp.einsum("iba,ib->ia", o["R"], w_ref), RTOL, "omega body")
    al_ref = matcalc.unskew(o["Wd"])
    assert_rel(o["al"], al_ref, RTOL, "alpha")
    # in body axes: d/dt(Rᵀ ω) = Rᵀ ω̇ (the Ṙᵀ ω term vanishes because ω × ω = 0)
    assert_rel(o["alb"], jnp.einsum("iba,ib->ia", o["R"], al_ref), RTOL, "alpha body")


# ---------------------------------------------------------------------------------------------
# API details: named points, batching, bad input
# ---------------------------------------------------------------------------------------------


def test_named_points_and_batching():
    rng = np.random.default_rng(5)
    from strategies import random_bodies, random_coupling

    model = mb.build_model(
        random_bodies(rng, 6),
        random_coupling(rng, 3, 6),
        points={"tip": ("b5", (0.1, -0.2, 0.3)), "fixed": ("ground", (1.0, 2.0, 3.0))},
    )
    qs = jnp.asarray(rng.normal(size=(7, 3)))
    r = jnp.array([0.1, -0.2, 0.3])

    @jax.jit
    def positions(q):
        return (
            mb.point_position(model, "tip", None, q),
            mb.point_position(model, 5, r, q),
            mb.point_position(model, "b5", r, q),
            mb.point_position(model, "fixed", None, q),
            mb.transform_derivatives(model, q)[1],
        )

    batched = jax.jit(jax.vmap(positions))(qs)
    for k in (0, 6):
        single = positions(qs[k])
        for b, s in zip(batched, single, strict=True):
            assert_rel(b[k], s, 1e-14, "vmap")
    np.testing.assert_allclose(batched[0], batched[1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(batched[0], batched[2], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(batched[3], np.broadcast_to([1.0, 2.0, 3.0], (7, 3)))


def test_unknown_body_is_named():
    model = chain(3)
    q = jnp.zeros(3)
    with np.testing.assert_raises_regex(mb.ModelError, "'link1' is not a named point"):
        mb.point_position(model, "link1", None, q)
    with np.testing.assert_raises_regex(mb.ModelError, r"must be a 3-vector, got shape \(2,\)"):
        mb.point_position(model, "link1", jnp.zeros(2), q)
    with np.testing.assert_raises_regex(ValueError, "frame must be 'ground' or 'body'"):
        mb.body_angular_velocity(model, q, q, frame="world")
    with np.testing.assert_raises_regex(mb.ModelError, "unknown body 'hand'"):
        mb.point_position(model, "hand", jnp.zeros(3), q)
    with np.testing.assert_raises_regex(mb.ModelError, "'hand' is not a named point"):
        mb.point_position(model, "hand", None, q)
    with np.testing.assert_raises_regex(mb.ModelError, "body index 3 out of range"):
        mb.point_velocity(model, 3, jnp.zeros(3), q, q)


def test_local_rotation_is_rodrigues():
    """Eq. 39 equals the matrix exponential of θ Ṽ for unit axes (scipy)."""
    rng = np.random.default_rng(0)
    axes = rng.normal(size=(20, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = rng.uniform(-7.0, 7.0, size=20)
    R = np.asarray(kin.rotation(jnp.asarray(axes), jnp.asarray(angles)))
    R_ref = Rotation.from_rotvec(axes * angles[:, None]).as_matrix()
    assert np.max(np.abs(R - R_ref)) < 1e-14


# the properties above at their former depth (each example compiles a new random tree)
test_closed_form_derivatives_match_autodiff_deep = slow_twin(
    test_closed_form_derivatives_match_autodiff, 10, model=trees, seed=seeds
)
test_body_angular_velocity_and_acceleration_deep = slow_twin(
    test_body_angular_velocity_and_acceleration, 8, model=trees, seed=seeds
)
