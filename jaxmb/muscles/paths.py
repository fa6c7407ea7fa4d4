"""Musculotendon paths, muscle lengths and the moment-arm matrix R(q) (seed 001 §4 2-4).

Eqs. 149–195. A musculotendon unit is an ordered path of points over bodies. Its *attachment
sequence* Γ_k (Definition 2) is the sequence of bodies that the path visits; it may skip
parent/child relations and include the ground (body ``-1`` here, "0" in the seed). Path elements:

- :class:`PathPoint`: a point fixed in a body (or the ground).
- :class:`ConditionalPathPoint`: a via point that is part of the path only while one coordinate is
  inside ``range`` (closed interval, as OpenSim's ``ConditionalPathPoint``). The switch is *not*
  smoothed: like OpenSim, the length jumps when the via point appears, and at a switching pose the
  moment arm is the one-sided value of whichever side the pose is on.
- :class:`MovingPathPoint`: a point whose body-frame location is a smooth function of q; each
  coordinate x, y, z is a natural cubic spline of one generalized coordinate (OpenSim's
  ``MovingPathPoint`` with spline functions).
- Wrapping (:class:`WrapCylinder`, :class:`WrapSphere`, :class:`WrapEllipsoid`, :class:`WrapTorus`)
  as OpenSim 4.6 computes it (``GeometryPath::applyWrapObjects``): each :class:`PathWrap` acts on
  a range of path points; at every pose the object wraps every segment of that range (between the
  points active then, tangent points of other objects included), and the first segment the
  straight line crosses ("mandatory") or else the wrap that lengthens its segment least is kept,
  its two tangent points inserted into the path on the object's body. With two or more wrap
  objects this is repeated up to 8 times until the length changes by < 0.5 mm. The per-object
  algorithms are OpenSim's own (:mod:`jaxmb.wrapping`): cylinder (tangent points slid to an apex
  plane, helix; with several objects, OpenSim's tangency iteration), sphere (great circle), torus
  (a cylinder tangent to the centre circle), ellipsoid (OpenSim's "hybrid" Frans/fan wrapping
  plane, iterative tangent points, sampled surface curve). The discrete choices are
  ``jnp.where`` selections, so lengths are differentiable wherever OpenSim's path is smooth.

Evaluation is vectorized so that the compiled program does not grow with the number of muscles:
the points of each muscle are evaluated (cheap, per muscle), then the muscles are split into at most
three groups (no wrap; one wrap object, OpenSim's single-object case; several) and each group is
padded to common point and wrap-slot counts and runs ONE kernel (:func:`_path_kernel`) under
``jax.vmap``: the wrap slots are a ``lax.scan`` (padded slots are no-ops), the wrap type a
``lax.switch`` over the types present (``_WRAP_TYPES``; under ``vmap`` every branch is evaluated),
the quadrant a traced ``(axis, sign)`` (sign 0 = "all"). The GMLAV gradient is vmapped the same way.

Moment arms (the seed's closed form). Every straight segment between consecutive active points on
*different* bodies pulls its first point along the unit vector e and its last point along −e. The
sum of these per body, in body axes, is the GMLAV ``E_ki`` and its moment ``Ê_ki`` (Definitions
3–5, Eqs. 153–160). With γ_i (Eq. 176) and β_i (Eqs. 179–184) from the closed-form kinematics,

    R = Σ_i ( γ_i E_iᵀ + Jᵀ ϑ β_i Ê_iᵀ )                                 (Eq. 193, (nq, nm))

and column k is ``Σ_{i ∈ Γ_k} (γ_i E_ki + Jᵀ ϑ β_i Ê_ki)`` (Eq. 195, ``method="sparse"``). The
pull on each point is computed as f = −∂L/∂x of the path length with respect to the point's ground
position (the unit vector of a straight segment between body-fixed points, as in the seed); it
also covers OpenSim's wrap constructions, whose tangent points are not stationary, and each wrap
object's body takes the reaction (−∂L/∂ of its frame origin and axes). A moving path point adds
``(∂r/∂q)ᵀ F`` (its motion in its body, as OpenSim's ``GeometryPath::addInEquivalentForces``).
``R F_mt`` is the generalized force of the muscle tensions, and ``R = −∂L/∂q``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..joint_maps.coordinate_functions import OsimJointMap
from ..kinematics import kinematics
from ..math.functions import natural_cubic_spline
from ..model import Model, ModelError
from .wrap import algorithms as wr

__all__ = [
    "PathPoint",
    "ConditionalPathPoint",
    "MovingPathPoint",
    "WrapCylinder",
    "WrapSphere",
    "WrapEllipsoid",
    "WrapTorus",
    "PathWrap",
    "MuscleParameters",
    "Muscle",
    "MuscleSet",
    "with_muscles",
    "muscle_lengths",
    "muscle_velocities",
    "moment_arms",
    "lengths_and_moment_arms",
    "moment_arm_terms",
    "path_geometry",
]

_GL_X, _GL_W = np.polynomial.legendre.leggauss(64)


# ----------------------------------------------------------------------------- path elements
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

    def __init__(self, body, location, name: str = ""):
        self.body = body
        self.location = jnp.asarray(location, dtype=float)
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

    def __init__(self, body, location, coordinate, range, name: str = ""):  # noqa: A002
        self.body = body
        self.location = jnp.asarray(location, dtype=float)
        self.coordinate = coordinate
        self.range = jnp.asarray(range, dtype=float)
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

    def __init__(self, body, coordinates, knots, values, name: str = ""):
        self.body = body
        self.coordinates = tuple(coordinates)
        self.knots = jnp.asarray(knots, dtype=float)
        self.values = jnp.asarray(values, dtype=float)
        self.name = name

    def evaluate(self, q, nq):
        loc, dloc = [], []
        for a in range(3):
            v, d = natural_cubic_spline(self.knots[a], self.values[a], q[self.coordinates[a]])
            loc.append(v)
            dloc.append(jnp.zeros(nq, v.dtype).at[self.coordinates[a]].set(d))
        return jnp.stack(loc), jnp.stack(dloc), jnp.asarray(True)


class _WrapObject(eqx.Module):
    body: Any = eqx.field(static=True)
    translation: Float[Array, " 3"]
    rotation: Float[Array, "3 3"]
    quadrant: str = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def _frame(self, body, translation, rotation, quadrant, name):
        self.body = body
        self.translation = jnp.asarray(translation, dtype=float)
        self.rotation = jnp.asarray(rotation, dtype=float)
        self.quadrant = quadrant
        self.name = name


class WrapCylinder(_WrapObject):
    """A cylinder along the wrap frame's z axis, centred at its origin (OpenSim's WrapCylinder).

    Attributes:
        body: body index or name (static). translation: (3,) m, wrap-frame origin in the body frame.
        rotation: (3, 3) wrap-frame axes in the body frame (columns). radius: m.
        length: m (no wrap when both tangent points lie beyond ±length/2; ``inf`` for none).
        quadrant: OpenSim's allowed side ("all", "+x", "-x", "+y", ...).
    """

    radius: Float[Array, ""]
    length: Float[Array, ""]

    def __init__(self, body, translation, rotation, radius, length=np.inf, quadrant="all", name=""):
        self._frame(body, translation, rotation, quadrant, name)
        self.radius = jnp.asarray(radius, dtype=float)
        self.length = jnp.asarray(length, dtype=float)

    def wrap_line(self, p1, p2, single):
        return wr.cylinder_wrap_line(
            p1, p2, self.radius, self.length, wr.QUADRANTS[self.quadrant], single
        )

    def wrap(self, p, s):
        return _wrap_cylinder(p, s, self.radius, self.length, wr.QUADRANTS[self.quadrant])


class WrapEllipsoid(_WrapObject):
    """An ellipsoid, semi-axes ``dimensions`` (m) along the wrap-frame axes.

    Wraps with OpenSim's own WrapEllipsoid algorithm (method "hybrid"),
    :func:`jaxmb.wrapping.ellipsoid_wrap_line`. :meth:`wrap` is the older exact-tangent planar
    section, kept for reference.
    """

    dimensions: Float[Array, " 3"]

    def __init__(self, body, translation, rotation, dimensions, quadrant="all", name=""):
        self._frame(body, translation, rotation, quadrant, name)
        self.dimensions = jnp.asarray(dimensions, dtype=float)

    def wrap_line(self, p1, p2, single):
        return wr.ellipsoid_wrap_line(p1, p2, self.dimensions, wr.QUADRANTS[self.quadrant], single)

    def wrap(self, p, s):
        return _wrap_ellipsoid(p, s, self.dimensions, wr.QUADRANTS[self.quadrant])


class WrapSphere(_WrapObject):
    """A sphere of ``radius`` (m) centred at the wrap-frame origin (OpenSim's WrapSphere)."""

    radius: Float[Array, ""]

    def __init__(self, body, translation, rotation, radius, quadrant="all", name=""):
        self._frame(body, translation, rotation, quadrant, name)
        self.radius = jnp.asarray(radius, dtype=float)

    def wrap_line(self, p1, p2, single):
        return wr.sphere_wrap_line(p1, p2, self.radius, wr.QUADRANTS[self.quadrant])

    def wrap(self, p, s):
        return _wrap_ellipsoid(
            p, s, jnp.broadcast_to(self.radius, (3,)), wr.QUADRANTS[self.quadrant]
        )


class WrapTorus(_WrapObject):
    """A torus about the wrap frame's z axis: tube radius ``inner_radius``, distance from the
    axis to the tube's centre circle ``outer_radius`` (m), OpenSim's WrapTorus parameters."""

    inner_radius: Float[Array, ""]
    outer_radius: Float[Array, ""]

    def __init__(
        self, body, translation, rotation, inner_radius, outer_radius, quadrant="all", name=""
    ):
        self._frame(body, translation, rotation, quadrant, name)
        self.inner_radius = jnp.asarray(inner_radius, dtype=float)
        self.outer_radius = jnp.asarray(outer_radius, dtype=float)

    def wrap_line(self, p1, p2, single):
        return wr.torus_wrap_line(
            p1, p2, self.inner_radius, self.outer_radius, wr.QUADRANTS[self.quadrant], single
        )


class PathWrap(eqx.Module):
    """A wrap object acting on the path points ``start`` … ``end`` (0-based, inclusive, ``-1`` = the
    last point), OpenSim's PathWrap ``range`` (1-based, ``-1`` = all) converted. At every pose the
    object wraps the segment of that range (between the points active then, wrap points of other
    objects included) that OpenSim's ``GeometryPath::applyWrapObjects`` picks. ``segment=k`` is
    shorthand for ``start=k, end=k + 1``."""

    wrap: _WrapObject
    start: int = eqx.field(static=True)
    end: int = eqx.field(static=True)

    def __init__(self, wrap, start: int = 0, end: int = -1, segment: int | None = None):
        self.wrap = wrap
        if segment is not None:
            start, end = int(segment), int(segment) + 1
        self.start, self.end = int(start), int(end)

    @property
    def segment(self) -> int | None:
        """The single segment ``start`` → ``start + 1`` when the range is one segment, else None."""
        return self.start if self.end == self.start + 1 else None


class MuscleParameters(eqx.Module):
    """Hill-type parameters of one musculotendon unit (see :mod:`jaxmb.hill`).

    Attributes:
        max_isometric_force: F_max (N). optimal_fiber_length: l_opt (m).
        tendon_slack_length: l_s (m). pennation_at_optimal: α_opt (rad).
        max_contraction_velocity: v_max in optimal fibre lengths per second (1/s).
    """

    max_isometric_force: Float[Array, ""]
    optimal_fiber_length: Float[Array, ""]
    tendon_slack_length: Float[Array, ""]
    pennation_at_optimal: Float[Array, ""]
    max_contraction_velocity: Float[Array, ""]

    def __init__(
        self,
        max_isometric_force,
        optimal_fiber_length,
        tendon_slack_length,
        pennation_at_optimal=0.0,
        max_contraction_velocity=10.0,
    ):
        self.max_isometric_force = jnp.asarray(max_isometric_force, dtype=float)
        self.optimal_fiber_length = jnp.asarray(optimal_fiber_length, dtype=float)
        self.tendon_slack_length = jnp.asarray(tendon_slack_length, dtype=float)
        self.pennation_at_optimal = jnp.asarray(pennation_at_optimal, dtype=float)
        self.max_contraction_velocity = jnp.asarray(max_contraction_velocity, dtype=float)


class Muscle(eqx.Module):
    """One musculotendon unit: a named path (points in order, origin first) and Hill parameters."""

    name: str = eqx.field(static=True)
    points: tuple
    wraps: tuple = ()
    params: MuscleParameters | None = None


class MuscleSet(eqx.Module):
    """The musculotendon units of a model (``Model.muscles``); ``names`` is static."""

    muscles: tuple
    names: tuple = eqx.field(static=True)

    def __init__(self, muscles: Sequence[Muscle]):
        self.muscles = tuple(muscles)
        self.names = tuple(m.name for m in self.muscles)

    @property
    def params(self) -> MuscleParameters:
        """Hill parameters stacked over muscles, each field (nm,)."""
        ps = [m.params for m in self.muscles]
        if any(p is None for p in ps):
            missing = [m.name for m in self.muscles if m.params is None]
            raise ModelError(f"muscles {missing} have no Hill parameters")
        return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *ps)


