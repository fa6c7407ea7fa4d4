"""OpenSim 4.6's muscle-wrapping algorithms, reimplemented in JAX (jit/vmap/grad-able).

Each ``*_wrap_line`` function wraps one straight path segment p1 → p2, given in the wrap object's
own frame, and returns ``(code, r1, r2, wrap_length)``: OpenSim's ``WrapObject::WrapAction`` code
(:data:`NO_WRAP`, :data:`INSIDE_RADIUS`, :data:`WRAPPED`, :data:`MANDATORY_WRAP`), the tangent
points r1 (near p1) and r2 (near p2) in the wrap frame, and the length of the path on the surface
between them (m). The discrete choices OpenSim makes with ``if`` are made here with ``jnp.where``,
so the result is differentiable wherever OpenSim's own path is smooth.

Ported in our own words from opensim-core (Apache-2.0), files
``OpenSim/Simulation/Wrap/WrapCylinder.cpp`` (``wrapLine``, ``_make_spiral_path``,
``_adjust_tangent_point``), ``WrapSphere.cpp`` (``wrapLine``) and ``WrapMath.cpp``
(``IntersectLines``, ``IntersectLineSegPlane``, ``GetClosestPointOnLineToPoint``). Their quirks are
kept on purpose, because the goal is OpenSim's numbers, not the exact geodesic:

- cylinder: the preliminary tangent points are slid along the axis to the plane through p1, p2
  and an "apex" point, and the surface path is the helix between them; with more than one wrap
  object on the path (``single=False``) OpenSim then slides each tangent point by 1.5× the
  correction until the tangent line and the helix meet within 0.1° (at most 100 passes), using a
  helix sample at 1/n of its length, n = ⌊length / 2 mm⌋;
- sphere: tangent points in the plane through p1, p2 and the centre, the great-circle arc between
  them; a constrained far-side wrap returns a *negative* arc length, as OpenSim does.
- ellipsoid (``WrapEllipsoid.cpp``: ``wrapLine`` with method hybrid, ``calcTangentPoint``,
  ``CalcDistanceOnEllipsoid``, ``findClosestPoint``, ``closestPointToEllipse``): coordinates
  scaled by 3 / Σ dimensions; the wrapping plane passes through p1, p2 and a surface point c1 that
  blends "Frans" (the crossing with the coordinate plane most normal to the line, reduced to an
  ellipse; faded out within 30 % of the chord ends) and "fan" (the mean direction from 298 points
  of the chord to their nearest surface points) by the line's largest direction cosine between
  0.7073 and 0.9; with a quadrant, c1 is mirrored to the active side (and pulled toward the
  bisecting plane by the fan weight, except that OpenSim's ``EQUAL_WITHIN_ERROR(fanWeight,
  -Infinity)`` is never true, so a pure Frans c1 is only mirrored); nearest points by Eberly's
  Newton iteration (64 checks, |f| < 1e-9, planar special case within 2e-13 of a coordinate
  plane, an unconverged solve leaves its output unchanged); tangent points by a damped
  Gauss–Newton iteration stopped at a squared residual of 1e-8 (at most 50 × 1000 steps), so they
  are *not* exact tangent points; the surface length is a polyline of ⌊chord / 1 mm⌋ (≤ 499)
  segments through rays cast in the plane from the point where it crosses the coordinate axis
  most normal to it; a constrained path that leaves r1 or r2 backwards goes the long way round.
  The code is always MANDATORY_WRAP when the line crosses the ellipsoid between p1 and p2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "NO_WRAP",
    "INSIDE_RADIUS",
    "WRAPPED",
    "MANDATORY_WRAP",
    "QUADRANTS",
    "cylinder_wrap_line",
    "sphere_wrap_line",
    "torus_wrap_line",
    "ellipsoid_wrap_line",
]

NO_WRAP, INSIDE_RADIUS, WRAPPED, MANDATORY_WRAP = 0, 1, 2, 3

# OpenSim's quadrant names -> (axis, sign); "all" -> None (WrapObject::extendFinalizeFromProperties)
QUADRANTS = {"all": None, "ALL": None, "All": None}
for _a, _n in enumerate("xyz"):
    for _s, _pre in ((1.0, ("", "+")), (-1.0, ("-",))):
        for _p in _pre:
            QUADRANTS[_p + _n] = (_a, _s)
            QUADRANTS[_p + _n.upper()] = (_a, _s)

_LINE_EPSILON = 1e-5  # SimmMacros.h
_TANGENCY = 0.1 * jnp.pi / 180.0  # WrapCylinder.cpp TANGENCY_THRESHOLD
_MAX_ADJUST = 100
_DN = jnp.array([0.0, 0.0, 1.0])


def _norm(v):
    sq = jnp.sum(v * v, axis=-1)
    ok = sq > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def _unit(v):
    """v / |v|, or zeros for a zero vector (WrapMath::NormalizeOrZero)."""
    n = _norm(v)
    return v / jnp.where(n > 0, n, 1.0)[..., None]


@jax.custom_jvp
def _acos(x):
    # OpenSim lets acos see rounding-level |x| > 1 (NaN); clipping keeps the path finite
    return jnp.arccos(jnp.clip(x, -1.0, 1.0))


@_acos.defjvp
def _acos_jvp(primals, tangents):
    # arccos' is infinite at |x| = 1; a zero there (instead of inf, or 0·inf = NaN through the
    # clip and through jnp.where branches not taken) keeps moment arms finite
    (x,), (dx,) = primals, tangents
    inner = 1.0 - x * x
    ok = inner > 0
    slope = jnp.where(ok, -1.0 / jnp.sqrt(jnp.where(ok, inner, 1.0)), 0.0)
    return _acos(x), slope * dx


def _sqrt0(v):
    """sqrt(max(v, 0)) with a zero (not infinite) derivative at and below 0."""
    ok = v > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, v, 1.0)), 0.0)


def _dsign(x):
    return jnp.where(x >= 0, 1.0, -1.0)


def _closest_on_line(pt, line_pt, line):
    """Closest point to ``pt`` on the line through ``line_pt`` along ``line`` (any length)."""
    return line_pt + jnp.dot(pt - line_pt, _unit(line)) * _unit(line)


def _det_rows(a, b, c):
    return jnp.dot(a, jnp.cross(b, c))


def _intersect_lines(p1, p2, p3, p4):
    """Closest points between lines p1p2 and p3p4: (on first, s along p1→p2, on second, ok)."""
    d1, d2 = p2 - p1, p4 - p3
    m1, m2 = _norm(d1), _norm(d2)
    v1, v2 = _unit(d1), _unit(d2)
    c = jnp.cross(v1, v2)
    den = jnp.dot(c, c)
    ok = den > 2e-13  # SimmMacros ROUNDOFF_ERROR
    den = jnp.where(ok, den, 1.0)
    t = _det_rows(p3 - p1, v1, c) / den
    s = _det_rows(p3 - p1, v2, c) / den
    return p1 + s * v1, s / jnp.where(m1 > 0, m1, 1.0), p3 + t * v2, t / m2, ok


def _seg_plane(a, b, normal, d):
    """Intersection of segment a→b with the plane n·x + d = 0: (point, hit)."""
    vec = b - a
    dp = jnp.dot(vec, normal)
    okd = jnp.abs(dp) >= _LINE_EPSILON
    t = (-d - jnp.dot(normal, a)) / jnp.where(okd, dp, 1.0)
    hit = okd & (t >= -_LINE_EPSILON) & (t <= 1.0 + _LINE_EPSILON)
    return a + t * vec, hit


def _axis_rotate(v, axis, angle):
    """Rotate v by ``angle`` about the unit ``axis`` (Rodrigues)."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    return v * c + jnp.cross(axis, v) * s + axis * jnp.dot(axis, v) * (1.0 - c)


