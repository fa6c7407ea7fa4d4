"""The ellipsoid: :class:`WrapEllipsoid` and OpenSim 4.6's ``WrapEllipsoid::wrapLine`` in JAX.

Ported in our own words from opensim-core (Apache-2.0), ``OpenSim/Simulation/Wrap/
WrapEllipsoid.cpp`` (``wrapLine`` with method hybrid, ``calcTangentPoint``,
``CalcDistanceOnEllipsoid``, ``findClosestPoint``, ``closestPointToEllipse``). Its quirks are kept
on purpose, because the goal is OpenSim's numbers: coordinates scaled by 3 / Σ dimensions; the
wrapping plane passes through p1, p2 and a surface point c1 that blends "Frans" (the crossing
with the coordinate plane most normal to the line, reduced to an ellipse; faded out within 30 % of
the chord ends) and "fan" (the mean direction from 298 points of the chord to their nearest
surface points) by the line's largest direction cosine between 0.7073 and 0.9; with a quadrant,
c1 is mirrored to the active side (and pulled toward the bisecting plane by the fan weight, except
that OpenSim's ``EQUAL_WITHIN_ERROR(fanWeight, -Infinity)`` is never true, so a pure Frans c1 is
only mirrored); nearest points by Eberly's Newton iteration (64 checks, |f| < 1e-9, planar special
case within 2e-13 of a coordinate plane, an unconverged solve leaves its output unchanged);
tangent points by a damped Gauss–Newton iteration stopped at a squared residual of 1e-8 (at most
50 × 1000 steps), so they are *not* exact tangent points; the surface length is a polyline of
⌊chord / 1 mm⌋ (≤ 499) segments through rays cast in the plane from the point where it crosses the
coordinate axis most normal to it; a constrained path that leaves r1 or r2 backwards goes the long
way round. The code is always MANDATORY_WRAP when the line crosses the ellipsoid between p1 and
p2.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ...math.linalg import cholesky_solve_bm
from .base import AbstractWrapObject, check_positive
from .common import (
    INSIDE_RADIUS,
    MANDATORY_WRAP,
    NO_WRAP,
    acos,
    dsign,
    iterate_jvp,
    safe_norm,
    sqrt0,
    traced_apart_forward,
    unit,
)

__all__ = ["WrapEllipsoid", "ellipsoid_wrap_line", "ellipsoid_wrap_code", "distance_on_ellipsoid"]

# OpenSim's WrapEllipsoid::wrapLine, method "hybrid" (the PathWrap default and the only method the
# .osim models here use). Constants from WrapEllipsoid.cpp / SimmMacros.h.
_ELL_P_TOL = 1e-4  # ELLIPSOID_TOLERANCE_1: p1e / p2e "on the surface", collinearity
_ELL_TINY = 1e-8  # ELLIPSOID_TINY: calcTangentPoint stops when the squared residual is below it
_MU_BLEND_MIN = 0.7073  # 100 % fan
_MU_BLEND_MAX = 0.9  # 100 % Frans
_N_FAN = 300  # NUM_FAN_SAMPLES
_SV_BLEND = 0.3  # SV_BOUNDARY_BLEND
_ROUNDOFF = 2e-13  # ROUNDOFF_ERROR (EQUAL_WITHIN_ERROR)
_SEG_LENGTH = 0.001  # CalcDistanceOnEllipsoid desiredSegLength (m)
_MAX_SEG = 499
_LM_MAXIT, _LM_MAXIT2 = 50, 1000


def _safe_den(x):
    return jnp.where(x == 0, 1.0, x)


def _quartic(t, a2, w):
    """closestPointToEllipse's f(t) and f'(t), a2 = (a², b²), w = (a²u², b²v²), OpenSim's order."""
    P, Q = t + a2[0], t + a2[1]
    f = P * P * Q * Q - w[0] * Q * Q - w[1] * P * P
    fp = 2.0 * (P * Q * (P + Q) - w[0] * Q - w[1] * P)
    return f, fp


