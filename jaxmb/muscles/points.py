"""Path points: where a musculotendon path runs in a body, possibly depending on q.

A musculotendon unit is an ordered path of points over bodies (seed 001 §4, Eqs. 149–195); its
*attachment sequence* Γ_k (Definition 2) is the sequence of bodies that the path visits; it may
skip parent/child relations and include the ground (body ``-1`` here, "0" in the seed). Every point
type answers ``evaluate(q, nq) -> (location (3,), ∂location/∂q (3, nq), active)`` in its body's
frame (m), which is all the path geometry asks of it, and says by its class attribute
``moves_in_body`` whether ∂location/∂q can be non-zero (the moment arms' moving-point term then
reads only the points that move):

- :class:`PathPoint`: a point fixed in a body (or the ground).
- :class:`ConditionalPathPoint`: a via point that is part of the path only while one coordinate is
  inside ``range`` (closed interval, as OpenSim's ``ConditionalPathPoint``). The switch is *not*
  smoothed: like OpenSim, the length jumps when the via point appears, and at a switching pose the
  moment arm is the one-sided value of whichever side the pose is on.
- :class:`MovingPathPoint`: a point whose body-frame location is a smooth function of q; each
  coordinate x, y, z is a natural cubic spline of one generalized coordinate (OpenSim's
  ``MovingPathPoint`` with spline functions); its subclasses :class:`OsimMovingPathPoint` (OpenSim
  functions of OpenSim coordinates, coupled ones included) and :class:`FunctionPathPoint` (OpenSim
  functions of one coordinate each, clamped to its range: :func:`clamp_to_range`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..joint_maps.coordinate_functions import OsimJointMap
from ..math.functions import as_array, natural_cubic_spline

__all__ = [
    "PathPoint",
    "ConditionalPathPoint",
    "MovingPathPoint",
    "OsimMovingPathPoint",
    "FunctionPathPoint",
    "OsimConditionalPathPoint",
    "clamp_to_range",
    "full_coordinates_and_jacobian",
]


class PathPoint(eqx.Module):
    """A path point fixed in a body.

    Attributes:
        body: body index or name (``-1``/``"ground"`` for the ground); static.
        location: (3,) m, in the body frame.
        name: optional label (static).
    """

    body: Any = eqx.field(static=True)
    location: Float[Array, " 3"]
    name: str = eqx.field(static=True, default="")
    moves_in_body: ClassVar[bool] = False

    def __init__(self, body, location, name: str = ""):
        self.body = body
        self.location = as_array(location)
        self.name = name

    def evaluate(self, q, nq):
        """(location (3,), ∂location/∂q (3, nq), active)."""
        return self.location, jnp.zeros((3, nq), self.location.dtype), jnp.asarray(True)


class ConditionalPathPoint(eqx.Module):
    """A via point in the path only while ``range[0] <= q[coordinate] <= range[1]``.

    Attributes:
        body: body index or name (static). location: (3,) m in the body frame.
        coordinate: index or name of the generalized coordinate (static).
        range: (2,) closed interval of that coordinate (rad or m).
    """

    body: Any = eqx.field(static=True)
    location: Float[Array, " 3"]
    coordinate: Any = eqx.field(static=True)
    range: Float[Array, " 2"]
    name: str = eqx.field(static=True, default="")
    moves_in_body: ClassVar[bool] = False

    def __init__(self, body, location, coordinate, range, name: str = ""):  # noqa: A002
        self.body = body
        self.location = as_array(location)
        self.coordinate = coordinate
        self.range = as_array(range)
        self.name = name

    def evaluate(self, q, nq):
        c = q[self.coordinate]
        active = (c >= self.range[0]) & (c <= self.range[1])
        return self.location, jnp.zeros((3, nq), self.location.dtype), active


class MovingPathPoint(eqx.Module):
    """A point whose body-frame location is a smooth function of q.

    Coordinate ``a`` (x, y, z) of the location is a natural cubic spline of the generalized
    coordinate ``coordinates[a]`` through ``(knots[a], values[a])``.

    Attributes:
        body: body index or name (static).
        coordinates: three coordinate indices or names (static).
        knots: (3, K) spline abscissae (rad or m), increasing. values: (3, K) m.
    """

    body: Any = eqx.field(static=True)
    coordinates: tuple = eqx.field(static=True)
    knots: Float[Array, "3 K"]
    values: Float[Array, "3 K"]
    name: str = eqx.field(static=True, default="")
    moves_in_body: ClassVar[bool] = True

    def __init__(self, body, coordinates, knots, values, name: str = ""):
        self.body = body
        self.coordinates = tuple(coordinates)
        self.knots = as_array(knots)
        self.values = as_array(values)
        self.name = name

    def evaluate(self, q, nq):
        loc, dloc = [], []
        for a in range(3):
            v, d = natural_cubic_spline(self.knots[a], self.values[a], q[self.coordinates[a]])
            loc.append(v)
            dloc.append(jnp.zeros(nq, v.dtype).at[self.coordinates[a]].set(d))
        return jnp.stack(loc), jnp.stack(dloc), jnp.asarray(True)


class OsimMovingPathPoint(MovingPathPoint):
    """OpenSim's MovingPathPoint: each body-frame coordinate a function of an OpenSim coordinate.

    ``x_osim[a] = functions[a](Q[sources[a]])`` with ``Q = joint_map.full_coordinates(q)`` (so a
    coupled coordinate works as well as an independent one; ``sources[a] = -1``: evaluated at 0, as
    OpenSim does for a function with no coordinate), moved into the jaxmb body frame,
    ``x = rotation @ x_osim + offset``. Any :mod:`jaxmb.io.functions` type works. ``∂x/∂q`` is
    exact (forward-mode autodiff through the functions and the coupling).

    Attributes:
        body: jaxmb body index (static). functions: three OpenSim functions (m).
        sources: their coordinates' indices in the full OpenSim coordinate vector (static).
        joint_map: the imported model's :class:`OsimJointMap`.
        rotation (3, 3), offset (3,) m: OpenSim body frame to jaxmb body frame.
    """

    functions: tuple
    sources: tuple[int, int, int] = eqx.field(static=True)
    joint_map: OsimJointMap
    rotation: Float[Array, "3 3"]
    offset: Float[Array, " 3"]

    def __init__(self, body, functions, sources, joint_map, rotation, offset, name: str = ""):
        self.body = body
        self.functions = tuple(functions)
        self.sources = tuple(int(c) for c in sources)
        self.joint_map = joint_map
        self.rotation = as_array(rotation)
        self.offset = as_array(offset)
        # the model coordinates (indices in q) the point reads directly
        self.coordinates = tuple(
            joint_map.independent.index(c)
            for c in sorted({int(c) for c in sources if c >= 0})
            if c in joint_map.independent
        )
        self.knots = as_array(np.zeros((3, 0)))
        self.values = as_array(np.zeros((3, 0)))
        self.name = name

    def location(self, q: Float[Array, " nq"]) -> Float[Array, " 3"]:
        """Position in the jaxmb body frame (m), shape (3,)."""
        Q = self.joint_map.full_coordinates(q)
        return self.evaluate_from(Q, jnp.zeros(Q.shape + (0,), Q.dtype))[0]

    def evaluate(self, q, nq):
        """(location (3,), ∂location/∂q (3, nq), active) — the contract of jaxmb's path points."""
        return self.evaluate_from(*full_coordinates_and_jacobian(self.joint_map, q))

    def evaluate_from(self, Q, JQ):
        """:meth:`evaluate` from the full OpenSim coordinates Q (nfull,) and ∂Q/∂q (nfull, nq)
        (:func:`full_coordinates_and_jacobian`, shared by the points of one model): each
        function's slope at its coordinate times that coordinate's row of ∂Q/∂q."""
        zero = jnp.zeros((), dtype=Q.dtype)
        x, dx = [], []
        for f, c in zip(self.functions, self.sources, strict=True):
            v, d = jax.jvp(f, (Q[c] if c >= 0 else zero,), (jnp.ones((), Q.dtype),))
            x.append(v)
            dx.append(d * JQ[c] if c >= 0 else jnp.zeros(JQ.shape[1:], Q.dtype))
        return (self.rotation @ jnp.stack(x) + self.offset, self.rotation @ jnp.stack(dx),
                jnp.asarray(True))  # fmt: skip


