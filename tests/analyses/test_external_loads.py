"""External loads' generalized forces against hand-computed cases, and trial inverse dynamics."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb.analyses import (
    GROUND,
    ExternalLoad,
    Frame,
    external_generalized_forces,
    trial_inverse_dynamics,
)


@pytest.fixture(scope="module")
def pendulum():
    # one revolute joint about z at the ground origin, 2 kg at (1, 0, 0), gravity −9.81 y
    return mb.build_model(
        [mb.Body("link", None, "revolute", (0, 0, 1), position=(0, 0, 0), mass=2.0,
                 com=(1.0, 0.0, 0.0))],
        gravity=(0.0, -9.81, 0.0),
    )  # fmt: skip


def _load(force=None, point=None, torque=None, force_frame=GROUND, point_frame=GROUND):
    arr = lambda v: None if v is None else jnp.asarray([v], dtype=float)  # noqa: E731
    return ExternalLoad(0, Frame(0), arr(force), force_frame, arr(point), point_frame, arr(torque))


def test_ground_force_at_a_ground_point_is_r_cross_f(pendulum):
    # Q = (z × p) · F
    Q = external_generalized_forces(pendulum, jnp.zeros(1), [_load((0, 1, 0), (1, 0, 0))], 0)
    np.testing.assert_allclose(Q, [1.0], atol=1e-14)
    Q = external_generalized_forces(pendulum, jnp.zeros(1), [_load((3, 0, 0), (0, 2, 0))], 0)
    np.testing.assert_allclose(Q, [-6.0], atol=1e-14)


def test_force_and_point_in_the_body_frame_follow_the_body(pendulum):
    q = jnp.array([np.pi / 2])  # body x axis along ground y
    body = Frame(0)
    # (1,0,0)_body at (1,0,0)_body: a radial pull, no moment
    Q = external_generalized_forces(pendulum, q, [_load((1, 0, 0), (1, 0, 0), None, body, body)], 0)
    np.testing.assert_allclose(Q, [0.0], atol=1e-14)
    # (0,1,0)_body = (−1,0,0)_ground at (0,1,0)_ground: z × (0,1,0) = (−1,0,0) → Q = 1
    Q = external_generalized_forces(pendulum, q, [_load((0, 1, 0), (1, 0, 0), None, body, body)], 0)
    np.testing.assert_allclose(Q, [1.0], atol=1e-14)


def test_torque_and_body_origin_default(pendulum):
    Q = external_generalized_forces(pendulum, jnp.zeros(1), [_load(None, None, (0, 0, 2.5))], 0)
    np.testing.assert_allclose(Q, [2.5], atol=1e-14)
    # no point: the force acts at the applied body's origin (the joint): no moment
    Q = external_generalized_forces(pendulum, jnp.zeros(1), [_load((0, 5, 0))], 0)
    np.testing.assert_allclose(Q, [0.0], atol=1e-14)


def test_trial_inverse_dynamics_balances_gravity_with_a_load(pendulum):
    nt = 3
    q = jnp.zeros((nt, 1))
    z = jnp.zeros((nt, 1))
    tau0 = trial_inverse_dynamics(pendulum, q, z, z)
    np.testing.assert_allclose(tau0[:, 0], 2.0 * 9.81, rtol=1e-12)  # holds the weight
    up = ExternalLoad(
        0,
        Frame(0),
        jnp.tile(jnp.array([[0.0, 2.0 * 9.81, 0.0]]), (nt, 1)),
        GROUND,
        jnp.tile(jnp.array([[1.0, 0.0, 0.0]]), (nt, 1)),
        GROUND,
        None,
    )
    tau = trial_inverse_dynamics(pendulum, q, z, z, [up])
    np.testing.assert_allclose(tau, 0.0, atol=1e-12)
