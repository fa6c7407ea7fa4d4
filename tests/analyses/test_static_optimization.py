"""The batched static-optimization solve against SLSQP, and its gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmb.analyses import so_frame, solve_static_optimization

optimize = pytest.importorskip("scipy.optimize")


@pytest.mark.parametrize("p", [2.0, 3.0])
def test_frames_match_slsqp_with_bounds_and_free_reserves(p):
    rng = np.random.default_rng(int(p))
    nt, nq, na = 8, 3, 8
    A = rng.normal(size=(nt, nq, na)) * rng.uniform(0.1, 100, size=(nt, 1, na))
    b = np.einsum("tqa,ta->tq", A, rng.uniform(0, 1, (nt, na))) * rng.uniform(0.3, 1, (nt, 1))
    lo, hi = np.full(na, 0.01), np.ones(na)
    lo[-1], hi[-1] = -np.inf, np.inf  # a reserve actuator
    r = solve_static_optimization(A, b, lo, hi, exponent=p)  # all frames in one solve
    assert r.infeasible.size == 0
    for t in range(nt):
        ref = optimize.minimize(
            lambda x: np.sum(np.abs(x) ** p), np.clip(np.full(na, 0.3), lo, hi),
            jac=lambda x: p * np.sign(x) * np.abs(x) ** (p - 1),
            constraints=[{"type": "eq", "fun": lambda x: A[t] @ x - b[t], "jac": lambda x: A[t]}],
            bounds=list(zip(lo, hi, strict=True)), method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 1000},
        )  # fmt: skip
        x = np.asarray(r.controls[t])
        assert np.max(np.abs(A[t] @ x - b[t])) <= 1e-9 * max(1.0, np.max(np.abs(b[t])))
        assert np.sum(np.abs(x) ** p) <= np.sum(np.abs(ref.x) ** p) + 1e-10
        assert np.max(np.abs(x - ref.x)) < 1e-6


def test_infeasible_frames_are_reported_and_gradients_flow():
    A = jnp.array([[[1.0, 1.0]], [[1.0, 1.0]]])
    b = jnp.array([[1.5], [3.0]])  # the second needs more than both bounds allow
    r = solve_static_optimization(A, b, jnp.zeros(2), jnp.ones(2), iterations=10)
    assert list(r.infeasible) == [1]
    np.testing.assert_allclose(r.controls[0], [0.75, 0.75], atol=1e-12)

    def total(scale):
        return solve_static_optimization(
            A[:1] * scale, b[:1], jnp.zeros(2), jnp.ones(2), iterations=10
        ).cost.sum()

    g = jax.grad(lambda s: jnp.sum(
        jax.vmap(lambda A1, b1: so_frame(A1 * s, b1, jnp.zeros(2), jnp.ones(2), 2.0, 6)[0])(
            A[:1], b[:1]
        )
        ** 2))(1.0)  # fmt: skip
    # Σa² = 2 (1.5 / (2 s))² = 1.125 / s²: d/ds = −2.25 at s = 1
    assert float(g) == pytest.approx(-2.25, rel=1e-8)
    assert float(total(1.0)) == pytest.approx(1.125, rel=1e-10)
