"""Joint maps: implicit maps (Newton + implicit-function JVP) and ∇f, H four ways (seed §3-3).

Exact routes are checked against each other to 1e-10 relative: autodiff through the custom JVP,
``ImplicitMap.derivatives`` (one LU, linearized Hessian), the projection method (Eqs. 101–120) and,
for the five-bar, autodiff of an explicit closed-form solution of the loop. The approximate routes
(molecule, pre-model) are measured against autodiff as functions of step / grid size, their observed
convergence orders asserted, and their errors asserted below stated tolerances.
"""

import importlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import rel
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, random_coupling

import jaxmb as mb
from jaxmb.joint_maps import (
    ImplicitMap,
    PremodelMap,
    joint_gradients,
    joint_hessians,
    joint_values,
    molecule_derivatives,
    premodel,
    projection_derivatives,
    projection_solve,
)
from jaxmb.models.five_bar import five_bar
from jaxmb.models.four_bar import four_bar

# the model modules themselves (their closed-form helpers), whatever jaxmb.models routes by name
five_bar_mod = importlib.import_module("jaxmb.models.five_bar")
four_bar_mod = importlib.import_module("jaxmb.models.four_bar")

RTOL = 1e-10


@pytest.fixture(scope="module")
def fb5():
    return five_bar()


@pytest.fixture(scope="module")
def fb4():
    return four_bar()


def random_implicit(seed, m, nq, with_independent):
    """g(f, q) = A f_dep + 0.2 tanh(B f + C q) + D q + e: a random smooth implicit system."""
    rng = np.random.default_rng(seed)
    nj = m + (nq if with_independent else 0)
    p = {
        "A": jnp.asarray(np.eye(m) + 0.2 * rng.normal(size=(m, m))),
        "B": jnp.asarray(rng.normal(size=(m, nj))),
        "C": jnp.asarray(rng.normal(size=(m, nq))),
        "D": jnp.asarray(rng.normal(size=(m, nq))),
        "e": jnp.asarray(0.3 * rng.normal(size=m)),
    }
    dep = tuple(range(nj - m, nj)) if with_independent else tuple(range(m))

    def g(f, q, p):
        return (
            p["A"] @ f[np.asarray(dep)]
            + 0.2 * jnp.tanh(p["B"] @ f + p["C"] @ q)
            + p["D"] @ q
            + p["e"]
        )

    return ImplicitMap(g, nq, nj, dep, np.zeros(m), p, iterations=8, tol=1e-12)


# --------------------------------------------------------------------------------------------
# ImplicitMap: the exact routes agree
# --------------------------------------------------------------------------------------------


@settings(max_examples=examples(3))
@given(
    seed=st.integers(0, 2**31 - 1),
    m=st.integers(1, 4),
    nq=st.integers(1, 3),
    with_independent=st.booleans(),
)
def test_implicit_routes_agree_random_systems(seed, m, nq, with_independent):
    jm = random_implicit(seed, m, nq, with_independent)
    q = jnp.asarray(np.random.default_rng(seed + 1).uniform(-0.5, 0.5, nq))

    @jax.jit
    def everything(q):
        sol = jm.solve(q)
        f = jm(q)
        res = jm.residual(f[np.asarray(jm.dependent)], q)
        Ja, Ha = jax.jacfwd(jm)(q), jax.jacfwd(jax.jacfwd(jm))(q)
        return (
            sol,
            f,
            res,
            Ja,
            Ha,
            jm.derivatives(q),
            projection_derivatives(jm, q),
            jax.jacrev(jm)(q),
        )

    sol, f, res, Ja, Ha, (f1, J1, H1), (f2, J2, H2), Jr = everything(q)
    assert bool(sol.converged) and not bool(sol.singular)
    assert np.max(np.abs(res)) < 1e-13
    np.testing.assert_allclose(f1, f, rtol=0, atol=1e-15)
    for J in (J1, J2, Jr):
        assert rel(J, Ja) < RTOL
    for H in (H1, H2):
        assert rel(H, Ha) < RTOL
    # H is symmetric in (k, l)
    assert np.max(np.abs(H2 - np.swapaxes(H2, 1, 2))) <= 1e-12 * np.max(np.abs(H2))