def _sextic(t, a2, w):
    """findClosestPoint's f(t) and f'(t), a2 = (a², b², c²), w = (a²u², b²v², c²w²)."""
    P, Q, R = t + a2[0], t + a2[1], t + a2[2]
    P2, Q2, R2 = P * P, Q * Q, R * R
    f = P2 * Q2 * R2 - w[0] * Q2 * R2 - w[1] * P2 * R2 - w[2] * P2 * Q2
    PQ, PR, QR = P * Q, P * R, Q * R
    fp = 2.0 * (
        PQ * R * (QR + PR + PQ) - w[0] * QR * (Q + R) - w[1] * PR * (P + R) - w[2] * PQ * (P + Q)
    )
    return f, fp


def _newton(t, done, fval):
    """One of Eberly's Newton steps, t frozen once |f| < 1e-9 was seen."""
    f, fp = fval(t)
    done = done | (jnp.abs(f) < 1e-9)
    return jnp.where(done, t, t - f / _safe_den(fp)), done


def _eberly_iterate(a2p, wp, t0p, a2g, wg, t0g):
    """Newton's method on the quartic (planar case) and the sextic (general case) side by side:
    at most 64 checks of |f| < 1e-9 each, t frozen once converged, 63 steps at most."""

    def body(state):
        tp, dp, tg, dg, i = state
        tp, dp = _newton(tp, dp, lambda t: _quartic(t, a2p, wp))
        tg, dg = _newton(tg, dg, lambda t: _sextic(t, a2g, wg))
        return tp, dp, tg, dg, i + 1

    false = jnp.asarray(False)
    tp, _, tg, _, _ = jax.lax.while_loop(
        lambda s: ~(s[1] & s[3]) & (s[4] < 63), body, (t0p, false, t0g, false, 0)
    )
    return tp, tg


def _one_iterate(equation):
    """The Newton iteration of :func:`_eberly_iterate` on one of its equations alone. Each t is
    frozen at its own convergence, so it ends where the side-by-side loop ends it."""

    def iterate(a2, w, t0):
        def body(state):
            t, done, i = state
            t, done = _newton(t, done, lambda t: equation(t, a2, w))
            return t, done, i + 1

        return jax.lax.while_loop(lambda s: ~s[1] & (s[2] < 63), body, (t0, jnp.asarray(False), 0))[
            0
        ]

    return iterate


# 301 solves per wrap, up to 63 steps each: reverse mode stores no Newton step. (The root's implicit
# derivative was tried: 5x cheaper, but it departs from the iterate's, and so from central
# differences of OpenSim's length, by up to 2.6e-7 relative.)
_eberly_roots = iterate_jvp(_eberly_iterate)
_quartic_root = iterate_jvp(_one_iterate(_quartic))
_sextic_root = iterate_jvp(_one_iterate(_sextic))


def _ellipse_point(a, b, u, v, t):
    """closestPointToEllipse's result from the Newton parameter t, with OpenSim's special cases
    within ROUNDOFF_ERROR of the axes (which do not use t)."""
    a2, b2 = a * a, b * b
    near_x, near_y = jnp.abs(u) <= _ROUNDOFF, jnp.abs(v) <= _ROUNDOFF
    # near both axes
    xb = jnp.where(a < b, jnp.where(u < 0, -a, a), u)
    yb = jnp.where(a < b, v, jnp.where(v < 0, -b, b))
    # near the y axis (u == 0)
    top = (a >= b) | (jnp.abs(v) >= b - a2 / b)
    y_nx = jnp.where(top, jnp.where(v >= 0, b, -b), b2 * v / _safe_den(b2 - a2))
    x_nx = jnp.where(top, u, a * sqrt0(jnp.abs(1.0 - (y_nx / b) ** 2)))
    # near the x axis (v == 0)
    side = (b >= a) | (jnp.abs(u) >= a - b2 / a)
    x_ny = jnp.where(side, jnp.where(u >= 0, a, -a), a2 * u / _safe_den(a2 - b2))
    y_ny = jnp.where(side, v, b * sqrt0(jnp.abs(1.0 - (x_ny / a) ** 2)))
    xg, yg = a2 * u / _safe_den(t + a2), b2 * v / _safe_den(t + b2)
    x = jnp.where(near_x & near_y, xb, jnp.where(near_x, x_nx, jnp.where(near_y, x_ny, xg)))
    y = jnp.where(near_x & near_y, yb, jnp.where(near_x, y_nx, jnp.where(near_y, y_ny, yg)))
    return x, y


_PLANE_AXES = ((1, 2), (2, 0), (0, 1))  # findClosestPoint's 2-d cross-section per special axis


