"""The torus: :class:`WrapTorus` and OpenSim 4.6's ``WrapTorus::wrapLine`` in JAX.

Ported in our own words from opensim-core (Apache-2.0), ``OpenSim/Simulation/Wrap/WrapTorus.cpp``
(``wrapLine``, ``findClosestPoint``, ``calcCircleResids``) and ``OpenSim/Common/Lmdif.cpp``: the
point of the centre circle nearest the line is found by OpenSim's own MINPACK lmdif from both
ends, and a cylinder tangent to the circle there (:func:`~jaxmb.muscles.wrap.cylinder.
cylinder_wrap_line`) wraps the segment.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ...model import ModelError
from .base import AbstractWrapObject, check_positive
from .common import NO_WRAP, WRAPPED, dsign, iterate_jvp, safe_norm, sqrt0, unit
from .cylinder import cylinder_wrap_line

__all__ = ["WrapTorus", "torus_wrap_line", "circle_residual", "circle_parameter"]

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


def circle_residual(u, a, b, radius):
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
    f = lambda u: circle_residual(u, a, b, radius)  # noqa: E731
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
        temp2 = sqrt0(par_n) * pnorm / fn_safe  # par 0: a finite derivative
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
circle_parameter = iterate_jvp(_lmdif1)


def _circle_pass(a, b, radius):
    """WrapTorus::findClosestPoint's pass along a → b: OpenSim's lmdif from u = 0 on its residual.

    Returns the point a + u·(b − a)/|b − a|.
    """
    return a + circle_parameter(a, b, radius) * unit(b - a)


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
        rho = safe_norm(a[:2])
        return sqrt0(jnp.dot(a, a) + outer_radius**2 - 2 * outer_radius * rho)

    d1, d2 = dist(a1), dist(a2)
    pick2 = ~(d1 < d2)
    found = jnp.asarray(True)
    if quadrant is not None:
        ax, sg = quadrant
        every = jnp.asarray(sg == 0.0)  # "all" (traced quadrants)
        on1, on2 = dsign(a1[ax]) == sg, dsign(a2[ax]) == sg
        pick2 = jnp.where(every, pick2, jnp.where(on1 & on2, pick2, ~on1))
        found = every | on1 | on2
    a = jnp.where(pick2, a2, a1)
    c = outer_radius * jnp.stack([a[0], a[1], jnp.zeros_like(a[0])]) / safe_norm(a[:2])
    cx = unit(-c)
    cy = jnp.array([0.0, 0.0, -1.0], a.dtype)
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


class WrapTorus(AbstractWrapObject):
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

    def size_parameters(self):
        return (self.inner_radius, self.outer_radius, 1.0)

    def check(self, where):
        size = [float(self.inner_radius), float(self.outer_radius)]
        check_positive(size, where)
        if not size[0] < size[1]:
            raise ModelError(
                f"{where}: torus inner_radius {size[0]} must be below outer_radius {size[1]}"
            )

    @staticmethod
    def wrap_segment(p1, p2, size, axis, sign, single):
        return torus_wrap_line(p1, p2, size[0], size[1], (axis, sign), single)