def _iterate_jvp(iterate):
    """``iterate`` (an early-exit loop: OpenSim's iterations stop on tolerances) made
    differentiable in forward and reverse mode: its tangent is the forward-mode Jacobian of the
    iterate where it stops, formed from the primal values, times the input tangents. That is the
    derivative of the length OpenSim computes (what central differences of it give), not of the
    exact root it approaches; reverse mode cannot pass the loop itself. Arguments that are not
    floating point (flags) get no tangent."""
    f = jax.custom_jvp(iterate)

    @f.defjvp
    def _jvp(primals, tangents):
        diff = [i for i, x in enumerate(primals) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]

        def of_diff(*xs):
            args = list(primals)
            for i, x in zip(diff, xs, strict=True):
                args[i] = x
            return iterate(*args)

        out = iterate(*primals)
        J = jax.jacfwd(of_diff, argnums=tuple(range(len(diff))))(*(primals[i] for i in diff))

        def contract(_, Jo):
            return sum(
                jnp.tensordot(Jk, tangents[i], axes=jnp.ndim(tangents[i]))
                for Jk, i in zip(Jo, diff, strict=True)
            )

        return out, jax.tree_util.tree_map(contract, out, J)

    return f


# ----------------------------------------------------------------------------- cylinder
def _tangent_candidates(p, r):
    """The two tangent points on the cylinder seen from p, in the cross-section plane of p."""
    pa = jnp.array([0.0, 0.0, 1.0]) * p[2]
    vv = _unit(p - pa)
    dist_p = _norm(p - pa)
    sin_t = r / jnp.where(dist_p > 0, dist_p, 1.0)
    d = r * sin_t
    pp = pa + d * vv
    h = _sqrt0(r * r - d * d)
    uu = jnp.cross(_DN, vv)
    return pp + h * uu, pp - h * uu, pa, dist_p


def _spiral(r1, r2, radius, long_wrap):
    """Helix data between r1 and r2 (WrapCylinder::_make_spiral_path, first half).

    OpenSim 4.6 measures theta as the *signed* angle about the cylinder axis, atan2 in (−π, π],
    and a long wrap takes 2π − theta: a long wrap whose signed angle is negative thus runs
    2π + |theta| around the axis (one extra turn's worth of length), and the helix is swept about
    the axis itself, not about uu × vv.
    """
    r1a = jnp.array([0.0, 0.0, 1.0]) * r1[2]
    r2a = jnp.array([0.0, 0.0, 1.0]) * r2[2]
    axial = r2a - r1a
    uu = (r1 - r1a) / radius
    vv = (r2 - r2a) / radius
    sin_t, cos_t = jnp.dot(jnp.cross(uu, vv), _DN), jnp.dot(uu, vv)
    ok = sin_t * sin_t + cos_t * cos_t > 0
    theta = jnp.arctan2(jnp.where(ok, sin_t, 0.0), jnp.where(ok, cos_t, 1.0))
    theta = jnp.where(long_wrap, 2.0 * jnp.pi - theta, theta)
    length = _sqrt0((radius * theta) ** 2 + jnp.dot(axial, axial))
    return r1a, axial, uu, _DN, theta, length


def _spiral_point(r1a, axial, uu, ax, sense, t, theta, radius):
    return r1a + radius * _axis_rotate(uu, ax, sense * t * theta) + t * axial


def _adjust_tangent(pt, r, w):
    """WrapCylinder::_adjust_tangent_point: (new r, adjusted?)."""
    alpha = _acos(jnp.dot(_unit(r - pt), _DN))
    omega = _acos(jnp.dot(_unit(w - r), _DN))
    adjust = jnp.abs(alpha - omega) > _TANGENCY
    pa = _closest_on_line(pt, r, _DN)
    wa = _closest_on_line(w, r, _DN)
    _, _, on_axis_line, _, _ = _intersect_lines(pt, w, pa, wa)
    return jnp.where(adjust, r + 1.5 * (on_axis_line - r), r), adjust


def _most_parallel_pair(r1a, r1b, r2a, r2b, u1a, u1b, u2a, u2b):
    """OpenSim's pick among two tangent candidates per end (WrapCylinder/WrapSphere::wrapLine):
    the pair whose unit directions u are most nearly parallel, ties in OpenSim's order."""
    j1, j2, j3, j4 = u1a @ u2a, u1a @ u2b, u1b @ u2a, u1b @ u2b
    c1 = (j1 > j2) & (j1 > j3) & (j1 > j4)
    c2 = ~c1 & (j2 > j3) & (j2 > j4)
    c3 = ~c1 & ~c2 & (j3 > j4)
    return jnp.where(c1 | c2, r1a, r1b), jnp.where(c1 | c3, r2a, r2b)