def _planar_case(a, x, ax):
    """closestPointToEllipse in the cross-section that keeps x[ax]: the quartic's (a², w, t0)
    and the point from its root t."""
    j, k = jnp.asarray(_PLANE_AXES)[ax]
    ap, up = jnp.stack([a[j], a[k]]), jnp.stack([x[j], x[k]])
    inside = jnp.sum((up / ap) * (up / ap)) < 1.0
    t0 = jnp.where(inside, 0.0, jnp.max(ap) * sqrt0(jnp.dot(up, up)))
    a2p = ap * ap

    def point(t):
        yj, yk = _ellipse_point(a[j], a[k], x[j], x[k], t)
        e = jnp.arange(3)
        return jnp.where(e == j, yj, jnp.where(e == k, yk, x))

    return (a2p, a2p * (up * up), t0), point


def _general_case(a, x):
    """findClosestPoint's sextic: its (a², w, t0) and (point, converged) from its last t (t is
    frozen at convergence, so the 64th check is the one made on it)."""
    inside = jnp.sum((x / a) * (x / a)) < 1.0
    t0 = jnp.where(inside, 0.0, jnp.max(a) * sqrt0(jnp.dot(x, x)))
    a2 = a * a
    w = a2 * (x * x)

    def point(t):
        return a2 * x / _safe_den(t + a2), jnp.abs(_sextic(t, a2, w)[0]) < 1e-9

    return (a2, w, t0), point


def _special_axis(a, dims, x, axis):
    """OpenSim's specialCaseAxis: (special, axis). ``axis`` (int, may be traced) 0, 1, 2 is
    given; -1 picks the coordinate within ROUNDOFF_ERROR of 0 whose other two dimensions sum
    least (first on ties), and no special case when there is none."""
    sums = jnp.sum(dims) - dims
    near = jnp.abs(x) <= _ROUNDOFF
    special = (axis >= 0) | jnp.any(near)
    return special, jnp.where(axis >= 0, axis, jnp.argmin(jnp.where(near, sums, jnp.inf)))


def _closest_point(a, dims, x, axis=-1):
    """findClosestPoint (Eberly) as OpenSim computes it. Returns (point (3,), ok).

    ``axis`` (see :func:`_special_axis`): in a special case x[axis] is kept and the point solved
    in the elliptical cross-section (closestPointToEllipse), otherwise from the sextic. Both
    Newton solves start at t = 0 (inside) or max(a)·|x| (outside) and stop at |f| < 1e-9 after
    at most 64 checks; the planar one then uses its last t, the general one reports ``ok`` False
    (OpenSim leaves its output untouched, which the callers reproduce). One loop runs both
    solves, each on a harmless stand-in point where it is not taken, so that no NaN reaches
    jax.grad. (For many points at once, :func:`_fan_points` runs the sextic alone.)
    """
    special, ax = _special_axis(a, dims, x, axis)
    planar_in, planar = _planar_case(a, jnp.where(special, x, 0.5 * a), ax)
    general_in, general = _general_case(a, jnp.where(special, 1.5 * a, x))
    tp, tg = _eberly_roots(*planar_in, *general_in)
    y, done = general(tg)
    return jnp.where(special, planar(tp), y), special | done


def _plane_points(a, x, ax):
    """:func:`_closest_point` of points x (m, 3) each in its special case ax (m,), the quartic
    alone."""

    def one(x, ax):
        planar_in, planar = _planar_case(a, x, ax)
        return planar(_quartic_root(*planar_in))

    return jax.vmap(one)(x, ax)


def _fan_points(a, dims, x):
    """:func:`_closest_point` of points x (m, 3) with axis -1: the sextic alone, and the planar
    solve (a ``lax.cond``) only when some point is within ROUNDOFF_ERROR of a coordinate plane
    (a segment that lies in one). Same results, without the quartic's Newton steps and planar
    construction for every point of the fan."""

    def general(x):
        general_in, general = _general_case(a, x)
        return general(_sextic_root(*general_in))

    special, ax = jax.vmap(lambda x: _special_axis(a, dims, x, -1))(x)
    # each solve sees a stand-in where it is not taken, as in _closest_point
    y, ok = jax.vmap(general)(jnp.where(special[:, None], 1.5 * a, x))

    def with_planar(y):
        xs = jnp.where(special[:, None], x, 0.5 * a)
        return jnp.where(special[:, None], _plane_points(a, xs, ax), y)

    y = jax.lax.cond(jnp.any(special), with_planar, lambda y: y, y)
    return y, ok | special