def _resolve_body(model: Model, body, where):
    try:
        return model.body_index(body)
    except ModelError as e:
        raise ModelError(f"{where}: {e}") from None


def _resolve_coordinate(model: Model, c, where):
    try:
        return model.coordinate_index(c)
    except ModelError as e:
        raise ModelError(f"{where}: {e}") from None


def _finite(x, where):
    x = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(x)):
        raise ModelError(f"{where} has non-finite entries: {x.tolist()}")
    return x


def with_muscles(model: Model, muscles: Sequence[Muscle] | MuscleSet) -> Model:
    """Validate musculotendon paths against ``model`` and return the model carrying them.

    Body and coordinate names are resolved to indices. Raises :class:`ModelError` naming the muscle
    and the element: fewer than two points, a conditional origin or insertion, a conditional point
    next to a wrap, two wraps on one segment, unknown bodies/coordinates, non-finite numbers, bad
    spline knots, non-positive wrap sizes, a non-orthonormal wrap rotation, an unknown quadrant.
    """
    if isinstance(muscles, MuscleSet):
        muscles = muscles.muscles
    out, names = [], set()
    for mi, mus in enumerate(muscles):
        if not isinstance(mus, Muscle):
            raise ModelError(
                f"muscles[{mi}] is a {type(mus).__name__}, expected jaxmb.muscles.Muscle"
            )
        w = f"muscle {mus.name!r}"
        if mus.name in names:
            raise ModelError(f"{w}: muscle name used more than once")
        names.add(mus.name)
        if len(mus.points) < 2:
            raise ModelError(f"{w}: a path needs at least two points, got {len(mus.points)}")
        pts = []
        for k, p in enumerate(mus.points):
            wp = f"{w}, point {k} {getattr(p, 'name', '')!r}"
            if isinstance(p, PathPoint):
                pts.append(
                    PathPoint(
                        _resolve_body(model, p.body, wp),
                        _finite(p.location, f"{wp} location"),
                        p.name,
                    )
                )
            elif isinstance(p, ConditionalPathPoint):
                if k in (0, len(mus.points) - 1):
                    raise ModelError(f"{wp}: the origin and insertion cannot be conditional")
                r = _finite(p.range, f"{wp} range")
                if r.shape != (2,) or r[0] > r[1]:
                    raise ModelError(f"{wp}: range must be (low, high) with low <= high, got {r}")
                pts.append(
                    ConditionalPathPoint(
                        _resolve_body(model, p.body, wp),
                        _finite(p.location, f"{wp} location"),
                        _resolve_coordinate(model, p.coordinate, wp),
                        r,
                        p.name,
                    )
                )
            elif isinstance(p, MovingPathPoint) and type(p).evaluate != MovingPathPoint.evaluate:
                # a subclass with its own location function (e.g. FunctionPathPoint,
                # OsimMovingPathPoint): kept as it is, body and coordinates resolved
                q = copy.copy(p)
                object.__setattr__(q, "body", _resolve_body(model, p.body, wp))
                cs = tuple(_resolve_coordinate(model, c, wp) for c in p.coordinates)
                object.__setattr__(q, "coordinates", cs)
                pts.append(q)
            elif isinstance(p, MovingPathPoint):
                kn = _finite(p.knots, f"{wp} knots")
                va = _finite(p.values, f"{wp} values")
                if kn.ndim != 2 or kn.shape[0] != 3 or kn.shape != va.shape or kn.shape[1] < 2:
                    raise ModelError(
                        f"{wp}: knots and values must both be (3, K>=2), got "
                        f"{kn.shape} and {va.shape}"
                    )
                if np.any(np.diff(kn, axis=1) <= 0):
                    raise ModelError(f"{wp}: spline knots must be strictly increasing")
                if len(p.coordinates) != 3:
                    raise ModelError(f"{wp}: give one coordinate per axis (3), got {p.coordinates}")
                pts.append(
                    MovingPathPoint(
                        _resolve_body(model, p.body, wp),
                        tuple(_resolve_coordinate(model, c, wp) for c in p.coordinates),
                        kn,
                        va,
                        p.name,
                    )
                )
            else:
                raise ModelError(f"{wp}: unsupported path element {type(p).__name__}")
        wraps = []
        n = len(pts)
        for j, pw in enumerate(mus.wraps):
            wo = getattr(pw, "wrap", None)
            ww = f"{w}, wrap {j} {getattr(wo, 'name', '')!r}"
            if not isinstance(pw, PathWrap) or not isinstance(wo, _WrapObject):
                raise ModelError(f"{ww}: expected PathWrap(wrap_object, start, end)")
            start, end = pw.start, (n - 1 if pw.end == -1 else pw.end)
            if not 0 <= start < end <= n - 1:
                raise ModelError(
                    f"{ww}: point range start={pw.start}, end={pw.end} is not a range of at least "
                    f"two of the {n} path points (0-based, inclusive, -1 = last)"
                )
            if wo.quadrant not in wr.QUADRANTS:
                raise ModelError(
                    f"{ww}: unknown quadrant {wo.quadrant!r}; use one of {list(wr.QUADRANTS)}"
                )
            Rw = _finite(wo.rotation, f"{ww} rotation")
            if Rw.shape != (3, 3) or np.abs(Rw.T @ Rw - np.eye(3)).max() > 1e-9:
                raise ModelError(f"{ww}: rotation must be a 3x3 orthonormal matrix")
            _finite(wo.translation, f"{ww} translation")
            if isinstance(wo, WrapTorus):
                size = np.asarray([wo.inner_radius, wo.outer_radius], dtype=float)
            else:
                size = np.asarray(getattr(wo, "dimensions", getattr(wo, "radius", 1.0)), float)
            if not np.all(np.isfinite(size)) or np.any(size <= 0):
                raise ModelError(f"{ww}: sizes must be positive and finite, got {size}")
            if isinstance(wo, WrapTorus) and not size[0] < size[1]:
                raise ModelError(
                    f"{ww}: torus inner_radius {size[0]} must be below outer_radius {size[1]}"
                )
            if isinstance(wo, WrapCylinder) and not float(wo.length) > 0:
                raise ModelError(f"{ww}: cylinder length must be positive, got {float(wo.length)}")
            body = _resolve_body(model, wo.body, ww)
            wraps.append(PathWrap(dataclasses.replace(wo, body=body), start, end))
        out.append(Muscle(mus.name, tuple(pts), tuple(wraps), mus.params))
    return eqx.tree_at(lambda m: m.muscles, model, MuscleSet(out), is_leaf=lambda x: x is None)