def test_five_bar_implicit_equals_closed_form(fb5):
    """The Newton + IFT map against autodiff of the explicit circle-intersection solution."""
    jm = fb5.joint_map
    qs = jnp.asarray(np.random.default_rng(5).uniform(-np.pi, np.pi, (64, 2)))

    def closed(q):
        return jnp.concatenate([q, five_bar_mod._branch(q, jm.params, jm.params["ref"])])

    @jax.jit
    @jax.vmap
    def both(q):
        return (
            jm(q),
            closed(q),
            jm.derivatives(q),
            projection_derivatives(jm, q),
            jax.jacfwd(closed)(q),
            jax.hessian(closed)(q),
        )

    f, fc, (_, J, H), (_, Jp, Hp), Jc, Hc = both(qs)
    assert rel(f, fc) < 1e-13
    assert rel(J, Jc) < RTOL and rel(H, Hc) < RTOL
    assert rel(Jp, Jc) < RTOL and rel(Hp, Hc) < RTOL


def test_four_bar_implicit_equals_closed_form(fb4):
    """Four-bar: f(q) against the crank-parametrized closed form, ∇f, H by the chain rule."""
    jm = fb4.joint_map
    qs = jnp.linspace(0.08, 0.57, 40)[:, None]
    F, (_, J, H) = jax.jit(jax.vmap(lambda q: (jm(q), jm.derivatives(q))))(qs)
    F = np.asarray(F)
    qc, *th = four_bar_mod.branch_by_crank(F[:, 0])
    assert np.max(np.abs(qc - np.asarray(qs[:, 0]))) < 1e-13
    assert np.max(np.abs(np.stack(th, -1) - F)) < 1e-12
    L = {k: float(v) for k, v in four_bar_mod.LENGTHS.items()}

    def by_crank(t1):  # (q, θ1, θ2, θ3) as functions of the crank angle, in jax
        x1, y1 = L["l1"] * jnp.cos(t1), L["l1"] * jnp.sin(t1)
        dx, dy = L["l0"] - x1, -y1
        D = jnp.hypot(dx, dy)
        c = (L["l2"] ** 2 + D**2 - L["l3"] ** 2) / (2 * L["l2"] * D)
        phi2 = jnp.arctan2(dy, dx) + jnp.arccos(c)
        x2, y2 = x1 + L["l2"] * jnp.cos(phi2), y1 + L["l2"] * jnp.sin(phi2)
        phi3 = jnp.arctan2(-y2, L["l0"] - x2)
        return jnp.stack([y1 + L["lcm2"] * jnp.sin(phi2), t1, phi2 - t1, phi3 - phi2])

    t1 = jnp.asarray(F[:, 0])
    d1 = jax.vmap(jax.jacfwd(by_crank))(t1)
    d2 = jax.vmap(jax.jacfwd(jax.jacfwd(by_crank)))(t1)
    dq, dth = d1[:, :1], d1[:, 1:]
    J_ref = dth / dq
    H_ref = (d2[:, 1:] - J_ref * d2[:, :1]) / dq**2  # d²θ/dq² = (θ'' − (dθ/dq) q'') / q'²
    assert rel(J[:, :, 0], J_ref) < RTOL
    assert rel(H[:, :, 0, 0], H_ref) < RTOL


def test_implicit_reverse_mode_vmap_jit_and_params(fb5):
    jm = fb5.joint_map
    qs = jnp.asarray(np.random.default_rng(0).uniform(-3, 3, (16, 2)))

    def f_of_l3(l3, q, implicit=True):
        p = dict(jm.params, l3=l3)
        if implicit:
            return eqx.tree_at(lambda m: m.params, jm, p)(q)
        return five_bar_mod._branch(q, p, p["ref"])

    @jax.jit
    def run(qs):
        F = jax.vmap(jm)(qs)
        J = jax.vmap(lambda q: jm.derivatives(q)[1])(qs)
        Ja = jax.vmap(jax.jacfwd(jm))(qs)
        # reverse mode through the fixed-count solve (the custom JVP, transposed)
        g = jax.grad(lambda q: jnp.sum(jnp.sin(jm(q))))(qs[0])
        g_ref = Ja[0].T @ jnp.cos(F[0])
        # derivative with respect to a constraint parameter (l3), against the closed form
        l3 = jnp.asarray(3.0)
        d_impl = jax.jacfwd(f_of_l3)(l3, qs[0])[2:]
        d_closed = jax.jacfwd(lambda l: f_of_l3(l, qs[0], False))(l3)
        gp = jax.grad(lambda m: jnp.sum(m(qs[0]) ** 2))(jm).params["l3"]
        gp_ref = 2 * F[0] @ jax.jacfwd(f_of_l3)(l3, qs[0])
        return F, J, Ja, g, g_ref, d_impl, d_closed, gp, gp_ref

    F, J, Ja, g, g_ref, d_impl, d_closed, gp, gp_ref = run(qs)
    assert np.all(np.isfinite(F))
    assert rel(J, Ja) < RTOL
    assert rel(g, g_ref) < RTOL
    assert rel(d_impl, d_closed) < RTOL
    assert rel(gp, gp_ref) < RTOL


