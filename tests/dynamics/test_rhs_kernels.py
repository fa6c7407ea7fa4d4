"""The fast right-hand-side kernels: one shared :class:`Kinematics` pass, the tree equations of
motion projected to q from it, force elements from that cache, fused small contractions.

Each is checked against an independent route: ``jnp.einsum``, autodiff of the body poses, the
closed-form (Kronecker calculus) M, N q̇ and G, and each element's own ``generalized_force``.
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
from strategies import examples, random_models, slow_twin

import jaxmb  # noqa: F401  (float64)
from jaxmb import dynamics as dy
from jaxmb import forces as fo
from jaxmb import kinematics as kin

REL = 1e-10


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
    M, Nqd, G = dy.projected_terms(model, kin.tree_kinematics(model, q), qd)
    h = Nqd - G
    Mc = dy.mass_matrix(model, q, method="closed_form")
    hc = dy.bias_forces(model, q, qd, method="closed_form") - dy.gravity_forces(
        model, q, method="closed_form"
    )
    return M, h, Mc, hc


@settings(max_examples=examples(4))
@given(random_models(max_bodies=8, max_nq=5), st.integers(0, 2**31 - 1))
def test_q_space_equations_of_motion_match_closed_form(model, seed):
    q, qd = _state(model, seed)
    M, h, Mc, hc = _eom_routes(model, q, qd)
    assert_rel(M, Mc, what="M = Jᵀ M_θ J vs Eq. 145")
    assert_rel(h, hc, what="Jᵀ (c_θ − G_θ) vs N q̇ − G (Eqs. 147, 187)")


@eqx.filter_jit
def _regrouped_and_joint_space(model, q, qd, qdd):
    k = kin.tree_kinematics(model, q)
    R, o, Sw, Sv = dy.tree.batch_last_kinematics(k)
    thdd = (k.J @ qdd + jnp.einsum("jlm,l,m->j", k.H, qd, qd))[:, None]
    col = lambda x: x[:, None]
    Jb = jnp.transpose(k.Jb, (1, 2, 0))[..., None]
    args = (model, R, o, Sw, Sv, Jb, col(qd), col(k.J @ qd), thdd)
    regrouped = dy.tree.coordinate_space_terms(*args)
    folded = dy.tree.coordinate_space_terms(*args, want_m=False, fold_gravity=True)
    Mt, ct, Gt = dy.joint_space_terms(model, R, o, Sw, Sv, col(k.J @ qd), thdd)
    J = k.J
    joint_space = (J.T @ Mt[..., 0] @ J, J.T @ ct[:, 0], J.T @ Gt[:, 0])
    return [x[..., 0] for x in regrouped], folded[1][:, 0], joint_space


@settings(max_examples=examples(4))
@given(random_models(max_bodies=8, max_nq=5), st.integers(0, 2**31 - 1))
def test_coordinate_space_terms_regroup_the_joint_space_projection(model, seed):
    """The body-by-body projection (used when nq < nj) equals ``Jᵀ (M_θ, c_θ, G_θ) J`` of the
    joint-space CRBA/RNEA, with q̈ ≠ 0 and with gravity folded into the RNEA."""
    q, qd = _state(model, seed)
    qdd = jnp.asarray(np.random.default_rng(seed + 1).normal(size=model.nq))
    (M, c, G), c_minus_G, (Mj, cj, Gj) = _regrouped_and_joint_space(model, q, qd, qdd)
    assert_rel(M, Mj, what="Σ Jbᵀ I Jb vs Jᵀ M_θ J", rel=1e-12)
    assert_rel(c, cj, what="Σ Jbᵀ f vs Jᵀ c_θ", rel=1e-12)
    assert_rel(G, Gj, what="gravity by body vs Jᵀ G_θ", rel=1e-12)
    assert_rel(c_minus_G, cj - Gj, what="gravity folded", rel=1e-12)


def _poses_autodiff_point_jacobian(model, b, p, q):
    def r(x):
        A = dy.referee_poses(model, x)[b]
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


# both routes of every check compiled as one program per random model: op by op they cost more
@eqx.filter_jit
def _cached_and_referee_routes(model, q, qd, ps, elements, pf):
    k = kin.tree_kinematics(model, q)
    points = [
        (kin.point_jacobian_from(k, b, ps[b]), _poses_autodiff_point_jacobian(model, b, ps[b], q))
        for b in range(model.nb)
    ]
    forces = [
        (e.from_kinematics(model, k, qd, 0.0), e.generalized_force(model, q, qd, 0.0))
        for e in elements
    ]
    point_force = None
    if pf.body >= 0:
        _, Jr_ad = _poses_autodiff_point_jacobian(model, pf.body, pf.point, q)
        point_force = (pf.from_kinematics(model, k, qd, 0.0), Jr_ad.T @ pf.force)
    return points, forces, point_force


@settings(max_examples=examples(4))
@given(random_models(max_bodies=7, max_nq=4), st.integers(0, 2**31 - 1))
def test_cached_point_jacobian_and_force_elements(model, seed):
    rng = np.random.default_rng(seed)
    q, qd = _state(model, seed)
    ps = [jnp.asarray(rng.normal(size=3)) for _ in range(model.nb)]
    elements = _elements(model, rng)
    pf = _elements(model, rng)[0]
    points, forces, point_force = _cached_and_referee_routes(model, q, qd, ps, elements, pf)
    for b, ((r, Jr), (r_ad, Jr_ad)) in enumerate(points):
        assert_rel(r, r_ad, what=f"point on body {b}")
        assert_rel(Jr, Jr_ad, what=f"∂r/∂q of a point on body {b} vs autodiff")
    for e, (cached, own) in zip(elements, forces, strict=True):
        name = type(e).__name__
        assert_rel(cached, own, what=f"{name}.from_kinematics vs generalized_force")
    # the point elements against virtual work through autodiff poses
    if point_force is not None:
        assert_rel(*point_force, what="PointForce")


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


# ------------------------------------------------------- lean embedded RK and the dynamics premodel


@pytest.mark.parametrize("method, unroll", [("tsit5", True), ("dopri5", False), ("dopri8", True),
                                            ("dopri8", False)])  # fmt: skip
def test_erk_solve_matches_closed_form(method, unroll):
    """A damped oscillator ``x'' + 2ζω x' + ω² x = 0`` against its closed-form solution."""
    from jaxmb.simulation import erk_solve

    w, z, t1 = 30.0, 0.1, 1.0
    rhs = lambda t, y: jnp.stack([y[1], -(w**2) * y[0] - 2 * z * w * y[1]])
    r = erk_solve(rhs, jnp.array([1.0, 0.0]), 0.0, t1, method=method, rtol=1e-11, atol=1e-11,
                  unroll=unroll)  # fmt: skip
    wd = w * np.sqrt(1 - z**2)
    x = lambda t: np.exp(-z * w * t) * (np.cos(wd * t) + z * w / wd * np.sin(wd * t))
    v = -np.exp(-z * w * t1) * (w**2 / wd) * np.sin(wd * t1)
    assert bool(r.ok) and float(r.t) == t1
    np.testing.assert_allclose(np.asarray(r.y1), [x(t1), v], rtol=0, atol=1e-9)


