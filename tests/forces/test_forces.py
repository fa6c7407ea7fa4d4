"""Force elements: generalized forces by virtual work against independent routes.

Independent routes: autodiff of the point position (``∂r/∂q`` by ``jax.jacfwd``), virtual power
(``Q·q̇ = F·v`` with v from :func:`jaxmb.point_velocity`, ``Q·q̇ = τ·ω`` with ω from
:func:`jaxmb.body_angular_velocity`) and ``Q = −∂V/∂q`` for conservative elements. Exact in exact
arithmetic: tolerance 1e-12 relative.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_rel as shared_assert_rel
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, random_models

import jaxmb as mb
from jaxmb import dynamics as dy
from jaxmb import forces as fo
from jaxmb.models.chain import chain

REL = 1e-12


# this file's bound (REL) is tighter than the shared default
assert_rel = functools.partial(shared_assert_rel, rel=REL)


def _draw(model, seed):
    rng = np.random.default_rng(seed)
    q = jnp.asarray(rng.normal(size=model.nq))
    qd = jnp.asarray(rng.normal(size=model.nq))
    b = int(rng.integers(0, model.nb))
    r = jnp.asarray(rng.normal(size=3) * 0.3)
    F = jnp.asarray(rng.normal(size=3))
    return rng, q, qd, b, r, F


# every example compiles for a new tree structure: few examples, one compiled call each
FEW = settings(max_examples=examples(5))


@eqx.filter_jit
def _point_terms(model, b, r, F, q, qd):
    Q = fo.PointForce(b, r, F).generalized_force(model, q, qd, 0.0)
    Jr = jax.jacfwd(lambda x: mb.point_position(model, b, r, x))(q)
    return Q, Jr.T @ F, Q @ qd, F @ mb.point_velocity(model, b, r, q, qd)


@FEW
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_point_force_virtual_work(model, seed):
    _, q, qd, b, r, F = _draw(model, seed)
    Q, Q_ref, P, P_ref = _point_terms(model, b, r, F, q, qd)
    assert_rel(Q, Q_ref, what="Q = (∂r/∂q)ᵀ F")
    assert_rel(P, P_ref, what="Q·q̇ = F·v")


@eqx.filter_jit
def _torque_terms(model, b, tau, q):
    Q = fo.BodyTorque(b, tau).generalized_force(model, q, None, 0.0)
    # Q·v = τ·ω(v) for every velocity v: ω on the basis of q̇
    W = jax.vmap(lambda v: mb.body_angular_velocity(model, q, v)[b])(jnp.eye(model.nq))
    return Q, W @ tau


@FEW
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_body_torque_virtual_power(model, seed):
    _, q, _, b, _, tau = _draw(model, seed)
    Q, Q_ref = _torque_terms(model, b, tau, q)
    assert_rel(Q, Q_ref, what="Q = (∂ω/∂q̇)ᵀ τ")


@FEW
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_joint_torque_and_coordinate_force(model, seed):
    rng, q, qd, j, _, _ = _draw(model, seed)
    Q = fo.JointTorque(j, 2.5).generalized_force(model, q, qd, 0.0)
    fdot = jax.jvp(model.joint_map, (q,), (qd,))[1][j]
    assert_rel(Q @ qd, 2.5 * fdot, what="Q·q̇ = τ ḟ_j")
    k = int(rng.integers(0, model.nq))
    Qc = fo.CoordinateForce(k, -1.5).generalized_force(model, q, qd, 0.0)
    np.testing.assert_array_equal(Qc, -1.5 * np.eye(model.nq)[k])


@eqx.filter_jit
def _spring_terms(model, spring, damper, q, qd):
    a, pa, b, r = spring.body_a, spring.point_a, spring.body_b, spring.point_b

    def length(x):
        ra = pa if a < 0 else mb.point_position(model, a, pa, x)
        return jnp.linalg.norm(mb.point_position(model, b, r, x) - ra)

    _, Ldot = jax.jvp(length, (q,), (qd,))
    return (
        spring.generalized_force(model, q, qd, 0.0),
        -jax.grad(lambda x: spring.potential_energy(model, x))(q),
        damper.generalized_force(model, q, qd, 0.0),
        -damper.damping * Ldot * jax.grad(length)(q),
    )


@FEW
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_point_to_point_spring_is_conservative_plus_damping(model, seed):
    rng, q, qd, b, r, _ = _draw(model, seed)
    # a spring between two points of one body does no work; take another body or the ground
    others = [i for i in range(-1, model.nb) if i != b]
    a = others[int(rng.integers(0, len(others)))]
    pa = jnp.asarray(rng.normal(size=3) * (1.0 if a < 0 else 0.3))
    spring = fo.PointToPointSpring(a, pa, b, r, stiffness=30.0, rest_length=0.2)
    damper = fo.PointToPointSpring(a, pa, b, r, stiffness=0.0, rest_length=0.0, damping=4.0)
    Q, Q_ref, Qd, Qd_ref = _spring_terms(model, spring, damper, q, qd)
    assert_rel(Q, Q_ref, what="Q = −∂V/∂q")
    assert_rel(Qd, Qd_ref, what="damping −c L̇ ∇L")
    assert Qd @ qd <= 1e-12  # a damper never does positive work


@eqx.filter_jit
def _joint_spring_terms(model, s, undamped, q, qd):
    j = s.joint
    gradf = jax.grad(lambda x: model.joint_map(x)[j])(q)
    Qu = undamped.generalized_force(model, q, qd, 0.0)
    return (
        Qu,
        -jax.grad(lambda x: s.potential_energy(model, x))(q),
        s.generalized_force(model, q, qd, 0.0) - Qu,
        -s.damping * (gradf @ qd) * gradf,
    )


@FEW
@given(random_models(max_bodies=6, max_nq=4), st.integers(0, 2**31 - 1))
def test_joint_spring(model, seed):
    _, q, qd, j, _, _ = _draw(model, seed)
    s = fo.JointSpring(j, stiffness=12.0, rest=0.3, damping=0.7)
    undamped = fo.JointSpring(j, stiffness=12.0, rest=0.3)
    Qu, Qu_ref, Qd, Qd_ref = _joint_spring_terms(model, s, undamped, q, qd)
    assert_rel(Qu, Qu_ref, what="−∂V/∂q")
    assert_rel(Qd, Qd_ref, what="−c ḟ ∇f")


def test_ground_to_ground_spring_and_names():
    model = chain(2)
    s = fo.PointToPointSpring("ground", [0, 0, 0], "link1", [0, 0, 0.1], 10.0, 0.0)
    s_idx = fo.PointToPointSpring(-1, [0, 0, 0], 1, [0, 0, 0.1], 10.0, 0.0)
    q = jnp.array([0.3, -0.2])
    assert_rel(s.generalized_force(model, q, q, 0.0), s_idx.generalized_force(model, q, q, 0.0))
    with pytest.raises(mb.ModelError, match="unknown body 'nope'"):
        fo.PointForce("nope", [0, 0, 0], [1, 0, 0]).generalized_force(model, q, q, 0.0)


def test_zero_length_spring_has_finite_gradient():
    model = chain(1)
    s = fo.PointToPointSpring(-1, [0, 0, 0], 0, [0, 0, 0], 10.0, 0.1)
    q = jnp.zeros(1)
    Q = s.generalized_force(model, q, q, 0.0)
    g = jax.grad(
        lambda k: jnp.sum(
            eqx.tree_at(lambda x: x.stiffness, s, k).generalized_force(model, q, q, 0.0)
        )
    )(10.0)
    assert np.all(np.isfinite(Q)) and np.isfinite(g)


def test_applied_forces_sum_and_enter_the_equations_of_motion():
    base = chain(3)
    elements = (
        fo.CoordinateForce(0, 0.4),
        fo.JointTorque(2, -0.3),
        fo.PointForce(1, [0.0, 0.1, 0.2], [1.0, -2.0, 0.5]),
        fo.BodyTorque("link2", [0.1, 0.2, -0.3]),
        fo.PointToPointSpring(-1, [0.2, 0.0, 0.5], 2, [0.0, 0.0, 0.3], 50.0, 0.1, damping=2.0),
        fo.JointSpring(1, 5.0, 0.2, damping=0.1),
    )
    model = eqx.tree_at(lambda m: m.forces, base, elements)
    q, qd = jnp.array([0.3, -0.4, 0.5]), jnp.array([0.7, 0.2, -1.1])
    total = sum(e.generalized_force(model, q, qd, 0.0) for e in elements)
    assert_rel(dy.applied_forces(model, q, qd), total)
    qdd = dy.forward_dynamics(model, q, qd)
    qdd_ref = dy.forward_dynamics(base, q, qd, total)
    assert_rel(qdd, qdd_ref, rel=1e-12, what="model forces = external τ")
    np.testing.assert_allclose(dy.inverse_dynamics(model, q, qd, qdd), 0.0, atol=1e-11)


def test_force_parameters_are_traced_leaves():
    """Differentiable and batchable in the element parameters (no recompilation per value)."""
    model = chain(2)
    q, qd = jnp.array([0.3, -0.4]), jnp.array([0.1, 0.2])

    def qdd_of(k):
        spring = fo.PointToPointSpring(-1, [0.1, 0, 0.4], 1, [0, 0, 0.2], k, 0.05)
        m = eqx.tree_at(lambda m: m.forces, model, (spring,))
        return dy.forward_dynamics(m, q, qd)

    ks = jnp.array([1.0, 10.0, 100.0])
    batched = jax.jit(jax.vmap(qdd_of))(ks)
    one = jax.jit(qdd_of)  # compiled once, called for every value (op-by-op costs more here)
    for i, k in enumerate(ks):
        assert_rel(batched[i], one(k))
    d = jax.jit(jax.jacfwd(qdd_of))(10.0)
    fd = (one(10.0 + 1e-5) - one(10.0 - 1e-5)) / 2e-5
    np.testing.assert_allclose(d, fd, rtol=1e-6)