# ----------------------------------------------------------------------------- wrapping geometry
def _safe_norm(v, axis=-1):
    sq = jnp.sum(v * v, axis=axis)
    ok = sq > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def _safe_acos_inv(d):
    """acos(1/d) for d > 1, finite (and with finite gradients) elsewhere."""
    dd = jnp.where(d > 1.0, d, 2.0)
    return jnp.where(d > 1.0, jnp.arccos(1.0 / dd), 0.0)


def _segment_hits(p, s, radius):
    """Does the segment p→s pass within ``radius`` of the origin, strictly inside (0, 1)?"""
    d = s - p
    dd = jnp.sum(d * d)
    t = -jnp.dot(p, d) / jnp.where(dd > 0, dd, 1.0)
    near = p + t * d
    return (t > 0) & (t < 1) & (jnp.sum(near * near) < radius**2), near


def _side_of(sign_axis, point):
    return jnp.where(point >= 0, 1.0, -1.0) == sign_axis


def _wrap_cylinder(p, s, r, length, quadrant):
    """Geodesic wrap of p→s (wrap frame) over the cylinder x² + y² = r² along z.

    Returns (active, T1 (3,), T2 (3,), curve length between T1 and T2).
    """
    p2, s2 = p[:2], s[:2]
    hit, near = _segment_hits(p2, s2, r)
    dp, ds = _safe_norm(p2), _safe_norm(s2)
    outside = (dp > r) & (ds > r)
    ap, as_ = _safe_acos_inv(dp / r), _safe_acos_inv(ds / r)
    thp, ths = jnp.arctan2(p2[1], p2[0]), jnp.arctan2(s2[1], s2[0])
    cross = p2[0] * s2[1] - p2[1] * s2[0]
    sigma0 = jnp.where(cross >= 0, 1.0, -1.0)

    def arc(sigma):
        th1 = thp + sigma * ap
        th2 = ths - sigma * as_
        phi = jnp.mod(sigma * (th2 - th1), 2 * jnp.pi)
        return th1, phi

    if quadrant is None:
        sigma = sigma0
        active = hit
    else:
        ax, sg = quadrant
        th1, phi = arc(sigma0)
        mid = th1 + sigma0 * phi / 2
        mid_xy = jnp.stack([jnp.cos(mid), jnp.sin(mid), 0.0])
        sigma = jnp.where(_side_of(sg, mid_xy[ax]) if ax < 2 else True, sigma0, -sigma0)
        if ax < 2:
            sp, ss = _side_of(sg, p[ax]), _side_of(sg, s[ax])
            opposite = sp != ss
            near_wrong = ~_side_of(sg, near[ax])
            active = (sp | ss) & (hit | (opposite & near_wrong))
        else:
            active = hit
    th1, phi = arc(sigma)
    th2 = th1 + sigma * phi
    t1 = r * jnp.stack([jnp.cos(th1), jnp.sin(th1)])
    t2 = r * jnp.stack([jnp.cos(th2), jnp.sin(th2)])
    a = _safe_norm(p2 - t1)
    b = _safe_norm(t2 - s2)
    D = a + r * phi + b
    Dsafe = jnp.where(D > 0, D, 1.0)
    dz = s[2] - p[2]
    z1 = p[2] + dz * a / Dsafe
    z2 = p[2] + dz * (a + r * phi) / Dsafe
    curve = r * phi * jnp.sqrt(1.0 + (dz / Dsafe) ** 2)
    T1 = jnp.concatenate([t1, z1[None]])
    T2 = jnp.concatenate([t2, z2[None]])
    active = active & outside
    half = 0.5 * length
    beyond = (jnp.abs(z1) > half) & (jnp.abs(z2) > half)
    active = active & ~beyond
    return active, T1, T2, curve


