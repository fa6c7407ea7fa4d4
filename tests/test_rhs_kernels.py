"""The fast right-hand-side kernels: one shared :class:`TreeKinematics` pass, q-space equations of
motion from the body twist Jacobians, force elements from that cache, fused small contractions.

Each is checked against an independent route: ``jnp.einsum``, autodiff of the body poses, the
closed-form (Kronecker calculus) M, N q̇ and G, and each element's own ``generalized_force``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_models

import jaxmb  # noqa: F401  (float64)
from jaxmb import dynamics as dy
from jaxmb import forces as fo
from jaxmb import kinematics as kin

REL = 1e-10


def assert_rel(a, b, rel=REL, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    scale = max(np.abs(b).max(initial=0.0), 1e-6)  # below 1e-6 the bound is 1e-16 absolute
    err = np.abs(a - b).max(initial=0.0)
    assert err <= rel * scale, f"{what}: max error {err:.3e} > {rel:g} × {scale:.3e}"


@pytest.mark.parametrize(
    "spec, shapes",
    [
        ("ij,ja,jl->ial", [(7, 7), (7, 6), (7, 1)]),
        ("iab,ibc,idc->iad", [(5, 3, 3), (5, 3, 3), (5, 3, 3)]),
        ("ila,ima->lm", [(4, 3, 6), (4, 3, 6)]),
        ("jlm,l,m->j", [(6, 2, 2), (2,), (2,)]),
        ("ij,ja,jl->ial", [(40, 40), (40, 6), (40, 5)]),  # above the threshold: jnp.einsum
    ],
)
def test_small_einsum_is_einsum(spec, shapes):
    rng = np.random.default_rng(0)
    ops = [jnp.asarray(rng.normal(size=s)) for s in shapes]
    assert_rel(kin.small_einsum(spec, *ops), jnp.einsum(spec, *ops), rel=1e-14, what=spec)


def _state(model, seed):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.normal(size=model.nq)) for _ in range(2))


@eqx.filter_jit
def _eom_routes(model, q, qd):
    M, h = dy._equations_of_motion(model, kin.tree_kinematics(model, q), qd)
    Mc = dy.mass_matrix(model, q, method="closed_form")
    hc = dy.bias_forces(model, q, qd, method="closed_form") - dy.gravity_forces(
        model, q, method="closed_form"
    )
    return M, h, Mc, hc


@settings(max_examples=4)
@given(random_models(max_bodies=8, max_nq=5), st.integers(0, 2**31 - 1))
def test_q_space_equations_of_motion_match_closed_form(model, seed):
    q, qd = _state(model, seed)
    M, h, Mc, hc = _eom_routes(model, q, qd)
    assert_rel(M, Mc, what="M = Σ Jbᵀ I Jb vs Eq. 145")
    assert_rel(h, hc, what="Σ Jbᵀ f vs N q̇ − G (Eqs. 147, 187)")


def _poses_autodiff_point_jacobian(model, b, p, q):
    def r(x):
        A = dy._referee_poses(model, x)[b]
        return A[:3, :3] @ p + A[:3, 3]

    return r(q), jax.jacfwd(r)(q)


def _elements(model, rng):
    nb = model.nb
    b = lambda: int(rng.integers(-1, nb))
    v = lambda: rng.normal(size=3)
    return [
        fo.PointForce(b(), v(), v()),
        fo.BodyTorque(b(), v()),
        fo.PointToPointSpring(b(), v(), b(), v(), 3.0, 0.2, 0.7),
        fo.JointTorque(int(rng.integers(0, nb)), 1.3),
        fo.JointSpring(int(rng.integers(0, nb)), 2.0, 0.1, 0.4),
        fo.CoordinateForce(int(rng.integers(0, model.nq)), -0.8),
    ]


@settings(max_examples=4)
@given(random_models(max_bodies=7, max_nq=4), st.integers(0, 2**31 - 1))
def test_cached_point_jacobian_and_force_elements(model, seed):
    rng = np.random.default_rng(seed)
    q, qd = _state(model, seed)
    k = kin.tree_kinematics(model, q)
    for b in range(model.nb):
        p = jnp.asarray(rng.normal(size=3))
        r, Jr = kin.point_jacobian_from(k, b, p)
        r_ad, Jr_ad = _poses_autodiff_point_jacobian(model, b, p, q)
        assert_rel(r, r_ad, what=f"point on body {b}")
        assert_rel(Jr, Jr_ad, what=f"∂r/∂q of a point on body {b} vs autodiff")
    for e in _elements(model, rng):
        name = type(e).__name__
        assert_rel(
            e.from_kinematics(model, k, qd, 0.0),
            e.generalized_force(model, q, qd, 0.0),
            what=f"{name}.from_kinematics vs generalized_force",
        )
    # the point elements against virtual work through autodiff poses
    pf = _elements(model, rng)[0]
    if pf.body >= 0:
        _, Jr_ad = _poses_autodiff_point_jacobian(model, pf.body, pf.point, q)
        assert_rel(pf.from_kinematics(model, k, qd, 0.0), Jr_ad.T @ pf.force, what="PointForce")


def test_forward_dynamics_uses_generic_elements_fallback():
    """A user element that only defines generalized_force still enters forward dynamics."""
    from jaxmb.models.chain import chain

    class Push(fo.AbstractForce):
        def generalized_force(self, model, q, qd, t):
            return jnp.ones(model.nq) * 0.5

    model = chain(3)
    q, qd = _state(model, 1)
    pushed = eqx.tree_at(lambda m: m.forces, model, (Push(),))
    qdd0 = dy.forward_dynamics(model, q, qd, tau=jnp.ones(model.nq) * 0.5)
    assert_rel(dy.forward_dynamics(pushed, q, qd), qdd0, what="fallback element")
