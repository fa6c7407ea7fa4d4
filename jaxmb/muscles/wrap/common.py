"""Numerics shared by the wrap shapes: safe norms and square roots, acos with a finite derivative,
OpenSim's WrapMath line helpers, the differentiation rule of OpenSim's early-exit iterations, the
result codes and quadrant names.

Ported in our own words from opensim-core (Apache-2.0), ``OpenSim/Simulation/Wrap/WrapMath.cpp``
(``IntersectLines``, ``IntersectLineSegPlane``, ``GetClosestPointOnLineToPoint``) and
``WrapObject.h``/``.cpp`` (the ``WrapAction`` codes, the quadrant names).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import jax
import jax.numpy as jnp

__all__ = [
    "rotate",
    "NO_WRAP",
    "INSIDE_RADIUS",
    "WRAPPED",
    "MANDATORY_WRAP",
    "QUADRANTS",
    "safe_norm",
    "unit",
    "acos",
    "sqrt0",
    "dsign",
    "closest_on_line",
    "intersect_lines",
    "segment_plane",
    "axis_rotate",
    "iterate_jvp",
    "forward_only",
    "is_forward_only",
    "traced_apart_forward",
    "most_parallel_pair",
]

# OpenSim's WrapObject::WrapAction
NO_WRAP, INSIDE_RADIUS, WRAPPED, MANDATORY_WRAP = 0, 1, 2, 3

# OpenSim's quadrant names -> (axis, sign); "all" -> None (WrapObject::extendFinalizeFromProperties)
QUADRANTS = {"all": None, "ALL": None, "All": None}
for _a, _n in enumerate("xyz"):
    for _s, _pre in ((1.0, ("", "+")), (-1.0, ("-",))):
        for _p in _pre:
            QUADRANTS[_p + _n] = (_a, _s)
            QUADRANTS[_p + _n.upper()] = (_a, _s)

_LINE_EPSILON = 1e-5  # SimmMacros.h


def safe_norm(v, axis=-1):
    """|v| along ``axis``, with a zero (not NaN) derivative at v = 0."""
    sq = jnp.sum(v * v, axis=axis)
    ok = sq > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def unit(v):
    """v / |v|, or zeros for a zero vector (WrapMath::NormalizeOrZero)."""
    n = safe_norm(v)
    return v / jnp.where(n > 0, n, 1.0)[..., None]


@jax.custom_jvp
def acos(x):
    # OpenSim lets acos see rounding-level |x| > 1 (NaN); clipping keeps the path finite
    return jnp.arccos(jnp.clip(x, -1.0, 1.0))


@acos.defjvp
def _acos_jvp(primals, tangents):
    # arccos' is infinite at |x| = 1; a zero there (instead of inf, or 0·inf = NaN through the
    # clip and through jnp.where branches not taken) keeps moment arms finite
    (x,), (dx,) = primals, tangents
    inner = 1.0 - x * x
    ok = inner > 0
    slope = jnp.where(ok, -1.0 / jnp.sqrt(jnp.where(ok, inner, 1.0)), 0.0)
    return acos(x), slope * dx


def sqrt0(v):
    """sqrt(max(v, 0)) with a zero (not infinite) derivative at and below 0."""
    ok = v > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, v, 1.0)), 0.0)


def dsign(x):
    """sign(x) with sign(0) = +1 (OpenSim's DSIGN)."""
    return jnp.where(x >= 0, 1.0, -1.0)


def closest_on_line(pt, line_pt, line):
    """Closest point to ``pt`` on the line through ``line_pt`` along ``line`` (any length)."""
    return line_pt + jnp.dot(pt - line_pt, unit(line)) * unit(line)


def _det_rows(a, b, c):
    return jnp.dot(a, jnp.cross(b, c))


def intersect_lines(p1, p2, p3, p4):
    """Closest points between lines p1p2 and p3p4: (on first, s along p1→p2, on second, ok)."""
    d1, d2 = p2 - p1, p4 - p3
    m1, m2 = safe_norm(d1), safe_norm(d2)
    v1, v2 = unit(d1), unit(d2)
    c = jnp.cross(v1, v2)
    den = jnp.dot(c, c)
    ok = den > 2e-13  # SimmMacros ROUNDOFF_ERROR
    den = jnp.where(ok, den, 1.0)
    t = _det_rows(p3 - p1, v1, c) / den
    s = _det_rows(p3 - p1, v2, c) / den
    return p1 + s * v1, s / jnp.where(m1 > 0, m1, 1.0), p3 + t * v2, t / m2, ok


def segment_plane(a, b, normal, d):
    """Intersection of segment a→b with the plane n·x + d = 0: (point, hit)."""
    vec = b - a
    dp = jnp.dot(vec, normal)
    okd = jnp.abs(dp) >= _LINE_EPSILON
    t = (-d - jnp.dot(normal, a)) / jnp.where(okd, dp, 1.0)
    hit = okd & (t >= -_LINE_EPSILON) & (t <= 1.0 + _LINE_EPSILON)
    return a + t * vec, hit


def rotate(R, x):
    """R @ x for points x (..., 3) (R (3, 3)), as products and sums rather than a matrix product:
    XLA:CPU turns a matrix product into a library call, and one inside a loop keeps the loop
    from compiling into one function (:mod:`jaxmb.xla_options`)."""
    return jnp.sum(R * x[..., None, :], axis=-1)


def axis_rotate(v, axis, angle):
    """Rotate v by ``angle`` about the unit ``axis`` (Rodrigues)."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    return v * c + jnp.cross(axis, v) * s + axis * jnp.dot(axis, v) * (1.0 - c)


_FORWARD_ONLY = contextvars.ContextVar("jaxmb_forward_only", default=False)


@contextlib.contextmanager
def forward_only():
    """Trace what is evaluated forward only, never linearized for reverse mode (a pushforward
    kernel whose own derivative has a custom rule): there, :func:`iterate_jvp` takes an
    iteration's tangents from the loop itself (forward mode through it, one lane per tangent the
    caller pushes) instead of contracting its Jacobian with them. The derivative is the same (to
    round-off); only the program differs."""
    token = _FORWARD_ONLY.set(True)
    try:
        yield
    finally:
        _FORWARD_ONLY.reset(token)


def is_forward_only() -> bool:
    """Whether the code being traced is under :func:`forward_only` (loops that reverse mode
    cannot pass, ``while_loop`` with traced bounds, may then replace scans)."""
    return _FORWARD_ONLY.get()


_FORWARD_TWINS: dict = {}


def traced_apart_forward(fn):
    """``fn``, or under :func:`forward_only` a twin of it (one per ``fn``, kept): for a function
    that JAX traces once and caches by its identity (``jax.checkpoint`` of a module-level
    function). The cached jaxpr holds its :func:`iterate_jvp` calls with the rules they were
    first differentiated by; traced under :func:`forward_only`, a rule carries tangents through
    a loop, which reverse mode cannot transpose, so the two contexts must not share a trace."""
    if not _FORWARD_ONLY.get():
        return fn
    twin = _FORWARD_TWINS.get(fn)
    if twin is None:
        twin = _FORWARD_TWINS[fn] = functools.wraps(fn)(lambda *a, **k: fn(*a, **k))
    return twin


def iterate_jvp(iterate):
    """``iterate`` (an early-exit loop: OpenSim's iterations stop on tolerances) made
    differentiable in forward and reverse mode: its tangent is the forward-mode Jacobian of the
    iterate where it stops, formed from the primal values, times the input tangents (under
    :func:`forward_only`, forward mode through the loop itself). That is the derivative of the
    length OpenSim computes (what central differences of it give), not of the exact root it
    approaches; reverse mode cannot pass the loop itself. Arguments that are not floating point
    (flags) get no tangent."""
    f = jax.custom_jvp(iterate)

    @f.defjvp
    def _jvp(primals, tangents):
        diff = [i for i, x in enumerate(primals) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]

        def of_diff(*xs):
            args = list(primals)
            for i, x in zip(diff, xs, strict=True):
                args[i] = x
            return iterate(*args)

        if _FORWARD_ONLY.get():
            # never transposed here: the loop itself carries the tangents, as many lanes as the
            # caller pushes (arm26's moment arms: 2 coordinates against the Jacobian's 12 input
            # lanes of each ellipsoid Newton solve; 0.69x the time per pose)
            return jax.jvp(iterate, tuple(primals), tuple(tangents))
        # the primal by its own loop: under reverse mode inside a jax.checkpoint the forward pass
        # then runs only this loop and the backward pass the Jacobian's (the primal taken from the
        # Jacobian's pass ran that loop in both: MoBL-ARMS's moment arms 1.39x slower, 14 % more
        # HLO instructions)
        out = iterate(*primals)
        J = jax.jacfwd(of_diff, argnums=tuple(range(len(diff))))(*(primals[i] for i in diff))

        def contract(_, Jo):
            return sum(
                jnp.tensordot(Jk, tangents[i], axes=jnp.ndim(tangents[i]))
                for Jk, i in zip(Jo, diff, strict=True)
            )

        return out, jax.tree_util.tree_map(contract, out, J)

    return f


def most_parallel_pair(r1a, r1b, r2a, r2b, u1a, u1b, u2a, u2b):
    """OpenSim's pick among two tangent candidates per end (WrapCylinder/WrapSphere::wrapLine):
    the pair whose unit directions u are most nearly parallel, ties in OpenSim's order."""
    j1, j2, j3, j4 = u1a @ u2a, u1a @ u2b, u1b @ u2a, u1b @ u2b
    c1 = (j1 > j2) & (j1 > j3) & (j1 > j4)
    c2 = ~c1 & (j2 > j3) & (j2 > j4)
    c3 = ~c1 & ~c2 & (j3 > j4)
    return jnp.where(c1 | c2, r1a, r1b), jnp.where(c1 | c3, r2a, r2b)