def _ellipsoid_residual(r, d1, p, a, vs, vs4):
    """calcTangentPoint's four residuals: r in the plane (vs, vs4), on the ellipsoid, and the
    tangent plane at r (normal nr, offset d1) through r and through p."""
    nr = 2.0 * r / (a * a)
    q = r / a
    return jnp.stack(
        [
            jnp.dot(vs, r) + vs4,
            ((-1.0 + q[0] * q[0]) + q[1] * q[1]) + q[2] * q[2],
            jnp.dot(nr, r) + d1,
            jnp.dot(nr, p) + d1,
        ]
    )


def _lm_tangent(r, p, a, vs, vs4):
    """calcTangentPoint's damped Gauss–Newton iteration, step for step (returns r, d1)."""

    def res(r, d1):
        e = _ellipsoid_residual(r, d1, p, a, vs, vs4)
        return e, jnp.sum(e * e)

    d1 = -jnp.dot(2.0 * r / (a * a), r)
    _, ssq = res(r, d1)

    def outer(state):
        r, d1, ssq, ssqo, alpha, nit = state
        e, _ = res(r, d1)
        a2 = a * a
        J = jnp.concatenate(
            [
                jnp.stack([vs, 2.0 * r / a2, 2.0 * (2.0 * r) / a2, 2.0 * p / a2], axis=1),
                jnp.array([[0.0, 0.0, 1.0, 1.0]], vs.dtype),
            ]
        )  # dedth[parameter][equation]
        p1r1, p1m = unit(p - r), unit(p)
        pcos = jnp.dot(p1r1, p1m)
        dd = jnp.where(pcos > 0.1, 1.0 - pcos**100, 1.0)
        v = -jnp.sum(J * e, axis=1)  # products as sums: see common.rotate
        JJ = jnp.sum(J[:, None, :] * J[None, :, :], axis=2)
        diag = jnp.diag(JJ)

        def damp_body(s):
            r, d1, ssq, ssqo, alpha, vt, n2 = s
            M = JJ - jnp.diag(diag) + jnp.diag(diag * (1.0 + alpha))
            # OpenSim inverts M; M is symmetric positive definite (a damped Gram matrix), and an
            # unrolled Cholesky solve fuses where LAPACK's inverse is two library calls per step
            vt = dd * cholesky_solve_bm(M[:, :, None], v[:, None])[:, 0] / 16.0
            r, d1 = r + vt[:3], d1 + vt[3]
            _, new = res(r, d1)
            return r, d1, new, ssq, alpha * 4.0, vt, n2 + 1

        s = (r, d1, ssq, ssqo, alpha, jnp.zeros(4, r.dtype), 0)
        r, d1, ssq, ssqo, alpha, vt, _ = jax.lax.while_loop(
            lambda s: (s[2] >= s[3]) & (s[6] < _LM_MAXIT2), damp_body, s
        )
        alpha = alpha / 8.0

        def grow_body(s):
            r, d1, ssq, ssqo, fakt, n2 = s
            fakt = fakt * 2.0
            r, d1 = r + vt[:3] * fakt, d1 + vt[3] * fakt
            _, new = res(r, d1)
            return r, d1, new, ssq, fakt, n2 + 1

        s = (r, d1, ssq, ssqo, jnp.asarray(0.5, r.dtype), 0)
        r, d1, ssq, ssqo, fakt, _ = jax.lax.while_loop(
            lambda s: (s[2] <= s[3]) & (s[5] < _LM_MAXIT2), grow_body, s
        )
        r, d1 = r - vt[:3] * fakt, d1 - vt[3] * fakt
        _, ssq = res(r, d1)
        return r, d1, ssq, ssq, alpha, nit + 1

    state = (r, d1, ssq, ssq, jnp.asarray(0.01, r.dtype), 0)
    r, d1, *_ = jax.lax.while_loop(lambda s: (s[2] > _ELL_TINY) & (s[5] < _LM_MAXIT), outer, state)
    return r, d1


_lm_point = iterate_jvp(lambda r, p, a, vs, vs4: _lm_tangent(r, p, a, vs, vs4)[0])