def test_erk_solve_steps_like_diffrax():
    """Same tableau and the same kind of controller as diffrax's Tsit5 + PIDController: the step
    counts agree within 15 % and both solutions within their tolerance."""
    import diffrax as dfx

    from jaxmb.simulation import erk_solve

    rhs = lambda t, y: jnp.stack([y[1], -900.0 * y[0] - 6.0 * y[1] + jnp.cos(3.0 * t)])
    y0 = jnp.array([1.0, 0.0])
    r = erk_solve(rhs, y0, 0.0, 1.0, method="tsit5", rtol=1e-8, atol=1e-8)
    ref = dfx.diffeqsolve(dfx.ODETerm(lambda t, y, a: rhs(t, y)), dfx.Tsit5(), 0.0, 1.0, None, y0,
                          stepsize_controller=dfx.PIDController(rtol=1e-8, atol=1e-8))  # fmt: skip
    n, n_ref = int(r.num_steps), int(ref.stats["num_steps"])
    assert abs(n - n_ref) <= max(3, 0.15 * n_ref), (n, n_ref)
    np.testing.assert_allclose(np.asarray(r.y1), np.asarray(ref.ys[-1]), rtol=0, atol=1e-6)


def test_erk_solve_reports_failure():
    from jaxmb.simulation import erk_solve

    rhs = lambda t, y: -y
    r = erk_solve(rhs, jnp.ones(2), 0.0, 10.0, rtol=1e-12, atol=1e-12, max_steps=5)
    assert not bool(r.ok) and int(r.num_steps) == 5 and float(r.t) < 10.0
    blow = erk_solve(lambda t, y: y * y, jnp.ones(1), 0.0, 2.0, max_steps=10_000)  # y = 1/(1−t)
    assert not bool(blow.ok) and float(blow.t) < 1.0 + 1e-6
    with pytest.raises(ValueError, match="unknown method 'rk4'"):
        erk_solve(rhs, jnp.ones(2), 0.0, 1.0, method="rk4")


