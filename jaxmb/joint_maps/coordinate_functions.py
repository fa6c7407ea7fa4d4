"""Joint maps of imported OpenSim models: OpenSim functions of OpenSim coordinates.

OpenSim's ``CustomJoint`` gives each transform axis a function of one coordinate, and its
``CoordinateCouplerConstraint`` makes a coordinate a function of another; both are evaluated here
at run time, so an imported model does not depend on the ``.osim`` reader that built it. Closed
loops (OpenSim's weld, point, point-on-line and constant-distance constraints) make some
coordinates *dependent*: they are solved from the others by an :class:`ImplicitMap` on the full
coordinate vector (Newton inside JAX, seed §3-3).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .base import AbstractJointMap
from .implicit import ImplicitMap


class OsimJointMap(AbstractJointMap):
    """Joint map of an imported model: OpenSim functions of OpenSim coordinates.

    The full coordinate vector ``Q`` (all OpenSim coordinates, OpenSim order) is assembled from the
    independent ones, ``Q[independent] = q``, then each coupled coordinate in dependency order,
    ``Q[d] = scale · g(Q[source])``; a locked coordinate is held at its value,
    ``Q[held] = held_values`` (OpenSim's lock: it neither moves nor appears in q). Joint i is
    ``f_i = g_i(Q[source_i])`` (``source_i = -1``: a constant).

    With closed loops, ``loop`` is an :class:`ImplicitMap` ``q ↦ Q`` whose dependent variables are
    the coupled coordinates and those the loop constraints fix; ``Q = loop(q)`` replaces the
    explicit assembly (and its derivatives come from the implicit function theorem).

    Attributes:
        functions: per jaxmb joint, the OpenSim function of its TransformAxis (traced leaves).
        sources: per jaxmb joint, the index of its coordinate in ``Q`` (static; a tuple of
            indices for a TransformAxis function of several coordinates).
        coupling_functions, coupling_scales: per coupled coordinate, ``g`` and ``scale``.
        coupled, coupling_sources: their indices in ``Q`` and those of their independent coordinate
            (a tuple of indices for a function of several, e.g. a MultivariatePolynomialFunction).
        independent: the indices of q in ``Q``.
        nfull: number of OpenSim coordinates.
        held, held_values: indices in ``Q`` of the locked coordinates (static) and their values.
        loop: ``None``, or the :class:`ImplicitMap` ``q ↦ Q`` of a model with closed loops.
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
    loop: ImplicitMap | None = None

    def full_coordinates(self, q: Float[Array, " nq"]) -> Float[Array, " nfull"]:
        """All OpenSim coordinates (independent, coupled, locked and loop-dependent), OpenSim's
        order."""
        if self.loop is not None:
            return self.loop(q)
        Q = jnp.zeros(self.nfull, dtype=jnp.result_type(q, float))
        Q = Q.at[jnp.asarray(self.independent, dtype=int)].set(q)
        if self.held:
            Q = Q.at[jnp.asarray(self.held, dtype=int)].set(
                jnp.asarray(self.held_values, dtype=Q.dtype)
            )
        for k, (d, s, g) in enumerate(
            zip(self.coupled, self.coupling_sources, self.coupling_functions, strict=True)
        ):
            Q = Q.at[d].set(self.coupling_scales[k] * g(coupling_argument(Q, s)))
        return Q

    def __call__(self, q):
        return self.joint_values(self.full_coordinates(q))

    def derivatives(self, q: Float[Array, " nq"]):
        """``(f, J, H)``. With loops: one Newton solve and one LU for ``Q(q)``, ``∂Q/∂q`` and
        ``∂²Q/∂q²`` (:meth:`ImplicitMap.derivatives`), then the chain rule through the joint
        functions ``f = F(Q)``: ``J = F' J_Q``, ``H = F''(J_Q, J_Q) + F' H_Q`` (nested autodiff
        through the solve would trace it once per derivative order)."""
        if self.loop is None:
            return super().derivatives(q)
        Q, JQ, HQ = self.loop.derivatives(q)
        dF = jax.jacfwd(self.joint_values)(Q)
        ddF = jax.jacfwd(jax.jacfwd(self.joint_values))(Q)
        J = dF @ JQ
        H = jnp.einsum("iab,ak,bl->ikl", ddF, JQ, JQ) + jnp.einsum("ia,akl->ikl", dF, HQ)
        return self.joint_values(Q), J, H

    def jacobian(self, q):
        return self.derivatives(q)[1] if self.loop is not None else super().jacobian(q)

    def hessian(self, q):
        return self.derivatives(q)[2] if self.loop is not None else super().hessian(q)

    def joint_values(self, Q: Float[Array, " nfull"]) -> Float[Array, " nj"]:
        """The jaxmb joint variables f (nj,) from all OpenSim coordinates Q."""
        zero = jnp.zeros((), dtype=Q.dtype)
        return jnp.stack(
            [
                g(zero) if s == -1 else g(coupling_argument(Q, s))
                for g, s in zip(self.functions, self.sources, strict=True)
            ]
        )


def coupling_argument(Q: Float[Array, " nfull"], source: int | tuple[int, ...]):
    """The argument of a coupling function: ``Q[source]``, a vector for several coordinates."""
    return Q[source] if isinstance(source, int) else Q[jnp.asarray(source, dtype=int)]


@dataclasses.dataclass(frozen=True)
class GivenCoordinates:
    """The ``independent`` callable of a loop's :class:`ImplicitMap` on the full coordinates:
    ``params["given"].full_coordinates(q)[entries]``, i.e. the independent and locked coordinates
    (an :class:`OsimJointMap` without couplings places q and the held values), in Q's order.

    Attributes:
        entries: static indices in Q of every coordinate that is not dependent, increasing.
    """

    entries: tuple[int, ...]

    def __call__(self, q, params):
        return params["given"].full_coordinates(q)[jnp.asarray(self.entries, dtype=int)]
