"""The batch-last Cholesky solve against NumPy's dense solve, both of its branches (unrolled up
to n = 12 for a batch, LAPACK per state above), and NaN where M is not positive definite."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxmb.math.linalg import cholesky_solve_bm


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 14), B=st.sampled_from([1, 3]), seed=st.integers(0, 2**31 - 1))
def test_cholesky_solve_bm_equals_dense_solve(n, B, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(B, n, n))
    M = A @ np.swapaxes(A, 1, 2) + n * np.eye(n)  # symmetric positive definite, cond ≲ 10²
    rhs = rng.normal(size=(B, n))
    got = np.asarray(cholesky_solve_bm(np.moveaxis(M, 0, -1), rhs.T)).T
    want = np.linalg.solve(M, rhs[..., None])[..., 0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_cholesky_solve_bm_is_nan_where_not_positive_definite():
    M = np.stack([np.diag([2.0, 1.0]), np.diag([2.0, -1.0])], axis=-1)  # (2, 2, 2)
    x = np.asarray(cholesky_solve_bm(M, np.ones((2, 2))))
    np.testing.assert_allclose(x[:, 0], [0.5, 1.0], rtol=1e-15)
    assert np.isnan(x[:, 1]).all()