def _wrap_ellipsoid(p, s, dims, quadrant, with_outside=False):
    """Wrap of p→s over the ellipsoid Σ (x_a/dims_a)² = 1 in the plane through p, s and the centre.

    Exact great-circle geodesic when all ``dims`` are equal (a sphere). Returns
    (active, T1, T2, curve length).
    """
    ps, ss = p / dims, s / dims
    hit, _ = _segment_hits(ps, ss, 1.0)
    dp, ds = _safe_norm(ps), _safe_norm(ss)
    outside = (dp > 1.0) & (ds > 1.0)
    e1 = ps / jnp.where(dp > 0, dp, 1.0)
    n = jnp.cross(ps, ss)
    nn = _safe_norm(n)
    n = n / jnp.where(nn > 0, nn, 1.0)
    e2 = jnp.cross(n, e1)
    ths = jnp.arctan2(jnp.dot(ss, e2), jnp.dot(ss, e1))  # in [0, π] by the choice of n
    ap, as_ = _safe_acos_inv(dp), _safe_acos_inv(ds)

    def arc(sigma):
        th1 = sigma * ap
        th2 = ths - sigma * as_
        phi = jnp.mod(sigma * (th2 - th1), 2 * jnp.pi)
        return th1, phi

    sigma = jnp.asarray(1.0)
    if quadrant is not None:
        ax, sg = quadrant
        th1, phi = arc(sigma)
        mid = th1 + phi / 2
        mid_dir = jnp.cos(mid) * e1 + jnp.sin(mid) * e2
        sigma = jnp.where(_side_of(sg, mid_dir[ax]), 1.0, -1.0)
    th1, phi = arc(sigma)
    u1 = jnp.cos(th1) * e1 + jnp.sin(th1) * e2
    th2 = th1 + sigma * phi
    u2 = jnp.cos(th2) * e1 + jnp.sin(th2) * e2
    # curve length ∫ |dims ⊙ du/dθ| dθ over the arc, Gauss–Legendre
    th = th1 + sigma * phi * 0.5 * (jnp.asarray(_GL_X) + 1.0)
    tang = -jnp.sin(th)[:, None] * e1 + jnp.cos(th)[:, None] * e2
    speed = _safe_norm(tang * dims)
    curve = 0.5 * phi * jnp.dot(jnp.asarray(_GL_W), speed)
    if with_outside:
        return hit & outside, u1 * dims, u2 * dims, curve, outside
    return hit & outside, u1 * dims, u2 * dims, curve


# ----------------------------------------------------------------------------- path evaluation
def _homog(A, x):
    return A[:3, :3] @ x + A[:3, 3]


# wrap-frame stand-ins for segments outside a wrap's range, far from any object of unit-ish
# size, so the (discarded) wrap computation there stays finite and has finite gradients
_SAFE_P1 = np.array([7.1, 3.3, 1.7])
_SAFE_P2 = np.array([5.3, -4.1, 2.9])


class _Path(eqx.Module):
    """A current path during OpenSim's wrapping iteration (fixed-size, order by ``key``).

    Slots 0..N-1 are the muscle's points, slots N+2w and N+2w+1 wrap w's tangent points; a slot
    is in the path when its key is finite, and the path runs in increasing key.
    """

    key: Array  # (N+2W,)
    pos: Array  # (N+2W, 3) ground positions (m)
    wlen: Array  # (W,) surface length of each wrap (m)
    # OpenSim 4.6's Point::getLocationInGround cache of each slot (gval: valid). For a wrap point
    # it is filled on first use and never refreshed within a pose: PathWrapPoint::setLocation
    # updates the local location but does not invalidate the inherited ground-position cache, so
    # calcPathLength and calcPathLengthChange see the tangent point of the pass that first asked.
    gpos: Array  # (N+2W, 3)
    gval: Array  # (N+2W,) bool


def _ground(path):
    """Positions as Point::getLocationInGround returns them (cached where the cache is valid)."""
    return jnp.where(path.gval[:, None], path.gpos, path.pos)


def _touch(path, used):
    """Fill the ground-position cache of the slots ``used`` (N+2W,) bool that lack one."""
    fill = used & ~path.gval
    gpos = jnp.where(fill[:, None], path.pos, path.gpos)
    return _Path(path.key, path.pos, path.wlen, gpos, path.gval | used)


def _sorted(path, owner):
    perm = jnp.argsort(path.key)
    return perm, path.key[perm], path.pos[perm], jnp.asarray(owner)[perm]


def _current_length(path, owner):
    """GeometryPath::calcPathLength: straight segments, plus the stored surface length between the
    two tangent points of one wrap object."""
    perm, skey, _, sown = _sorted(path, owner)
    spos = _ground(path)[perm]
    valid = jnp.isfinite(skey[1:])
    same = (sown[:-1] >= 0) & (sown[:-1] == sown[1:])
    wl = path.wlen[jnp.maximum(sown[:-1], 0)] if path.wlen.shape[0] else jnp.zeros_like(skey[1:])
    seg = jnp.where(same, wl, _safe_norm(spos[1:] - spos[:-1]))
    return jnp.sum(jnp.where(valid, seg, 0.0))


def _apply_wrap_unrolled(path, w, pw, frame, active, owner, n, single):
    """One PathWrap's turn in GeometryPath::applyWrapObjects: remove its tangent points, wrap every
    segment of its range, keep the first mandatory wrap or else the wrap that lengthens its segment
    least, insert the tangent points. Returns (path, result code of the last segment tried).

    The per-muscle, per-object form (static wrap object), kept as the referee of the vectorized
    kernel :func:`_path_kernel` in the tests."""
    Rg, pg = frame
    start, end = pw.start, (n - 1 if pw.end == -1 else pw.end)
    return _apply_wrap_segments(
        path,
        w,
        lambda a, b: pw.wrap.wrap_line(a, b, single),
        Rg,
        pg,
        start,
        end,
        active,
        owner,
        n,
    )


