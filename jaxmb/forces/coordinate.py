"""Forces on OpenSim coordinates: limits, generalized springs and coordinate actuators.

These elements act on one coordinate of the *full* coordinate vector of a joint map that has one
(:class:`~jaxmb.joint_maps.OsimJointMap`: independent, coupled and locked coordinates of an
imported model), ``Q_c(q)``. A generalized force ``τ`` on ``Q_c`` maps to the model's coordinates
by virtual work, ``Q = (∂Q_c/∂q)ᵀ τ``, and the coordinate's rate is ``Q̇_c = (∂Q_c/∂q) q̇``; a
locked coordinate has ``∂Q_c/∂q = 0`` (its force is taken up by the lock, as in OpenSim).

Formulas are OpenSim 4.6's (``CoordinateLimitForce.cpp``, ``SpringGeneralizedForce.cpp``,
``CoordinateActuator.cpp``), in SI units (the reader converts OpenSim's degrees).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..math.expressions import Expressions
from .base import AbstractForce, as_float

__all__ = [
    "coordinate_value_rate_gradient",
    "smooth_step",
    "CoordinateLimitForce",
    "SpringGeneralizedForce",
    "CoordinateActuator",
    "ExpressionCoordinateForce",
]


def coordinate_value_rate_gradient(model, q, qd, index: int):
    """``(Q_c, Q̇_c, ∂Q_c/∂q)`` of full coordinate ``index`` of ``model.joint_map``."""
    full = model.joint_map.full_coordinates

    def value(x):
        return full(x)[index]

    val, grad = jax.value_and_grad(value)(jnp.asarray(q, dtype=jnp.result_type(q, float)))
    return val, jnp.sum(grad * qd), grad


def smooth_step(x, x0, x1, y0, y1):
    """Simbody's ``Function::Step``: ``y0`` below ``x0``, ``y1`` above ``x1``, and between them
    ``y0 + (y1 − y0) t³ (10 − 15 t + 6 t²)`` with ``t = (x − x0)/(x1 − x0)``."""
    t = jnp.clip((x - x0) / (x1 - x0), 0.0, 1.0)
    return y0 + (y1 - y0) * t**3 * (10.0 - 15.0 * t + 6.0 * t * t)


class CoordinateLimitForce(AbstractForce):
    """OpenSim's ``CoordinateLimitForce``: a spring-damper engaged beyond a coordinate's limits.

    ``K_up = Step(q; q_up, q_up + tr; 0, k_up)``, ``K_lo = Step(q; q_lo − tr, q_lo; k_lo, 0)``,
    ``τ = −K_up (q − q_up) + K_lo (q_lo − q) − c (K_up/k_up + K_lo/k_lo) q̇``.

    Attributes:
        coordinate: index in the joint map's full coordinates (static).
        upper_stiffness, lower_stiffness: N·m/rad or N/m. upper_limit, lower_limit: rad or m.
        damping: N·m·s/rad or N·s/m. transition: rad or m.
    """

    coordinate: int = eqx.field(static=True)
    upper_stiffness: Float[Array, ""]
    upper_limit: Float[Array, ""]
    lower_stiffness: Float[Array, ""]
    lower_limit: Float[Array, ""]
    damping: Float[Array, ""]
    transition: Float[Array, ""]

    def __init__(
        self, coordinate, upper_stiffness, upper_limit, lower_stiffness, lower_limit, damping,
        transition,
    ):
        self.coordinate = int(coordinate)
        self.upper_stiffness = as_float(upper_stiffness)
        self.upper_limit = as_float(upper_limit)
        self.lower_stiffness = as_float(lower_stiffness)
        self.lower_limit = as_float(lower_limit)
        self.damping = as_float(damping)
        self.transition = as_float(transition)

    def force(self, x, xd):
        """The generalized force (N·m or N) on the coordinate at value ``x`` and rate ``xd``."""
        ku, kl = self.upper_stiffness, self.lower_stiffness
        K_up = smooth_step(x, self.upper_limit, self.upper_limit + self.transition, 0.0, ku)
        K_lo = smooth_step(x, self.lower_limit - self.transition, self.lower_limit, kl, 0.0)
        f_up = -K_up * (x - self.upper_limit)
        f_lo = K_lo * (self.lower_limit - x)
        return f_up + f_lo - self.damping * (K_up / ku + K_lo / kl) * xd

    def generalized_force(self, model, q, qd, t):
        x, xd, g = coordinate_value_rate_gradient(model, q, qd, self.coordinate)
        return self.force(x, xd) * g


class SpringGeneralizedForce(AbstractForce):
    """OpenSim's ``SpringGeneralizedForce``: ``τ = −k (q − rest) − c q̇`` on one coordinate.

    Attributes:
        coordinate: index in the joint map's full coordinates (static).
        stiffness, rest_length, viscosity: SI (N·m/rad, rad, N·m·s/rad or N/m, m, N·s/m).
    """

    coordinate: int = eqx.field(static=True)
    stiffness: Float[Array, ""]
    rest_length: Float[Array, ""]
    viscosity: Float[Array, ""]

    def __init__(self, coordinate, stiffness, rest_length, viscosity):
        self.coordinate = int(coordinate)
        self.stiffness = as_float(stiffness)
        self.rest_length = as_float(rest_length)
        self.viscosity = as_float(viscosity)

    def generalized_force(self, model, q, qd, t):
        x, xd, g = coordinate_value_rate_gradient(model, q, qd, self.coordinate)
        return (-self.stiffness * (x - self.rest_length) - self.viscosity * xd) * g


class CoordinateActuator(AbstractForce):
    """OpenSim's ``CoordinateActuator``: ``τ = optimal_force · control`` on one coordinate.

    ``control`` is the input (a leaf: set it with :func:`equinox.tree_at`, batch or differentiate
    it); OpenSim's control without a controller is 0.

    Attributes:
        name: the actuator's name (static). coordinate: index in the full coordinates (static).
        optimal_force: N·m or N per unit control. control: dimensionless.
    """

    name: str = eqx.field(static=True)
    coordinate: int = eqx.field(static=True)
    optimal_force: Float[Array, ""]
    control: Float[Array, ""]

    def __init__(self, name, coordinate, optimal_force, control=0.0):
        self.name = name
        self.coordinate = int(coordinate)
        self.optimal_force = as_float(optimal_force)
        self.control = as_float(control)

    def generalized_force(self, model, q, qd, t):
        _, _, g = coordinate_value_rate_gradient(model, q, qd, self.coordinate)
        return self.optimal_force * self.control * g


class ExpressionCoordinateForce(AbstractForce):
    """OpenSim's ``ExpressionBasedCoordinateForce``: ``τ = e(q, q̇)`` on one coordinate, ``e`` an
    expression of the coordinate's value and rate, compiled by :mod:`jaxmb.math.expressions`
    (its variables ``q`` and ``qdot`` bound as the names ``value`` and ``rate``).

    Attributes:
        coordinate: index in the joint map's full coordinates (static).
        expression: an :class:`~jaxmb.math.expressions.Expressions` over ``(value, rate)``
            (static); ``source`` keeps OpenSim's text.
    """

    coordinate: int = eqx.field(static=True)
    expression: Expressions = eqx.field(static=True)
    source: str = eqx.field(static=True)

    def __init__(self, coordinate, expression: Expressions, source: str = ""):
        self.coordinate = int(coordinate)
        self.expression = expression
        self.source = source

    def generalized_force(self, model, q, qd, t):
        x, xd, g = coordinate_value_rate_gradient(model, q, qd, self.coordinate)
        return self.expression(jnp.stack([x, xd]), {})[0] * g
