"""Applied generalized forces that a model carries itself (springs, motors, point forces).

Each element maps the state to a generalized force in q-space through virtual work,
``Q = Σ (∂r/∂q)ᵀ F + Σ (∂θ/∂q)ᵀ τ``. ``forward_dynamics(model, q, qd, tau)`` adds the sum of
``model.forces`` to the user's ``tau``, so ``tau = 0`` is the free motion of the model.

Indices (coordinates, joints, bodies) are static fields; magnitudes (forces, stiffnesses, points)
are traced leaves, so an element is differentiable and batchable in its parameters. Bodies may be
given by index or by name; ``-1`` or ``"ground"`` is the fixed frame (points then are in ground
coordinates).

Extension point: subclass :class:`AbstractForce` and implement :meth:`generalized_force`; define
``potential_energy(model, q)`` as well when the element is conservative (used by
:func:`jaxmb.dynamics.total_energy`). Forward dynamics calls :meth:`AbstractForce.from_kinematics`
with the :class:`jaxmb.kinematics.TreeKinematics` it has already computed (joint map, poses, body
twist Jacobians), so that a right-hand side evaluates the kinematics once for all elements; the
default falls back to ``generalized_force``, and the built-in elements override it.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import TreeKinematics, point_jacobian_from, tree_kinematics

__all__ = [
    "AbstractForce",
    "CoordinateForce",
    "JointTorque",
    "PointForce",
    "BodyTorque",
    "PointToPointSpring",
    "JointSpring",
    "point_jacobian",
]


class AbstractForce(eqx.Module):
    """A force element; its parameters are pytree leaves (traced, differentiable, batchable)."""

    @abc.abstractmethod
    def generalized_force(self, model, q, qd, t) -> Float[Array, " nq"]:
        """Generalized force (N or N·m per unit of each coordinate), shape (nq,)."""

    def from_kinematics(self, model, kin: TreeKinematics, qd, t) -> Float[Array, " nq"]:
        """:meth:`generalized_force` at ``kin.q`` from precomputed kinematics (same value)."""
        return self.generalized_force(model, kin.q, qd, t)


def _f64(x):
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _body(model, body) -> int:
    return model.body_index(body)


def point_jacobian(model, body, point, q) -> tuple[Float[Array, " 3"], Float[Array, "3 nq"]]:
    """Ground position (m) of a body-fixed point and its Jacobian ``∂r/∂q`` (3, nq), closed form.

    ``body = -1``/``"ground"``: the point is fixed in the ground frame (zero Jacobian).
    """
    b = _body(model, body)
    point = jnp.asarray(point)
    if b < 0:
        return point, jnp.zeros((3, model.nq), dtype=jnp.result_type(point, q))
    return point_jacobian_from(tree_kinematics(model, q), b, point)


class CoordinateForce(AbstractForce):
    """A constant generalized force ``value`` on coordinate ``index`` (a motor on q), N or N·m."""

    index: int = eqx.field(static=True)
    value: Float[Array, ""]

    def __init__(self, index, value):
        self.index = index
        self.value = _f64(value)

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
        self.torque = _f64(torque)

    def generalized_force(self, model, q, qd, t):
        j = _body(model, self.joint)
        if j < 0:
            raise ValueError(f"JointTorque: joint {self.joint!r} is not a joint of the model")
        return model.joint_map.jacobian(q)[j] * self.torque

    def from_kinematics(self, model, kin, qd, t):
        j = _body(model, self.joint)
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
        self.point = _f64(point)
        self.force = _f64(force)

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        _, Jr = point_jacobian_from(kin, _body(model, self.body), self.point)
        return jnp.sum(Jr * self.force[:, None], axis=0)


class BodyTorque(AbstractForce):
    """A pure torque (N·m, ground frame) on ``body``: ``Q = (∂ω/∂q̇)ᵀ τ``."""

    body: int | str = eqx.field(static=True)
    torque: Float[Array, " 3"]

    def __init__(self, body, torque):
        self.body = body
        self.torque = _f64(torque)

    def generalized_force(self, model, q, qd, t):
        b = _body(model, self.body)
        if b < 0:
            return jnp.zeros(model.nq, dtype=jnp.result_type(q, self.torque))
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        b = _body(model, self.body)
        if b < 0:
            return jnp.zeros(kin.J.shape[1], dtype=jnp.result_type(kin.J, self.torque))
        # ω = Σ_l Jb[b, :3, l] q̇_l, so ∂ω/∂q̇ is the angular block of the body twist Jacobian
        return jnp.sum(self.torque[:, None] * kin.Jb[b, :3], axis=0)


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
        self.point_a, self.point_b = _f64(point_a), _f64(point_b)
        self.stiffness = _f64(stiffness)
        self.rest_length = _f64(rest_length)
        self.damping = _f64(damping)

    def length_and_gradient(self, model, q):
        """Spring length L (m) and ``∂L/∂q`` (nq,)."""
        return self._length_and_gradient(model, tree_kinematics(model, q))

    def _length_and_gradient(self, model, kin):
        ra, Ja = point_jacobian_from(kin, _body(model, self.body_a), self.point_a)
        rb, Jb = point_jacobian_from(kin, _body(model, self.body_b), self.point_b)
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
        self.stiffness = _f64(stiffness)
        self.rest = _f64(rest)
        self.damping = _f64(damping)

    def _index(self, model):
        j = _body(model, self.joint)
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