def _slide_iterate(p1, p2, r1, r2, radius, long_wrap):
    """OpenSim 4.6's multi-object tangency loop (WrapCylinder::wrapLine): each tangent point slides
    by 1.5x toward the line through its path point and the helix's first (last) 2 mm sample until
    both are within 0.1 deg of tangency, at most 100 times. An early-exit while loop."""
    sense = jnp.where(long_wrap, -1.0, 1.0)

    def body(state):
        a1, a2, _, k = state
        r1a_, axial, uu, ax_, theta, wl = _spiral(a1, a2, radius, long_wrap)
        n = jnp.maximum(jnp.floor(wl / 0.002), 1.0)
        tt = 1.0 / n
        w1 = _spiral_point(r1a_, axial, uu, ax_, sense, tt, theta, radius)
        b1, adj1 = _adjust_tangent(p1, a1, w1)
        # OpenSim 4.6 samples r2's helix point from the r1 it has just slid (axially)
        w2 = _spiral_point(_DN * b1[2], axial, uu, ax_, sense, 1.0 - tt, theta, radius)
        b2, adj2 = _adjust_tangent(p2, a2, w2)
        go = (n >= 2) & (adj1 | adj2)
        return jnp.where(go, b1, a1), jnp.where(go, b2, a2), go, k + 1

    init = (r1, r2, jnp.asarray(True), jnp.asarray(0))
    r1, r2, _, _ = jax.lax.while_loop(lambda s: s[2] & (s[3] < _MAX_ADJUST), body, init)
    return r1, r2


_slide_tangents = _iterate_jvp(_slide_iterate)


def cylinder_wrap_line(p1, p2, radius, length, quadrant, single=True):
    """OpenSim's WrapCylinder::wrapLine for the cylinder x² + y² = radius² along z, |z| ≤ length/2.

    Args:
        p1, p2: (3,) segment ends in the wrap frame (m). radius, length: m (``length`` may be inf).
        quadrant: ``None`` ("all") or ``(axis, sign)``, both possibly traced, ``sign == 0`` for
            "all". single: True when the path has only this wrap object (static; OpenSim 4.6 then
            skips the tangent-point sliding iteration).
    Returns:
        (code, r1 (3,), r2 (3,), wrap_length (m)).
    """
    r = radius
    r2_ = r * r
    inside = (jnp.sum(p1[:2] ** 2) < r2_) | (jnp.sum(p2[:2] ** 2) < r2_)
    half = 0.5 * length
    start_z = jnp.where(jnp.isfinite(half), -half, 0.0)
    cyl_start = jnp.array([0.0, 0.0, 1.0]) * start_z
    near12, t12, near00, _, ok = _intersect_lines(p1, p2, cyl_start, cyl_start + _DN)
    crosses = ok & (jnp.sum((near12 - near00) ** 2) < r2_) & (t12 > 0.0) & (t12 < 1.0)

    r1a, r1b, p11, d1 = _tangent_candidates(p1, r)
    r2a, r2b, p22, d2 = _tangent_candidates(p2, r)
    far_side = jnp.asarray(False)
    long_wrap = jnp.asarray(False)
    code = jnp.where(crosses, MANDATORY_WRAP, NO_WRAP)
    u1a, u1b = _unit(r1a - p11), _unit(r1b - p11)
    u2a, u2b = _unit(r2a - p22), _unit(r2b - p22)
    r1, r2 = _most_parallel_pair(r1a, r1b, r2a, r2b, u1a, u1b, u2a, u2b)
    if quadrant is not None:
        # a traced quadrant may be "all" (sign 0): both results are computed, one is selected
        code_all, r1_all, r2_all = code, r1, r2
        ax, sg = quadrant
        every = sg == 0.0
        sg = jnp.where(every, 1.0, sg)
        s1, s2 = _dsign(p1[ax]), _dsign(p2[ax])
        either = (s1 == sg) | (s2 == sg)
        maybe = (s1 != s2) & (_dsign(near12[ax]) != sg)
        code = jnp.where(
            either, jnp.where(crosses, MANDATORY_WRAP, jnp.where(maybe, WRAPPED, NO_WRAP)), WRAPPED
        )
        m1a, m1b, m2a, m2b = r1a - p11, r1b - p11, r2a - p22, r2b - p22
        alpha = _acos(m1a @ m2b / (_norm(m1a) * _norm(m2b)))
        beta = _acos(m1b @ m2a / (_norm(m1b) * _norm(m2a)))
        a_gt = alpha > beta
        on1a, on1b = _dsign(r1a[ax]) == sg, _dsign(r1b[ax]) == sg
        on2a, on2b = _dsign(r2a[ax]) == sg, _dsign(r2b[ax]) == sg
        # choice "b-a": r1 = r1b, r2 = r2a, far side when alpha <= beta;
        # choice "a-b": r1 = r1a, r2 = r2b, far side when alpha > beta
        both1, neither1 = on1a & on1b, ~on1a & ~on1b
        pick_ba = jnp.where(
            both1,
            on2a,
            jnp.where(on1a, False, jnp.where(on1b, True, jnp.where(on2a, True, ~(on2b | a_gt)))),
        )
        far_side = jnp.where(pick_ba, ~a_gt, a_gt)
        far_side = jnp.where(neither1 & ~on2a & ~on2b, True, far_side)
        r1 = jnp.where(pick_ba, r1b, r1a)
        r2 = jnp.where(pick_ba, r2a, r2b)
        sum_musc = (r1 - p1) + (r2 - p2)
        sum_r = (r1 - p11) + (r2 - p22)
        long_wrap = jnp.dot(sum_r, sum_musc) < 0.0

        code = jnp.where(every, code_all, code)
        r1 = jnp.where(every, r1_all, r1)
        r2 = jnp.where(every, r2_all, r2)
        far_side = far_side & ~every
        long_wrap = long_wrap & ~every

    # apex of the wrap: on the cylinder, in the plane of p1, p2 and the axis point below mpt
    t = d1 / (d1 + d2)
    mpt = p1 + t * (p2 - p1)
    axispt = jnp.array([0.0, 0.0, 1.0]) * mpt[2]
    pn = _unit(jnp.cross(_unit(p1 - axispt), _unit(p2 - axispt)))
    apex1 = axispt + r * _unit(jnp.cross(_DN, pn))
    apex2 = axispt + r * _unit(jnp.cross(pn, _DN))
    closer1 = jnp.sum((mpt - apex1) ** 2) < jnp.sum((mpt - apex2) ** 2)
    apex = jnp.where(closer1 != far_side, apex1, apex2)

    # slide r1, r2 along the cylinder's generators to the plane (p1, p2, apex)
    pn = _unit(jnp.cross(_unit(p1 - apex), _unit(p2 - apex)))
    d = -jnp.dot(p1, pn)
    r1p, hit1 = _seg_plane(r1 - 10.0 * _DN, r1 + 10.0 * _DN, pn, d)
    r2p, hit2 = _seg_plane(r2 - 10.0 * _DN, r2 + 10.0 * _DN, pn, d)
    # (OpenSim passes p22 / p11 as the line *direction* here; both lie on the z axis)
    z1, z2 = p11[2], p22[2]
    c1p = _closest_on_line(r1p, p11, p22)[2]
    c2p = _closest_on_line(r2p, p22, p11)[2]
    r1 = jnp.where(hit1 & ((c1p - z2) ** 2 < (z1 - z2) ** 2), r1p, r1)
    r2 = jnp.where(hit2 & ((c2p - z1) ** 2 < (z2 - z1) ** 2), r2p, r2)

    beyond = ((r1[2] < -half) | (r1[2] > half)) & ((r2[2] < -half) | (r2[2] > half))

    if not single:
        r1, r2 = _slide_tangents(p1, p2, r1, r2, jnp.asarray(r, p1.dtype), long_wrap)

    wrap_len = _spiral(r1, r2, r, long_wrap)[-1]
    code = jnp.where(inside, INSIDE_RADIUS, jnp.where(beyond, NO_WRAP, code))
    return code, r1, r2, wrap_len


