"""OpenSim's coordinate processing pieces against independent references: the IIR filter against
scipy's Butterworth design and recurrence, the natural splines against analytic functions and
scipy's interpolating splines with the same end conditions, padding by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxmb.analyses import (
    coordinate_operators,
    iir_coefficients,
    lowpass_iir,
    natural_spline_matrix,
    opensim_pad,
)
from jaxmb.analyses.signals import block_tridiagonal_solve

scipy_signal = pytest.importorskip("scipy.signal")
interpolate = pytest.importorskip("scipy.interpolate")


@settings(max_examples=15, deadline=None)
@given(fs=st.floats(20.0, 2000.0), frac=st.floats(0.01, 0.45))
def test_iir_coefficients_are_a_third_order_butterworth(fs, frac):
    fc = frac * fs
    a, b, used = iir_coefficients(1.0 / fs, fc)
    bs, as_ = scipy_signal.butter(3, fc, fs=fs)
    assert used == fc
    np.testing.assert_allclose(a, bs, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(b, as_, rtol=1e-9, atol=1e-14)


def test_cutoff_at_or_above_nyquist_is_lowered_as_opensim_does():
    assert iir_coefficients(0.01, 60.0)[2] == pytest.approx(0.49 * 100.0)


def test_lowpass_is_two_passes_of_the_recurrence_with_copied_first_samples():
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.normal(size=200))
    dt, fc = 1 / 120, 6.0
    a, b, _ = iir_coefficients(dt, fc)

    def one_pass(s):
        y = s.copy()
        zi = scipy_signal.lfiltic(a, b, y[2::-1], s[2::-1])
        y[3:], _ = scipy_signal.lfilter(a, b, s[3:], zi=zi)
        return y

    ref = one_pass(one_pass(x)[::-1])[::-1]
    np.testing.assert_allclose(lowpass_iir(dt, fc, x), ref, rtol=1e-12, atol=1e-12)


def test_pad_is_the_odd_reflection_about_each_end():
    x = np.array([1.0, 2.0, 4.0, 7.0, 11.0])
    np.testing.assert_allclose(opensim_pad(x, 2), [-2.0, 0.0, 1.0, 2.0, 4.0, 7.0, 11.0, 15.0, 18.0])


@pytest.mark.parametrize("degree", [3, 5])
def test_natural_spline_reproduces_low_degree_polynomials_and_their_derivatives(degree):
    rng = np.random.default_rng(degree)
    x = np.cumsum(rng.uniform(0.5, 1.5, 30)) * 0.1
    m = (degree + 1) // 2
    c = rng.normal(size=m)  # a polynomial of degree m − 1 satisfies the natural end conditions
    f = np.polynomial.Polynomial(c)
    xe = np.linspace(x[0], x[-1], 57)
    W = natural_spline_matrix(x, xe, degree, (0, 1, 2))
    for d in range(3):
        np.testing.assert_allclose(W[d] @ f(x), f.deriv(d)(xe), rtol=1e-9, atol=1e-9)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(6, 60), degree=st.sampled_from([3, 5]))
def test_natural_spline_matches_scipy_interpolating_spline(seed, n, degree):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.uniform(0.2, 2.0, n))
    y = rng.normal(size=n)
    bc = "natural" if degree == 3 else ([(3, 0.0), (4, 0.0)], [(3, 0.0), (4, 0.0)])
    sp = interpolate.make_interp_spline(x, y, k=degree, bc_type=bc)
    xe = np.concatenate([x, 0.5 * (x[1:] + x[:-1])])
    # all pieces (the knot derivatives solved for every datum) and three of them (only the rows
    # those pieces use, from the transposed system)
    for xs in (xe, xe[[1, n // 2, n + 2]]):
        W = natural_spline_matrix(x, xs, degree, (0, 1, 2))
        for d in range(3):
            ref = sp(xs, d)
            assert np.max(np.abs(W[d] @ y - ref)) <= 1e-8 * max(1.0, np.max(np.abs(ref)))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 70), r=st.integers(1, 3))
def test_block_tridiagonal_solve_matches_the_dense_solve(seed, n, r):
    rng = np.random.default_rng(seed)
    Lo, Up = rng.normal(size=(2, n, r, r))
    Di = rng.normal(size=(n, r, r)) + 3.0 * r * np.eye(r)  # block diagonally dominant
    B = rng.normal(size=(n, r, 4))
    A = np.zeros((n * r, n * r))
    for i in range(n):
        A[i * r : (i + 1) * r, i * r : (i + 1) * r] = Di[i]
        if i > 0:
            A[i * r : (i + 1) * r, (i - 1) * r : i * r] = Lo[i]
        if i < n - 1:
            A[i * r : (i + 1) * r, (i + 1) * r : (i + 2) * r] = Up[i]
    X = np.linalg.solve(A, B.reshape(n * r, 4)).reshape(n, r, 4)
    np.testing.assert_allclose(
        block_tridiagonal_solve(Lo, Di, Up, B), X, rtol=0, atol=1e-12 * np.max(np.abs(X))
    )


def test_rounded_times_are_resampled_as_opensim_does():
    t = np.round(np.arange(151) / 60.0, 8)  # a file's 8-decimal times: not uniform to eps
    ops = coordinate_operators(t, 6.0, (0.0, 2.5))
    assert ops.resampled
    # OpenSim's published ID output of such a file starts at -5e-7 s (tests/analyses: ID tests)
    assert ops.times.shape == (151,)
    assert ops.times[0] == pytest.approx(-5.0e-7, abs=1e-9)
    unf = coordinate_operators(t, None, (0.0, 2.5))
    np.testing.assert_array_equal(unf.times, t)
    np.testing.assert_allclose(unf.W0, np.eye(151), atol=1e-12)
