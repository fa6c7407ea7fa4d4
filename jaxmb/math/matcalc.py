"""The calculus of matrix-valued functions of seed 001, §2 (Definition 1, Theorems 1–4).

Conventions (the seed's, made explicit):

* ``vec`` stacks columns (Neudecker): ``vec(A)[k*m + i] = A[i, k]`` for ``A`` of shape (m, n).
* Definition 1, Eq. 3: for ``A(q)`` of shape (m, n) and ``q`` of length r,
  ``∂A/∂q = Σ_ik E_ik ⊗ ∂A_ik/∂q`` is the (m·r, n) matrix whose row ``i*r + l``, column ``k`` holds
  ``∂A_ik/∂q_l``. The library computes with the *tensor form* ``T[i, k, l] = ∂A_ik/∂q_l``
  (what ``jax.jacfwd`` returns); :func:`tensor_to_kron` and :func:`kron_to_tensor` convert.
* The commutation matrix ``U_{m,n} = Σ_ik E_ik^{m×n} ⊗ E_ki^{n×m}`` (Eq. 2) has shape (m·n, m·n)
  and satisfies ``U_{m,n} vec(A) = vec(Aᵀ)``.

The theorems are written here literally, with materialized Kronecker products, because they are the
reference the rest of the library is checked against; the hot paths in :mod:`jaxmb.kinematics` and
:mod:`jaxmb.dynamics` use the equivalent einsum contractions instead.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = [
    "vec",
    "unvec",
    "skew",
    "unskew",
    "elementary",
    "commutation_matrix",
    "kron",
    "tensor_to_kron",
    "kron_to_tensor",
    "partial",
    "product_rule",
    "scalar_product_rule",
    "kron_rule",
    "differential_a",
    "differential_b",
]


def vec(A: Float[Array, "m n"]) -> Float[Array, " mn"]:
    """Column-stacking vectorization, ``vec(A)[k*m + i] = A[i, k]``."""
    return jnp.reshape(jnp.swapaxes(A, -1, -2), A.shape[:-2] + (A.shape[-1] * A.shape[-2],))


def unvec(v: Float[Array, " mn"], m: int, n: int) -> Float[Array, "m n"]:
    """Inverse of :func:`vec` for an (m, n) matrix."""
    return jnp.swapaxes(jnp.reshape(v, v.shape[:-1] + (n, m)), -1, -2)


def skew(v: Float[Array, "... 3"]) -> Float[Array, "... 3 3"]:
    """The skew-symmetric matrix ``ṽ`` with ``ṽ w = v × w`` (batched over leading axes)."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    o = jnp.zeros_like(x)
    return jnp.stack(
        [jnp.stack([o, -z, y], -1), jnp.stack([z, o, -x], -1), jnp.stack([-y, x, o], -1)], -2
    )


def unskew(S: Float[Array, "... 3 3"]) -> Float[Array, "... 3"]:
    """The vector of a skew-symmetric matrix (its skew-symmetric part, for a general matrix)."""
    return 0.5 * jnp.stack(
        [S[..., 2, 1] - S[..., 1, 2], S[..., 0, 2] - S[..., 2, 0], S[..., 1, 0] - S[..., 0, 1]], -1
    )


def elementary(i: int, k: int, m: int, n: int, dtype=None) -> Float[Array, "m n"]:
    """The elementary matrix ``E_ik^{m×n}``: zero except a one at row i, column k (0-based)."""
    return jnp.zeros((m, n), dtype=dtype).at[i, k].set(1.0)


def commutation_matrix(m: int, n: int, dtype=None) -> Float[Array, "mn mn"]:
    """The commutation matrix ``U_{m,n}`` of Eq. 2, built from its definition.

    ``U_{m,n} vec(A) = vec(Aᵀ)`` for every ``A`` of shape (m, n); ``U_{m,n}ᵀ = U_{n,m}``.
    """
    U = jnp.zeros((m * n, m * n), dtype=dtype)
    for i in range(m):
        for k in range(n):
            U = U + jnp.kron(elementary(i, k, m, n, dtype), elementary(k, i, n, m, dtype))
    return U


def kron(*mats: Array) -> Array:
    """Kronecker product of two or more matrices (vectors are treated as columns)."""
    out = _as_matrix(mats[0])
    for M in mats[1:]:
        out = jnp.kron(out, _as_matrix(M))
    return out


def _as_matrix(x: Array) -> Array:
    x = jnp.asarray(x)
    if x.ndim == 0:
        return x.reshape(1, 1)
    if x.ndim == 1:
        return x[:, None]
    return x


def tensor_to_kron(T: Float[Array, "m n r"]) -> Float[Array, "mr n"]:
    """Definition 1 arrangement from the tensor form ``T[i, k, l] = ∂A_ik/∂q_l``."""
    m, n, r = T.shape
    return jnp.reshape(jnp.transpose(T, (0, 2, 1)), (m * r, n))


def kron_to_tensor(D: Float[Array, "mr n"], r: int) -> Float[Array, "m n r"]:
    """Inverse of :func:`tensor_to_kron`."""
    mr, n = D.shape
    return jnp.transpose(jnp.reshape(D, (mr // r, r, n)), (0, 2, 1))


def partial(A: Callable[[Array], Array], q: Float[Array, " r"]) -> Array:
    """Definition 1 (Eq. 3): ``∂A/∂q`` of a matrix-valued ``A(q)`` as an (m·r, n) matrix.

    A vector-valued ``A`` is treated as a column (n = 1), a scalar as 1×1. Applying it twice
    gives the second derivative of the seed, ``∂²A/∂q² = ∂(∂A/∂q)/∂q`` of shape (m·r², n).
    """
    A_mat = lambda x: _as_matrix(A(x))
    return tensor_to_kron(jax.jacfwd(A_mat)(q))


def product_rule(A, dA, B, dB, r: int):
    """Theorem 1 (Eq. 4): ``∂(AB)/∂q = ∂A/∂q B + (A ⊗ I_r) ∂B/∂q``."""
    return dA @ B + jnp.kron(A, jnp.eye(r, dtype=A.dtype)) @ dB


def scalar_product_rule(a, da, A, dA):
    """Theorem 2 (Eq. 11): ``∂(aA)/∂q = A ⊗ ∂a/∂q + a ∂A/∂q`` (``da`` is the r-vector ∇a)."""
    return jnp.kron(A, _as_matrix(da)) + a * dA


def kron_rule(A, dA, C, dC, r: int):
    """Theorem 3 (Eq. 14): ``∂(A⊗C)/∂q = (I_m ⊗ U_{s,r})(∂A/∂q ⊗ C) + A ⊗ ∂C/∂q``."""
    m = A.shape[0]
    s = C.shape[0]
    left = jnp.kron(jnp.eye(m, dtype=A.dtype), commutation_matrix(s, r, A.dtype))
    return left @ jnp.kron(dA, C) + jnp.kron(A, dC)


def differential_a(dA, dq):
    """Theorem 4a (Eq. 27): ``dA = (I_m ⊗ dqᵀ) ∂A/∂q``."""
    r = dq.shape[0]
    m = dA.shape[0] // r
    return jnp.kron(jnp.eye(m, dtype=dA.dtype), dq[None, :]) @ dA


def differential_b(dAT, dq):
    """Theorem 4b (Eq. 28): ``dA = (∂Aᵀ/∂q)ᵀ (I_n ⊗ dq)``, with ``dAT = ∂Aᵀ/∂q``."""
    r = dq.shape[0]
    n = dAT.shape[0] // r
    return dAT.T @ jnp.kron(jnp.eye(n, dtype=dAT.dtype), dq[:, None])