def _apply_wrap_segments(
    path, w, wrap_line, Rg, pg, start, end, active, owner, n, screen_line=None
):
    """GeometryPath::applyWrapObjects for wrap slot ``w`` (may be traced) with ``wrap_line(p1, p2)``
    in the wrap frame (Rg (3, 3), pg (3,) in ground) over the points ``start`` … ``end``.

    ``screen_line`` (default ``wrap_line``) wraps the candidate segments to choose one: it must
    give ``wrap_line``'s code, and its tangent points and length wherever the code is WRAPPED
    (only those enter the choice); the kept segment is wrapped by ``wrap_line``."""
    key = path.key.at[n + 2 * w].set(jnp.inf).at[n + 2 * w + 1].set(jnp.inf)
    path = _Path(key, path.pos, path.wlen, path.gpos, path.gval)
    m = key.shape[0]
    idx = jnp.arange(n)
    in_rng = active & (idx >= start) & (idx <= end)
    has = jnp.any(in_rng)
    smp = jnp.argmax(in_rng)
    emp = n - 1 - jnp.argmax(in_rng[::-1])
    j_start = jnp.sum(key < key[smp])
    j_end = jnp.sum(key < key[emp])
    perm, skey, spos, sown = _sorted(path, owner)
    gs = _ground(path)[perm]  # calcPathLengthChange measures from the cached ground positions
    j = jnp.arange(m - 1)
    same = (sown[:-1] >= 0) & (sown[:-1] == sown[1:])
    cand = has & (j >= j_start) & (j < j_end) & ~same
    a, b = spos[:-1], spos[1:]
    to_w = jax.vmap(lambda x: Rg.T @ (x - pg))
    aw = jnp.where(cand[:, None], to_w(a), jnp.asarray(_SAFE_P1))
    bw = jnp.where(cand[:, None], to_w(b), jnp.asarray(_SAFE_P2))
    # every candidate is wrapped only to choose (codes, lengthening: discrete): without derivatives
    code, r1, r2, wl = _wrap_candidates(
        screen_line or wrap_line, cand, jax.lax.stop_gradient(aw), jax.lax.stop_gradient(bw)
    )
    T1 = r1 @ Rg.T + pg
    T2 = r2 @ Rg.T + pg
    mand = cand & (code == wr.MANDATORY_WRAP)
    wrapped = cand & (code == wr.WRAPPED)
    ga, gb = gs[:-1], gs[1:]
    change = _safe_norm(ga - T1) + wl + _safe_norm(gb - T2) - _safe_norm(gb - ga)
    change = jnp.where(wrapped, change, jnp.inf)
    any_mand = jnp.any(mand)
    best = jnp.where(any_mand, jnp.argmax(mand), jnp.argmin(change))
    # segments scanned before the first mandatory wrap: their ends' caches fill when "wrapped"
    measured = wrapped & (~any_mand | (j < jnp.argmax(mand)))
    used = jnp.zeros(m, bool).at[perm[:-1]].max(measured).at[perm[1:]].max(measured)
    path = _touch(path, used)
    found = any_mand | jnp.any(wrapped)
    last = (m - 2) - jnp.argmax(cand[::-1])
    result = jnp.where(any_mand, wr.MANDATORY_WRAP, jnp.where(jnp.any(cand), code[last], 0))
    # the kept wrap once more, differentiably: the same inputs give the same values, and the
    # derivatives (forward and reverse) flow through this one wrap per slot and pass only
    _, r1b, r2b, wlb = _wrap_candidates(wrap_line, found[None], aw[best][None], bw[best][None])
    k0, k1 = skey[best], skey[best + 1]
    i1, i2 = n + 2 * w, n + 2 * w + 1
    key = path.key.at[i1].set(jnp.where(found, k0 + (k1 - k0) / 3.0, jnp.inf))
    key = key.at[i2].set(jnp.where(found, k0 + 2.0 * (k1 - k0) / 3.0, jnp.inf))
    pos = path.pos.at[i1].set(r1b[0] @ Rg.T + pg).at[i2].set(r2b[0] @ Rg.T + pg)
    wlen = path.wlen.at[w].set(jnp.where(found, wlb[0], 0.0))
    return _Path(key, pos, wlen, path.gpos, path.gval), result


def _wrap_candidates(wrap_line, cand, aw, bw):
    """``wrap_line`` on the candidate segments only (cand (m,), ends aw, bw (m, 3)); the others
    return (NO_WRAP, a, b, 0). A ``lax.map`` of ``lax.cond``: unbatched (one pose), only the
    candidates run OpenSim's algorithm; under ``vmap`` over poses both branches run, as before."""
    # remat: reverse mode keeps only the segment ends, not the residuals of every step of the
    # wrap algorithms' inner iterations (tens of MB per pose, batched over passes and slots)
    line = jax.checkpoint(wrap_line)

    def skip(a, b):
        code, r1, r2, wl = jax.eval_shape(line, a, b)
        return (
            jnp.full(code.shape, wr.NO_WRAP, code.dtype),
            a.astype(r1.dtype),
            b.astype(r2.dtype),
            jnp.zeros(wl.shape, wl.dtype),
        )

    return jax.lax.map(lambda x: jax.lax.cond(x[0], line, skip, x[1], x[2]), (cand, aw, bw))


def _initial_path(X, active, nw):
    n = X.shape[0]
    owner = np.concatenate([-np.ones(n, int), np.repeat(np.arange(nw), 2)])
    key = jnp.concatenate(
        [
            jnp.where(active, jnp.arange(n, dtype=X.dtype), jnp.inf),
            jnp.full(2 * nw, jnp.inf, X.dtype),
        ]
    )
    pos = jnp.concatenate([X, jnp.zeros((2 * nw, 3), X.dtype)])
    return _Path(key, pos, jnp.zeros(nw, X.dtype), pos, jnp.arange(n + 2 * nw) < n), owner


def _iterate_wraps(path, apply, nw, owner, length_fn):
    """OpenSim's multi-object loop: up to 8 passes over the wraps until the length changes by
    < 0.5 mm; the first two wraps are swapped once when the first misses and the second has a
    point inside. ``apply(path, i, swapped)`` applies the wrap in position i of a pass."""
    n = path.key.shape[0] - 2 * nw

    def one_pass(state, kk):
        # a converged path skips the pass (a real branch for one pose; a select under vmap)
        return jax.lax.cond(state[2], lambda s: s, lambda s: next_pass(s, kk), state), None

    def next_pass(state, kk):
        path, last, done, swapped = state
        new, results = apply(path, swapped)
        length = length_fn(new, owner)
        new = _touch(new, jnp.isfinite(new.key))  # calcPathLength asked every point in the path
        conv = jnp.abs(length - last) < 0.0005
        swap = (kk == 0) & ~conv & (results[0] == wr.NO_WRAP) & (results[1] == wr.INSIDE_RADIUS)
        k_sw = new.key.at[n].set(jnp.inf).at[n + 1].set(jnp.inf)
        new = _Path(jnp.where(swap, k_sw, new.key), new.pos, new.wlen, new.gpos, new.gval)
        keep = jax.tree_util.tree_map(lambda x, y: jnp.where(done, x, y), path, new)
        state = (
            keep,
            jnp.where(done | conv, last, length),
            done | conv,
            swapped | (swap & ~done),
        )
        return state

    dtype = path.pos.dtype
    init = (path, jnp.asarray(jnp.inf, dtype), jnp.asarray(False), jnp.asarray(False))
    (path, _, _, _), _ = jax.lax.scan(one_pass, init, jnp.arange(8))
    return path


def _wrapped_path_unrolled(mus: Muscle, X, active, frames):
    """OpenSim's GeometryPath::applyWrapObjects for one muscle, unrolled over its wrap objects (the
    straightforward per-muscle form; the referee of :func:`_path_kernel` in the tests).

    Same arguments and result as :func:`_wrapped_path`."""
    n, nw = X.shape[0], len(mus.wraps)
    path, owner = _initial_path(X, active, nw)
    if nw == 0:
        return _current_length(path, owner), path
    single = nw == 1

    def apply(path, w):
        return _apply_wrap_unrolled(path, w, mus.wraps[w], frames[w], active, owner, n, single)

    if single:
        path, _ = apply(path, 0)
        return _current_length(path, owner), path

    def one_pass(path, swapped):
        new, results = path, []
        for i in range(nw):
            if i < 2:
                pa, ra = apply(new, i)
                pb, rb = apply(new, 1 - i)
                new = jax.tree_util.tree_map(lambda x, y: jnp.where(swapped, y, x), pa, pb)
                results.append(jnp.where(swapped, rb, ra))
            else:
                new, r = apply(new, i)
                results.append(r)
        return new, results

    path = _iterate_wraps(path, one_pass, nw, owner, _current_length)
    return _current_length(path, owner), path


# ----------------------------------------------------------------------------- vectorized kernel
# Every wrap-object type's line function with one signature, ``(p1, p2, size (3,), axis, sign,
# single) -> (code, r1, r2, wrap_length)`` (wrap frame, m; axis/sign the quadrant, sign 0 = "all",
# both traced; single static). The kernel picks the type with lax.switch over the types present.
def _cylinder_line(p1, p2, size, axis, sign, single):
    return wr.cylinder_wrap_line(p1, p2, size[0], size[1], (axis, sign), single)


def _cylinder_screen(p1, p2, size, axis, sign, single):
    # the code does not depend on OpenSim's multi-object tangent sliding, and the choice reads
    # tangent points and length only where the code is WRAPPED: slide only there
    first = wr.cylinder_wrap_line(p1, p2, size[0], size[1], (axis, sign), True)
    if single:
        return first
    return jax.lax.cond(
        first[0] == wr.WRAPPED,
        lambda: wr.cylinder_wrap_line(p1, p2, size[0], size[1], (axis, sign), False),
        lambda: first,
    )