def _tangent_point(pe, r, p, a, vs, vs4):
    """calcTangentPoint: slide r (start: c1) in the plane (vs, vs4) until the line p → r is
    tangent to the ellipsoid; p itself when it lies on the surface (|pe| < 1e-4)."""
    return jnp.where(jnp.abs(pe) < _ELL_P_TOL, p, _lm_point(r, p, a, vs, vs4))


_ARC_SHORT = 64  # segments of the arc's first, cheaper form


def distance_on_ellipsoid(r1, r2, a, vs, vs4, factor, far_side):
    """OpenSim's WrapEllipsoid::CalcDistanceOnEllipsoid: the surface path from r1 to r2 in the
    plane (vs, vs4), in OpenSim's normalized units (the ellipsoid scaled by ``factor``).

    Args:
        r1, r2: (3,) tangent points on the normalized ellipsoid of semi-axes ``a`` (3,).
        vs, vs4: the wrapping plane ``vs · x + vs4 = 0`` (vs (3,) a unit normal).
        factor: the normalization, 3 / (sum of the semi-axes in m) (1/m).
        far_side: the long way round (bool, static or traced).

    Returns (length (normalized), the path's second point (3,), the point before its last (3,),
    the segment count n).

    n = ⌊|r1 − r2| / 1 mm⌋ (at most 499) segments; the interior points are rays from the point
    a0 where the plane crosses the coordinate axis most normal to it, at equal angle steps from
    r1 (the short way, or the long way round for a far-side wrap), cast to the surface. Below 1 mm
    the chord. Points past n repeat r2 (zero-length segments), so an arc of at most
    :data:`_ARC_SHORT` segments is computed with that many points (a ``lax.cond``: a muscle's
    arc over an arm's ellipsoid is a few tens of millimetres, and the 499 rays cost more than the
    rest of the wrap; under a vectorized batch both forms run).
    """
    chord = safe_norm(r1 - r2)
    length_m = chord / factor
    n = jnp.clip(jnp.floor(length_m / _SEG_LENGTH), 1, _MAX_SEG).astype(jnp.int32)
    imax = jnp.argmax(jnp.abs(vs))
    e = jnp.arange(3) == imax
    a0 = jnp.where(e, -vs4 / _safe_den(jnp.sum(jnp.where(e, vs, 0.0))), 0.0)
    ar1, ar2 = unit(r1 - a0), unit(r2 - a0)
    phi0 = acos(jnp.dot(ar1, ar2))
    nf = n.astype(r1.dtype)
    dphi = jnp.where(far_side, -(2.0 * jnp.pi - phi0) / nf, phi0 / nf)
    vsz = unit(jnp.cross(ar1, ar2))
    vsy = jnp.cross(vsz, ar1)
    f2 = a0 / a
    cc = jnp.dot(f2, f2) - 1.0

    def along(m):
        # the path's points 0 … m for at most m segments: rays at angles 1 … m − 1 steps
        phi = jnp.arange(1, m, dtype=r1.dtype)[:, None] * dphi
        rr = ar1 * jnp.cos(phi) + vsy * jnp.sin(phi)
        f1 = rr / a
        aa = jnp.sum(f1 * f1, axis=1)
        bb = 2.0 * jnp.sum(f1 * f2, axis=1)
        mu3 = (-bb + sqrt0(bb * bb - 4.0 * aa * cc)) / (2.0 * aa)
        s = a0 + mu3[:, None] * rr
        j = jnp.arange(m + 1)[:, None]
        pts = jnp.where(j == 0, r1, jnp.where(j < n, jnp.concatenate([r1[None], s, r2[None]]), r2))
        return jnp.sum(safe_norm(pts[1:] - pts[:-1])), pts[1], pts[jnp.maximum(n - 1, 0)]

    arc, w1, w2 = jax.lax.cond(
        n <= _ARC_SHORT, partial(along, _ARC_SHORT), partial(along, _MAX_SEG)
    )
    short = length_m < _SEG_LENGTH
    return jnp.where(short, chord, arc), w1, w2, jnp.where(short, 1, n)


