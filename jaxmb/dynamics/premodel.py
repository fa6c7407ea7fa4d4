"""Premodelled dynamics of a one-coordinate model: q̈ = a(q) + b(q) q̇², fitted once, spectrally."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..model import Model
from .terms import try_forward_dynamics

__all__ = ["PremodelDynamics", "premodel_dynamics"]


class PremodelDynamics(eqx.Module):
    """Spectral premodel of a one-coordinate model's forward dynamics, ``q̈ = a(q) + b(q) q̇²``.

    With nq = 1 the equations of motion ``M(q) q̈ + Γ(q) q̇² = G(q) + Q(q) + τ`` reduce to two
    scalar functions of q, ``a = (G + Q)/M`` and ``b = −Γ/M`` (Γ the one Christoffel symbol of the
    first kind), whenever the force elements depend on q alone. This is the seed's empirically-based
    idea (fit smooth functions of q once, then integrate a tiny ODE) carried from the joint
    variables to the whole right-hand side: the fit is spectral (Fourier in a periodic coordinate,
    Chebyshev on an interval), so for the analytic a, b of a mechanism away from its singular
    configurations the coefficients decay geometrically and a few dozen reach float64 round-off
    (``fit_error`` records the measured error at points between the fitting nodes).

    Evaluation is ``2K + 1`` cosines/sines and two dot products: a handful of fused operations
    instead of the joint map, pose pass and tree recursions, which is what makes small ODEs cheap
    on XLA:CPU, where every fused kernel costs a fixed dispatch overhead.

    Attributes:
        coef: (2, 2K+1) rows a, b; columns ``[c₀, c₁..c_K, s₁..s_K]`` (Fourier: ``c_k cos kθ +
            s_k sin kθ`` with ``θ = 2π q / period``; Chebyshev: ``c_k T_k(x)``, s unused).
        kind: ``"fourier"`` or ``"chebyshev"`` (static).
        lower, upper: the coordinate's interval (Chebyshev) or ``(0, period)`` (Fourier).
        fit_error: max |a_fit − a| / max|a| and the same for b, at the off-node check points.
    """

    coef: Float[Array, "2 n"]
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    fit_error: tuple[float, float] = eqx.field(static=True)

    def terms(self, q: Float[Array, " 1"]) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """``(a(q), b(q))``: q̈ at rest (1/s², per unit of q) and the q̇² coefficient.

        Fourier: Horner in ``z = e^{iθ}`` on ``Σ (c_k − i s_k) zᵏ`` (real part); Chebyshev:
        Clenshaw's recurrence. One sine and one cosine (or none) and a chain of multiply-adds
        instead of 2K transcendental functions: the recurrences are stable for |z| = 1 and
        |x| ≤ 1 (error ~ K ε).
        """
        K = (self.coef.shape[1] - 1) // 2
        C, S = self.coef[:, : K + 1], self.coef[:, K + 1 :]
        if self.kind == "fourier":
            th = (2.0 * jnp.pi / (self.upper - self.lower)) * (q[0] - self.lower)
            zr, zi = jnp.cos(th), jnp.sin(th)
            pr, pi = C[:, K], -S[:, K - 1]
            for k in range(K - 1, 0, -1):
                pr, pi = pr * zr - pi * zi + C[:, k], pr * zi + pi * zr - S[:, k - 1]
            ab = pr * zr - pi * zi + C[:, 0]
        else:
            x = (2.0 * q[0] - (self.lower + self.upper)) / (self.upper - self.lower)
            x = eqx.error_if(
                x,
                jnp.abs(x) > 1.0,
                f"PremodelDynamics: q outside the fitted interval [{self.lower}, {self.upper}]",
            )
            b1, b2 = jnp.zeros_like(C[:, 0]), jnp.zeros_like(C[:, 0])
            for k in range(K, 0, -1):
                b1, b2 = C[:, k] + 2.0 * x * b1 - b2, b1
            ab = C[:, 0] + x * b1 - b2
        return ab[0], ab[1]

    def __call__(self, q: Float[Array, " 1"], qd: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """q̈ (1,) at state (q, q̇) (each shape (1,))."""
        a, b = self.terms(q)
        return jnp.reshape(a + b * qd[0] * qd[0], (1,))


@eqx.filter_jit
def _qdd_map(model: Model, q, qd):
    """q̈ at each (q_i, q̇_i) of a one-coordinate model; lax.map, since one point's graph compiles
    faster than a vmapped one and the run time is nothing. Keyed on the model's structure."""
    return jax.lax.map(
        lambda x: try_forward_dynamics(model, x[0][None], x[1][None], None, 0.0)[0][0], (q, qd)
    )


def _exact_terms(model: Model, qs):
    """a(q), b(q) (each (n,)) from the tree route, one compiled call: ``a = q̈(q, 0)`` and
    ``b = (q̈(q, v) − a) / v²`` with v so large that ``b v²`` dominates a (no cancellation)."""
    qs = np.asarray(qs, dtype=float)
    n, v = qs.shape[0], 1e4
    pad = -(2 * n) % 64  # shapes in buckets of 64: fits of different n share one compilation
    q = np.concatenate([qs, qs, np.full(pad, qs[0])])
    qd = np.concatenate([np.zeros(n), np.full(n, v), np.zeros(pad)])
    qdd = np.asarray(_qdd_map(model, jnp.asarray(q), jnp.asarray(qd)))
    a = qdd[:n]
    return a, (qdd[n : 2 * n] - a) / v**2