# ----------------------------------------------------------------------------- sphere
def sphere_wrap_line(p1, p2, radius, quadrant):
    """OpenSim's WrapSphere::wrapLine for the sphere |x| = radius (wrap frame).

    ``quadrant``: ``None`` ("all") or ``(axis, sign)``, possibly traced, ``sign == 0`` for "all".
    Returns (code, r1 (3,), r2 (3,), wrap_length (m, negative for a constrained far-side wrap)).
    """
    r = radius
    n1, n2 = _norm(p1), _norm(p2)
    inside = (n1 < r) | (n2 < r)
    ri = p1 - p2
    mp = -p2
    a = jnp.dot(ri, ri)
    b = -2.0 * jnp.dot(mp, ri)
    c = jnp.dot(mp, mp) - r * r
    disc = b * b - 4.0 * a * c
    sq = _sqrt0(disc)
    l1 = (-b + sq) / (2.0 * a)
    l2 = (-b - sq) / (2.0 * a)
    hits = (disc >= 0.0) & (0.0 < l1) & (l1 < 1.0) & (0.0 < l2) & (l2 < 1.0) & (l1 >= l2)

    p1p2 = _unit(p1 - p2)
    nvec = _unit(jnp.cross(p1p2, _unit(p2)))

    def candidates(p, n_p):
        y = _unit(-p)
        z = jnp.cross(nvec, y)
        # p on or inside the sphere clips r/|p| to 1, where arcsin' is infinite: 0·inf = NaN through
        # the clip would reach jax.grad even of a discarded (INSIDE_RADIUS) candidate segment; the
        # double where keeps arcsin(±1) = ±π/2 with slope 0 there, as _acos does
        s_ = jnp.clip(r / n_p, -1.0, 1.0)
        in_ = jnp.abs(s_) < 1.0
        a_ = jnp.where(in_, jnp.arcsin(jnp.where(in_, s_, 0.0)), _dsign(s_) * (0.5 * jnp.pi))
        # rows of [n y z]·Rx(±a): the y column is y cos a ∓ z sin a (WrapMath::Make3x3DirCosMatrix)
        ca, sa = jnp.cos(a_), jnp.sin(a_)
        return p + (y * ca - z * sa) * n_p * ca, p + (y * ca + z * sa) * n_p * ca

    r1a, r1b = candidates(p1, n1)
    r2a, r2b = candidates(p2, n2)
    u1a, u1b, u2a, u2b = _unit(r1a), _unit(r1b), _unit(r2a), _unit(r2b)
    r1, r2 = _most_parallel_pair(r1a, r1b, r2a, r2b, u1a, u1b, u2a, u2b)
    code = jnp.where(hits, WRAPPED, NO_WRAP)
    far_side = jnp.asarray(False)
    if quadrant is not None:
        # a traced quadrant may be "all" (sign 0): both results are computed, one is selected
        code_all, r1_all, r2_all = code, r1, r2
        ax, sg = quadrant
        every = sg == 0.0
        sg = jnp.where(every, 1.0, sg)
        s1, s2 = _dsign(p1[ax]), _dsign(p2[ax])
        either = (s1 == sg) | (s2 == sg)
        # closest point of the line to the centre (OpenSim measures t along p2 → p1, then negates)
        # (tt is a distance in m here, compared with 1 as OpenSim does)
        mm = p1 + jnp.dot(-p1, p1p2) * p1p2
        tt = jnp.dot(p1, p1p2)
        mand = (jnp.dot(mm, mm) < r * r) & (tt > 0.0) & (tt < 1.0)
        maybe = (s1 != s2) & (_dsign(mm[ax]) != sg)
        code = jnp.where(
            hits & either,
            jnp.where(mand, MANDATORY_WRAP, jnp.where(maybe, WRAPPED, NO_WRAP)),
            code,
        )
        flip_case = (s1 != sg) | (s2 != sg)
        axis_vec = jnp.zeros(3).at[ax].set(sg)
        sm = _unit(-p1 - p2)
        q1 = jnp.where(u1a @ sm > u1b @ sm, r1a, r1b)
        o1 = jnp.where(u1a @ sm > u1b @ sm, r1b, r1a)
        q2 = jnp.where(u2a @ sm > u2b @ sm, r2a, r2b)
        o2 = jnp.where(u2a @ sm > u2b @ sm, r2b, r2a)
        flip = jnp.dot(_unit((q1 - p1) + (q2 - p2)), axis_vec) < 0.0
        q1, q2 = jnp.where(flip, o1, q1), jnp.where(flip, o2, q2)
        far = jnp.dot((q1 + q2), (q1 - p1) + (q2 - p2)) < 0.0
        r1 = jnp.where(flip_case, q1, r1)
        r2 = jnp.where(flip_case, q2, r2)
        far_side = flip_case & far
        code = jnp.where(every, code_all, code)
        r1 = jnp.where(every, r1_all, r1)
        r2 = jnp.where(every, r2_all, r2)
        far_side = far_side & ~every
    angle = _acos(jnp.dot(_unit(r1), _unit(r2)))
    angle = jnp.where(far_side, -(2.0 * jnp.pi - angle), angle)
    code = jnp.where(inside, INSIDE_RADIUS, code)
    return code, r1, r2, r * angle


# ----------------------------------------------------------------------------- torus
_CYL_LENGTH = 10000.0  # WrapTorus.cpp CYL_LENGTH
# MINPACK lmdif as OpenSim 4.6 calls it from WrapTorus::findClosestPoint (OpenSim/Common/
# Lmdif.cpp, with its local changes: forward-difference step fixed at 1e-5, initial step bound
# `factor` whenever factor·|diag·x| ≤ 1e-4, Jacobian evaluations not counted in nfev)
_LM_FTOL = _LM_XTOL = 1e-4
_LM_FACTOR = 0.2
_LM_MAXFEV = 500
_LM_EPS = 1e-5
_MACHEP = 1.2e-16
_DWARF = 1.0e-38