def ellipsoid_wrap_line(p1, p2, dimensions, quadrant, single=True):
    """OpenSim's WrapEllipsoid::wrapLine (method "hybrid") for the ellipsoid Σ (x_i / d_i)² = 1.

    Args:
        p1, p2: (3,) segment ends in the wrap frame (m).
        dimensions: (3,) semi-axes d (m).
        quadrant: ``None`` ("all") or ``(axis, sign)``, either possibly traced, sign 0 = "all".
        single: unused (OpenSim's ellipsoid has no multi-object branch); kept for the common
            signature.

    Returns (code, r1 (3,), r2 (3,), wrap_length (m)): :data:`MANDATORY_WRAP` whenever the line
    crosses the ellipsoid between p1 and p2, else :data:`NO_WRAP`, or :data:`INSIDE_RADIUS` for an
    end inside. r1, r2 are p1, p2 when there is no wrap.

    Dependence on the previous call: OpenSim seeds r1, r2, c1, sv from ``PathWrap``'s previous
    result, but with method hybrid every branch that reaches the wrap overwrites c1 and sv, and
    r1 = r2 = c1 before the tangent search. The only route left is a general-case Newton solve in
    findClosestPoint that fails to converge in 64 checks (OpenSim then leaves the output as it
    was): for the fan samples this keeps the previous sample's point, reproduced here; for the
    final projection of the pure-fan c1 it would keep the previous call's c1, for which this port
    uses the unprojected fan point (how often that solve fails was not counted; all finite
    reference cases agree to 3.3e-16 m). The test references build one fresh model and state per
    case.

    Where a CalcDistanceOnEllipsoid ray from a0 misses the surface (a0 outside a slender
    ellipsoid) OpenSim takes the square root of a negative number and returns NaN; this port
    takes the ray as tangent and stays finite.

    Derivatives: jax.grad gives the derivative of the length OpenSim computes, iterations stopped
    where OpenSim stops them (the Newton and tangent-point loops by the forward-mode Jacobians of
    their iterates), so it equals central differences of OpenSim's length wherever the discrete
    choices (branches, iteration counts, the number of surface segments) stay put; it is not the
    derivative of a geodesic. The length jumps where ⌊|r1 − r2| / 1 mm⌋ changes, as OpenSim's does.
    """
    p1 = jnp.asarray(p1)
    p2 = jnp.asarray(p2)
    dims = jnp.asarray(dimensions, dtype=p1.dtype)
    axis, sign = (0, 0.0) if quadrant is None else quadrant
    # rematerialized in reverse mode: the Newton iterations of 301 nearest-point solves would
    # otherwise be stored for every wrap of every pass of GeometryPath's multi-object loop
    return jax.checkpoint(traced_apart_forward(_ellipsoid_wrap))(
        p1, p2, dims, jnp.asarray(axis), jnp.asarray(sign, dtype=p1.dtype)
    )


def _ellipsoid_crossing(P1, P2, a):
    """The line P1 P2 against the ellipsoid of semi-axes a (scaled frame): (p1e, p2e, disc, l1,
    l2): each end's implicit-surface value, the discriminant and the two crossing parameters."""
    q1, q2 = P1 / a, P2 / a
    p1e = ((-1.0 + q1[0] * q1[0]) + q1[1] * q1[1]) + q1[2] * q1[2]
    p2e = ((-1.0 + q2[0] * q2[0]) + q2[1] * q2[1]) + q2[2] * q2[2]
    f1, f2 = (P1 - P2) / a, P2 / a
    aa = jnp.dot(f1, f1)
    bb = 2.0 * jnp.dot(f1, f2)
    cc = jnp.dot(f2, f2) - 1.0
    disc = bb * bb - 4.0 * aa * cc
    sq = sqrt0(disc)
    return p1e, p2e, disc, (-bb + sq) / (2.0 * aa), (-bb - sq) / (2.0 * aa)


def _ellipsoid_code(P1, P2, a):
    """WrapEllipsoid::wrapLine's result code from the scaled ends alone: (code, inside, wraps)."""
    p1e, p2e, disc, l1, l2 = _ellipsoid_crossing(P1, P2, a)
    inside = (p1e < -_ELL_P_TOL) | (p2e < -_ELL_P_TOL)
    ppm = jnp.dot(unit(P1), unit(P2)) - 1.0
    collinear = jnp.abs(ppm) < _ELL_P_TOL
    hits = (disc >= 0.0) & (0.0 < l1) & (l1 < 1.0) & (0.0 < l2) & (l2 < 1.0)
    wraps = ~inside & ~collinear & hits
    code = jnp.where(inside, INSIDE_RADIUS, jnp.where(wraps, MANDATORY_WRAP, NO_WRAP))
    return code, inside, wraps