def _check_position_only_forces(model: Model, qs) -> None:
    """Raise naming the first force element whose generalized force depends on q̇ or t."""
    qs = jnp.asarray(qs, dtype=float)
    probes = jnp.asarray([[0.0, 0.0], [1.0, 0.0], [-3.0, 0.0], [0.0, 1.7]])  # (q̇, t)
    Q = jnp.repeat(qs, len(probes))
    P = jnp.tile(probes, (qs.shape[0], 1))
    for element in model.forces:
        gf = lambda q, p, element=element: element.generalized_force(model, q[None], p[:1], p[1])[0]
        vals = np.asarray(jax.jit(jax.vmap(gf))(Q, P)).reshape(qs.shape[0], len(probes))
        d = float(np.max(np.abs(vals[:, 1:] - vals[:, :1])))
        if not d <= 1e-12 * max(float(np.max(np.abs(vals))), 1e-300):  # round-off allowed
            raise ValueError(
                f"premodel_dynamics: force element {type(element).__name__} depends on q̇ or t "
                f"(its generalized force changes by {d:.3g}); only position-dependent forces "
                "can be premodelled"
            )


def premodel_dynamics(
    model: Model,
    *,
    period: float | None = None,
    interval: tuple[float, float] | None = None,
    n: int = 64,
    tol: float = 1e-10,
) -> PremodelDynamics:
    """Fit :class:`PremodelDynamics` to a one-coordinate model's exact (tree-route) dynamics.

    Args:
        model: a model with ``nq == 1`` whose force elements depend on q only (checked).
        period: the coordinate's period (e.g. 2π for a crank angle that turns round): a Fourier
            fit over one period from n equispaced samples (K = n // 2 − 1 harmonics).
        interval: ``(lower, upper)`` of a non-periodic coordinate: a Chebyshev fit of degree n − 1
            at the n Chebyshev points; evaluation outside the interval raises.
        n: number of samples (≥ 4).
        tol: largest accepted relative fit error; a worse fit raises (more samples, a shorter
            interval, or a coordinate that is not periodic in ``period``).

    Returns:
        The premodel; ``fit_error`` holds the measured relative error of a and b at n points
        between the nodes (compare it with the accuracy you need before integrating).
    """
    if model.nq != 1:
        raise ValueError(f"premodel_dynamics: needs a one-coordinate model, got nq = {model.nq}")
    if (period is None) == (interval is None):
        raise ValueError("premodel_dynamics: give exactly one of period= or interval=")
    if n < 4:
        raise ValueError(f"premodel_dynamics: n must be at least 4, got {n}")
    if period is not None:
        if not period > 0:
            raise ValueError(f"premodel_dynamics: period must be positive, got {period}")
        lo, hi, kind = 0.0, float(period), "fourier"
        K = n // 2 - 1
        nodes = np.arange(n) * (hi / n)
        checks = nodes + 0.5 * hi / n
    else:
        lo, hi = (float(v) for v in interval)
        if not hi > lo:
            raise ValueError(f"premodel_dynamics: interval must have lower < upper, got {interval}")
        kind, K = "chebyshev", n - 1
        x = np.cos(np.pi * (np.arange(n) + 0.5) / n)
        nodes = 0.5 * (lo + hi) + 0.5 * (hi - lo) * x
        xc = np.cos(np.pi * np.arange(n + 1) / n)  # extrema: between the nodes, ends included
        checks = 0.5 * (lo + hi) + 0.5 * (hi - lo) * xc
    _check_position_only_forces(model, nodes)
    everything = np.stack(_exact_terms(model, np.concatenate([nodes, checks])))
    vals, exact = everything[:, : len(nodes)], everything[:, len(nodes) :]  # (2, n), (2, n_check)
    if not np.all(np.isfinite(vals)):
        bad = nodes[~np.all(np.isfinite(vals), axis=0)][0]
        raise ValueError(f"premodel_dynamics: the exact dynamics is not finite at q = {bad:.6g}")
    coef = np.zeros((2, 2 * K + 1))
    if kind == "fourier":
        C = np.fft.rfft(vals, axis=1) / n
        coef[:, 0] = C[:, 0].real
        coef[:, 1 : K + 1] = 2.0 * C[:, 1 : K + 1].real
        coef[:, K + 1 :] = -2.0 * C[:, 1 : K + 1].imag
    else:
        k = np.arange(n)
        T = np.cos(np.outer(k, np.pi * (np.arange(n) + 0.5) / n))  # T_k at node j
        coef[:, :n] = (2.0 / n) * vals @ T.T
        coef[:, 0] *= 0.5
    fit = PremodelDynamics(jnp.asarray(coef), lo, hi, kind, (0.0, 0.0))
    approx = np.asarray(jax.jit(jax.vmap(lambda q: jnp.stack(fit.terms(q[None]))))(checks)).T
    err = np.max(np.abs(approx - exact), axis=1) / np.maximum(np.max(np.abs(exact), axis=1), 1e-300)
    if not np.max(err) <= tol:
        raise ValueError(
            f"premodel_dynamics: {kind} fit with n = {n} misses the exact dynamics by "
            f"{np.max(err):.3g} (relative, > tol = {tol:g}) between the nodes: increase n, shorten "
            "the interval, or check that the dynamics really has the given period"
        )
    return PremodelDynamics(jnp.asarray(coef), lo, hi, kind, (float(err[0]), float(err[1])))