def _circle_coeffs(a, b):
    """WrapTorus::calcCircleResids' constants for the line a → b (its own operation order)."""
    d = b - a
    mag = jnp.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    nx, ny, nz = d[0] / mag, d[1] / mag, d[2] / mag
    c2 = 2.0 * (a[0] * nx + a[1] * ny + a[2] * nz)
    c3 = a[0] * nx + a[1] * ny
    c4 = nx * nx + ny * ny
    c5 = a[0] * a[0] + a[1] * a[1]
    return c2, c3, c4, c5


def _circle_resid(u, a, b, radius):
    """OpenSim's residual (it weighs the radial term twice, so its root is the line point nearest
    the circle of radius 2·radius in the z = 0 plane, not the torus's centre circle)."""
    c2, c3, c4, c5 = _circle_coeffs(a, b)
    rho = jnp.sqrt(jnp.maximum(u * u * c4 + 2.0 * c3 * u + c5, 1e-300))
    return c2 + 2.0 * u - 2.0 * radius * (2.0 * c4 * u + 2.0 * c3) / rho


def _lmpar1(r, diag, qtb, delta, par):
    """MINPACK lmpar for one variable: (step x, Levenberg–Marquardt parameter, sdiag)."""
    sing = r == 0.0
    x0 = jnp.where(sing, 0.0, qtb / jnp.where(sing, 1.0, r))
    dxnorm = jnp.abs(diag * x0)
    fp0 = dxnorm - delta
    gauss_newton = fp0 <= 0.1 * delta
    dx_safe = jnp.where(dxnorm > 0, dxnorm, 1.0)
    r_safe = jnp.where(sing, 1.0, r)
    t = jnp.abs(diag * (diag * x0 / dx_safe) / r_safe)
    parl0 = jnp.where(sing, 0.0, (fp0 / delta) / t / t)
    gnorm = jnp.abs(r * qtb / diag)
    paru0 = gnorm / delta
    paru0 = jnp.where(paru0 == 0.0, _DWARF / jnp.minimum(delta, 0.1), paru0)
    par0 = jnp.minimum(jnp.maximum(par, parl0), paru0)
    par0 = jnp.where(par0 == 0.0, gnorm / dx_safe, par0)

    def qrsolv(p):
        s = jnp.sqrt(p) * diag
        small = jnp.abs(r) < jnp.abs(s)
        cot = r / jnp.where(small, s, 1.0)
        sn_c = 0.5 / jnp.sqrt(0.25 + 0.25 * cot * cot)
        tan = s / jnp.where(small | (r == 0.0), 1.0, r)
        cs_t = 0.5 / jnp.sqrt(0.25 + 0.25 * tan * tan)
        sn, cs = jnp.where(small, sn_c, cs_t * tan), jnp.where(small, sn_c * cot, cs_t)
        rot = s != 0.0
        sdiag = jnp.where(rot, cs * r + sn * s, r)
        wa = jnp.where(rot, cs * qtb + sn * 0.0, qtb)
        return jnp.where(sdiag == 0.0, 0.0, wa / jnp.where(sdiag == 0.0, 1.0, sdiag)), sdiag

    def body(st):
        it, p, parl, paru, fp, _, _, _ = st
        it = it + 1
        p = jnp.where(p == 0.0, jnp.maximum(_DWARF, 0.001 * paru), p)
        x, sdiag = qrsolv(p)
        dxn = jnp.abs(diag * x)
        fp_prev, fp = fp, dxn - delta
        stop = (
            (jnp.abs(fp) <= 0.1 * delta) | ((parl == 0.0) & (fp <= fp_prev) & (fp_prev < 0.0))
        ) | (it == 10)
        w = diag * (diag * x / jnp.where(dxn > 0, dxn, 1.0)) / jnp.where(sdiag == 0, 1.0, sdiag)
        parc = (fp / delta) / jnp.abs(w) / jnp.abs(w)
        parl_n = jnp.where(fp > 0.0, jnp.maximum(parl, p), parl)
        paru_n = jnp.where(fp < 0.0, jnp.minimum(paru, p), paru)
        p_n = jnp.maximum(parl_n, p + parc)
        return (
            it,
            jnp.where(stop, p, p_n),
            jnp.where(stop, parl, parl_n),
            jnp.where(stop, paru, paru_n),
            fp,
            x,
            sdiag,
            stop,
        )

    init = (0, par0, parl0, paru0, fp0, x0, r, gauss_newton)
    _, par_l, _, _, _, x_l, sdiag_l, _ = jax.lax.while_loop(lambda st: ~st[-1], body, init)
    return (
        jnp.where(gauss_newton, x0, x_l),
        jnp.where(gauss_newton, 0.0, par_l),
        jnp.where(gauss_newton, r, sdiag_l),
    )