def ellipsoid_wrap_code(p1, p2, dimensions):
    """The code :func:`ellipsoid_wrap_line` returns, without the wrap: MANDATORY_WRAP, NO_WRAP or
    INSIDE_RADIUS (OpenSim's ellipsoid never reports WRAPPED, so choosing among a PathWrap's
    candidate segments needs no tangent points or lengths)."""
    dims = jnp.asarray(dimensions, dtype=jnp.asarray(p1).dtype)
    factor = 3.0 / (dims[0] + dims[1] + dims[2])
    return _ellipsoid_code(p1 * factor, p2 * factor, dims * factor)[0]


def _ellipsoid_wrap(p1, p2, dims, axis, sign):
    e_ax = jnp.arange(3) == axis
    factor = 3.0 / (dims[0] + dims[1] + dims[2])
    P1, P2, a = p1 * factor, p2 * factor, dims * factor
    code, inside, wraps = _ellipsoid_code(P1, P2, a)
    # the construction below runs on a stand-in segment that wraps where this one does not, so
    # that no NaN from the branches not taken reaches jax.grad
    P1 = jnp.where(wraps, P1, a * jnp.array([1.5, 0.2, 0.1], a.dtype))
    P2 = jnp.where(wraps, P2, a * jnp.array([-1.5, 0.3, -0.1], a.dtype))
    p1e, p2e, _, l1, l2 = _ellipsoid_crossing(P1, P2, a)
    p1p2 = P1 - P2
    r1 = P2 + l1 * p1p2
    r2 = P2 + l2 * p1p2
    r1r2 = r2 - r1  # OpenSim's name; r1 → r2

    # (1) Frans: the crossing of the line with each coordinate plane, reduced to the ellipse there
    mu = jnp.abs(unit(p1p2))
    t = -r1 / jnp.where(r1r2 == 0, _ROUNDOFF, r1r2)
    t_sv = r1 + t[:, None] * r1r2
    # (2) fan: 298 points of r1 → r2 and their nearest surface points
    tt = jnp.arange(1, _N_FAN - 1, dtype=p1.dtype) / _N_FAN
    fan_sv = r1 + tt[:, None] * r1r2
    t_c1 = _plane_points(a, t_sv, jnp.arange(3))
    fan_c, fan_ok = _fan_points(a, dims, fan_sv)
    best = jnp.argmax(mu)
    mu_b, t_b = mu[best], t[best]
    s = jnp.where(
        (t_b < 0.0) | (t_b > 1.0),
        0.0,
        jnp.where(
            t_b < _SV_BLEND,
            t_b / _SV_BLEND,
            jnp.where(t_b > 1.0 - _SV_BLEND, (1.0 - t_b) / _SV_BLEND, 1.0),
        ),
    )
    mu_b = jnp.where(
        (mu_b > _MU_BLEND_MIN) & (s < 1.0), _MU_BLEND_MIN + s * (mu_b - _MU_BLEND_MIN), mu_b
    )
    c1_frans = t_c1[best]  # (OpenSim's sv only feeds its axial method and the display)

    # the fan direction: the mean of the unit vectors from the points to their surface points (an
    # unconverged solve keeps the point before it, as OpenSim's reused output variable does)
    mid = r1 + 0.5 * r1r2
    last_ok = jax.lax.cummax(jnp.where(fan_ok, jnp.arange(tt.shape[0]), -1))
    fan_c = jnp.where((last_ok >= 0)[:, None], fan_c[jnp.maximum(last_ok, 0)], t_c1[0])
    v_sum = jnp.sum(unit(fan_c - fan_sv), axis=0)
    c_fan = mid + unit(v_sum)
    w_frans = (mu_b - _MU_BLEND_MIN) / (_MU_BLEND_MAX - _MU_BLEND_MIN)
    pure_fan = mu_b <= _MU_BLEND_MIN
    pure_frans = mu_b >= _MU_BLEND_MAX
    fan_weight = jnp.where(pure_frans, -jnp.inf, jnp.where(pure_fan, 1.0, 1.0 - w_frans))
    fw = jnp.minimum(fan_weight, 1.0)

    def blend_input(proj, ok):
        return w_frans * c1_frans + (1.0 - w_frans) * jnp.where(ok[0], proj[0], t_c1[1])

    def c1_of(proj, ok):
        fan = jnp.where(ok[0], proj[0], c_fan)
        mix = jnp.where(ok[1], proj[1], c1_frans)
        return jnp.where(pure_frans, c1_frans, jnp.where(pure_fan, fan, mix))

    # quadrant: mirror c1 to the active side; a fan-based c1 is pulled toward the bisecting plane
    # (OpenSim's EQUAL_WITHIN_ERROR(fanWeight, -Infinity) is never true: a pure Frans c1 is only
    # mirrored)
    def quadrant_input(c1):
        c_ax = jnp.sum(jnp.where(e_ax, c1, 0.0))
        bis = (c_ax + (-c_ax)) / 2.0
        return jnp.where(e_ax, -c_ax + jnp.maximum(fw, 0.0) * (bis - (-c_ax)), c1)

    # the three projections c_fan → blend → quadrant depend on each other: one scanned solve
    def project(carry, k):
        proj, ok = carry
        c1 = c1_of(proj, ok)
        x = jnp.where(k == 0, c_fan, jnp.where(k == 1, blend_input(proj, ok), quadrant_input(c1)))
        y, good = _closest_point(a, dims, x)
        return (proj.at[k].set(y), ok.at[k].set(good)), x

    init = (jnp.zeros((3, 3), p1.dtype), jnp.zeros(3, bool))
    (proj, ok), inputs = jax.lax.scan(project, init, jnp.arange(3))
    c1 = c1_of(proj, ok)
    c_ax = jnp.sum(jnp.where(e_ax, c1, 0.0))
    flip = (sign != 0) & (dsign(c_ax) != sign)
    c1m = jnp.where(e_ax, -c1, c1)
    c1_q = jnp.where(fw > 0.0, jnp.where(ok[2], proj[2], inputs[2]), c1m)
    r_start = jnp.where(flip, c1m, c1)
    c1 = jnp.where(flip, c1_q, c1)

    # the wrapping plane through p1, p2 and c1; tangent points from c1 toward p1 and p2
    vs = unit(jnp.cross(p1p2, P1 - c1))
    vs4 = -jnp.dot(vs, c1)
    # both tangent points (and below both arcs) in one vmapped call: one compiled loop nest
    R1, R2 = jax.vmap(_tangent_point, in_axes=(0, None, 0, None, None, None))(
        jnp.stack([p1e, p2e]), r_start, jnp.stack([P1, P2]), a, vs, vs4
    )

    length, w1, w2, n = distance_on_ellipsoid(R1, R2, a, vs, vs4, factor, False)
    wrong = (jnp.dot(unit(P1 - R1), unit(w1 - R1)) > 0.0) | (
        jnp.dot(unit(P2 - R2), unit(w2 - R2)) > 0.0
    )
    # the far side's arc is computed only where it is taken
    far = (sign != 0) & (n >= 2) & wrong
    length = jax.lax.cond(
        far, lambda: distance_on_ellipsoid(R1, R2, a, vs, vs4, factor, True)[0], lambda: length
    )

    return (
        code,
        jnp.where(wraps, R1 / factor, p1),
        jnp.where(wraps, R2 / factor, p2),
        jnp.where(wraps, length / factor, 0.0),
    )


class WrapEllipsoid(AbstractWrapObject):
    """An ellipsoid, semi-axes ``dimensions`` (m) along the wrap-frame axes.

    Wraps with OpenSim's own WrapEllipsoid algorithm (method "hybrid"), :func:`ellipsoid_wrap_line`.
    """

    dimensions: Float[Array, " 3"]

    def __init__(self, body, translation, rotation, dimensions, quadrant="all", name=""):
        self._frame(body, translation, rotation, quadrant, name)
        self.dimensions = jnp.asarray(dimensions, dtype=float)

    def size_parameters(self):
        return self.dimensions

    def check(self, where):
        check_positive(self.dimensions, where)

    @staticmethod
    def wrap_segment(p1, p2, size, axis, sign, single):
        return ellipsoid_wrap_line(p1, p2, size, (axis, sign), single)

    @classmethod
    def screen_segment(cls, p1, p2, size, axis, sign, single):
        # the ellipsoid's code is never WRAPPED: the choice needs the code alone
        return ellipsoid_wrap_code(p1, p2, size), p1, p2, jnp.zeros((), p1.dtype)