def _sphere_line(p1, p2, size, axis, sign, single):
    return wr.sphere_wrap_line(p1, p2, size[0], (axis, sign))


def _ellipsoid_line(p1, p2, size, axis, sign, single):
    return wr.ellipsoid_wrap_line(p1, p2, size, (axis, sign), single)


def _ellipsoid_screen(p1, p2, size, axis, sign, single):
    # the ellipsoid's code is never WRAPPED: the choice needs the code alone
    return wr.ellipsoid_wrap_code(p1, p2, size), p1, p2, jnp.zeros((), p1.dtype)


def _torus_line(p1, p2, size, axis, sign, single):
    return wr.torus_wrap_line(p1, p2, size[0], size[1], (axis, sign), single)


# (wrap-object class, its size parameters (3,), line function, screen function: the line's code,
# and its tangent points and length where the code is WRAPPED); a new type is one more row
_WRAP_TYPES = (
    (WrapCylinder, lambda w: (w.radius, w.length, 1.0), _cylinder_line, _cylinder_screen),
    (WrapSphere, lambda w: (w.radius, 1.0, 1.0), _sphere_line, _sphere_line),
    (WrapEllipsoid, lambda w: w.dimensions, _ellipsoid_line, _ellipsoid_screen),
    (WrapTorus, lambda w: (w.inner_radius, w.outer_radius, 1.0), _torus_line, _torus_line),
)


def _wrap_type(wo) -> int:
    for t, (cls, *_) in enumerate(_WRAP_TYPES):
        if type(wo) is cls:
            return t
    for t, (cls, *_) in enumerate(_WRAP_TYPES):
        if isinstance(wo, cls):
            return t
    raise ModelError(f"wrap object {wo.name!r}: unsupported type {type(wo).__name__}")


class _WrapSlots(eqx.Module):
    """The wrap objects of one muscle as padded arrays (W slots).

    R (W, 3, 3), p (W, 3): wrap frames in ground; size (W, 3); kind (W,) index into the kernel's
    type table; axis (W,), sign (W,): quadrant (sign 0 = "all"); start, end (W,): point range
    (0-based, inclusive, resolved); valid (W,): slot holds a wrap object.
    """

    R: Array
    p: Array
    size: Array
    kind: Array
    axis: Array
    sign: Array
    start: Array
    end: Array
    valid: Array


def _path_kernel(X, active, slots: _WrapSlots, types: tuple, single: bool):
    """OpenSim's GeometryPath::applyWrapObjects for one muscle with padded wrap slots, the loop over
    slots a ``lax.scan`` and the wrap type a ``lax.switch`` over ``types`` ((line, screen)
    function pairs, rows of ``_WRAP_TYPES``), so that one program serves every muscle. Padded
    slots are no-ops.

    X: (N, 3) ground positions (m); active: (N,). Returns (length, path) as
    :func:`_wrapped_path`; path slots N + 2w, N + 2w + 1 are slot w's tangent points.
    """
    n, nw = X.shape[0], slots.R.shape[0]
    path, owner = _initial_path(X, active, nw)
    if nw == 0:
        return _current_length(path, owner), path

    def switch(fs, w):
        branches = [(lambda f: lambda *a: f(*a, single))(f) for f in fs]

        def line(a, b):
            args = (a, b, slots.size[w], slots.axis[w], slots.sign[w])
            if len(branches) == 1:
                return branches[0](*args)
            return jax.lax.switch(slots.kind[w], branches, *args)

        return line

    def apply(path, w):
        line, screen = (switch([t[k] for t in types], w) for k in (0, 1))
        new, result = _apply_wrap_segments(
            path,
            w,
            line,
            slots.R[w],
            slots.p[w],
            slots.start[w],
            slots.end[w],
            active,
            owner,
            n,
            screen,
        )
        new = jax.tree_util.tree_map(lambda x, y: jnp.where(slots.valid[w], x, y), new, path)
        return new, result

    if single:
        path, _ = apply(path, 0)
        return _current_length(path, owner), path

    def one_pass(path, swapped):
        def slot(p, i):
            return apply(p, jnp.where(swapped & (i < 2), 1 - i, i))

        return jax.lax.scan(slot, path, jnp.arange(nw))

    path = _iterate_wraps(path, one_pass, nw, owner, _current_length)
    return _current_length(path, owner), path


def _wrap_slots(mus: Muscle, frames, W: int, kinds: list[int], n: int) -> _WrapSlots:
    """Pad one muscle's wraps to W slots; ``kinds``: the table rows present, in branch order."""
    nw = len(mus.wraps)
    dtype = frames[0][0].dtype if nw else jnp.zeros(()).dtype
    R = jnp.asarray([f[0] for f in frames] + [jnp.eye(3, dtype=dtype)] * (W - nw), dtype)
    p = jnp.asarray([f[1] for f in frames] + [jnp.zeros(3, dtype)] * (W - nw), dtype)
    size, kind, axis, sign, start, end = [], [], [], [], [], []
    for pw in mus.wraps:
        t = _wrap_type(pw.wrap)
        size.append(jnp.asarray(_WRAP_TYPES[t][1](pw.wrap), dtype).reshape(3))
        kind.append(kinds.index(t))
        q = wr.QUADRANTS[pw.wrap.quadrant]
        axis.append(0 if q is None else q[0])
        sign.append(0.0 if q is None else q[1])
        start.append(pw.start)
        end.append(n - 1 if pw.end == -1 else pw.end)
    pad = W - nw
    size = jnp.stack(size + [jnp.ones(3, dtype)] * pad) if W else jnp.zeros((0, 3), dtype)
    return _WrapSlots(
        R.reshape(W, 3, 3),
        p.reshape(W, 3),
        size,
        jnp.asarray(kind + [0] * pad, jnp.int32),
        jnp.asarray(axis + [0] * pad, jnp.int32),
        jnp.asarray(sign + [0.0] * pad, dtype),
        jnp.asarray(start + [0] * pad, jnp.int32),
        jnp.asarray(end + [-1] * pad, jnp.int32),
        jnp.asarray([True] * nw + [False] * pad),
    )


def _kinds(muscles) -> list[int]:
    return sorted({_wrap_type(pw.wrap) for mus in muscles for pw in mus.wraps})


def _wrapped_path(mus: Muscle, X, active, frames):
    """OpenSim's GeometryPath::applyWrapObjects for one muscle at one pose (the kernel, unpadded).

    X: (N, 3) ground positions of the path points; active: (N,) bool; frames: per PathWrap the
    wrap frame's ground pose (R (3, 3), p (3,)). With two or more wrap objects the wraps are
    re-applied up to 8 times until the length changes by less than 0.5 mm, and the first two are
    swapped once when the first misses and the second has a point inside. Returns (length, path).
    """
    kinds = _kinds([mus])
    slots = _wrap_slots(mus, frames, len(mus.wraps), kinds, X.shape[0])
    types = tuple(_WRAP_TYPES[t][2:] for t in kinds)
    return _path_kernel(X, active, slots, types, len(mus.wraps) == 1)


def _poses_ext(model: Model, A):
    eye = jnp.eye(4, dtype=A.dtype)[None]
    return jnp.concatenate([A, eye], axis=0)


def _muscle_set(model: Model) -> MuscleSet:
    if model.muscles is None or not isinstance(model.muscles, MuscleSet):
        raise ModelError(f"model {model.name!r} has no muscles; attach them with with_muscles()")
    return model.muscles


def _path_inputs(mus: Muscle, A_ext, q, nq):
    """Body-frame and ground positions of the points, ∂location/∂q, active mask, wrap frames."""
    evals = [p.evaluate(q, nq) for p in mus.points]
    local = jnp.stack([e[0] for e in evals])
    dlocal = jnp.stack([e[1] for e in evals])
    active = jnp.stack([e[2] for e in evals])
    X = jnp.stack([_homog(A_ext[p.body], e[0]) for p, e in zip(mus.points, evals, strict=True)])
    frames = []
    for pw in mus.wraps:
        Ab = A_ext[pw.wrap.body]
        frames.append((Ab[:3, :3] @ pw.wrap.rotation, _homog(Ab, pw.wrap.translation)))
    return local, dlocal, active, X, tuple(frames)