def test_implicit_reports_failure():
    # outside the four-bar's range (the coupler CoM never rises above 0.5986 m): no assembly
    jm = four_bar().joint_map
    q = jnp.asarray([0.75])
    with pytest.raises(Exception, match="did not converge"):
        jax.block_until_ready(jm(q))
    with pytest.raises(Exception, match="did not converge"):
        jax.block_until_ready(jax.jit(lambda q: jm.derivatives(q))(q))
    sol = jm.solve(q)
    assert not bool(sol.converged)
    quiet = jm.replace(check=False)
    jax.block_until_ready(quiet(q))  # no raise; the status says what happened
    # a singular ∂g/∂f: g = f² − q at q = 0 from f = 0
    sing = ImplicitMap(lambda f, q, p: f**2 - q, 1, 1, (0,), [0.0], iterations=3)
    with pytest.raises(Exception, match="singular"):
        jax.block_until_ready(sing(jnp.asarray([0.0])))
    assert bool(sing.solve(jnp.asarray([0.0])).singular)


def test_implicit_map_validation():
    g = lambda f, q, p: f[2:] - q
    with pytest.raises(ValueError, match="reference assembly"):
        ImplicitMap(g, 2, 4, (2, 3), [0.0])
    with pytest.raises(ValueError, match="distinct"):
        ImplicitMap(g, 2, 4, (2, 2), [0.0, 0.0])
    with pytest.raises(ValueError, match="independent"):
        ImplicitMap(g, 1, 4, (2, 3), [0.0, 0.0])
    with pytest.raises(ValueError, match="iterations"):
        ImplicitMap(g, 2, 4, (2, 3), [0.0, 0.0], iterations=0)


# --------------------------------------------------------------------------------------------
# projection elimination, explicit maps and the public functions
# --------------------------------------------------------------------------------------------


@settings(max_examples=examples(10))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 6), k=st.integers(1, 9))
def test_projection_solve_equals_linear_solve(seed, m, k):
    rng = np.random.default_rng(seed)
    G = jnp.asarray(rng.normal(size=(m, m)) + 2 * np.eye(m))
    R = jnp.asarray(rng.normal(size=(m, k)))
    X = projection_solve(G, R)
    assert rel(X, jnp.linalg.solve(G, R)) < 1e-10
    # the defining Kronecker form, literally: Σ_j ḡ_j ⊗ x_j = vec-stacked rhs
    lhs = sum(jnp.kron(G[:, j], X[j]) for j in range(m))
    assert rel(lhs, R.reshape(-1)) < 1e-10


