"""Joint maps of imported OpenSim models: OpenSim functions of OpenSim coordinates.

OpenSim's ``CustomJoint`` gives each transform axis a function of one coordinate, and its
``CoordinateCouplerConstraint`` makes a coordinate a function of another; both are evaluated here
at run time, so an imported model does not depend on the ``.osim`` reader that built it.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .base import AbstractJointMap


class OsimJointMap(AbstractJointMap):
    """Joint map of an imported model: OpenSim functions of OpenSim coordinates.

    The full coordinate vector ``Q`` (all OpenSim coordinates, OpenSim order) is assembled from the
    independent ones, ``Q[independent] = q``, then each coupled coordinate in dependency order,
    ``Q[d] = scale · g(Q[source])``; a locked coordinate is held at its value,
    ``Q[held] = held_values`` (OpenSim's lock: it neither moves nor appears in q). Joint i is ``f_i = g_i(Q[source_i])`` (``source_i = -1``: a
    constant).

    Attributes:
        functions: per jaxmb joint, the OpenSim function of its TransformAxis (traced leaves).
        sources: per jaxmb joint, the index of its coordinate in ``Q`` (static).
        coupling_functions, coupling_scales: per coupled coordinate, ``g`` and ``scale``.
        coupled, coupling_sources: their indices in ``Q`` and those of their independent coordinate.
        independent: the indices of q in ``Q``.
        nfull: number of OpenSim coordinates.
        held, held_values: indices in ``Q`` of the locked coordinates (static) and their values.
    """

    functions: tuple
    coupling_functions: tuple
    coupling_scales: Float[Array, " nc"]
    sources: tuple[int, ...] = eqx.field(static=True)
    coupled: tuple[int, ...] = eqx.field(static=True)
    coupling_sources: tuple[int, ...] = eqx.field(static=True)
    independent: tuple[int, ...] = eqx.field(static=True)
    nfull: int = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)
    held: tuple[int, ...] = eqx.field(static=True, default=())
    held_values: tuple = ()

    def full_coordinates(self, q: Float[Array, " nq"]) -> Float[Array, " nfull"]:
        """All OpenSim coordinates (independent and coupled), OpenSim's order."""
        Q = jnp.zeros(self.nfull, dtype=jnp.result_type(q, float))
        Q = Q.at[jnp.asarray(self.independent, dtype=int)].set(q)
        if self.held:
            Q = Q.at[jnp.asarray(self.held, dtype=int)].set(
                jnp.asarray(self.held_values, dtype=Q.dtype)
            )
        for k, (d, s, g) in enumerate(
            zip(self.coupled, self.coupling_sources, self.coupling_functions, strict=True)
        ):
            Q = Q.at[d].set(self.coupling_scales[k] * g(Q[s]))
        return Q

    def __call__(self, q):
        Q = self.full_coordinates(q)
        zero = jnp.zeros((), dtype=Q.dtype)
        return jnp.stack(
            [g(Q[s] if s >= 0 else zero) for g, s in zip(self.functions, self.sources, strict=True)]
        )
