"""Applied generalized forces that a model carries itself (springs, motors, point forces).

Each element maps the state to a generalized force in q-space through virtual work,
``Q = Σ (∂r/∂q)ᵀ F + Σ (∂θ/∂q)ᵀ τ``. ``forward_dynamics(model, q, qd, tau)`` adds the sum of
``model.forces`` to the user's ``tau``, so ``tau = 0`` is the free motion of the model.

Extension point: subclass :class:`AbstractForce` and implement :meth:`generalized_force`.
"""

from __future__ import annotations

import abc

import equinox as eqx
from jaxtyping import Array, Float

__all__ = ["AbstractForce"]


class AbstractForce(eqx.Module):
    """A force element; its parameters are pytree leaves (traced, differentiable, batchable)."""

    @abc.abstractmethod
    def generalized_force(self, model, q, qd, t) -> Float[Array, " nq"]:
        """Generalized force (N or N·m per unit of each coordinate), shape (nq,)."""