class _Group(eqx.Module):
    """The muscles of one kernel call, padded to N points and W wrap slots (leading axis: muscle).

    X, local (G, N, 3) m; dlocal (G, N, 3, nq); active (G, N); slots: :class:`_WrapSlots` with a
    leading G axis. Static: the muscles' indices, the kernel's type table, ``single``, the bodies
    (``nb`` = ground) of the points (G, N) and wraps (G, W), the wraps' translations (G, W, 3).
    """

    X: Array
    local: Array
    dlocal: Array
    active: Array
    slots: _WrapSlots
    wrap_translation: Array
    index: tuple = eqx.field(static=True)
    types: tuple = eqx.field(static=True)
    single: bool = eqx.field(static=True)
    body: tuple = eqx.field(static=True)
    wrap_body: tuple = eqx.field(static=True)

    def lengths_and_paths(self):
        """Per muscle (length (G,), path), one kernel mapped over the muscles."""
        return _over_muscles(
            lambda X, a, s: _path_kernel(X, a, s, self.types, self.single),
            self.slots.R.shape[1],
            self.X,
            self.active,
            self.slots,
        )


def _over_muscles(f, nw, *args):
    """``f`` over the leading (muscle) axis of ``args``: ``vmap`` without wrap objects; with them
    ``lax.map``, so that each muscle's wrap type is a real ``lax.switch`` branch and the skipped
    passes and non-candidate segments are not computed (under ``vmap`` every branch would run for
    every muscle: 28 ellipsoid evaluations per arm26 pose instead of 2)."""
    if nw == 0:
        return jax.vmap(f)(*args)
    return jax.lax.map(lambda a: f(*a), args)


def _groups(model: Model, A_ext, q) -> list[_Group]:
    """The muscles split by wrap count (none; one, OpenSim's single-object case; several), each
    group padded for one vmapped kernel; the compiled program does not grow with the muscles."""
    ms = _muscle_set(model)
    nb, nq = model.nb, model.nq
    cats: dict[int, list[int]] = {}
    for m, mus in enumerate(ms.muscles):
        cats.setdefault(min(len(mus.wraps), 2), []).append(m)
    out = []
    for cat, idx in sorted(cats.items()):
        muscles = [ms.muscles[m] for m in idx]
        N = max(len(mus.points) for mus in muscles)
        W = max(len(mus.wraps) for mus in muscles)
        kinds = _kinds(muscles)
        cols = {k: [] for k in ("X", "local", "dlocal", "active", "slots", "wt")}
        body, wbody = [], []
        for mus in muscles:
            local, dlocal, active, X, frames = _path_inputs(mus, A_ext, q, nq)
            n, pad = X.shape[0], N - X.shape[0]
            cols["X"].append(jnp.concatenate([X, jnp.zeros((pad, 3), X.dtype)]))
            cols["local"].append(jnp.concatenate([local, jnp.zeros((pad, 3), X.dtype)]))
            cols["dlocal"].append(jnp.concatenate([dlocal, jnp.zeros((pad, 3, nq), X.dtype)]))
            cols["active"].append(jnp.concatenate([active, jnp.zeros(pad, bool)]))
            cols["slots"].append(_wrap_slots(mus, frames, W, kinds, n))
            wt = [pw.wrap.translation for pw in mus.wraps]
            cols["wt"].append(jnp.asarray(wt + [jnp.zeros(3, X.dtype)] * (W - len(wt)), X.dtype))
            body.append(tuple(nb if p.body < 0 else p.body for p in mus.points) + (nb,) * pad)
            wb = [nb if pw.wrap.body < 0 else pw.wrap.body for pw in mus.wraps]
            wbody.append(tuple(wb) + (nb,) * (W - len(wb)))
        stack = lambda xs: jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)  # noqa: E731
        out.append(
            _Group(
                stack(cols["X"]),
                stack(cols["local"]),
                stack(cols["dlocal"]),
                stack(cols["active"]),
                stack(cols["slots"]),
                stack(cols["wt"]),
                tuple(idx),
                tuple(_WRAP_TYPES[t][2:] for t in kinds),
                cat == 1,
                tuple(body),
                tuple(wbody),
            )
        )
    return out


def muscle_lengths(model: Model, q: Float[Array, " nq"]) -> Float[Array, " nm"]:
    """Musculotendon path lengths L(q) (m), shape (nm,), as OpenSim 4.6 computes them.

    Batching over poses: wrapped paths branch (OpenSim's segment choice, its multi-object passes,
    early-exit iterations), and under ``jax.vmap`` every branch runs for every pose. On a CPU map
    over poses with ``jax.lax.map`` instead (arm26's moment arms: 3.5 ms per pose with lax.map,
    102 ms with vmap; ``benchmarks/moment_arms.py``); paths without wrap objects vmap well.
    """
    ms = _muscle_set(model)
    k = kinematics(model, q, second_order=False)
    A_ext = _poses_ext(model, k.A)
    L = jnp.zeros(len(ms.muscles), A_ext.dtype)
    for g in _groups(model, A_ext, q):
        L = L.at[np.asarray(g.index)].set(g.lengths_and_paths()[0])
    return L


def path_geometry(model: Model, q, muscle: int | str):
    """One muscle's current path at q: ground positions (n, 3), body indices (n,) and a mask (n,)
    of the entries in the path, in path order (wrap tangent points included where a wrap is on;
    entries not in the path come last), n = points + 2 × wrap objects."""
    ms = _muscle_set(model)
    i = ms.names.index(muscle) if isinstance(muscle, str) else int(muscle)
    mus = ms.muscles[i]
    k = kinematics(model, q, second_order=False)
    _, _, active, X, frames = _path_inputs(mus, _poses_ext(model, k.A), q, model.nq)
    _, path = _wrapped_path(mus, X, active, frames)
    n, nw = len(mus.points), len(mus.wraps)
    bodies = np.asarray(
        [p.body for p in mus.points] + [pw.wrap.body for pw in mus.wraps for _ in (0, 1)], int
    )
    owner = np.concatenate([-np.ones(n, int), np.repeat(np.arange(nw), 2)])
    perm, skey, spos, _ = _sorted(path, owner)
    return spos, jnp.asarray(bodies)[perm], jnp.isfinite(skey)


# ----------------------------------------------------------------------------- moment arms
def moment_arm_terms(model: Model, kin):
    """γ_i (Eq. 176), shape (nb, nq, 3), and β_i (Eq. 179), shape (nb, nb, 3), in body-i axes.

    ``γ_i[l]`` is ∂(origin of body i)/∂q_l in body-i axes; ``β_i[j]`` is joint j's rotation axis in
    body-i axes for j ∈ Anc(i) ∪ {i} (zero otherwise), so that the body's virtual rotation is
    ``β_iᵀ ϑ J δq``.
    """
    A = kin.A
    nb = model.nb
    Rm, p = A[:, :3, :3], A[:, :3, 3]
    par = np.where(np.asarray(model.parent) < 0, nb, model.parent)
    R_par = jnp.concatenate([Rm, jnp.eye(3, dtype=A.dtype)[None]], axis=0)[par]
    omega = jnp.einsum("jab,jb->ja", R_par, model.axis_theta)  # pr(j)A V_θj in ground axes
    slide = jnp.einsum("jab,jb->ja", R_par, model.axis_d)  # pr(j)A V_dj in ground axes
    rev = jnp.asarray(model.is_revolute)
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    lever = p[:, None, :] - p[None, :, :]  # (i, j, 3): p_i - p_j
    u = jnp.where(rev[None, :, None], jnp.cross(omega[None, :, :], lever), slide[None, :, :])
    u_i = jnp.einsum("iba,ijb->ija", Rm, u)  # in body-i axes
    gamma = jnp.einsum("ij,jl,ija->ila", anc, kin.J, u_i)
    beta = anc[:, :, None] * jnp.einsum("iba,jb->ija", Rm, omega)
    return gamma, beta


