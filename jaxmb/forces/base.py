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
with the :class:`jaxmb.kinematics.Kinematics` it has already computed (joint map, poses, body
twist Jacobians), so that a right-hand side evaluates the kinematics once for all elements; the
default falls back to ``generalized_force``, and the built-in elements override it.

One file per kind: loads (``loads.py``: constant forces and torques) and springs (``springs.py``).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..kinematics import Kinematics, point_jacobian_from, tree_kinematics
from ..model import ModelError

__all__ = [
    "AbstractForce",
    "as_float",
    "check_physical",
    "point_jacobian",
    "applied_forces",
    "applied_forces_from",
]


class AbstractForce(eqx.Module):
    """A force element; its parameters are pytree leaves (traced, differentiable, batchable)."""

    @abc.abstractmethod
    def generalized_force(self, model, q, qd, t) -> Float[Array, " nq"]:
        """Generalized force (N or N·m per unit of each coordinate), shape (nq,)."""

    def from_kinematics(self, model, kin: Kinematics, qd, t) -> Float[Array, " nq"]:
        """:meth:`generalized_force` at ``kin.q`` from precomputed kinematics (same value)."""
        return self.generalized_force(model, kin.q, qd, t)


def check_physical(element, *names, nonnegative=()) -> None:
    """Raise :class:`jaxmb.ModelError` naming the element, the field and its value when a field in
    ``names`` is not finite or one in ``nonnegative`` is negative (traced values are skipped)."""
    for name in names:
        x = getattr(element, name)
        if isinstance(x, jax.core.Tracer):
            continue
        v = np.asarray(x, dtype=float)
        bad = ~np.isfinite(v) | ((v < 0) if name in nonnegative else False)
        if np.any(bad):
            rule = "finite and >= 0" if name in nonnegative else "finite"
            val = float(v[bad].reshape(-1)[0])
            raise ModelError(f"{type(element).__name__}: {name} = {val!r} must be {rule}")


def as_float(x):
    """x as an array of the default float type (float64 under jaxmb), for traced parameters."""
    return jnp.asarray(x, dtype=jnp.result_type(float))


def point_jacobian(model, body, point, q) -> tuple[Float[Array, " 3"], Float[Array, "3 nq"]]:
    """Ground position (m) of a body-fixed point and its Jacobian ``∂r/∂q`` (3, nq), closed form.

    ``body = -1``/``"ground"``: the point is fixed in the ground frame (zero Jacobian).
    """
    b = model.body_index(body)
    point = jnp.asarray(point)
    if b < 0:
        return point, jnp.zeros((3, model.nq), dtype=jnp.result_type(point, q))
    return point_jacobian_from(tree_kinematics(model, q), b, point)


def applied_forces(
    model, q: Float[Array, " nq"], qd: Float[Array, " nq"], t=0.0
) -> Float[Array, " nq"]:
    """Sum of the generalized forces of ``model.forces`` (springs, motors, ...), shape (nq,)."""
    total = jnp.zeros(model.nq, dtype=jnp.result_type(q, float))
    for element in model.forces:
        total = total + element.generalized_force(model, q, qd, t)
    return total


def applied_forces_from(model, kin: Kinematics, qd, t=0.0) -> Float[Array, " nq"]:
    """:func:`applied_forces` at ``kin.q`` from kinematics already computed (one pose pass serves
    the equations of motion and every element), shape (nq,)."""
    total = jnp.zeros(model.nq, dtype=jnp.result_type(kin.q, float))
    for element in model.forces:
        total = total + element.from_kinematics(model, kin, qd, t)
    return total
