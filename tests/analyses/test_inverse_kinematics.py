"""The batched IK solver's pieces: the marker Jacobian from one kinematics pass against forward-mode
autodiff of the marker positions, and whole solves that must recover a pose the markers were made
from (with bounds, a locked coordinate and a missing marker)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxmb as mb
from jaxmb.analyses import marker_jacobian, marker_positions, solve_inverse_kinematics

CHAIN = mb.models.chain(5)
BODIES = np.array([0, 1, 2, 3, 4, 4, -1])
POINTS = np.array(
    [[0.1, 0.0, 0.2], [0.0, 0.1, 0.1], [0.05, -0.1, 0.3], [0.1, 0.1, 0.0], [0.0, 0.0, 0.3],
     [0.2, -0.1, 0.1], [0.3, 0.2, 0.1]]
)  # fmt: skip


_POS = jax.jit(lambda q: marker_positions(CHAIN, q, BODIES, POINTS))
_JAC = jax.jit(lambda q: marker_jacobian(CHAIN, q, BODIES, POINTS))
_JACFWD = jax.jit(jax.jacfwd(lambda q: marker_positions(CHAIN, q, BODIES, POINTS)))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-2.0, 2.0), min_size=5, max_size=5))
def test_marker_jacobian_equals_forward_mode_autodiff(q):
    q = jnp.asarray(q)
    p, J = _JAC(q)
    np.testing.assert_allclose(p, _POS(q), atol=1e-15)
    Jf = _JACFWD(q)
    np.testing.assert_allclose(J, Jf, atol=1e-13)
    assert np.all(np.asarray(J[-1]) == 0.0)  # the ground marker does not move


@pytest.mark.slow  # ~27 s under load 15 (compiles the solve)
def test_batched_solve_recovers_the_generating_poses():
    rng = np.random.default_rng(3)
    nt = 12
    q_true = rng.uniform(-0.8, 0.8, (nt, 5))
    q_true[:, 2] = 0.1  # locked at its start value
    lo = np.array([-np.inf, -0.5, -np.inf, -np.inf, -np.inf])
    hi = np.array([np.inf, 0.5, np.inf, np.inf, np.inf])
    q_true[:, 1] = np.clip(q_true[:, 1], -0.5, 0.5)
    meas = np.array(jax.vmap(lambda q: marker_positions(CHAIN, q, BODIES, POINTS))(q_true))
    meas[0, 3] = np.nan  # a missing marker: weight 0 for that frame
    q0 = np.array([0.0, 0.0, 0.1, 0.0, 0.0])
    free = np.array([True, True, False, True, True])
    r = solve_inverse_kinematics(CHAIN, BODIES, POINTS, meas, np.ones((nt, 7)), q0, lo, hi, free)
    assert bool(np.all(r.converged))
    np.testing.assert_allclose(r.q, q_true, atol=1e-7)
    assert np.all(np.asarray(r.total_squared_error) < 1e-16)
    assert np.isnan(r.marker_errors[0, 3])
    assert np.all((np.asarray(r.q[:, 1]) >= -0.5) & (np.asarray(r.q[:, 1]) <= 0.5))


def test_coordinate_tasks_weigh_against_the_markers_mean_as_in_opensim():
    """OpenSim's objective: Simbody's Markers goal Σ w‖e‖² / (2Σw) plus each coordinate task's
    QValue goal c (q − q̂)². The solution is a stationary point of that objective and not of the
    unnormalized sum (a coordinate task's weight would then count 2Σw = 20 times less)."""
    rng = np.random.default_rng(7)
    q_true = np.array([0.3, -0.2, 0.1, 0.4, -0.3])
    meas = np.asarray(marker_positions(CHAIN, q_true, BODIES, POINTS))[None]
    meas = meas + rng.normal(0.0, 0.02, meas.shape)  # an imperfect fit: the two terms compete
    meas = np.concatenate([meas, meas])
    meas[1, 2] = np.nan  # frame 1: marker 2 missing
    w = np.array([[1.0, 2.0, 1.0, 3.0, 1.0, 1.0, 1.0]] * 2)
    cw, cv = np.zeros((2, 5)), np.zeros((2, 5))
    cw[:, 1], cv[:, 1] = 0.5, 0.25
    inf = np.full(5, np.inf)
    r = solve_inverse_kinematics(
        CHAIN, BODIES, POINTS, meas, w, np.zeros(5), -inf, inf, np.ones(5, bool), cw, cv
    )
    q = jnp.asarray(r.q[0])

    def objective(q, norm):
        e2 = jnp.sum((marker_positions(CHAIN, q, BODIES, POINTS) - meas[0]) ** 2, axis=1)
        return jnp.sum(w[0] * e2) / norm + jnp.sum(cw[0] * (q - cv[0]) ** 2)

    opensim = jax.grad(objective)(q, 2.0 * w[0].sum())
    plain = jax.grad(objective)(q, 1.0)
    assert float(jnp.max(jnp.abs(opensim))) < 1e-7  # the solve stops on steps below 1e-6
    assert float(jnp.max(jnp.abs(plain))) > 1e-3
    np.testing.assert_allclose(r.cost[0], objective(q, 2.0 * w[0].sum()), rtol=1e-12)
    # OpenSim's marker-error columns with a marker missing: its zero error counts in the RMS
    e = np.asarray(r.marker_errors[1])
    assert np.isnan(e[2])
    np.testing.assert_allclose(r.total_squared_error[1], np.nansum(e**2), rtol=1e-13)
    np.testing.assert_allclose(r.rms_error[1] ** 2 * 7, r.total_squared_error[1], rtol=1e-13)


@pytest.mark.slow  # ~70 s under load 15 (compiles the solve's reverse mode)
def test_solve_is_reverse_differentiable_in_the_markers():
    q_true = jnp.array([0.3, -0.2, 0.1, 0.4, -0.3])
    meas = marker_positions(CHAIN, q_true, BODIES, POINTS)[None]
    inf = np.full(5, np.inf)

    def q_of(m):
        return solve_inverse_kinematics(
            CHAIN, BODIES, POINTS, m, np.ones((1, 7)), np.zeros(5), -inf, inf, np.ones(5, bool)
        ).q[0, 0]

    q_of = jax.jit(q_of)
    g = jax.grad(q_of)(meas)
    # independent route: central differences of the solve itself
    e = np.zeros(meas.shape)
    e[0, 4, 1] = 1e-6
    fd = (q_of(meas + e) - q_of(meas - e)) / 2e-6
    np.testing.assert_allclose(g[0, 4, 1], fd, rtol=1e-4, atol=1e-8)