def _gmlav(model: Model, q, kin):
    """Per muscle: the GMLAV E_ki and its moment Ê_ki of every body (Definitions 3–5), and the
    moving-point term. Returns E (nb, nm, 3), Ê (nb, nm, 3), R_moving (nq, nm) and the path
    lengths L (nm,) (the same pass: one evaluation of the paths gives both).

    The pull of the path on each of its points is f = −∂L/∂x (ground), the derivative of the
    path length with respect to that point's ground position at fixed wrap objects; between two
    body-fixed points this is the unit vector of the straight segment, as in Eq. 153. A wrap
    object's body takes the reaction of its wrap: the force −∂L/∂p at its frame origin p and the
    couple −Σ_j R_j × ∂L/∂R_j of its frame axes R_j.
    """
    ms = _muscle_set(model)
    nb, nq = model.nb, model.nq
    A_ext = _poses_ext(model, kin.A)
    E = jnp.zeros((nb + 1, len(ms.muscles), 3), kin.A.dtype)
    Eh = jnp.zeros_like(E)
    R_mov = jnp.zeros((nq, len(ms.muscles)), kin.A.dtype)
    L = jnp.zeros(len(ms.muscles), kin.A.dtype)
    for g in _groups(model, A_ext, q):

        def length(X, R, p, active, slots, g=g):
            slots = eqx.tree_at(lambda s: (s.R, s.p), slots, (R, p))
            return _path_kernel(X, active, slots, g.types, g.single)[0]

        Lg, (gX, gR, gp) = _over_muscles(
            jax.value_and_grad(length, argnums=(0, 1, 2)),
            g.slots.R.shape[1],
            g.X,
            g.slots.R,
            g.slots.p,
            g.active,
            g.slots,
        )
        m = np.asarray(g.index)
        L = L.at[m].set(Lg)
        slot = np.asarray(g.body)
        Rb = A_ext[slot, :3, :3]
        F = -jnp.einsum("gkba,gkb->gka", Rb, gX)  # body axes
        E = E.at[slot, m[:, None]].add(F)
        Eh = Eh.at[slot, m[:, None]].add(jnp.cross(g.local, F))
        R_mov = R_mov.at[:, m].set(jnp.einsum("gkal,gka->lg", g.dlocal, F))
        if gR.shape[1]:
            sb = np.asarray(g.wrap_body)
            Rwb = A_ext[sb, :3, :3]
            Fw = -jnp.einsum("gwba,gwb->gwa", Rwb, gp)
            axes = jnp.sum(jnp.cross(jnp.swapaxes(g.slots.R, -1, -2), jnp.swapaxes(gR, -1, -2)), -2)
            couple = -jnp.einsum("gwba,gwb->gwa", Rwb, axes)
            E = E.at[sb, m[:, None]].add(Fw)
            Eh = Eh.at[sb, m[:, None]].add(jnp.cross(g.wrap_translation, Fw) + couple)
    return E[:nb], Eh[:nb], R_mov, L


def moment_arms(
    model: Model, q: Float[Array, " nq"], method: str = "dense"
) -> Float[Array, "nq nm"]:
    """The moment-arm matrix R(q) (m or m/m per coordinate unit), shape (nq, nm), closed form.

    ``method="dense"``: Eq. 193, ``R = Σ_i γ_i E_iᵀ + Jᵀ ϑ β_i Ê_iᵀ`` over all bodies.
    ``method="sparse"``: Eq. 195, column k summed over the bodies of its attachment sequence Γ_k.
    Both add the moving-path-point term. ``R = −∂L/∂q``; ``R F`` is the generalized muscle force.
    Over many poses of wrapped paths prefer ``jax.lax.map`` to ``jax.vmap`` on a CPU (see
    :func:`muscle_lengths`).
    """
    return lengths_and_moment_arms(model, q, method)[1]


def lengths_and_moment_arms(
    model: Model, q: Float[Array, " nq"], method: str = "dense"
) -> tuple[Float[Array, " nm"], Float[Array, "nq nm"]]:
    """Path lengths L(q) (nm,) m and the moment-arm matrix R(q) (nq, nm) from one evaluation of the
    paths (the GMLAV's derivative pass also gives the lengths): what :func:`muscle_lengths` and
    :func:`moment_arms` return, at about the cost, and the compile time, of the latter alone.
    """
    ms = _muscle_set(model)
    kin = kinematics(model, q, second_order=False)
    gamma, beta = moment_arm_terms(model, kin)
    E, Eh, R_mov, L = _gmlav(model, q, kin)
    rev = jnp.asarray(model.is_revolute, dtype=kin.J.dtype)
    if method == "dense":
        R = jnp.einsum("ila,ima->lm", gamma, E) + jnp.einsum(
            "jl,j,ija,ima->lm", kin.J, rev, beta, Eh
        )
    elif method == "sparse":
        cols = []
        for m, mus in enumerate(ms.muscles):
            gamma_seq = sorted(
                ({p.body for p in mus.points} | {pw.wrap.body for pw in mus.wraps}) - {-1}
            )
            col = jnp.zeros(model.nq, kin.J.dtype)
            for i in gamma_seq:
                if i < 0:
                    continue
                col = col + gamma[i] @ E[i, m] + kin.J.T @ (rev * (beta[i] @ Eh[i, m]))
            cols.append(col)
        R = jnp.stack(cols, axis=1)
    else:
        raise ValueError(f"moment_arms: unknown method {method!r}; use 'dense' or 'sparse'")
    return L, R + R_mov


def muscle_velocities(model: Model, q, qd) -> Float[Array, " nm"]:
    """Musculotendon lengthening velocities dL/dt = −R(q)ᵀ q̇ (m/s), shape (nm,)."""
    return -moment_arms(model, q).T @ qd


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
        self.rotation = jnp.asarray(rotation, dtype=float)
        self.offset = jnp.asarray(offset, dtype=float)
        self.coordinates = tuple(
            c for c in sorted({int(c) for c in sources if c >= 0}) if c in joint_map.independent
        )
        self.knots = jnp.zeros((3, 0))
        self.values = jnp.zeros((3, 0))
        self.name = name

    def location(self, q: Float[Array, " nq"]) -> Float[Array, " 3"]:
        """Position in the jaxmb body frame (m), shape (3,)."""
        Q = self.joint_map.full_coordinates(q)
        zero = jnp.zeros((), dtype=Q.dtype)
        x = jnp.stack(
            [f(Q[c] if c >= 0 else zero) for f, c in zip(self.functions, self.sources, strict=True)]
        )
        return self.rotation @ x + self.offset

    def evaluate(self, q, nq):
        """(location (3,), ∂location/∂q (3, nq), active) — the contract of jaxmb's path points."""
        return self.location(q), jax.jacfwd(self.location)(q), jnp.asarray(True)


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
        self.ranges = jnp.asarray(r)
        self.knots = jnp.asarray([[0.0, 1.0]] * 3)
        self.values = jnp.zeros((3, 2))
        self.name = name

    def evaluate(self, q, nq):
        loc, dloc = [], []
        for a, (f, c) in enumerate(zip(self.functions, self.coordinates, strict=True)):
            lo, hi = self.ranges[a, 0], self.ranges[a, 1]
            v, d = jax.jvp(lambda x: f(clamp_to_range(x, lo, hi)), (q[c],), (jnp.ones_like(q[c]),))
            loc.append(v)
            dloc.append(jnp.zeros(nq, v.dtype).at[c].set(d))
        return jnp.stack(loc), jnp.stack(dloc), jnp.asarray(True)


