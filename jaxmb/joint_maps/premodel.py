"""The seed's pre-modeling (§3-3): a spline fit of any joint map sampled over a grid of q.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import AbstractJointMap
from .implicit import ImplicitMap


class PremodelMap(AbstractJointMap):
    """A joint map fitted to samples of another one over a box of q (seed §3-3, pre-modeling).

    1 DOF: a not-a-knot cubic spline per joint (``interpax.CubicSpline``, error O(h⁴) in f, O(h³)
    in ∇f, O(h²) in H). 2 DOF: a tensor-product C² cubic spline (``interpax.Interpolator2D``,
    ``method="cubic2"``, natural end conditions, so O(h²) near the edges). ∇f and H are the exact
    derivatives of the fit. Built by :func:`premodel`.

    Attributes:
        spline: the interpax interpolator (pytree; knot values are traced leaves).
        lower, upper: static bounds of the fitted box per coordinate.
        extrapolate: static; outside the box, evaluate the end polynomials (``True``, e.g. for a
            warm start) or raise through ``equinox.error_if`` (``False``).
    """

    spline: Any
    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    extrapolate: bool = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)

    def __init__(self, spline, lower, upper, nj: int, extrapolate: bool = False):
        self.spline = spline
        self.lower = tuple(float(v) for v in lower)
        self.upper = tuple(float(v) for v in upper)
        self.nq = len(self.lower)
        self.nj = int(nj)
        self.extrapolate = bool(extrapolate)

    def _check(self, q):
        if self.extrapolate:
            return q
        lo, hi = jnp.asarray(self.lower), jnp.asarray(self.upper)
        slack = 1e-12 * (1.0 + jnp.abs(hi - lo))
        return eqx.error_if(
            q,
            jnp.any((q < lo - slack) | (q > hi + slack)),
            f"PremodelMap: q outside the pre-modeled box lower={self.lower}, upper={self.upper}",
        )

    def _eval(self, q, d):
        if self.nq == 1:
            return self.spline(q[0], nu=d[0])
        return self.spline(q[0], q[1], dx=d[0], dy=d[1])

    def __call__(self, q):
        q = self._check(jnp.asarray(q))
        return self._eval(q, (0,) * self.nq)

    def derivatives(self, q):
        q = self._check(jnp.asarray(q))
        f = self._eval(q, (0,) * self.nq)
        if self.nq == 1:
            J = self._eval(q, (1,))[:, None]
            H = self._eval(q, (2,))[:, None, None]
            return f, J, H
        J = jnp.stack([self._eval(q, (1, 0)), self._eval(q, (0, 1))], axis=1)
        hxy = self._eval(q, (1, 1))
        H = jnp.stack(
            [
                jnp.stack([self._eval(q, (2, 0)), hxy], -1),
                jnp.stack([hxy, self._eval(q, (0, 2))], -1),
            ],
            -2,
        )
        return f, J, H

    def jacobian(self, q):
        return self.derivatives(q)[1]

    def hessian(self, q):
        return self.derivatives(q)[2]


def _continuation(solve_at, qs, x0):
    """Solve along the rows of ``qs`` (N, nq) outward from the middle, each from its neighbour."""
    c = qs.shape[0] // 2

    def run(seq, x):
        def step(x, qk):
            sol = solve_at(qk, x)
            return sol.f, sol

        return jax.lax.scan(step, x, seq)[1]

    fwd = run(qs[c:], x0)
    bwd = run(qs[: c + 1][::-1], x0)
    return jax.tree_util.tree_map(lambda b, f: jnp.concatenate([b[::-1][:-1], f]), bwd, fwd)


def _sample(joint_map, axes):
    """Joint values on the grid spanned by ``axes`` (shape (n0, [n1,] nj)), checked for failure."""
    grids = np.meshgrid(*axes, indexing="ij")
    pts = np.stack([g.ravel() for g in grids], -1)
    if isinstance(joint_map, ImplicitMap):
        # neighbours are a grid step apart, farther than the map's own warm start may be
        mp = joint_map.replace(iterations=max(joint_map.iterations, 12))
        dep = np.asarray(mp.dependent)

        def solve_at(qk, x):
            return mp.solve(qk, x[dep])

        if len(axes) == 1:
            q0 = jnp.asarray(axes[0])[:, None]
            sol = jax.jit(
                lambda: _continuation(
                    solve_at, q0, mp.assemble(mp.guess(q0[len(q0) // 2]), q0[len(q0) // 2])
                )
            )()
        else:
            a0, a1 = jnp.asarray(axes[0]), jnp.asarray(axes[1])
            c1 = a1[len(a1) // 2]

            @jax.jit
            def sweep():
                row_q = jnp.stack([a0, jnp.full_like(a0, c1)], -1)
                qc = row_q[len(a0) // 2]
                row = _continuation(solve_at, row_q, mp.assemble(mp.guess(qc), qc))

                def column(q0i, f_start):
                    col_q = jnp.stack([jnp.full_like(a1, q0i), a1], -1)
                    return _continuation(solve_at, col_q, f_start)

                return jax.vmap(column)(a0, row.f)

            sol = sweep()
        F = np.asarray(sol.f).reshape(*(len(a) for a in axes), mp.nj)
        ok = np.asarray(sol.converged).reshape(F.shape[:-1]) & ~np.asarray(sol.singular).reshape(
            F.shape[:-1]
        )
        if not ok.all():
            bad = pts[np.flatnonzero(~ok.ravel())[0]]
            raise ValueError(
                f"premodel: the constraints could not be solved at q = {bad.tolist()} "
                f"({(~ok).sum()} of {ok.size} grid points failed); shrink the ranges to the "
                "mechanism's assembly range"
            )
        return F
    F = np.asarray(jax.jit(jax.vmap(joint_map))(jnp.asarray(pts)))
    if not np.all(np.isfinite(F)):
        raise ValueError("premodel: the joint map returned non-finite values on the grid")
    return F.reshape(*(len(a) for a in axes), joint_map.nj)


def premodel(
    joint_map: AbstractJointMap,
    ranges: Sequence[tuple[float, float]],
    n: int | Sequence[int] = 101,
    *,
    extrapolate: bool = False,
) -> PremodelMap:
    """Sweep q over ``ranges``, solve, and fit splines: the seed's pre-modeling of f(q).

    An :class:`ImplicitMap` is solved by continuation (each grid point warm-started from its
    neighbour, outward from the middle of the box, the middle from the map's own warm start), so the
    fit follows one assembly branch. Any other map is simply evaluated.

    Args:
        joint_map: the map to sample (nq = 1 or 2).
        ranges: ``[(lo, hi)]`` per coordinate (rad or m).
        n: knots per coordinate (int or one per coordinate); spacing h = (hi − lo)/(n − 1).
        extrapolate: see :class:`PremodelMap`.

    Raises:
        ValueError: for nq > 2, bad ranges, or a grid point where the constraints have no solution.
    """
    nq = joint_map.nq
    if nq not in (1, 2):
        raise ValueError(f"premodel: supports nq = 1 or 2 (splines); this map has nq = {nq}")
    ranges = [tuple(float(v) for v in r) for r in ranges]
    if len(ranges) != nq or any(len(r) != 2 or not r[0] < r[1] for r in ranges):
        raise ValueError(f"premodel: need {nq} ranges (lo, hi) with lo < hi, got {ranges}")
    ns = [int(n)] * nq if np.isscalar(n) else [int(v) for v in n]
    if len(ns) != nq or min(ns) < 4:
        raise ValueError(f"premodel: need at least 4 knots per coordinate, got {n}")
    axes = [np.linspace(lo, hi, k) for (lo, hi), k in zip(ranges, ns, strict=True)]
    F = jnp.asarray(_sample(joint_map, axes))
    import interpax  # here: its import (~35 ms) is not on the setup commands' path

    if nq == 1:
        spline = interpax.CubicSpline(
            jnp.asarray(axes[0]), F, axis=0, bc_type="not-a-knot", extrapolate=True
        )
    else:
        spline = interpax.Interpolator2D(
            jnp.asarray(axes[0]), jnp.asarray(axes[1]), F, method="cubic2", extrap=True
        )
    return PremodelMap(
        spline, [r[0] for r in ranges], [r[1] for r in ranges], joint_map.nj, extrapolate
    )


# -------------------------------------------------------------------------------------------------
# ∇f and H four ways
# -------------------------------------------------------------------------------------------------
