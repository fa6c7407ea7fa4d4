"""OpenSim's body actuators as force elements with a control input: ``TorqueActuator`` and
``PointActuator`` (``CoordinateActuator`` is in :mod:`.coordinate`).

The actuation is ``optimal_force · control``; ``control`` is a traced leaf (0 without a controller,
as in OpenSim), set it with :func:`equinox.tree_at`. Formulas from OpenSim 4.6's
``TorqueActuator.cpp`` and ``PointActuator.cpp``; generalized forces by virtual work.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import point_jacobian_from, tree_kinematics
from .base import AbstractForce, as_float

__all__ = ["TorqueActuator", "PointActuator"]


class TorqueActuator(AbstractForce):
    """A torque ``a · axis`` on ``body_a`` and its opposite on ``body_b`` (``-1``: the ground),
    ``a = optimal_force · control``; ``axis`` in ground if ``torque_is_global``, else in body A.

    Attributes:
        name (static), body_a, body_b (static jaxmb indices), rotation_a: (3, 3) OpenSim body A
        frame to its jaxmb frame; axis: (3,) unit; optimal_force: N·m; control.
    """

    name: str = eqx.field(static=True)
    body_a: int = eqx.field(static=True)
    body_b: int = eqx.field(static=True)
    torque_is_global: bool = eqx.field(static=True)
    rotation_a: Float[Array, "3 3"]
    axis: Float[Array, " 3"]
    optimal_force: Float[Array, ""]
    control: Float[Array, ""]

    def __init__(self, name, body_a, body_b, axis, torque_is_global, optimal_force,
                 rotation_a=None, control=0.0):
        self.name = name
        self.body_a, self.body_b = int(body_a), int(body_b)
        self.torque_is_global = bool(torque_is_global)
        self.rotation_a = as_float(jnp.eye(3) if rotation_a is None else rotation_a)
        a = as_float(axis)
        self.axis = a / jnp.linalg.norm(a)
        self.optimal_force = as_float(optimal_force)
        self.control = as_float(control)

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        tau = self.optimal_force * self.control * self.axis
        nq = kin.J.shape[1]
        zero = jnp.zeros((3, nq), dtype=kin.Jb.dtype)
        if not self.torque_is_global and self.body_a >= 0:
            tau = kin.A[self.body_a, :3, :3] @ (self.rotation_a @ tau)
        Ja = kin.Jb[self.body_a, :3] if self.body_a >= 0 else zero
        Jb = kin.Jb[self.body_b, :3] if self.body_b >= 0 else zero
        return (Ja - Jb).T @ tau


class PointActuator(AbstractForce):
    """A force ``a · direction`` at a point of ``body``, ``a = optimal_force · control``.

    ``direction`` in ground if ``force_is_global``, else in the body's OpenSim frame; ``point`` in
    ground if ``point_is_global`` (the body point there at the current pose), else in the body.

    Attributes:
        name, body (static), force_is_global, point_is_global (static); transform: (4, 4) OpenSim
        body frame to its jaxmb frame; point, direction: (3,); optimal_force: N; control.
    """

    name: str = eqx.field(static=True)
    body: int = eqx.field(static=True)
    force_is_global: bool = eqx.field(static=True)
    point_is_global: bool = eqx.field(static=True)
    transform: Float[Array, "4 4"]
    point: Float[Array, " 3"]
    direction: Float[Array, " 3"]
    optimal_force: Float[Array, ""]
    control: Float[Array, ""]

    def __init__(self, name, body, point, direction, force_is_global, point_is_global,
                 optimal_force, transform=None, control=0.0):
        self.name, self.body = name, int(body)
        self.force_is_global, self.point_is_global = bool(force_is_global), bool(point_is_global)
        self.transform = as_float(jnp.eye(4) if transform is None else transform)
        self.point = as_float(point)
        d = as_float(direction)
        self.direction = d / jnp.linalg.norm(d)
        self.optimal_force = as_float(optimal_force)
        self.control = as_float(control)

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        if self.body < 0:
            return jnp.zeros(kin.J.shape[1], dtype=kin.Jb.dtype)
        A = kin.A[self.body]
        R, o = A[:3, :3], A[:3, 3]
        C, c = self.transform[:3, :3], self.transform[:3, 3]
        F = self.optimal_force * self.control * self.direction
        if not self.force_is_global:
            F = R @ (C @ F)
        p = R.T @ (self.point - o) if self.point_is_global else C @ self.point + c
        _, J = point_jacobian_from(kin, self.body, p)
        return J.T @ F
