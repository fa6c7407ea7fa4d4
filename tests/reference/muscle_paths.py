"""Test-only references for muscle paths: independent or older forms the package is checked
against.

- :func:`wrapped_path_unrolled`: OpenSim's ``GeometryPath::applyWrapObjects`` for one muscle,
  unrolled over its wrap objects (static objects, static quadrants, a Python loop over the wraps),
  the referee of the vectorized kernel :func:`jaxmb.muscles.path_kernel.path_kernel`.
- :func:`wrap_line`: each shape's OpenSim algorithm with its quadrant static (the wrap objects'
  former ``wrap_line`` methods).
- :func:`wrap_cylinder`, :func:`wrap_ellipsoid`: the exact-tangent geodesic wraps the package used
  before it reproduced OpenSim (the wrap objects' former ``wrap`` methods).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb.muscles import Muscle, WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus
from jaxmb.muscles.path_kernel import apply_wrap, initial_path, iterate_wraps, path_length
from jaxmb.muscles.wrap import (
    QUADRANTS,
    cylinder_wrap_line,
    ellipsoid_wrap_line,
    sphere_wrap_line,
    torus_wrap_line,
)
from jaxmb.muscles.wrap.common import safe_norm

_GL_X, _GL_W = np.polynomial.legendre.leggauss(64)


def wrap_line(wo, p1, p2, single):
    """``wo``'s OpenSim algorithm on p1 → p2 (wrap frame, m), its quadrant static."""
    quadrant = QUADRANTS[wo.quadrant]
    if isinstance(wo, WrapCylinder):
        return cylinder_wrap_line(p1, p2, wo.radius, wo.length, quadrant, single)
    if isinstance(wo, WrapEllipsoid):
        return ellipsoid_wrap_line(p1, p2, wo.dimensions, quadrant, single)
    if isinstance(wo, WrapSphere):
        return sphere_wrap_line(p1, p2, wo.radius, quadrant)
    if isinstance(wo, WrapTorus):
        return torus_wrap_line(p1, p2, wo.inner_radius, wo.outer_radius, quadrant, single)
    raise TypeError(f"no reference wrap for {type(wo).__name__}")


def apply_wrap_unrolled(path, w, pw, frame, active, owner, n, single):
    """One PathWrap's turn in GeometryPath::applyWrapObjects: remove its tangent points, wrap every
    segment of its range, keep the first mandatory wrap or else the wrap that lengthens its segment
    least, insert the tangent points. Returns (path, result code of the last segment tried).

    The per-muscle, per-object form (static wrap object), kept as the referee of the vectorized
    kernel :func:`path_kernel` in the tests."""
    Rg, pg = frame
    start, end = pw.start, (n - 1 if pw.end == -1 else pw.end)
    return apply_wrap(
        path,
        w,
        lambda a, b: wrap_line(pw.wrap, a, b, single),
        Rg,
        pg,
        start,
        end,
        active,
        owner,
        n,
    )


def wrapped_path_unrolled(mus: Muscle, X, active, frames):
    """OpenSim's GeometryPath::applyWrapObjects for one muscle, unrolled over its wrap objects (the
    straightforward per-muscle form; the referee of :func:`path_kernel` in the tests).

    Same arguments and result as :func:`wrapped_path`."""
    n, nw = X.shape[0], len(mus.wraps)
    path, owner = initial_path(X, active, nw)
    if nw == 0:
        return path_length(path, owner), path
    single = nw == 1

    def apply(path, w):
        return apply_wrap_unrolled(path, w, mus.wraps[w], frames[w], active, owner, n, single)

    if single:
        path, _ = apply(path, 0)
        return path_length(path, owner), path

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

    path = iterate_wraps(path, one_pass, nw, owner, path_length)
    return path_length(path, owner), path


# ----------------------------------------------------------------------------- vectorized kernel
# Every wrap-object type's line function with one signature, ``(p1, p2, size (3,), axis, sign,


# ----------------------------------------------------------------------------- exact geodesic wraps
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


def wrap_cylinder(p, s, r, length, quadrant):
    """Geodesic wrap of p→s (wrap frame) over the cylinder x² + y² = r² along z.

    Returns (active, T1 (3,), T2 (3,), curve length between T1 and T2).
    """
    p2, s2 = p[:2], s[:2]
    hit, near = _segment_hits(p2, s2, r)
    dp, ds = safe_norm(p2), safe_norm(s2)
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
    a = safe_norm(p2 - t1)
    b = safe_norm(t2 - s2)
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


def wrap_ellipsoid(p, s, dims, quadrant, with_outside=False):
    """Wrap of p→s over the ellipsoid Σ (x_a/dims_a)² = 1 in the plane through p, s and the centre.

    Exact great-circle geodesic when all ``dims`` are equal (a sphere). Returns
    (active, T1, T2, curve length).
    """
    ps, ss = p / dims, s / dims
    hit, _ = _segment_hits(ps, ss, 1.0)
    dp, ds = safe_norm(ps), safe_norm(ss)
    outside = (dp > 1.0) & (ds > 1.0)
    e1 = ps / jnp.where(dp > 0, dp, 1.0)
    n = jnp.cross(ps, ss)
    nn = safe_norm(n)
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
    speed = safe_norm(tang * dims)
    curve = 0.5 * phi * jnp.dot(jnp.asarray(_GL_W), speed)
    if with_outside:
        return hit & outside, u1 * dims, u2 * dims, curve, outside
    return hit & outside, u1 * dims, u2 * dims, curve
