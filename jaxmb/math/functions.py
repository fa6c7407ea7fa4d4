"""OpenSim's function types as JAX-traceable equinox Modules (univariate, float64).

Every class reproduces OpenSim 4.6's evaluation exactly, extrapolation included, so an imported
joint map or coupling agrees with OpenSim to rounding (checked against ``opensim`` in the tests):

- :class:`Constant` ``c``; :class:`LinearFunction` ``a x + b`` (OpenSim coefficients ``[a, b]``);
- :class:`PolynomialFunction` with coefficients from the highest power down (``SimTK::Polynomial``);
- :class:`SimmSpline`: SIMM's cubic spline (Forsythe–Malcolm–Moler end conditions: the end third
  derivatives match those of the cubics through the first and last four knots), linear extrapolation
  with the end slopes;
- :class:`NaturalCubicSpline`: despite its name, the same spline as SimmSpline — OpenSim's
  ``NaturalCubicSpline.cpp`` is a copy of ``SimmSpline.cpp`` and OpenSim 4.6 reads the tag as a
  SimmSpline (``getConcreteClassName()`` says so); its ends are *not* free of curvature;
- :class:`PiecewiseLinearFunction`: linear interpolation, extrapolation with the end slopes;
- :class:`MultiplierFunction` ``scale · g(x)``.

Spline coefficients are computed with ``jnp`` in the constructor, so a spline built inside a traced
function is differentiable with respect to its knot values. Evaluation is a knot search
(:func:`knot_interval`) and a polynomial piece: exact first and second derivatives by autodiff
inside each interval.

:data:`FUNCTION_TYPES` names the OpenSim types these classes cover; reading them from an ``.osim``
file is the OpenSim reader's job (:func:`jaxmb.io.osim.parse_function`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "as_array",
    "knot_interval",
    "interval_values",
    "AbstractFunction",
    "Constant",
    "LinearFunction",
    "PolynomialFunction",
    "SimmSpline",
    "NaturalCubicSpline",
    "PiecewiseLinearFunction",
    "MultiplierFunction",
    "MultivariatePolynomialFunction",
    "EllipsoidSurfacePoint",
    "UnsupportedFunctionError",
    "FUNCTION_TYPES",
]


def as_array(x, dtype=float) -> jax.Array:
    """``jnp.asarray(x, dtype)`` for building models and their parts. A concrete value (number,
    list, numpy or JAX array) is converted in numpy and placed on the device, where
    ``jnp.asarray`` compiles and runs a small conversion program for each new shape (about 20
    while reading an OpenSim model: ~0.7 s of a warm command-line run, cache reads included). A
    traced value goes through ``jnp.asarray`` (built inside jit/grad/vmap it stays traced).
    ``dtype=None`` keeps x's dtype (canonicalized: float32 when x64 is off)."""
    if isinstance(x, jax.core.Tracer):
        return jnp.asarray(x, dtype=dtype)
    a = np.asarray(x, dtype=dtype)
    return jax.device_put(a.astype(jax.dtypes.canonicalize_dtype(a.dtype), copy=False))


class UnsupportedFunctionError(ValueError):
    """An OpenSim function type (or a malformed function) that jaxmb cannot evaluate."""


class AbstractFunction(eqx.Module):
    """A scalar function ``y = g(x)`` of one coordinate value (rad or m), JAX-traceable."""

    def __call__(self, x: Float[Array, ""]) -> Float[Array, ""]:
        raise NotImplementedError

    @property
    def is_constant(self) -> bool:
        """True when the function does not depend on its argument."""
        return False


class Constant(AbstractFunction):
    """``g(x) = value``."""

    value: Float[Array, ""]

    def __init__(self, value):
        self.value = as_array(value)

    def __call__(self, x):
        return self.value + 0.0 * x

    @property
    def is_constant(self) -> bool:
        return True


class LinearFunction(AbstractFunction):
    """``g(x) = slope · x + intercept`` (OpenSim ``<coefficients> slope intercept``)."""

    slope: Float[Array, ""]
    intercept: Float[Array, ""]

    def __init__(self, slope, intercept=0.0):
        self.slope = as_array(slope)
        self.intercept = as_array(intercept)

    def __call__(self, x):
        return self.slope * x + self.intercept


