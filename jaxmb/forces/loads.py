"""Loads: constant generalized forces, joint torques, point forces and body torques (motors,
external loads), each mapped to q-space by virtual work."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import point_jacobian_from, tree_kinematics
from .base import AbstractForce, as_float

__all__ = ["CoordinateForce", "JointTorque", "PointForce", "BodyTorque"]


class CoordinateForce(AbstractForce):
    """A constant generalized force ``value`` on coordinate ``index`` (a motor on q), N or N·m."""

    index: int = eqx.field(static=True)
    value: Float[Array, ""]

    def __init__(self, index, value):
        self.index = index
        self.value = as_float(value)

    def generalized_force(self, model, q, qd, t):
        k = model.coordinate_index(self.index)
        if not 0 <= k < model.nq:
            raise ValueError(
                f"CoordinateForce: coordinate index {k} out of range for nq={model.nq}"
            )
        return jnp.zeros(model.nq, dtype=jnp.result_type(q, self.value)).at[k].set(self.value)


class JointTorque(AbstractForce):
    """Torque (revolute, N·m) or force (prismatic, N) on joint variable ``joint``: Q = ∇f_j τ."""

    joint: int = eqx.field(static=True)
    torque: Float[Array, ""]

    def __init__(self, joint, torque):
        self.joint = joint
        self.torque = as_float(torque)

    def generalized_force(self, model, q, qd, t):
        j = model.body_index(self.joint)
        if j < 0:
            raise ValueError(f"JointTorque: joint {self.joint!r} is not a joint of the model")
        return model.joint_map.jacobian(q)[j] * self.torque

    def from_kinematics(self, model, kin, qd, t):
        j = model.body_index(self.joint)
        if j < 0:
            raise ValueError(f"JointTorque: joint {self.joint!r} is not a joint of the model")
        return kin.J[j] * self.torque


class PointForce(AbstractForce):
    """A force (N, ground frame) at a point (m) fixed in ``body``: ``Q = (∂r/∂q)ᵀ F``."""

    body: int | str = eqx.field(static=True)
    point: Float[Array, " 3"]
    force: Float[Array, " 3"]

    def __init__(self, body, point, force):
        self.body = body
        self.point = as_float(point)
        self.force = as_float(force)

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        _, Jr = point_jacobian_from(kin, model.body_index(self.body), self.point)
        return jnp.sum(Jr * self.force[:, None], axis=0)


class BodyTorque(AbstractForce):
    """A pure torque (N·m, ground frame) on ``body``: ``Q = (∂ω/∂q̇)ᵀ τ``."""

    body: int | str = eqx.field(static=True)
    torque: Float[Array, " 3"]

    def __init__(self, body, torque):
        self.body = body
        self.torque = as_float(torque)

    def generalized_force(self, model, q, qd, t):
        b = model.body_index(self.body)
        if b < 0:
            return jnp.zeros(model.nq, dtype=jnp.result_type(q, self.torque))
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        b = model.body_index(self.body)
        if b < 0:
            return jnp.zeros(kin.J.shape[1], dtype=jnp.result_type(kin.J, self.torque))
        # ω = Σ_l Jb[b, :3, l] q̇_l, so ∂ω/∂q̇ is the angular block of the body twist Jacobian
        return jnp.sum(self.torque[:, None] * kin.Jb[b, :3], axis=0)
