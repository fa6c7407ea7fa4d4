"""The cylinder: :class:`WrapCylinder` and OpenSim 4.6's ``WrapCylinder::wrapLine`` in JAX.

Ported in our own words from opensim-core (Apache-2.0), ``OpenSim/Simulation/Wrap/WrapCylinder.cpp``
(``wrapLine``, ``_make_spiral_path``, ``_adjust_tangent_point``). Its quirks are kept on purpose,
because the goal is OpenSim's numbers, not the exact geodesic: the preliminary tangent points are
slid along the axis to the plane through p1, p2 and an "apex" point, and the surface path is the
helix between them; with more than one wrap object on the path (``single=False``) OpenSim then
slides each tangent point by 1.5x the correction until the tangent line and the helix meet within
0.1° (at most 100 passes), using a helix sample at 1/n of its length, n = ⌊length / 2 mm⌋. The
discrete choices OpenSim makes with ``if`` are ``jnp.where`` selections here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...model import ModelError
from .base import AbstractWrapObject, check_positive
from .common import (
    INSIDE_RADIUS,
    MANDATORY_WRAP,
    NO_WRAP,
    WRAPPED,
    acos,
    axis_rotate,
    closest_on_line,
    dsign,
    intersect_lines,
    iterate_jvp,
    most_parallel_pair,
    safe_norm,
    segment_plane,
    sqrt0,
    unit,
)

__all__ = ["WrapCylinder", "cylinder_wrap_line"]

_TANGENCY = 0.1 * jnp.pi / 180.0  # WrapCylinder.cpp TANGENCY_THRESHOLD
_MAX_ADJUST = 100
_DN = np.array([0.0, 0.0, 1.0])  # numpy: importing starts no JAX backend


def _tangent_candidates(p, r):
    """The two tangent points on the cylinder seen from p, in the cross-section plane of p."""
    pa = _DN.astype(p.dtype) * p[2]
    vv = unit(p - pa)
    dist_p = safe_norm(p - pa)
    sin_t = r / jnp.where(dist_p > 0, dist_p, 1.0)
    d = r * sin_t
    pp = pa + d * vv
    h = sqrt0(r * r - d * d)
    uu = jnp.cross(_DN.astype(vv.dtype), vv)
    return pp + h * uu, pp - h * uu, pa, dist_p


def _spiral(r1, r2, radius, long_wrap):
    """Helix data between r1 and r2 (WrapCylinder::_make_spiral_path, first half).

    OpenSim 4.6 measures theta as the *signed* angle about the cylinder axis, atan2 in (−π, π],
    and a long wrap takes 2π − theta: a long wrap whose signed angle is negative thus runs
    2π + |theta| around the axis (one extra turn's worth of length), and the helix is swept about
    the axis itself, not about uu × vv.
    """
    r1a = _DN.astype(r1.dtype) * r1[2]
    r2a = _DN.astype(r2.dtype) * r2[2]
    axial = r2a - r1a
    uu = (r1 - r1a) / radius
    vv = (r2 - r2a) / radius
    sin_t, cos_t = jnp.dot(jnp.cross(uu, vv), _DN.astype(uu.dtype)), jnp.dot(uu, vv)
    ok = sin_t * sin_t + cos_t * cos_t > 0
    theta = jnp.arctan2(jnp.where(ok, sin_t, 0.0), jnp.where(ok, cos_t, 1.0))
    theta = jnp.where(long_wrap, 2.0 * jnp.pi - theta, theta)
    length = sqrt0((radius * theta) ** 2 + jnp.dot(axial, axial))
    return r1a, axial, uu, _DN.astype(uu.dtype), theta, length


def _spiral_point(r1a, axial, uu, ax, sense, t, theta, radius):
    return r1a + radius * axis_rotate(uu, ax, sense * t * theta) + t * axial


def _adjust_tangent(pt, r, w):
    """WrapCylinder::_adjust_tangent_point: (new r, adjusted?)."""
    alpha = acos(jnp.dot(unit(r - pt), _DN.astype(r.dtype)))
    omega = acos(jnp.dot(unit(w - r), _DN.astype(r.dtype)))
    adjust = jnp.abs(alpha - omega) > _TANGENCY
    pa = closest_on_line(pt, r, _DN.astype(r.dtype))
    wa = closest_on_line(w, r, _DN.astype(r.dtype))
    _, _, on_axis_line, _, _ = intersect_lines(pt, w, pa, wa)
    return jnp.where(adjust, r + 1.5 * (on_axis_line - r), r), adjust


def _slide_iterate(p1, p2, r1, r2, radius, long_wrap, slide):
    """OpenSim 4.6's multi-object tangency loop (WrapCylinder::wrapLine): each tangent point slides
    by 1.5x toward the line through its path point and the helix's first (last) 2 mm sample until
    both are within 0.1 deg of tangency, at most 100 times. An early-exit while loop; ``slide``
    (bool) False returns r1, r2 unchanged (no pass: under ``vmap`` such lanes cost no passes)."""
    sense = jnp.where(long_wrap, -1.0, 1.0)

    def body(state):
        a1, a2, _, k = state
        r1a_, axial, uu, ax_, theta, wl = _spiral(a1, a2, radius, long_wrap)
        n = jnp.maximum(jnp.floor(wl / 0.002), 1.0)
        tt = 1.0 / n
        w1 = _spiral_point(r1a_, axial, uu, ax_, sense, tt, theta, radius)
        b1, adj1 = _adjust_tangent(p1, a1, w1)
        # OpenSim 4.6 samples r2's helix point from the r1 it has just slid (axially)
        w2 = _spiral_point(
            _DN.astype(b1.dtype) * b1[2], axial, uu, ax_, sense, 1.0 - tt, theta, radius
        )
        b2, adj2 = _adjust_tangent(p2, a2, w2)
        go = (n >= 2) & (adj1 | adj2)
        return jnp.where(go, b1, a1), jnp.where(go, b2, a2), go, k + 1

    init = (r1, r2, jnp.asarray(slide), jnp.asarray(0))
    r1, r2, _, _ = jax.lax.while_loop(lambda s: s[2] & (s[3] < _MAX_ADJUST), body, init)
    return r1, r2


_slide_tangents = iterate_jvp(_slide_iterate)


def cylinder_wrap_line(p1, p2, radius, length, quadrant, single=True, slide_where=None):
    """OpenSim's WrapCylinder::wrapLine for the cylinder x² + y² = radius² along z, |z| ≤ length/2.

    Args:
        p1, p2: (3,) segment ends in the wrap frame (m). radius, length: m (``length`` may be inf).
        quadrant: ``None`` ("all") or ``(axis, sign)``, both possibly traced, ``sign == 0`` for
            "all". single: True when the path has only this wrap object (OpenSim 4.6 then skips
            the tangent-point sliding iteration); a Python bool or a traced boolean scalar.
        slide_where: with ``single`` False, slide only where the code is this one (None: always,
            as OpenSim does; a screen that reads tangent points only where the code is WRAPPED
            passes WRAPPED).
    Returns:
        (code, r1 (3,), r2 (3,), wrap_length (m)).
    """
    r = radius
    r2_ = r * r
    inside = (jnp.sum(p1[:2] ** 2) < r2_) | (jnp.sum(p2[:2] ** 2) < r2_)
    half = 0.5 * length
    start_z = jnp.where(jnp.isfinite(half), -half, 0.0)
    cyl_start = _DN.astype(p1.dtype) * start_z
    near12, t12, near00, _, ok = intersect_lines(
        p1, p2, cyl_start, cyl_start + _DN.astype(p1.dtype)
    )
    crosses = ok & (jnp.sum((near12 - near00) ** 2) < r2_) & (t12 > 0.0) & (t12 < 1.0)

    r1a, r1b, p11, d1 = _tangent_candidates(p1, r)
    r2a, r2b, p22, d2 = _tangent_candidates(p2, r)
    far_side = jnp.asarray(False)
    long_wrap = jnp.asarray(False)
    code = jnp.where(crosses, MANDATORY_WRAP, NO_WRAP)
    u1a, u1b = unit(r1a - p11), unit(r1b - p11)
    u2a, u2b = unit(r2a - p22), unit(r2b - p22)
    r1, r2 = most_parallel_pair(r1a, r1b, r2a, r2b, u1a, u1b, u2a, u2b)
    if quadrant is not None:
        # a traced quadrant may be "all" (sign 0): both results are computed, one is selected
        code_all, r1_all, r2_all = code, r1, r2
        ax, sg = quadrant
        every = jnp.asarray(sg == 0.0)
        sg = jnp.where(every, 1.0, sg)
        s1, s2 = dsign(p1[ax]), dsign(p2[ax])
        either = (s1 == sg) | (s2 == sg)
        maybe = (s1 != s2) & (dsign(near12[ax]) != sg)
        code = jnp.where(
            either, jnp.where(crosses, MANDATORY_WRAP, jnp.where(maybe, WRAPPED, NO_WRAP)), WRAPPED
        )
        m1a, m1b, m2a, m2b = r1a - p11, r1b - p11, r2a - p22, r2b - p22
        alpha = acos(m1a @ m2b / (safe_norm(m1a) * safe_norm(m2b)))
        beta = acos(m1b @ m2a / (safe_norm(m1b) * safe_norm(m2a)))
        a_gt = alpha > beta
        on1a, on1b = dsign(r1a[ax]) == sg, dsign(r1b[ax]) == sg
        on2a, on2b = dsign(r2a[ax]) == sg, dsign(r2b[ax]) == sg
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
    axispt = _DN.astype(mpt.dtype) * mpt[2]
    pn = unit(jnp.cross(unit(p1 - axispt), unit(p2 - axispt)))
    apex1 = axispt + r * unit(jnp.cross(_DN.astype(pn.dtype), pn))
    apex2 = axispt + r * unit(jnp.cross(pn, _DN.astype(pn.dtype)))
    closer1 = jnp.sum((mpt - apex1) ** 2) < jnp.sum((mpt - apex2) ** 2)
    apex = jnp.where(closer1 != far_side, apex1, apex2)

    # slide r1, r2 along the cylinder's generators to the plane (p1, p2, apex)
    pn = unit(jnp.cross(unit(p1 - apex), unit(p2 - apex)))
    d = -jnp.dot(p1, pn)
    r1p, hit1 = segment_plane(
        r1 - 10.0 * _DN.astype(r1.dtype), r1 + 10.0 * _DN.astype(r1.dtype), pn, d
    )
    r2p, hit2 = segment_plane(
        r2 - 10.0 * _DN.astype(r2.dtype), r2 + 10.0 * _DN.astype(r2.dtype), pn, d
    )
    # (OpenSim passes p22 / p11 as the line *direction* here; both lie on the z axis)
    z1, z2 = p11[2], p22[2]
    c1p = closest_on_line(r1p, p11, p22)[2]
    c2p = closest_on_line(r2p, p22, p11)[2]
    r1 = jnp.where(hit1 & ((c1p - z2) ** 2 < (z1 - z2) ** 2), r1p, r1)
    r2 = jnp.where(hit2 & ((c2p - z1) ** 2 < (z2 - z1) ** 2), r2p, r2)

    beyond = ((r1[2] < -half) | (r1[2] > half)) & ((r2[2] < -half) | (r2[2] > half))
    code = jnp.where(inside, INSIDE_RADIUS, jnp.where(beyond, NO_WRAP, code))

    if single is not True:  # False, or a traced flag (one kernel for paths of one and several)
        slide = jnp.asarray(True) if slide_where is None else code == slide_where
        slide = slide & ~jnp.asarray(single)  # a one-object path's loop makes no pass
        r1, r2 = _slide_tangents(p1, p2, r1, r2, jnp.asarray(r, p1.dtype), long_wrap, slide)

    wrap_len = _spiral(r1, r2, r, long_wrap)[-1]
    return code, r1, r2, wrap_len


class WrapCylinder(AbstractWrapObject):
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

    def size_parameters(self):
        return (self.radius, self.length, 1.0)

    def check(self, where):
        check_positive(self.radius, where)
        if not float(self.length) > 0:
            raise ModelError(f"{where}: cylinder length must be positive, got {float(self.length)}")

    @staticmethod
    def wrap_segment(p1, p2, size, axis, sign, single):
        return cylinder_wrap_line(p1, p2, size[0], size[1], (axis, sign), single)

    @classmethod
    def screen_segment(cls, p1, p2, size, axis, sign, single):
        # the code does not depend on OpenSim's multi-object tangent sliding, and the choice reads
        # tangent points and length only where the code is WRAPPED: slide only there
        return cylinder_wrap_line(p1, p2, size[0], size[1], (axis, sign), single, WRAPPED)
