"""The sphere: :class:`WrapSphere` and OpenSim 4.6's ``WrapSphere::wrapLine`` in JAX.

Ported in our own words from opensim-core (Apache-2.0), ``OpenSim/Simulation/Wrap/WrapSphere.cpp``:
tangent points in the plane through p1, p2 and the centre, the great-circle arc between them; a
constrained far-side wrap returns a *negative* arc length, as OpenSim does.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from .base import AbstractWrapObject, check_positive
from .common import (
    INSIDE_RADIUS,
    MANDATORY_WRAP,
    NO_WRAP,
    WRAPPED,
    acos,
    dsign,
    most_parallel_pair,
    safe_norm,
    sqrt0,
    unit,
)

__all__ = ["WrapSphere", "sphere_wrap_line"]


def sphere_wrap_line(p1, p2, radius, quadrant):
    """OpenSim's WrapSphere::wrapLine for the sphere |x| = radius (wrap frame).

    ``quadrant``: ``None`` ("all") or ``(axis, sign)``, possibly traced, ``sign == 0`` for "all".
    Returns (code, r1 (3,), r2 (3,), wrap_length (m, negative for a constrained far-side wrap)).
    """
    r = radius
    n1, n2 = safe_norm(p1), safe_norm(p2)
    inside = (n1 < r) | (n2 < r)
    ri = p1 - p2
    mp = -p2
    a = jnp.dot(ri, ri)
    b = -2.0 * jnp.dot(mp, ri)
    c = jnp.dot(mp, mp) - r * r
    disc = b * b - 4.0 * a * c
    sq = sqrt0(disc)
    l1 = (-b + sq) / (2.0 * a)
    l2 = (-b - sq) / (2.0 * a)
    hits = (disc >= 0.0) & (0.0 < l1) & (l1 < 1.0) & (0.0 < l2) & (l2 < 1.0) & (l1 >= l2)

    p1p2 = unit(p1 - p2)
    nvec = unit(jnp.cross(p1p2, unit(p2)))

    def candidates(p, n_p):
        y = unit(-p)
        z = jnp.cross(nvec, y)
        # p on or inside the sphere clips r/|p| to 1, where arcsin' is infinite: 0·inf = NaN through
        # the clip would reach jax.grad even of a discarded (INSIDE_RADIUS) candidate segment; the
        # double where keeps arcsin(±1) = ±π/2 with slope 0 there, as acos does
        s_ = jnp.clip(r / n_p, -1.0, 1.0)
        in_ = jnp.abs(s_) < 1.0
        a_ = jnp.where(in_, jnp.arcsin(jnp.where(in_, s_, 0.0)), dsign(s_) * (0.5 * jnp.pi))
        # rows of [n y z]·Rx(±a): the y column is y cos a ∓ z sin a (WrapMath::Make3x3DirCosMatrix)
        ca, sa = jnp.cos(a_), jnp.sin(a_)
        return p + (y * ca - z * sa) * n_p * ca, p + (y * ca + z * sa) * n_p * ca

    r1a, r1b = candidates(p1, n1)
    r2a, r2b = candidates(p2, n2)
    u1a, u1b, u2a, u2b = unit(r1a), unit(r1b), unit(r2a), unit(r2b)
    r1, r2 = most_parallel_pair(r1a, r1b, r2a, r2b, u1a, u1b, u2a, u2b)
    code = jnp.where(hits, WRAPPED, NO_WRAP)
    far_side = jnp.asarray(False)
    if quadrant is not None:
        # a traced quadrant may be "all" (sign 0): both results are computed, one is selected
        code_all, r1_all, r2_all = code, r1, r2
        ax, sg = quadrant
        every = jnp.asarray(sg == 0.0)
        sg = jnp.where(every, 1.0, sg)
        s1, s2 = dsign(p1[ax]), dsign(p2[ax])
        either = (s1 == sg) | (s2 == sg)
        # closest point of the line to the centre (OpenSim measures t along p2 → p1, then negates)
        # (tt is a distance in m here, compared with 1 as OpenSim does)
        mm = p1 + jnp.dot(-p1, p1p2) * p1p2
        tt = jnp.dot(p1, p1p2)
        mand = (jnp.dot(mm, mm) < r * r) & (tt > 0.0) & (tt < 1.0)
        maybe = (s1 != s2) & (dsign(mm[ax]) != sg)
        code = jnp.where(
            hits & either,
            jnp.where(mand, MANDATORY_WRAP, jnp.where(maybe, WRAPPED, NO_WRAP)),
            code,
        )
        flip_case = (s1 != sg) | (s2 != sg)
        axis_vec = jnp.zeros(3).at[ax].set(sg)
        sm = unit(-p1 - p2)
        q1 = jnp.where(u1a @ sm > u1b @ sm, r1a, r1b)
        o1 = jnp.where(u1a @ sm > u1b @ sm, r1b, r1a)
        q2 = jnp.where(u2a @ sm > u2b @ sm, r2a, r2b)
        o2 = jnp.where(u2a @ sm > u2b @ sm, r2b, r2a)
        flip = jnp.dot(unit((q1 - p1) + (q2 - p2)), axis_vec) < 0.0
        q1, q2 = jnp.where(flip, o1, q1), jnp.where(flip, o2, q2)
        far = jnp.dot((q1 + q2), (q1 - p1) + (q2 - p2)) < 0.0
        r1 = jnp.where(flip_case, q1, r1)
        r2 = jnp.where(flip_case, q2, r2)
        far_side = flip_case & far
        code = jnp.where(every, code_all, code)
        r1 = jnp.where(every, r1_all, r1)
        r2 = jnp.where(every, r2_all, r2)
        far_side = far_side & ~every
    angle = acos(jnp.dot(unit(r1), unit(r2)))
    angle = jnp.where(far_side, -(2.0 * jnp.pi - angle), angle)
    code = jnp.where(inside, INSIDE_RADIUS, code)
    return code, r1, r2, r * angle


class WrapSphere(AbstractWrapObject):
    """A sphere of ``radius`` (m) centred at the wrap-frame origin (OpenSim's WrapSphere)."""

    radius: Float[Array, ""]

    def __init__(self, body, translation, rotation, radius, quadrant="all", name=""):
        self._frame(body, translation, rotation, quadrant, name)
        self.radius = jnp.asarray(radius, dtype=float)

    def size_parameters(self):
        return (self.radius, 1.0, 1.0)

    def check(self, where):
        check_positive(self.radius, where)

    @staticmethod
    def wrap_segment(p1, p2, size, axis, sign, single):
        return sphere_wrap_line(p1, p2, size[0], (axis, sign))