class OsimConditionalPathPoint(MovingPathPoint):
    """OpenSim's ConditionalPathPoint on any OpenSim coordinate (independent, coupled or locked):
    a fixed point of the body, in the path while ``range[0] <= Q[source] <= range[1]`` with
    ``Q = joint_map.full_coordinates(q)``.

    Attributes:
        body: jaxmb body index (static). point: (3,) m in the jaxmb body frame.
        source: the coordinate's index in the full OpenSim coordinate vector (static).
        range: (2,) closed interval (rad or m). joint_map: the imported model's joint map.
    """

    point: Float[Array, " 3"]
    source: int = eqx.field(static=True)
    range: Float[Array, " 2"]
    joint_map: OsimJointMap
    moves_in_body: ClassVar[bool] = False

    def __init__(self, body, point, source, range, joint_map, name: str = ""):  # noqa: A002
        self.body = body
        self.point = as_array(point)
        self.source = int(source)
        self.range = as_array(range)
        self.joint_map = joint_map
        self.coordinates = ()
        self.knots = as_array(np.zeros((3, 0)))
        self.values = as_array(np.zeros((3, 0)))
        self.name = name

    def evaluate(self, q, nq):
        """(location (3,), zero ∂location/∂q (3, nq), active)."""
        Q = self.joint_map.full_coordinates(q)
        return self.evaluate_from(Q, jnp.zeros(Q.shape + (nq,), Q.dtype))

    def evaluate_from(self, Q, JQ):
        """:meth:`evaluate` from the full OpenSim coordinates Q (nfull,) (∂Q/∂q (nfull, nq) gives
        only the derivative's shape: the point is fixed in its body)."""
        c = Q[self.source]
        active = (c >= self.range[0]) & (c <= self.range[1])
        return self.point, jnp.zeros((3,) + JQ.shape[1:], self.point.dtype), active