@pytest.fixture(scope="module")
def pendulum():
    """chain(1), a physical pendulum under gravity, with a position-only joint spring."""
    from jaxmb.models import chain

    m = chain(1)
    return eqx.tree_at(lambda m: m.forces, m, (fo.JointSpring(0, 3.0, 0.2),))


@pytest.mark.parametrize("kind", ["fourier", "chebyshev"])
def test_premodel_dynamics_matches_forward_dynamics(pendulum, kind):
    """q̈ = a(q) + b(q) q̇² fitted spectrally equals the tree route's q̈ at random states."""
    # the spring's −k (q − rest) is not periodic: the Fourier case premodels the bare pendulum
    model = eqx.tree_at(lambda m: m.forces, pendulum, ()) if kind == "fourier" else pendulum
    kw = dict(period=2 * np.pi) if kind == "fourier" else dict(interval=(-2.0, 3.0))
    pm = dy.premodel_dynamics(model, n=24, **kw)
    assert pm.kind == kind and max(pm.fit_error) < 1e-12, pm.fit_error
    # the check of what is integrated (its table) against the exact route, made when fitted:
    # n states between the nodes at rest, 3n more at other speeds (a period: 1 to 3 periods away)
    checks = 24 if kind == "fourier" else 25  # Chebyshev: the n + 1 extrema, ends included
    assert pm.n_verified == 4 * checks and pm.deviation < 1e-11, (pm.n_verified, pm.deviation)
    rng = np.random.default_rng(7)
    lo, hi = (-9.0, 9.0) if kind == "fourier" else (-2.0, 3.0)
    qs, qds = (jnp.asarray(rng.uniform(a, b, 12)) for a, b in ((lo, hi), (-30.0, 30.0)))

    @jax.jit
    @jax.vmap
    def both(q, qd):
        return pm(q[None], qd[None])[0], dy.forward_dynamics(model, q[None], qd[None])[0]

    fit, exact = (np.asarray(x) for x in both(qs, qds))
    assert_rel(fit, exact, rel=1e-11, what=f"{kind} premodel q̈")


def test_premodel_dynamics_rejects_bad_input(pendulum):
    from jaxmb.models import chain

    with pytest.raises(ValueError, match="one-coordinate model, got nq = 2"):
        dy.premodel_dynamics(chain(2), period=2 * np.pi)
    with pytest.raises(ValueError, match="exactly one of period= or interval="):
        dy.premodel_dynamics(pendulum)
    with pytest.raises(ValueError, match="fourier fit with n = 16 misses the exact dynamics"):
        dy.premodel_dynamics(pendulum, period=2 * np.pi, n=16)  # the spring is not periodic
    with pytest.raises(ValueError, match="lower < upper"):
        dy.premodel_dynamics(pendulum, interval=(1.0, 1.0))
    damped = eqx.tree_at(lambda m: m.forces, pendulum, (fo.JointSpring(0, 3.0, 0.2, 0.5),))
    with pytest.raises(ValueError, match="JointSpring depends on q̇ or t"):
        dy.premodel_dynamics(damped, period=2 * np.pi, n=8)
    pm = dy.premodel_dynamics(pendulum, interval=(-1.0, 1.0), n=16)
    with pytest.raises(eqx.EquinoxRuntimeError, match="outside the fitted interval"):
        jax.block_until_ready(pm(jnp.array([1.5]), jnp.zeros(1)))


# the two properties above at their former depth, four random models each (about 5 s a model)
test_q_space_equations_of_motion_match_closed_form_deep = slow_twin(
    test_q_space_equations_of_motion_match_closed_form,
    8,
    random_models(max_bodies=8, max_nq=5),
    st.integers(0, 2**31 - 1),
)
test_cached_point_jacobian_and_force_elements_deep = slow_twin(
    test_cached_point_jacobian_and_force_elements,
    8,
    random_models(max_bodies=7, max_nq=4),
    st.integers(0, 2**31 - 1),
)
