"""Musculotendon units: a path (points in order, origin first, and the wrap objects acting on its
point ranges) and Hill parameters, and their validation against a model (:func:`with_muscles`).

``__all__`` lists every element type a path is built from (points, wrap objects, :class:`PathWrap`,
:class:`MuscleParameters`, :class:`Muscle`, :class:`MuscleSet`): the vocabulary the model-file
reader and writer (:mod:`jaxmb.io.model_file`) and the OpenSim importer resolve type names in.
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

from ..math.functions import as_array
from ..model import Model, ModelError
from .checks import check_muscle_parameters
from .points import ConditionalPathPoint, MovingPathPoint, PathPoint
from .wrap import QUADRANTS, AbstractWrapObject, WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus

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
]


class PathWrap(eqx.Module):
    """A wrap object acting on the path points ``start`` … ``end`` (0-based, inclusive, ``-1`` = the
    last point), OpenSim's PathWrap ``range`` (1-based, ``-1`` = all) converted. At every pose the
    object wraps the segment of that range (between the points active then, wrap points of other
    objects included) that OpenSim's ``GeometryPath::applyWrapObjects`` picks. ``segment=k`` is
    shorthand for ``start=k, end=k + 1``."""

    wrap: AbstractWrapObject
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
        self.max_isometric_force = as_array(max_isometric_force)
        self.optimal_fiber_length = as_array(optimal_fiber_length)
        self.tendon_slack_length = as_array(tendon_slack_length)
        self.pennation_at_optimal = as_array(pennation_at_optimal)
        self.max_contraction_velocity = as_array(max_contraction_velocity)

    def __check_init__(self):
        check_muscle_parameters(self)


class Muscle(eqx.Module):
    """One musculotendon unit: a named path (points in order, origin first) and Hill parameters."""

    name: str = eqx.field(static=True)
    points: tuple
    wraps: tuple = ()
    params: MuscleParameters | None = None


class MuscleSet(eqx.Module):
    """The musculotendon units of a model (``Model.muscles``); ``names`` is static. ``fit``:
    ``None`` (the exact paths), or the polynomial paths of :func:`~jaxmb.muscles.fit_paths`
    (:class:`~jaxmb.muscles.path_fit.FittedPaths`), which lengths and moment arms then evaluate."""

    muscles: tuple
    names: tuple = eqx.field(static=True)
    fit: Any = None

    def __init__(self, muscles: Sequence[Muscle], fit=None):
        self.muscles = tuple(muscles)
        self.names = tuple(m.name for m in self.muscles)
        self.fit = fit

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
            if not isinstance(pw, PathWrap) or not isinstance(wo, AbstractWrapObject):
                raise ModelError(f"{ww}: expected PathWrap(wrap_object, start, end)")
            start, end = pw.start, (n - 1 if pw.end == -1 else pw.end)
            if not 0 <= start < end <= n - 1:
                raise ModelError(
                    f"{ww}: point range start={pw.start}, end={pw.end} is not a range of at least "
                    f"two of the {n} path points (0-based, inclusive, -1 = last)"
                )
            if wo.quadrant not in QUADRANTS:
                raise ModelError(
                    f"{ww}: unknown quadrant {wo.quadrant!r}; use one of {list(QUADRANTS)}"
                )
            Rw = _finite(wo.rotation, f"{ww} rotation")
            if Rw.shape != (3, 3) or np.abs(Rw.T @ Rw - np.eye(3)).max() > 1e-9:
                raise ModelError(f"{ww}: rotation must be a 3x3 orthonormal matrix")
            _finite(wo.translation, f"{ww} translation")
            wo.check(ww)
            body = _resolve_body(model, wo.body, ww)
            wraps.append(PathWrap(dataclasses.replace(wo, body=body), start, end))
        out.append(Muscle(mus.name, tuple(pts), tuple(wraps), mus.params))
    return eqx.tree_at(lambda m: m.muscles, model, MuscleSet(out), is_leaf=lambda x: x is None)