def _lmdif1(a, b, radius):
    """OpenSim's lmdif_C on calcCircleResids from u = 0 (m = n = 1), iterate for iterate.

    ftol = xtol = 1e-4, gtol = 0, maxfev = 500, mode 1, factor 0.2 (WrapTorus::findClosestPoint).
    The QR factorization of the 1×1 Jacobian J is R = −J with Householder vector 2, so
    (Qᵀf)₁ = −f; lmpar and qrsolv reduce to their scalar Givens forms. Returns u (m along a → b).
    """
    f = lambda u: _circle_resid(u, a, b, radius)  # noqa: E731
    f0 = f(jnp.zeros((), a.dtype))
    z = jnp.zeros((), a.dtype)
    # state: x, fvec, fnorm, par, iter, delta, diag, xnorm, nfev, need_jac, r, qtf, gnorm, done
    init = (z, f0, jnp.abs(f0), z, 1, z, z, z, 1, True, z, z, z, False)

    def body(st):
        x, fvec, fnorm, par, it, delta, diag, xnorm, nfev, need_jac, r, qtf, gnorm, _ = st
        # L30: Jacobian by a forward difference, its QR factorization, Qᵀf, the scaled gradient
        jac = (f(x + _LM_EPS) - fvec) / _LM_EPS
        acn = jnp.abs(jac)
        r_j = jnp.where(jac != 0.0, -jac, 0.0)
        h = jnp.where(jac != 0.0, 2.0, jac)  # Householder-reduced column
        first = it == 1
        diag_j = jnp.where(first, jnp.where(acn == 0.0, 1.0, acn), diag)
        xnorm_j = jnp.where(first, jnp.abs(diag_j * x), xnorm)
        delta_j = _LM_FACTOR * xnorm_j
        delta_j = jnp.where(first, jnp.where(jnp.abs(delta_j) <= 1e-4, _LM_FACTOR, delta_j), delta)
        qtf_j = jnp.where(h != 0.0, fvec + h * (-(h * fvec) / jnp.where(h != 0, h, 1.0)), fvec)
        ok_g = (fnorm != 0.0) & (acn != 0.0)
        g_j = r_j * (qtf_j / jnp.where(ok_g, fnorm, 1.0)) / jnp.where(ok_g, acn, 1.0)
        gnorm_j = jnp.where(ok_g, jnp.abs(g_j), 0.0)
        stop_g = need_jac & (gnorm_j <= 0.0)
        diag_j = jnp.maximum(diag_j, acn)
        pick = lambda new, old: jnp.where(need_jac, new, old)  # noqa: E731
        r, qtf, gnorm = pick(r_j, r), pick(qtf_j, qtf), pick(gnorm_j, gnorm)
        diag, xnorm, delta = pick(diag_j, diag), pick(xnorm_j, xnorm), pick(delta_j, delta)
        # L200: one trial step
        step, par_n, _ = _lmpar1(r, diag, qtf, delta, par)
        p = -step
        xn = x + p
        pnorm = jnp.abs(diag * p)
        delta = jnp.where(it == 1, jnp.minimum(delta, pnorm), delta)
        f1 = f(xn)
        nfev = nfev + 1
        fnorm1 = jnp.abs(f1)
        fn_safe = jnp.where(fnorm != 0.0, fnorm, 1.0)
        actred = jnp.where(0.1 * fnorm1 < fnorm, 1.0 - (fnorm1 / fn_safe) ** 2, -1.0)
        temp1 = jnp.abs(r * p) / fn_safe
        temp2 = _sqrt0(par_n) * pnorm / fn_safe  # par 0: a finite derivative
        prered = temp1 * temp1 + temp2 * temp2 / 0.5
        dirder = -(temp1 * temp1 + temp2 * temp2)
        ratio = jnp.where(prered != 0.0, actred / jnp.where(prered != 0.0, prered, 1.0), 0.0)
        den = dirder + 0.5 * actred
        tmp = jnp.where(actred >= 0.0, 0.5, 0.5 * dirder / jnp.where(den != 0, den, 1.0))
        tmp = jnp.where((0.1 * fnorm1 >= fnorm) | (tmp < 0.1), 0.1, tmp)
        shrink = ratio <= 0.25
        grow = ~shrink & ((par_n == 0.0) | (ratio >= 0.75))
        delta = jnp.where(shrink, tmp * jnp.minimum(delta, pnorm / 0.1), delta)
        delta = jnp.where(grow, pnorm / 0.5, delta)
        par_n = jnp.where(shrink, par_n / tmp, jnp.where(grow, 0.5 * par_n, par_n))
        succ = ratio >= 1e-4
        x = jnp.where(succ, xn, x)
        fvec = jnp.where(succ, f1, fvec)
        xnorm = jnp.where(succ, jnp.abs(diag * xn), xnorm)
        fnorm = jnp.where(succ, fnorm1, fnorm)
        it = it + succ.astype(int)
        small_red = (jnp.abs(actred) <= _LM_FTOL) & (prered <= _LM_FTOL) & (0.5 * ratio <= 1.0)
        tiny_red = (jnp.abs(actred) <= _MACHEP) & (prered <= _MACHEP) & (0.5 * ratio <= 1.0)
        stop = small_red | (delta <= _LM_XTOL * xnorm) | (nfev >= _LM_MAXFEV) | tiny_red
        stop = stop | (delta <= _MACHEP * xnorm) | (gnorm <= _MACHEP)
        new = (x, fvec, fnorm, par_n, it, delta, diag, xnorm, nfev, succ, r, qtf, gnorm, stop)
        # a zero scaled gradient (gtol = 0) ends lmdif before the step (info 4)
        kept = tuple(jnp.where(stop_g, o_, n_) for n_, o_ in zip(new[:-1], st[:-1], strict=True))
        return kept + (stop | stop_g,)

    out = jax.lax.while_loop(lambda st: ~st[-1], body, init)
    return out[0]


# lmdif stops on ftol/xtol (1e-4), and where the line passes near the torus axis the residual
# jumps and lmdif ends off any root (MoBL-ARMS ECRL: f = -5.5e-3 at its last iterate, where the
# root's implicit derivative -f_t/f_u gave a 10.9 m moment arm): the iterate is differentiated
_circle_u = _iterate_jvp(_lmdif1)


def _circle_pass(a, b, radius):
    """WrapTorus::findClosestPoint's pass along a → b: OpenSim's lmdif from u = 0 on its residual.

    Returns the point a + u·(b − a)/|b − a|.
    """
    return a + _circle_u(a, b, radius) * _unit(b - a)


def torus_wrap_line(p1, p2, inner_radius, outer_radius, quadrant=None, single=True):
    """OpenSim's WrapTorus::wrapLine for the torus about the wrap frame's z axis.

    The point of the torus's centre circle (radius ``outer_radius``) nearest the line p1p2 is
    found from both ends; a cylinder of radius ``inner_radius`` tangent to the circle there,
    constrained to the side facing the torus axis ("+x" of its frame), wraps the segment. As in
    OpenSim the code is WRAPPED whenever a nearest point is found, and NO_WRAP otherwise.
    ``quadrant``: ``None`` ("all") or ``(axis, sign)``, possibly traced, ``sign == 0`` for "all".
    Returns (code, r1 (3,), r2 (3,), wrap_length (m)).
    """
    a1 = _circle_pass(p1, p2, outer_radius)
    a2 = _circle_pass(p2, p1, outer_radius)

    def dist(a):
        rho = _norm(a[:2])
        return _sqrt0(jnp.dot(a, a) + outer_radius**2 - 2 * outer_radius * rho)

    d1, d2 = dist(a1), dist(a2)
    pick2 = ~(d1 < d2)
    found = jnp.asarray(True)
    if quadrant is not None:
        ax, sg = quadrant
        every = sg == 0.0  # "all" (traced quadrants)
        on1, on2 = _dsign(a1[ax]) == sg, _dsign(a2[ax]) == sg
        pick2 = jnp.where(every, pick2, jnp.where(on1 & on2, pick2, ~on1))
        found = every | on1 | on2
    a = jnp.where(pick2, a2, a1)
    c = outer_radius * jnp.array([a[0], a[1], 0.0]) / _norm(a[:2])
    cx = _unit(-c)
    cy = jnp.array([0.0, 0.0, -1.0])
    cz = jnp.cross(cx, cy)
    R = jnp.stack([cx, cy, cz])  # rows: cylinder axes in the torus frame
    code, r1, r2, wl = cylinder_wrap_line(
        R @ (p1 - c), R @ (p2 - c), inner_radius, _CYL_LENGTH, (0, 1.0), single
    )
    on = code >= WRAPPED
    r1 = R.T @ r1 + c
    r2 = R.T @ r2 + c
    code = jnp.where(found & on, WRAPPED, NO_WRAP)
    return code, r1, r2, wl


