"""Matrix calculus of seed 001 §2: Definition 1, Theorems 1–4 and the commutation matrix.

Every check compares two independent routes in float64 to an absolute tolerance of 1e-12 on
quantities of order one: the left-hand side is Definition 1 (``partial``) of the composed
function, or, for Definition 1 itself, the literal sum ``Σ_ik E_ik ⊗ ∂A_ik/∂q`` built from
``jax.grad`` of each entry; the right-hand side is the theorem as implemented in
:mod:`jaxmb.matcalc`. The random smooth matrix functions are
``A_ik(q) = sin(P_ik·q + c_ik) + ½ (Q_ik·q)²``, with random shapes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from jaxmb import matcalc

TOL = 1e-12

dims = st.integers(1, 4)
seeds = st.integers(0, 2**31 - 1)


def smooth_matrix_function(rng, m, n, r):
    """A random smooth (m, n)-valued function of q ∈ R^r (entries are O(1), derivatives too)."""
    P = jnp.asarray(rng.normal(size=(m, n, r)))
    c = jnp.asarray(rng.normal(size=(m, n)))
    Q = jnp.asarray(rng.normal(size=(m, n, r)) * 0.5)

    def A(q):
        return jnp.sin(P @ q + c) + 0.5 * (Q @ q) ** 2

    return A


def smooth_scalar_function(rng, r):
    p = jnp.asarray(rng.normal(size=r))
    w = jnp.asarray(rng.normal(size=r))
    return lambda q: jnp.cos(p @ q) * (1.0 + 0.3 * (w @ q))


def definition_1_literal(A, q):
    """Eq. 3 summed term by term: ``Σ_ik E_ik^{m×n} ⊗ ∂A_ik/∂q`` (∂A_ik/∂q an r-column)."""
    A0 = A(q)
    m, n = A0.shape
    r = q.shape[0]
    out = jnp.zeros((m * r, n))
    for i in range(m):
        for k in range(n):
            g = jax.grad(lambda x, i=i, k=k: A(x)[i, k])(q)
            out = out + jnp.kron(matcalc.elementary(i, k, m, n), g[:, None])
    return out


def assert_close(a, b, tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = np.max(np.abs(a - b)) if a.size else 0.0
    assert err <= tol, f"max abs error {err:.3e} > {tol:.0e}"


@given(m=dims, n=dims, seed=seeds)
def test_vec_unvec_column_stacking(m, n, seed):
    A = jnp.asarray(np.random.default_rng(seed).normal(size=(m, n)))
    v = matcalc.vec(A)
    assert_close(v, np.asarray(A).reshape(-1, order="F"), 0.0)
    assert_close(matcalc.unvec(v, m, n), A, 0.0)


@given(seed=seeds)
def test_skew_is_cross_product(seed):
    rng = np.random.default_rng(seed)
    v, w = rng.normal(size=3), rng.normal(size=3)
    S = matcalc.skew(jnp.asarray(v))
    assert_close(S @ w, np.cross(v, w))
    assert_close(S, -S.T, 0.0)
    assert_close(matcalc.unskew(S), v, 0.0)


@given(m=dims, n=dims, seed=seeds)
def test_commutation_matrix(m, n, seed):
    """Eq. 2: ``U_{m,n} vec(A) = vec(Aᵀ)``, U orthogonal and ``U_{m,n}ᵀ = U_{n,m}``."""
    A = jnp.asarray(np.random.default_rng(seed).normal(size=(m, n)))
    U = jax.jit(matcalc.commutation_matrix, static_argnums=(0, 1))(m, n)
    assert U.shape == (m * n, m * n)
    assert_close(U @ matcalc.vec(A), matcalc.vec(A.T))
    assert_close(U @ U.T, np.eye(m * n), 0.0)
    assert_close(U.T, jax.jit(matcalc.commutation_matrix, static_argnums=(0, 1))(n, m), 0.0)
    # a permutation matrix: one 1 per row and per column
    assert_close(np.sort(np.asarray(U), axis=1)[:, -1], np.ones(m * n), 0.0)


@given(m=dims, n=dims, r=dims, seed=seeds)
def test_definition_1(m, n, r, seed):
    """``partial`` (jacfwd rearranged) equals the literal Kronecker sum of Eq. 3."""
    rng = np.random.default_rng(seed)
    A = smooth_matrix_function(rng, m, n, r)
    q = jnp.asarray(rng.normal(size=r))
    D, literal, T = jax.jit(
        lambda x: (matcalc.partial(A, x), definition_1_literal(A, x), jax.jacfwd(A)(x))
    )(q)
    assert D.shape == (m * r, n)
    assert_close(D, literal)
    # the tensor form and its inverse
    assert_close(matcalc.kron_to_tensor(D, r), T, 0.0)
    assert_close(matcalc.tensor_to_kron(matcalc.kron_to_tensor(D, r)), D, 0.0)


@given(m=dims, n=dims, r=dims, seed=seeds)
def test_definition_1_second_derivative(m, n, r, seed):
    """Applying Definition 1 twice arranges ∂²A_ik/∂q_l∂q_p at row (i·r + l)·r + p, column k."""
    rng = np.random.default_rng(seed)
    A = smooth_matrix_function(rng, m, n, r)
    q = jnp.asarray(rng.normal(size=r))
    D2, Hs = jax.jit(
        lambda x: (matcalc.partial(lambda y: matcalc.partial(A, y), x), jax.hessian(A)(x))
    )(q)  # Hs: (m, n, r, r)
    assert D2.shape == (m * r * r, n)
    expected = jnp.reshape(jnp.transpose(Hs, (0, 2, 3, 1)), (m * r * r, n))
    assert_close(D2, expected)


@given(m=dims, n=dims, t=dims, r=dims, seed=seeds)
def test_theorem_1_product_rule(m, n, t, r, seed):
    """Eq. 4: ``∂(AB)/∂q = ∂A/∂q B + (A ⊗ I_r) ∂B/∂q``."""
    rng = np.random.default_rng(seed)
    A = smooth_matrix_function(rng, m, n, r)
    B = smooth_matrix_function(rng, n, t, r)
    q = jnp.asarray(rng.normal(size=r))

    @jax.jit
    def sides(q):
        lhs = matcalc.partial(lambda x: A(x) @ B(x), q)
        rhs = matcalc.product_rule(A(q), matcalc.partial(A, q), B(q), matcalc.partial(B, q), r)
        return lhs, rhs

    lhs, rhs = sides(q)
    assert_close(lhs, rhs)


@given(m=dims, n=dims, r=dims, seed=seeds)
def test_theorem_2_scalar_product_rule(m, n, r, seed):
    """Eq. 11: ``∂(aA)/∂q = A ⊗ ∂a/∂q + a ∂A/∂q``."""
    rng = np.random.default_rng(seed)
    A = smooth_matrix_function(rng, m, n, r)
    a = smooth_scalar_function(rng, r)
    q = jnp.asarray(rng.normal(size=r))

    @jax.jit
    def sides(q):
        lhs = matcalc.partial(lambda x: a(x) * A(x), q)
        rhs = matcalc.scalar_product_rule(a(q), jax.grad(a)(q), A(q), matcalc.partial(A, q))
        return lhs, rhs

    lhs, rhs = sides(q)
    assert_close(lhs, rhs)


@given(m=dims, n=dims, s=dims, p=dims, r=dims, seed=seeds)
def test_theorem_3_kronecker_rule(m, n, s, p, r, seed):
    """Eq. 14: ``∂(A⊗C)/∂q = (I_m ⊗ U_{s,r})(∂A/∂q ⊗ C) + A ⊗ ∂C/∂q``."""
    rng = np.random.default_rng(seed)
    A = smooth_matrix_function(rng, m, n, r)
    C = smooth_matrix_function(rng, s, p, r)
    q = jnp.asarray(rng.normal(size=r))

    @jax.jit
    def sides(q):
        lhs = matcalc.partial(lambda x: jnp.kron(A(x), C(x)), q)
        rhs = matcalc.kron_rule(A(q), matcalc.partial(A, q), C(q), matcalc.partial(C, q), r)
        return lhs, rhs

    lhs, rhs = sides(q)
    assert lhs.shape == (m * s * r, n * p)
    assert_close(lhs, rhs)


@given(m=dims, n=dims, r=dims, seed=seeds)
def test_theorem_4_differentials(m, n, r, seed):
    """Eqs. 27–28: ``dA = (I_m ⊗ dqᵀ) ∂A/∂q = (∂Aᵀ/∂q)ᵀ (I_n ⊗ dq)``; dA by a JVP."""
    rng = np.random.default_rng(seed)
    A = smooth_matrix_function(rng, m, n, r)
    q = jnp.asarray(rng.normal(size=r))
    dq = jnp.asarray(rng.normal(size=r))

    @jax.jit
    def sides(q, dq):
        dA = jax.jvp(A, (q,), (dq,))[1]
        a = matcalc.differential_a(matcalc.partial(A, q), dq)
        b = matcalc.differential_b(matcalc.partial(lambda x: A(x).T, q), dq)
        return dA, a, b

    dA, a, b = sides(q, dq)
    assert_close(a, dA)
    assert_close(b, dA)


def test_kron_treats_vectors_as_columns():
    a = jnp.array([1.0, 2.0])
    B = jnp.array([[1.0, 0.0], [0.0, 3.0]])
    assert_close(matcalc.kron(a, B), np.kron(np.array([[1.0], [2.0]]), np.asarray(B)), 0.0)
    assert_close(matcalc.kron(B, a, B), np.kron(np.kron(B, [[1.0], [2.0]]), B), 0.0)