class PolynomialFunction(AbstractFunction):
    """``g(x) = Σ c_k x^(n-k)``: coefficients from the highest power down, as in OpenSim."""

    coefficients: Float[Array, " n"]

    def __init__(self, coefficients):
        c = jnp.atleast_1d(jnp.asarray(coefficients, dtype=float))
        if c.ndim != 1 or c.shape[0] == 0:
            raise UnsupportedFunctionError("PolynomialFunction needs at least one coefficient")
        self.coefficients = c

    def __call__(self, x):
        y = jnp.zeros_like(x) + self.coefficients[0]
        for k in range(1, self.coefficients.shape[0]):
            y = y * x + self.coefficients[k]
        return y


class MultiplierFunction(AbstractFunction):
    """``g(x) = scale · inner(x)``."""

    function: AbstractFunction
    scale: Float[Array, ""]

    def __init__(self, function: AbstractFunction, scale=1.0):
        self.function = function
        self.scale = as_array(scale)

    def __call__(self, x):
        return self.scale * self.function(x)

    @property
    def is_constant(self) -> bool:
        return self.function.is_constant


def knot_interval(knots: Float[Array, " n"], t):
    """The interval ``k`` (0 … n−2) of ``knots`` (n ≥ 2, increasing) that holds ``t``: the last
    knot ≤ t, clipped so that points outside the knots take the end intervals.

    A count of the knots ≤ t (``searchsorted``'s ``compare_all``) rather than a binary search:
    the knots of OpenSim's functions are few (4–30), so one comparison per knot costs less than
    the binary search's loop, and it compiles to a few elementwise operations and one sum instead
    of a ``while`` loop per function (an imported model evaluates one spline per coupled
    coordinate, moving path point and knee translation)."""
    n = knots.shape[0]
    return jnp.clip(jnp.searchsorted(knots, t, side="right", method="compare_all") - 1, 0, n - 2)


def interval_values(k, *columns):
    """``tuple(c[k] for c in columns)`` for knot intervals ``k`` (from :func:`knot_interval`) in
    one gather: each indexed gather of its own is a separate operation of the compiled
    program, and an imported model has one spline per coupled coordinate and moving point."""
    return tuple(jnp.take(jnp.stack(columns), k, axis=1, mode="clip"))


def _check_knots(x, y, what: str, minimum: int):
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.ndim != 1 or xs.shape != ys.shape:
        raise UnsupportedFunctionError(
            f"{what}: x and y must be 1-D of equal length, got {xs.shape} and {ys.shape}"
        )
    if xs.shape[0] < minimum:
        raise UnsupportedFunctionError(
            f"{what}: needs at least {minimum} points, got {xs.shape[0]}"
        )
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise UnsupportedFunctionError(f"{what}: non-finite knot values")
    if np.any(np.diff(xs) <= 0):
        k = int(np.argmax(np.diff(xs) <= 0))
        raise UnsupportedFunctionError(
            f"{what}: x must increase strictly (x[{k}] = {xs[k]}, x[{k + 1}] = {xs[k + 1]})"
        )


def _simm_coefficients(x, y):
    """Cubic-spline coefficients ``(b, c, d)`` of OpenSim's SimmSpline.

    Transcribes the tridiagonal system of ``SimmSpline::calcCoefficients`` (SIMM, after Forsythe,
    Malcolm & Moler 1977) as a dense solve, so it traces and differentiates; n is small (< 50).
    Concrete knots are computed in numpy: as eager JAX operations, the ~30 small operations per
    spline cost a dispatch (and, in a fresh process, a compilation-cache read) each, seconds for
    the splines of one imported model.
    """
    xp = jnp if isinstance(x, jax.core.Tracer) or isinstance(y, jax.core.Tracer) else np
    x, y = xp.asarray(x), xp.asarray(y)
    n = x.shape[0]
    h = x[1:] - x[:-1]
    if n == 2:
        s = (y[1] - y[0]) / h[0]
        return xp.stack([s, s]), xp.zeros(2), xp.zeros(2)
    delta = (y[1:] - y[:-1]) / h  # divided differences, (n-1,)
    rhs_inner = delta[1:] - delta[:-1]  # (n-2,)
    diag_inner = 2.0 * (h[:-1] + h[1:])
    diag = xp.concatenate([-h[:1], diag_inner, -h[-1:]])
    upper, lower = h, h
    if n > 3:
        d31, d20 = x[3] - x[1], x[2] - x[0]
        d1, d2 = x[n - 1] - x[n - 3], x[n - 2] - x[n - 4]
        d30, d3 = x[3] - x[0], x[n - 1] - x[n - 4]
        c0 = (rhs_inner[1] / d31 - rhs_inner[0] / d20) * h[0] ** 2 / d30
        cn = -(rhs_inner[-1] / d1 - rhs_inner[-2] / d2) * h[-1] ** 2 / d3
    else:
        c0 = cn = xp.zeros((), dtype=rhs_inner.dtype)
    rhs = xp.concatenate([c0[None], rhs_inner, cn[None]])
    T = xp.diag(diag) + xp.diag(upper, 1) + xp.diag(lower, -1)
    sigma = xp.linalg.solve(T, rhs)
    b_inner = delta - h * (sigma[1:] + 2.0 * sigma[:-1])
    b_last = delta[-1] + h[-1] * (sigma[-2] + 2.0 * sigma[-1])
    b = xp.concatenate([b_inner, b_last[None]])
    d_inner = (sigma[1:] - sigma[:-1]) / h
    d = xp.concatenate([d_inner, d_inner[-1:]])
    c = 3.0 * sigma
    return b, c, d