# ----------------------------------------------------------------------------- ellipsoid
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


def _eberly_iterate(a2p, wp, t0p, a2g, wg, t0g):
    """Newton's method on the quartic (planar case) and the sextic (general case) side by side:
    at most 64 checks of |f| < 1e-9 each, t frozen once converged, 63 steps at most."""

    def newton(t, done, fval):
        f, fp = fval(t)
        done = done | (jnp.abs(f) < 1e-9)
        return jnp.where(done, t, t - f / _safe_den(fp)), done

    def body(state):
        tp, dp, tg, dg, i = state
        tp, dp = newton(tp, dp, lambda t: _quartic(t, a2p, wp))
        tg, dg = newton(tg, dg, lambda t: _sextic(t, a2g, wg))
        return tp, dp, tg, dg, i + 1

    false = jnp.asarray(False)
    tp, _, tg, _, _ = jax.lax.while_loop(
        lambda s: ~(s[1] & s[3]) & (s[4] < 63), body, (t0p, false, t0g, false, 0)
    )
    return tp, tg


# 301 solves per wrap, up to 63 steps each: reverse mode stores no Newton step. (The root's implicit
# derivative was tried: 5x cheaper, but it departs from the iterate's, and so from central
# differences of OpenSim's length, by up to 2.6e-7 relative.)
_eberly_roots = _iterate_jvp(_eberly_iterate)


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
    x_nx = jnp.where(top, u, a * _sqrt0(jnp.abs(1.0 - (y_nx / b) ** 2)))
    # near the x axis (v == 0)
    side = (b >= a) | (jnp.abs(u) >= a - b2 / a)
    x_ny = jnp.where(side, jnp.where(u >= 0, a, -a), a2 * u / _safe_den(a2 - b2))
    y_ny = jnp.where(side, v, b * _sqrt0(jnp.abs(1.0 - (x_ny / a) ** 2)))
    xg, yg = a2 * u / _safe_den(t + a2), b2 * v / _safe_den(t + b2)
    x = jnp.where(near_x & near_y, xb, jnp.where(near_x, x_nx, jnp.where(near_y, x_ny, xg)))
    y = jnp.where(near_x & near_y, yb, jnp.where(near_x, y_nx, jnp.where(near_y, y_ny, yg)))
    return x, y


_PLANE_AXES = ((1, 2), (2, 0), (0, 1))  # findClosestPoint's 2-d cross-section per special axis


def _closest_point(a, dims, x, axis=-1):
    """findClosestPoint (Eberly) as OpenSim computes it. Returns (point (3,), ok).

    ``axis`` (int, may be traced) is OpenSim's specialCaseAxis: 0, 1, 2 keep x[axis] and solve in
    the elliptical cross-section (closestPointToEllipse); -1 picks that case when a coordinate is
    within ROUNDOFF_ERROR of 0 (the one whose other two dimensions sum least, first on ties), and
    otherwise solves the sextic. Both Newton solves start at t = 0 (inside) or max(a)·|x|
    (outside) and stop at |f| < 1e-9 after at most 64 checks; the planar one then uses its last
    t, the general one reports ``ok`` False (OpenSim leaves its output untouched, which the
    callers reproduce). One loop runs both solves.
    """
    sums = jnp.sum(dims) - dims
    near = jnp.abs(x) <= _ROUNDOFF
    auto = jnp.argmin(jnp.where(near, sums, jnp.inf))
    special = (axis >= 0) | jnp.any(near)
    ax = jnp.where(axis >= 0, axis, auto)
    # each solve sees a harmless stand-in point when not taken, so that no NaN reaches jax.grad
    xp = jnp.where(special, x, 0.5 * a)
    j, k = jnp.asarray(_PLANE_AXES)[ax]
    ap, up = jnp.stack([a[j], a[k]]), jnp.stack([xp[j], xp[k]])
    inside_p = jnp.sum((up / ap) * (up / ap)) < 1.0
    t0p = jnp.where(inside_p, 0.0, jnp.max(ap) * _sqrt0(jnp.dot(up, up)))
    xg = jnp.where(special, 1.5 * a, x)
    inside_g = jnp.sum((xg / a) * (xg / a)) < 1.0
    t0g = jnp.where(inside_g, 0.0, jnp.max(a) * _sqrt0(jnp.dot(xg, xg)))
    a2 = a * a
    a2p = ap * ap
    tp, tg = _eberly_roots(a2p, a2p * (up * up), t0p, a2, a2 * (xg * xg), t0g)
    # t is frozen at convergence, so the 64th check is this one
    done = jnp.abs(_sextic(tg, a2, a2 * (xg * xg))[0]) < 1e-9
    yj, yk = _ellipse_point(a[j], a[k], xp[j], xp[k], tp)
    planar = xp.at[j].set(yj).at[k].set(yk)
    general = a2 * xg / _safe_den(tg + a2)
    return jnp.where(special, planar, general), special | done


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
                jnp.array([[0.0, 0.0, 1.0, 1.0]]),
            ]
        )  # dedth[parameter][equation]
        p1r1, p1m = _unit(p - r), _unit(p)
        pcos = jnp.dot(p1r1, p1m)
        dd = jnp.where(pcos > 0.1, 1.0 - pcos**100, 1.0)
        v = -(J @ e)
        JJ = J @ J.T
        diag = jnp.diag(JJ)

        def damp_body(s):
            r, d1, ssq, ssqo, alpha, vt, n2 = s
            M = JJ - jnp.diag(diag) + jnp.diag(diag * (1.0 + alpha))
            vt = dd * (jnp.linalg.inv(M) @ v) / 16.0
            r, d1 = r + vt[:3], d1 + vt[3]
            _, new = res(r, d1)
            return r, d1, new, ssq, alpha * 4.0, vt, n2 + 1

        s = (r, d1, ssq, ssqo, alpha, jnp.zeros(4), 0)
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


_lm_point = _iterate_jvp(lambda r, p, a, vs, vs4: _lm_tangent(r, p, a, vs, vs4)[0])


