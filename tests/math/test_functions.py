"""The knot search of OpenSim's spline functions (:func:`jaxmb.math.functions.knot_interval`)
against NumPy's binary search, at random knots and at points inside, outside and exactly on them,
scalar and batched."""

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxmb.math import SimmSpline
from jaxmb.math.functions import knot_interval


def _numpy_interval(x, t):
    return np.clip(np.searchsorted(x, t, side="right") - 1, 0, x.shape[0] - 2)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), seed=st.integers(0, 2**31 - 1))
def test_knot_interval_equals_binary_search(n, seed):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-2.0, 2.0, n))
    x = x[np.concatenate([[True], np.diff(x) > 0])]
    if x.shape[0] < 2:
        x = np.array([-1.0, 1.0])
    t = np.concatenate([rng.uniform(-3.0, 3.0, 50), x, [x[0] - 1.0, x[-1] + 1.0, -0.0, 0.0]])
    want = _numpy_interval(x, t)
    got = np.asarray(jax.vmap(lambda s: knot_interval(x, s))(t))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(knot_interval(x, t[:, None])[:, 0]), want)
    assert int(knot_interval(x, t[3])) == want[3]


def test_knot_interval_of_nan_is_an_end_interval_and_the_spline_stays_nan():
    x = np.linspace(0.0, 1.0, 6)
    assert 0 <= int(knot_interval(x, np.nan)) <= 4  # NaN sorts last: the last interval
    assert np.isnan(float(SimmSpline(x, np.sin(x))(np.nan)))
