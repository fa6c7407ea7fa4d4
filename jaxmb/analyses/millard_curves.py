"""Millard2012 muscle curves as OpenSim 4.6 builds them: segmented quintic Bézier curves.

``SmoothSegmentedFunctionFactory::createFiberActiveForceLengthCurve`` (five segments) and
``createFiberForceVelocityCurve`` (four segments) place each segment's six control points with
``SegmentedQuinticBezierToolkit::calcQuinticBezierCornerControlPoints`` from the curve's
properties (``ActiveForceLengthCurve``, ``ForceVelocityCurve``; curviness scaled as
``0.1 + 0.8 c``). A value at x is the Bézier y(u) at the u with x(u) = x (Newton's method, as
``calcU``), and outside the curve's x range the end value plus the end slope times the distance
(``SmoothSegmentedFunction``). Control points are built here in NumPy per muscle; evaluation is
JAX (fixed Newton iterations from a linear guess, so it is differentiable).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..math.functions import as_array

__all__ = [
    "MillardCurves",
    "corner_control_points",
    "active_force_length_points",
    "force_velocity_points",
    "millard_curves",
]

_BINOM5 = np.array([1.0, 5.0, 10.0, 10.0, 5.0, 1.0])
_BINOM4 = np.array([1.0, 4.0, 6.0, 4.0, 1.0])


def corner_control_points(x0, y0, dydx0, x1, y1, dydx1, curviness):
    """``calcQuinticBezierCornerControlPoints``: (x (6,), y (6,)) of one segment."""
    root_eps = math.sqrt(np.finfo(float).eps)
    if abs(dydx0 - dydx1) > root_eps:
        xc = (y1 - y0 - x1 * dydx1 + x0 * dydx0) / (dydx0 - dydx1)
    else:
        xc = (x1 + x0) / 2
    yc = (xc - x1) * dydx1 + y1
    x0m, y0m = x0 + curviness * (xc - x0), y0 + curviness * (yc - y0)
    x1m, y1m = x1 + curviness * (xc - x1), y1 + curviness * (yc - y1)
    return np.array([x0, x0m, x0m, x1m, x1m, x1]), np.array([y0, y0m, y0m, y1m, y1m, y1])


def _scale(c):
    return 0.1 + 0.8 * c


def active_force_length_points(x0=0.47 - 0.0259, x1=0.73, x3=1.8123, ylow=0.1, dydx=0.8616):
    """Control points (5, 6) x and y and the end data of the active force–length curve
    (``x2 = 1``, curviness 1)."""
    x2, c = 1.0, _scale(1.0)
    xdelta = 0.05 * x2
    xs = x2 - xdelta
    y0, dydx0 = 0.0, 0.0
    y1 = 1 - dydx * (xs - x1)
    dydx01 = 1.25 * (y1 - y0) / (x1 - x0)
    x01, y01 = x0 + 0.5 * (x1 - x0), y0 + 0.5 * (y1 - y0)
    x1s, y1s, dydx1s = x1 + 0.5 * (xs - x1), y1 + 0.5 * (1 - y1), dydx
    y2, dydx2, y3, dydx3 = 1.0, 0.0, 0.0, 0.0
    x23 = (x2 + xdelta) + 0.5 * (x3 - (x2 + xdelta))
    y23 = y2 + 0.5 * (y3 - y2)
    dydx23 = (y3 - y2) / ((x3 - xdelta) - (x2 + xdelta))
    segs = [
        corner_control_points(x0, ylow, dydx0, x01, y01, dydx01, c),
        corner_control_points(x01, y01, dydx01, x1s, y1s, dydx1s, c),
        corner_control_points(x1s, y1s, dydx1s, x2, y2, dydx2, c),
        corner_control_points(x2, y2, dydx2, x23, y23, dydx23, c),
        corner_control_points(x23, y23, dydx23, x3, ylow, dydx3, c),
    ]
    X = np.stack([s[0] for s in segs])
    Y = np.stack([s[1] for s in segs])
    return X, Y, (x0, x3, ylow, ylow, 0.0, 0.0)


def force_velocity_points(
    fmax_e=1.4,
    dydx_c=0.0,
    dydx_near_c=0.25,
    dydx_iso=5.0,
    dydx_e=0.0,
    dydx_near_e=0.15,
    conc_curviness=0.6,
    ecc_curviness=0.9,
):
    """Control points (4, 6) x and y and end data of the force–velocity curve."""
    cc, ce = _scale(conc_curviness), _scale(ecc_curviness)
    xc, yc = -1.0, 0.0
    xnc = -0.9
    ync = yc + 0.5 * dydx_near_c * (xnc - xc) + 0.5 * dydx_c * (xnc - xc)
    xi, yi = 0.0, 1.0
    xe, ye = 1.0, fmax_e
    xne = 0.9
    yne = ye + 0.5 * dydx_near_e * (xne - xe) + 0.5 * dydx_e * (xne - xe)
    segs = [
        corner_control_points(xc, yc, dydx_c, xnc, ync, dydx_near_c, cc),
        corner_control_points(xnc, ync, dydx_near_c, xi, yi, dydx_iso, cc),
        corner_control_points(xi, yi, dydx_iso, xne, yne, dydx_near_e, ce),
        corner_control_points(xne, yne, dydx_near_e, xe, ye, dydx_e, ce),
    ]
    X = np.stack([s[0] for s in segs])
    Y = np.stack([s[1] for s in segs])
    return X, Y, (xc, xe, yc, ye, dydx_c, dydx_e)


def _bezier(u, P):
    """Quintic Bézier value at u (..., ) with control points P (..., 6)."""
    k = jnp.arange(6)
    B = _BINOM5 * u[..., None] ** k * (1.0 - u[..., None]) ** (5 - k)
    return jnp.sum(B * P, axis=-1)


def _bezier_du(u, P):
    k = jnp.arange(5)
    B = _BINOM4 * u[..., None] ** k * (1.0 - u[..., None]) ** (4 - k)
    return 5.0 * jnp.sum(B * (P[..., 1:] - P[..., :-1]), axis=-1)


def _evaluate(x, X, Y, ends, iterations=30):
    """Curve value at x (nm,) for per-muscle control points X, Y (nm, ns, 6), ends (nm, 6)."""
    x0, x1, y0, y1, d0, d1 = (ends[:, i] for i in range(6))
    xs = x[:, None]
    lo, hi = X[..., 0], X[..., 5]
    u = jnp.clip((xs - lo) / (hi - lo), 0.0, 1.0)

    def newton(_, u):
        f = _bezier(u, X) - xs
        df = _bezier_du(u, X)
        return jnp.clip(u - f / jnp.where(df == 0, 1.0, df), 0.0, 1.0)

    # a loop, not unrolled: 30 unrolled steps were ~2,600 of the 12,600 operations of a trial's
    # static optimization, which a stored program rebuilds on every load
    u = jax.lax.fori_loop(0, iterations, newton, u)
    y = _bezier(u, Y)  # (nm, ns)
    ns = X.shape[1]
    last = jnp.arange(ns) == ns - 1
    inside = (xs >= lo) & ((xs < hi) | (last & (xs == hi)))
    first = jnp.argmax(inside, axis=1)
    yin = jnp.take_along_axis(y, first[:, None], axis=1)[:, 0]
    return jnp.where(x < x0, y0 + d0 * (x - x0), jnp.where(x > x1, y1 + d1 * (x - x1), yin))


class MillardCurves(eqx.Module):
    """Per-muscle active force–length and force–velocity curves (control points as arrays)."""

    fl_x: Float[Array, "nm 5 6"]
    fl_y: Float[Array, "nm 5 6"]
    fl_ends: Float[Array, "nm 6"]
    fv_x: Float[Array, "nm 4 6"]
    fv_y: Float[Array, "nm 4 6"]
    fv_ends: Float[Array, "nm 6"]

    def active_force_length(self, ln: Float[Array, " nm"]) -> Float[Array, " nm"]:
        return _evaluate(ln, self.fl_x, self.fl_y, self.fl_ends)

    def force_velocity(self, vn: Float[Array, " nm"]) -> Float[Array, " nm"]:
        return _evaluate(vn, self.fv_x, self.fv_y, self.fv_ends)


def millard_curves(fl_params: list[dict], fv_params: list[dict]) -> MillardCurves:
    """Curves for each muscle from ``ActiveForceLengthCurve`` / ``ForceVelocityCurve`` property
    dicts (OpenSim's names; missing entries take OpenSim's defaults)."""
    fl = [
        active_force_length_points(
            p.get("min_norm_active_fiber_length", 0.47 - 0.0259),
            p.get("transition_norm_fiber_length", 0.73),
            p.get("max_norm_active_fiber_length", 1.8123),
            p.get("minimum_value", 0.1),
            p.get("shallow_ascending_slope", 0.8616),
        )
        for p in fl_params
    ]
    fv = [
        force_velocity_points(
            p.get("max_eccentric_velocity_force_multiplier", 1.4),
            p.get("concentric_slope_at_vmax", 0.0),
            p.get("concentric_slope_near_vmax", 0.25),
            p.get("isometric_slope", 5.0),
            p.get("eccentric_slope_at_vmax", 0.0),
            p.get("eccentric_slope_near_vmax", 0.15),
            p.get("concentric_curviness", 0.6),
            p.get("eccentric_curviness", 0.9),
        )
        for p in fv_params
    ]

    def st(items, i):
        return as_array(np.stack([np.asarray(it[i], dtype=float) for it in items]))

    return MillardCurves(st(fl, 0), st(fl, 1), st(fl, 2), st(fv, 0), st(fv, 1), st(fv, 2))
