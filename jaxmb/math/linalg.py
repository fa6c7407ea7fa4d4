"""Linear algebra on batch-last stacks: (n, n, B) matrices solved as vector operations over B."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["cholesky_solve_bm"]


def cholesky_solve_bm(M: Float[Array, "n n B"], rhs: Float[Array, "n B"]) -> Float[Array, "n B"]:
    """Solve M x = rhs for (n, n, B) symmetric positive definite M, unrolled (n³/6 vector ops);
    NaN where M is not positive definite (a non-positive pivot)."""
    n, B = M.shape[0], M.shape[-1]
    # the unrolled graph grows as n³, LAPACK per state is cheaper to compile above n = 12; for one
    # state (a right-hand side inside the user's solver) LAPACK's calls (factor, two solves) cost
    # more than the n³/6 fused scalar operations up to n = 5 and less from n = 6 (forward dynamics
    # of chain(n) in a compiled loop, µs, unrolled / LAPACK: n = 3 1.7 / 2.6, 4 2.2 / 2.9,
    # 5 3.7 / 4.1, 6 6.3 / 5.9, 7 7.8 / 7.0; the shoulder's 3×3 right-hand side 9.5 / 10.4)
    if n > 12 or (B == 1 and n > 5):
        import jax.scipy.linalg as jsl  # here: ~70 ms of import that most runs never need

        Mb, rb = jnp.moveaxis(M, -1, 0), rhs.T
        x = jax.vmap(lambda a, b: jsl.cho_solve(jsl.cho_factor(a, lower=True), b))(Mb, rb)
        return x.T
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        s = M[j, j] - sum((L[j][k] * L[j][k] for k in range(j)), 0.0)
        s = jnp.where(s > 0, s, jnp.nan)
        L[j][j] = jnp.sqrt(s)
        inv = 1.0 / L[j][j]
        for i in range(j + 1, n):
            L[i][j] = (M[i, j] - sum((L[i][k] * L[j][k] for k in range(j)), 0.0)) * inv
    y = [None] * n
    for i in range(n):
        y[i] = (rhs[i] - sum((L[i][k] * y[k] for k in range(i)), 0.0)) / L[i][i]
    x = [None] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum((L[k][i] * x[k] for k in range(i + 1, n)), 0.0)) / L[i][i]
    return jnp.stack(x)