def test_projection_solve_singular_raises():
    G = jnp.asarray([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(Exception, match="singular"):
        jax.block_until_ready(projection_solve(G, jnp.ones((2, 1))))


@settings(max_examples=examples(6))
@given(seed=st.integers(0, 2**31 - 1), nq=st.integers(1, 4), nj=st.integers(1, 5))
def test_public_functions_on_explicit_maps(seed, nq, nj):
    jm = random_coupling(np.random.default_rng(seed), nq, nj)
    q = jnp.asarray(np.random.default_rng(seed + 7).normal(size=nq))

    @jax.jit
    def routes(q):
        return (
            jax.jacfwd(jm)(q),
            jax.hessian(jm)(q),
            joint_values(jm, q),
            joint_gradients(jm, q, "projection"),
            joint_hessians(jm, q, "projection"),
            joint_gradients(jm, q),
            joint_gradients(jm, q, "molecule", h=1e-5),
            joint_hessians(jm, q, "molecule", h=1e-4),
        )

    Ja, Ha, f, Jp, Hp, J, Jm, Hm = routes(q)
    assert rel(f, jm(q)) < 1e-15
    assert rel(Jp, Ja) < RTOL and rel(Hp, Ha) < RTOL and rel(J, Ja) < RTOL
    assert rel(Jm, Ja) < 1e-7
    assert rel(Hm, Ha) < 1e-5


def test_public_functions_dispatch(fb5):
    q = jnp.asarray([0.4, -0.8])
    for method in ("autodiff", "projection"):
        assert rel(mb.joint_gradients(fb5, q, method), fb5.joint_map.jacobian(q)) < RTOL
        assert rel(mb.joint_hessians(fb5, q, method), fb5.joint_map.hessian(q)) < RTOL
    assert rel(mb.joint_values(fb5, q), fb5.joint_map(q)) == 0
    with pytest.raises(ValueError, match="unknown method"):
        mb.joint_gradients(fb5, q, "magic")
    with pytest.raises(ValueError, match="premodel_map"):
        mb.joint_gradients(fb5, q, "premodel")
    with pytest.raises(TypeError, match="Model or joint map"):
        mb.joint_values("five_bar", q)
    assert isinstance(mb.ImplicitMap, type)


# --------------------------------------------------------------------------------------------
# the approximate routes: measured error against autodiff, observed order, stated tolerance
# --------------------------------------------------------------------------------------------


def _order(hs, errs):
    return np.polyfit(np.log(hs), np.log(errs), 1)[0]


def test_molecule_error_against_step(fb5):
    jm = fb5.joint_map
    qs = jnp.asarray([[0.4, -0.8], [2.0, 1.0], [-1.0, 2.5]])
    hs = np.array([4e-2, 2e-2, 1e-2, 5e-3])
    eJ, eH = [], []
    ex = jax.jit(jax.vmap(jm.derivatives))(qs)
    mol_fn = jax.jit(jax.vmap(lambda q, h: molecule_derivatives(jm, q, h), (0, None)))
    for h in hs:
        mol = mol_fn(qs, h)
        eJ.append(rel(mol[1], ex[1]))
        eH.append(rel(mol[2], ex[2]))
    # truncation error O(h²) for both ∇f and H
    assert 1.8 < _order(hs, eJ) < 2.2, eJ
    assert 1.8 < _order(hs, eH) < 2.2, eH
    # stated tolerances at the near-optimal steps (measured ~1e-10 and ~1e-7 relative)
    assert rel(mol_fn(qs, 1e-5)[1], ex[1]) < 1e-8
    assert rel(mol_fn(qs, 1e-4)[2], ex[2]) < 1e-5


def test_premodel_1dof_convergence(fb4):
    jm = fb4.joint_map
    lo, hi = 0.1, 0.55
    qs = jnp.linspace(0.15, 0.5, 41)[:, None]
    ex = jax.jit(jax.vmap(jm.derivatives))(qs)
    ns = [33, 65, 129]
    ef, eJ, eH = [], [], []
    for n in ns:
        pm = premodel(jm, [(lo, hi)], n)
        fit = jax.jit(jax.vmap(lambda q, pm=pm: pm.derivatives(q)))(qs)
        ef.append(rel(fit[0], ex[0]))
        eJ.append(rel(fit[1], ex[1]))
        eH.append(rel(fit[2], ex[2]))
    hs = (hi - lo) / (np.asarray(ns) - 1)
    # not-a-knot cubic spline: O(h⁴) in f, O(h³) in ∇f, O(h²) in H
    assert _order(hs, ef) > 3.5, ef
    assert _order(hs, eJ) > 2.5, eJ
    assert _order(hs, eH) > 1.7, eH
    assert ef[-1] < 1e-8 and eJ[-1] < 3e-6 and eH[-1] < 1e-3, (ef[-1], eJ[-1], eH[-1])
    # a pre-model is a joint map: the model can use it, and joint_* dispatch to it (the loop's last
    # one, 129 knots: sampling the implicit map again would compile the sweep again)
    assert pm.nj == jm.nj and ns[-1] == 129
    q = jnp.asarray([0.3])
    assert rel(mb.joint_gradients(fb4, q, "premodel", premodel_map=pm), jm.jacobian(q)) < 1e-6
    model_pm = eqx.tree_at(lambda m: m.joint_map, fb4, pm)
    assert rel(mb.joint_hessians(model_pm, q, "premodel"), jm.hessian(q)) < 1e-3
    v = mb.point_velocity(model_pm, "p", None, q, jnp.asarray([0.2]))
    assert rel(v, mb.point_velocity(fb4, "p", None, q, jnp.asarray([0.2]))) < 1e-6
    with pytest.raises(Exception, match="outside the pre-modeled box"):
        jax.block_until_ready(pm(jnp.asarray([0.6])))


@pytest.mark.slow
def test_premodel_2dof_convergence(fb5):
    jm = fb5.joint_map
    box = [(-1.0, 1.0), (-1.0, 1.0)]
    qs = jnp.asarray(np.random.default_rng(3).uniform(-0.6, 0.6, (32, 2)))
    ex = jax.jit(jax.vmap(jm.derivatives))(qs)
    ns = [21, 41, 81]
    ef, eJ, eH = [], [], []
    for n in ns:
        pm = premodel(jm, box, n)
        fit = jax.jit(jax.vmap(lambda q, pm=pm: pm.derivatives(q)))(qs)
        ef.append(rel(fit[0], ex[0]))
        eJ.append(rel(fit[1], ex[1]))
        eH.append(rel(fit[2], ex[2]))
    hs = 2.0 / (np.asarray(ns) - 1)
    # tensor-product C² cubic spline with natural ends: interior O(h⁴)/O(h³)/O(h²) at best, the
    # natural end condition pollutes the interior at O(h²); measured orders asserted loosely
    assert _order(hs, ef) > 1.9, ef
    assert _order(hs, eJ) > 1.9, eJ
    assert _order(hs, eH) > 1.4, eH
    assert ef[-1] < 1e-5 and eJ[-1] < 1e-4 and eH[-1] < 1e-2, (ef[-1], eJ[-1], eH[-1])


def test_premodel_validation(fb4):
    with pytest.raises(ValueError, match="could not be solved"):
        premodel(fb4.joint_map, [(0.1, 0.8)], 33)
    with pytest.raises(ValueError, match="lo < hi"):
        premodel(fb4.joint_map, [(0.5, 0.1)], 33)
    with pytest.raises(ValueError, match="nq = 1 or 2"):
        premodel(random_coupling(np.random.default_rng(0), 3, 2), [(0, 1)] * 3, 9)
    assert isinstance(premodel(fb4.joint_map, [(0.1, 0.5)], 9), PremodelMap)


def test_implicit_continuation_follows_the_reference_branch():
    """A unit circle x² + y² = 1 with y dependent: from the lower assembly y = −1 at x = 0, the
    continuation stays on the lower branch at x = 0.9 (plain Newton from y = +0.1 would not), and
    continuation without the q of the reference assembly is refused."""

    def circle(f, q, p):
        return f[1:] ** 2 + f[:1] ** 2 - 1.0

    jm = ImplicitMap(
        circle, 1, 2, dependent=[1], reference=[-1.0], reference_q=[0.0], continuation=8
    )
    f = jm(jnp.asarray([0.9]))
    assert abs(float(f[1]) + np.sqrt(1 - 0.81)) < 1e-12
    with pytest.raises(ValueError, match="continuation needs reference_q"):
        ImplicitMap(circle, 1, 2, dependent=[1], reference=[-1.0], continuation=4)


@settings(max_examples=examples(6))
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 6))
def test_identity_map_equals_linear_map_of_the_identity(seed, n):
    """IdentityMap: f, J, H equal LinearMap(I)'s and autodiff's exactly; the dtype of q kept."""
    q = jnp.asarray(np.random.default_rng(seed).normal(size=n))
    im, lin = mb.IdentityMap(n), mb.LinearMap(np.eye(n))
    for a, b in zip(im.derivatives(q), lin.derivatives(q), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(jax.jacfwd(im)(q)), np.eye(n))
    np.testing.assert_array_equal(np.asarray(im.A), np.asarray(lin.A))
    assert im(q.astype(jnp.float32)).dtype == jnp.float32
    assert im is not None and mb.identity_map(n) == im  # no leaves: equal by structure


def test_identity_map_validation():
    with pytest.raises(ValueError, match=r"IdentityMap\(3\): q must have shape \(3,\)"):
        mb.IdentityMap(3)(jnp.zeros(2))
    with pytest.raises(ValueError, match="must be >= 0"):
        mb.IdentityMap(-1)