def full_coordinates_and_jacobian(joint_map: OsimJointMap, q):
    """(Q (nfull,), ∂Q/∂q (nfull, nq)): the full OpenSim coordinates of ``joint_map`` at q and
    their Jacobian (forward mode), what :meth:`OsimMovingPathPoint.evaluate_from` and
    :meth:`OsimConditionalPathPoint.evaluate_from` read."""
    return joint_map.full_coordinates(q), jax.jacfwd(joint_map.full_coordinates)(q)


@jax.custom_jvp
def clamp_to_range(x, lo, hi):
    """``clip(x, lo, hi)`` with derivative 1 inside, 0 outside and 1/2 at ``lo`` and ``hi``.

    OpenSim's MovingPathPoint clamps its coordinate to the coordinate's range before evaluating
    its functions (``MovingPathPoint::getLocation``), so the path length has a kink at the range
    ends. There the derivative is taken as the mean of the one-sided ones, which is what central
    differences of OpenSim's length give: the seed's protocol holds ``shoulder_elv`` at 0, its
    lower end, in two of the three sweeps.
    """
    return jnp.clip(x, lo, hi)


@clamp_to_range.defjvp
def _clamp_jvp(primals, tangents):
    x, lo, hi = primals
    dx = tangents[0]
    w = jnp.where((x > lo) & (x < hi), 1.0, jnp.where((x == lo) | (x == hi), 0.5, 0.0))
    return jnp.clip(x, lo, hi), w * dx


class FunctionPathPoint(MovingPathPoint):
    """A path point whose body-frame x, y, z (m) are OpenSim functions of one coordinate each.

    ``functions[a]`` (a :class:`jaxmb.io.functions.AbstractFunction`) of ``q[coordinates[a]]``,
    clamped to ``ranges[a]`` as OpenSim does (:func:`clamp_to_range`), gives axis a; its slope is
    taken by forward-mode autodiff (one-sided at an interior knot of a piecewise-linear function,
    as OpenSim's ``calcDerivative``). It is a :class:`~jaxmb.muscles.MovingPathPoint` (its motion
    in its body does work in R) with unused ``knots``/``values``.
    """

    functions: tuple = ()
    ranges: Float[Array, "3 2"] | None = None

    def __init__(self, body, coordinates, functions, ranges=None, name: str = ""):
        self.body = body
        self.coordinates = tuple(coordinates)
        self.functions = tuple(functions)
        r = np.tile([-np.inf, np.inf], (3, 1)) if ranges is None else np.asarray(ranges, float)
        self.ranges = as_array(r)
        self.knots = as_array([[0.0, 1.0]] * 3)
        self.values = as_array(np.zeros((3, 2)))
        self.name = name

    def evaluate(self, q, nq):
        loc, dloc = [], []
        for a, (f, c) in enumerate(zip(self.functions, self.coordinates, strict=True)):
            lo, hi = self.ranges[a, 0], self.ranges[a, 1]
            v, d = jax.jvp(lambda x: f(clamp_to_range(x, lo, hi)), (q[c],), (jnp.ones_like(q[c]),))
            loc.append(v)
            dloc.append(jnp.zeros(nq, v.dtype).at[c].set(d))
        return jnp.stack(loc), jnp.stack(dloc), jnp.asarray(True)