def _tangent_point(pe, r, p, a, vs, vs4):
    """calcTangentPoint: slide r (start: c1) in the plane (vs, vs4) until the line p → r is
    tangent to the ellipsoid; p itself when it lies on the surface (|pe| < 1e-4)."""
    return jnp.where(jnp.abs(pe) < _ELL_P_TOL, p, _lm_point(r, p, a, vs, vs4))


def _ellipsoid_arc(r1, r2, a, vs, vs4, factor, far_side):
    """CalcDistanceOnEllipsoid: (normalized length, the 500 path points, segment count n).

    n = ⌊|r1 − r2| / 1 mm⌋ (at most 499) segments; the interior points are rays from the point
    a0 where the plane crosses the coordinate axis most normal to it, at equal angle steps from
    r1 (the short way, or the long way round for a far-side wrap), cast to the surface. Below 1 mm
    the chord. Points past n repeat r2 (zero-length segments).
    """
    chord = _norm(r1 - r2)
    length_m = chord / factor
    n = jnp.clip(jnp.floor(length_m / _SEG_LENGTH), 1, _MAX_SEG).astype(jnp.int32)
    imax = jnp.argmax(jnp.abs(vs))
    e = jnp.arange(3) == imax
    a0 = jnp.where(e, -vs4 / _safe_den(jnp.sum(jnp.where(e, vs, 0.0))), 0.0)
    ar1, ar2 = _unit(r1 - a0), _unit(r2 - a0)
    phi0 = _acos(jnp.dot(ar1, ar2))
    nf = n.astype(r1.dtype)
    dphi = jnp.where(far_side, -(2.0 * jnp.pi - phi0) / nf, phi0 / nf)
    vsz = _unit(jnp.cross(ar1, ar2))
    vsy = jnp.cross(vsz, ar1)
    phi = jnp.arange(1, _MAX_SEG, dtype=r1.dtype)[:, None] * dphi
    rr = ar1 * jnp.cos(phi) + vsy * jnp.sin(phi)
    f1, f2 = rr / a, a0 / a
    aa = jnp.sum(f1 * f1, axis=1)
    bb = 2.0 * (f1 @ f2)
    cc = jnp.dot(f2, f2) - 1.0
    mu3 = (-bb + _sqrt0(bb * bb - 4.0 * aa * cc)) / (2.0 * aa)
    s = a0 + mu3[:, None] * rr
    j = jnp.arange(_MAX_SEG + 1)[:, None]
    pts = jnp.where(j == 0, r1, jnp.where(j < n, jnp.concatenate([r1[None], s, r2[None]]), r2))
    arc = jnp.sum(_norm(pts[1:] - pts[:-1]))
    short = length_m < _SEG_LENGTH
    return jnp.where(short, chord, arc), pts, jnp.where(short, 1, n)


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
    return jax.checkpoint(_ellipsoid_wrap)(
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
    sq = _sqrt0(disc)
    return p1e, p2e, disc, (-bb + sq) / (2.0 * aa), (-bb - sq) / (2.0 * aa)


def _ellipsoid_code(P1, P2, a):
    """WrapEllipsoid::wrapLine's result code from the scaled ends alone: (code, inside, wraps)."""
    p1e, p2e, disc, l1, l2 = _ellipsoid_crossing(P1, P2, a)
    inside = (p1e < -_ELL_P_TOL) | (p2e < -_ELL_P_TOL)
    ppm = jnp.dot(_unit(P1), _unit(P2)) - 1.0
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
    P1 = jnp.where(wraps, P1, a * jnp.array([1.5, 0.2, 0.1]))
    P2 = jnp.where(wraps, P2, a * jnp.array([-1.5, 0.3, -0.1]))
    p1e, p2e, _, l1, l2 = _ellipsoid_crossing(P1, P2, a)
    p1p2 = P1 - P2
    r1 = P2 + l1 * p1p2
    r2 = P2 + l2 * p1p2
    r1r2 = r2 - r1  # OpenSim's name; r1 → r2

    # (1) Frans: the crossing of the line with each coordinate plane, reduced to the ellipse there
    mu = jnp.abs(_unit(p1p2))
    t = -r1 / jnp.where(r1r2 == 0, _ROUNDOFF, r1r2)
    t_sv = r1 + t[:, None] * r1r2
    # (2) fan: 298 points of r1 → r2; their nearest surface points solved with Frans' three
    # planar ones in one batch
    tt = jnp.arange(1, _N_FAN - 1, dtype=p1.dtype) / _N_FAN
    fan_sv = r1 + tt[:, None] * r1r2
    near_c, near_ok = jax.vmap(lambda x, i: _closest_point(a, dims, x, i))(
        jnp.concatenate([t_sv, fan_sv]), jnp.concatenate([jnp.arange(3), jnp.full(tt.shape, -1)])
    )
    t_c1, fan_c, fan_ok = near_c[:3], near_c[3:], near_ok[3:]
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
    v_sum = jnp.sum(_unit(fan_c - fan_sv), axis=0)
    c_fan = mid + _unit(v_sum)
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
    flip = (sign != 0) & (_dsign(c_ax) != sign)
    c1m = jnp.where(e_ax, -c1, c1)
    c1_q = jnp.where(fw > 0.0, jnp.where(ok[2], proj[2], inputs[2]), c1m)
    r_start = jnp.where(flip, c1m, c1)
    c1 = jnp.where(flip, c1_q, c1)

    # the wrapping plane through p1, p2 and c1; tangent points from c1 toward p1 and p2
    vs = _unit(jnp.cross(p1p2, P1 - c1))
    vs4 = -jnp.dot(vs, c1)
    # both tangent points (and below both arcs) in one vmapped call: one compiled loop nest
    R1, R2 = jax.vmap(_tangent_point, in_axes=(0, None, 0, None, None, None))(
        jnp.stack([p1e, p2e]), r_start, jnp.stack([P1, P2]), a, vs, vs4
    )

    lengths, pts, n = jax.vmap(_ellipsoid_arc, in_axes=(None,) * 6 + (0,))(
        R1, R2, a, vs, vs4, factor, jnp.array([False, True])
    )
    pts, n = pts[0], n[0]
    w1, w2 = pts[1], pts[jnp.maximum(n - 1, 0)]
    wrong = (jnp.dot(_unit(P1 - R1), _unit(w1 - R1)) > 0.0) | (
        jnp.dot(_unit(P2 - R2), _unit(w2 - R2)) > 0.0
    )
    far = (sign != 0) & (n >= 2) & wrong
    length = jnp.where(far, lengths[1], lengths[0])

    return (
        code,
        jnp.where(wraps, R1 / factor, p1),
        jnp.where(wraps, R2 / factor, p2),
        jnp.where(wraps, length / factor, 0.0),
    )