class _CubicSpline(AbstractFunction):
    x: Float[Array, " n"]
    y: Float[Array, " n"]
    b: Float[Array, " n"]
    c: Float[Array, " n"]
    d: Float[Array, " n"]

    def __call__(self, t):
        x, y = self.x, self.y
        xk, yk, bk, ck, dk = interval_values(knot_interval(x, t), x, y, self.b, self.c, self.d)
        dx = t - xk
        inside = yk + dx * (bk + dx * (ck + dx * dk))
        below = y[0] + self.b[0] * (t - x[0])
        above = y[-1] + self.b[-1] * (t - x[-1])
        return jnp.where(t < x[0], below, jnp.where(t > x[-1], above, inside))


class SimmSpline(_CubicSpline):
    """OpenSim's ``SimmSpline`` through knots ``(x, y)`` (x strictly increasing, n ≥ 2).

    With n = 2 it is the line through the knots; outside ``[x₀, x_{n-1}]`` it continues linearly
    with the end slopes (zero second derivative), exactly as OpenSim evaluates it.
    """

    def __init__(self, x, y):
        _check_knots(x, y, "SimmSpline", 2)
        self.x = as_array(x)
        self.y = as_array(y)
        self.b, self.c, self.d = (as_array(v, None) for v in _simm_coefficients(self.x, self.y))


class NaturalCubicSpline(SimmSpline):
    """OpenSim's ``NaturalCubicSpline``: identical to :class:`SimmSpline` (see the module notes)."""


class PiecewiseLinearFunction(AbstractFunction):
    """OpenSim's ``PiecewiseLinearFunction``: linear between knots, end slopes outside."""

    x: Float[Array, " n"]
    y: Float[Array, " n"]

    def __init__(self, x, y):
        _check_knots(x, y, "PiecewiseLinearFunction", 2)
        self.x = as_array(x)
        self.y = as_array(y)

    def __call__(self, t):
        x, y = self.x, self.y
        x0, x1, y0, y1 = interval_values(knot_interval(x, t), x[:-1], x[1:], y[:-1], y[1:])
        return y0 + (y1 - y0) / (x1 - x0) * (t - x0)


class MultivariatePolynomialFunction(eqx.Module):
    """OpenSim's ``MultivariatePolynomialFunction``: ``g(x) = Σ c_t Π_d x_d^(e_t,d)`` of a vector
    x (dimension 1–4, order ≥ 0), e.g. a CoordinateCouplerConstraint of several coordinates.

    The terms are in OpenSim's order: nested loops over the powers of x₀, then x₁, …, each from 0
    up to what the order leaves (for 2-D, order 2: 1, y, y², x, xy, x²), checked against
    OpenSim 4.6's ``getTermValues``.

    Attributes:
        coefficients: (n_terms,) one per term.
        exponents: static, per term the power of each variable.
    """

    coefficients: Float[Array, " n"]
    exponents: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    def __init__(self, coefficients, dimension: int, order: int):
        dimension, order = int(dimension), int(order)
        if not 1 <= dimension <= 4 or order < 0:
            raise UnsupportedFunctionError(
                f"MultivariatePolynomialFunction: dimension {dimension} (1-4) and order {order}"
                " (>= 0) out of range"
            )
        self.exponents = tuple(_exponents(dimension, order))
        c = jnp.atleast_1d(jnp.asarray(coefficients, dtype=float))
        if c.shape != (len(self.exponents),):
            raise UnsupportedFunctionError(
                f"MultivariatePolynomialFunction: {c.shape[0]} coefficients, expected"
                f" {len(self.exponents)} for dimension {dimension} and order {order}"
            )
        self.coefficients = c

    @property
    def dimension(self) -> int:
        return len(self.exponents[0])

    @property
    def is_constant(self) -> bool:
        """True when every term but the constant one has a zero coefficient (concrete values)."""
        return bool(np.all(np.asarray(self.coefficients)[1:] == 0))

    def __call__(self, x: Float[Array, " dim"]) -> Float[Array, ""]:
        x = jnp.asarray(x)
        terms = [
            jnp.prod(jnp.stack([x[d] ** e for d, e in enumerate(t)])) for t in self.exponents
        ]
        return jnp.stack(terms) @ self.coefficients.astype(x.dtype)


