"""Springs: linear spring-dampers between two points and on a joint variable (conservative parts
with a ``potential_energy``)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import point_jacobian_from, tree_kinematics
from .base import AbstractForce, as_float, check_physical

__all__ = ["PointToPointSpring", "JointSpring"]


class PointToPointSpring(AbstractForce):
    """A linear spring-damper between two points: tension ``k (L − L₀) + c L̇`` (N).

    ``Q = −(∂L/∂q)ᵀ (k (L − L₀) + c L̇)``; its potential is ``½ k (L − L₀)²``. Body ``-1`` is the
    ground (the point is then in ground coordinates).

    Attributes:
        body_a, body_b: body indices or names (static). point_a, point_b: (3,) m in those frames.
        stiffness: N/m. rest_length: m. damping: N·s/m.
    """

    body_a: int | str = eqx.field(static=True)
    body_b: int | str = eqx.field(static=True)
    point_a: Float[Array, " 3"]
    point_b: Float[Array, " 3"]
    stiffness: Float[Array, ""]
    rest_length: Float[Array, ""]
    damping: Float[Array, ""]

    def __init__(self, body_a, point_a, body_b, point_b, stiffness, rest_length, damping=0.0):
        self.body_a, self.body_b = body_a, body_b
        self.point_a, self.point_b = as_float(point_a), as_float(point_b)
        self.stiffness = as_float(stiffness)
        self.rest_length = as_float(rest_length)
        self.damping = as_float(damping)

    def __check_init__(self):
        names = ("stiffness", "rest_length", "damping")
        check_physical(self, *names, nonnegative=names)

    def length_and_gradient(self, model, q):
        """Spring length L (m) and ``∂L/∂q`` (nq,)."""
        return self._length_and_gradient(model, tree_kinematics(model, q))

    def _length_and_gradient(self, model, kin):
        ra, Ja = point_jacobian_from(kin, model.body_index(self.body_a), self.point_a)
        rb, Jb = point_jacobian_from(kin, model.body_index(self.body_b), self.point_b)
        dr = rb - ra
        sq = jnp.sum(dr * dr)
        # double where: a zero-length spring has no direction, keep its gradient finite
        safe = jnp.where(sq > 0, sq, 1.0)
        L = jnp.where(sq > 0, jnp.sqrt(safe), 0.0)
        u = jnp.where(sq > 0, dr / jnp.sqrt(safe), 0.0)
        return L, jnp.sum(u[:, None] * (Jb - Ja), axis=0)

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        L, dL = self._length_and_gradient(model, kin)
        tension = self.stiffness * (L - self.rest_length) + self.damping * jnp.sum(dL * qd)
        return -tension * dL

    def potential_energy(self, model, q):
        L, _ = self.length_and_gradient(model, q)
        return 0.5 * self.stiffness * (L - self.rest_length) ** 2


class JointSpring(AbstractForce):
    """A linear spring-damper on joint variable ``joint``: ``τ = −k (f_j − rest) − c ḟ_j``.

    Attributes:
        joint: joint (= body) index or name (static).
        stiffness: N·m/rad or N/m. rest: rad or m. damping: N·m·s/rad or N·s/m.
    """

    joint: int | str = eqx.field(static=True)
    stiffness: Float[Array, ""]
    rest: Float[Array, ""]
    damping: Float[Array, ""]

    def __init__(self, joint, stiffness, rest, damping=0.0):
        self.joint = joint
        self.stiffness = as_float(stiffness)
        self.rest = as_float(rest)
        self.damping = as_float(damping)

    def __check_init__(self):
        check_physical(self, "stiffness", "rest", "damping", nonnegative=("stiffness", "damping"))

    def _index(self, model):
        j = model.body_index(self.joint)
        if j < 0:
            raise ValueError(f"JointSpring: joint {self.joint!r} is not a joint of the model")
        return j

    def generalized_force(self, model, q, qd, t):
        j = self._index(model)
        f = model.joint_map(q)[j]
        g = model.joint_map.jacobian(q)[j]
        return (-self.stiffness * (f - self.rest) - self.damping * (g @ qd)) * g

    def from_kinematics(self, model, kin, qd, t):
        j = self._index(model)
        f, g = kin.f[j], kin.J[j]
        return (-self.stiffness * (f - self.rest) - self.damping * jnp.sum(g * qd)) * g

    def potential_energy(self, model, q):
        f = model.joint_map(q)[self._index(model)]
        return 0.5 * self.stiffness * (f - self.rest) ** 2