class EllipsoidSurfacePoint(eqx.Module):
    """One component of the point of an ellipsoid whose position follows two body-fixed angles:
    Simbody's ``MobilizedBody::Ellipsoid`` (OpenSim's ``EllipsoidJoint``) puts the child frame's
    origin at ``(r_x n_x, r_y n_y, r_z n_z)`` in the parent frame, with
    ``n = Rx(a) Ry(b) ẑ = (sin b, −sin a cos b, cos a cos b)`` the child's z axis (checked against
    OpenSim 4.6 in tests/io/test_osim_zoo.py).

    Attributes:
        radius: the ellipsoid's semi-axis along ``axis`` (m).
        axis: static, 0, 1 or 2 (x, y, z of the parent frame).
    """

    radius: Float[Array, ""]
    axis: int = eqx.field(static=True)

    def __init__(self, radius, axis: int):
        if axis not in (0, 1, 2):
            raise ValueError(f"EllipsoidSurfacePoint: axis must be 0, 1 or 2, got {axis!r}")
        self.radius = jnp.asarray(radius, dtype=float)
        self.axis = int(axis)

    @property
    def dimension(self) -> int:
        return 2

    @property
    def is_constant(self) -> bool:
        return False

    def __call__(self, x: Float[Array, " 2"]) -> Float[Array, ""]:
        """``x = (a, b)``: the first two rotations of the joint (rad); returns metres."""
        x = jnp.asarray(x)
        a, b = x[0], x[1]
        n = (jnp.sin(b), -jnp.sin(a) * jnp.cos(b), jnp.cos(a) * jnp.cos(b))[self.axis]
        return self.radius.astype(x.dtype) * n


def _exponents(dimension: int, order: int, prefix=()):
    if len(prefix) == dimension:
        yield prefix
        return
    for e in range(order - sum(prefix) + 1):
        yield from _exponents(dimension, order, prefix + (e,))


FUNCTION_TYPES = (
    "Constant",
    "LinearFunction",
    "PolynomialFunction",
    "SimmSpline",
    "NaturalCubicSpline",
    "PiecewiseLinearFunction",
    "MultiplierFunction",
)


def natural_cubic_spline(knots, values, x):
    """Natural cubic spline through ``(knots, values)`` at x: value and first derivative.

    Beyond the end knots the end cubic pieces are extended. knots: (K,) increasing, K ≥ 2;
    values: (K,); x: scalar. Differentiable in values and knots.
    """
    h = jnp.diff(knots)
    K = knots.shape[0]
    if K == 2:
        slope = (values[1] - values[0]) / h[0]
        return values[0] + slope * (x - knots[0]), slope
    # second derivatives m with m_0 = m_{K-1} = 0
    rhs = 6.0 * (jnp.diff(values[1:]) / h[1:] - jnp.diff(values[:-1]) / h[:-1])
    main = 2.0 * (h[:-1] + h[1:])
    T = jnp.diag(main) + jnp.diag(h[1:-1], 1) + jnp.diag(h[1:-1], -1)
    m = jnp.concatenate([jnp.zeros(1), jnp.linalg.solve(T, rhs), jnp.zeros(1)])
    hi, t0, t1, y0, y1, m0, m1 = interval_values(
        knot_interval(knots, x), h, knots[:-1], knots[1:], values[:-1], values[1:], m[:-1], m[1:]
    )
    a, b = t1 - x, x - t0
    val = (
        (m0 * a**3 + m1 * b**3) / (6 * hi)
        + (y0 / hi - m0 * hi / 6) * a
        + (y1 / hi - m1 * hi / 6) * b
    )
    der = (-m0 * a**2 + m1 * b**2) / (2 * hi) - (y0 / hi - m0 * hi / 6) + (y1 / hi - m1 * hi / 6)
    return val, der


class LinearCombination(AbstractFunction):
    """``row · (f_1(x), …, f_k(x)) + offset``: e.g. a moving point's axis after a change of body
    frame (``row`` a row of the rotation, ``offset`` its translation)."""

    functions: tuple
    row: Float[Array, " 3"]
    offset: Float[Array, ""]

    def __call__(self, x):
        return self.row @ jnp.stack([f(x) for f in self.functions]) + self.offset
