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


#: degree of the piecewise polynomial that evaluates a premodel (see PremodelDynamics)
TABLE_DEGREE = 5
#: most cells the table may use before the fit is declared not representable
MAX_CELLS = 8192


class PremodelDynamics(eqx.Module):
    """Premodel of a one-coordinate model's forward dynamics, ``q̈ = a(q) + b(q) q̇²``.

    With nq = 1 the equations of motion ``M(q) q̈ + Γ(q) q̇² = G(q) + Q(q) + τ`` reduce to two
    scalar functions of q, ``a = (G + Q)/M`` and ``b = −Γ/M`` (Γ the one Christoffel symbol of the
    first kind), whenever the force elements depend on q alone. This is the seed's empirically-based
    idea (fit smooth functions of q once, then integrate a tiny ODE) carried from the joint
    variables to the whole right-hand side: the fit is spectral (Fourier in a periodic coordinate,
    Chebyshev on an interval), so for the analytic a, b of a mechanism away from its singular
    configurations the coefficients decay geometrically and a few dozen reach float64 round-off.

    It is *evaluated* through a table: the spectral series interpolated per cell of equal width by
    a polynomial of degree :data:`TABLE_DEGREE` (at the cell's Chebyshev points), so that ``a, b``
    at q is one index, one row read and a five-step Horner chain. XLA:CPU fuses that chain into one
    kernel; the spectral series itself (a 47-term complex Horner recurrence, or 94 sines and
    cosines) splits into dozens of kernels: on Andrews' squeezer a Dopri8 solve of 53 steps took
    0.17 ms against 0.79 ms (``benchmarks/andrews.py``'s premodel route, process CPU). The number of
    cells doubles until the table matches the series to round-off.

    Attributes:
        coef: (2, 2K+1) rows a, b of the spectral fit; columns ``[c₀, c₁..c_K, s₁..s_K]``
            (Fourier: ``c_k cos kθ + s_k sin kθ`` with ``θ = 2π (q − lower) / period``; Chebyshev:
            ``c_k T_k(x)``, s unused).
        table: (ncell, 2, TABLE_DEGREE + 1) per cell, the monomial coefficients (highest degree
            first) of a and b in the cell's local coordinate ``u ∈ [−1, 1]``.
        kind: ``"fourier"`` or ``"chebyshev"`` (static).
        lower, upper: the coordinate's interval (Chebyshev) or ``(lower, lower + period)``.
        fit_error: max |a_fit − a| / max|a| and the same for b, the evaluated premodel against the
            exact route at states between the fitting nodes.
        deviation: max |q̈_premodel − q̈_exact| / (|a| + |b| q̇²) over all verification states
            (between the nodes, several periods away for a Fourier fit, three speeds): the
            check of what is integrated against the exact route, done once when it is fitted.
        n_verified: number of states in that check.
    """

    coef: Float[Array, "2 n"]
    table: Float[Array, "ncell 2 d"]
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    fit_error: tuple[float, float] = eqx.field(static=True)
    deviation: float = eqx.field(static=True, default=float("nan"))
    n_verified: int = eqx.field(static=True, default=0)

    def terms(self, q: Float[Array, " 1"]) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """``(a(q), b(q))``: q̈ at rest (1/s², per unit of q) and the q̇² coefficient."""
        ncell = self.table.shape[0]
        x = (q[0] - self.lower) * (ncell / (self.upper - self.lower))
        if self.kind == "fourier":
            cell = jnp.floor(x)
            index = jnp.mod(cell.astype(jnp.int32), ncell)
        else:
            x = eqx.error_if(
                x,
                (x < 0.0) | (x > ncell),
                f"PremodelDynamics: q outside the fitted interval [{self.lower}, {self.upper}]",
            )
            cell = jnp.clip(jnp.floor(x), 0.0, ncell - 1.0)
            index = cell.astype(jnp.int32)
        u = 2.0 * (x - cell) - 1.0
        row = jax.lax.dynamic_index_in_dim(self.table, index, keepdims=False)  # (2, d + 1)
        ab = row[:, 0]
        for j in range(1, row.shape[1]):
            ab = ab * u + row[:, j]
        return ab[0], ab[1]

    def __call__(self, q: Float[Array, " 1"], qd: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """q̈ (1,) at state (q, q̇) (each shape (1,))."""
        a, b = self.terms(q)
        return jnp.reshape(a + b * qd[0] * qd[0], (1,))


def _spectral(coef, kind, lo, hi, q):
    """The spectral series (2, len(q)) at the points q (NumPy, float64)."""
    K = (coef.shape[1] - 1) // 2 if kind == "fourier" else coef.shape[1] - 1
    if kind == "fourier":
        th = np.outer(np.arange(1, K + 1), 2.0 * np.pi * (q - lo) / (hi - lo))
        return coef[:, :1] + coef[:, 1 : K + 1] @ np.cos(th) + coef[:, K + 1 :] @ np.sin(th)
    x = (2.0 * q - (lo + hi)) / (hi - lo)
    return np.stack([np.polynomial.chebyshev.chebval(x, c[: K + 1]) for c in coef])


def _table(coef, kind, lo, hi, tol):
    """(ncell, 2, d+1) piecewise-polynomial table of the series: the fewest cells (a power of two,
    ≥ 64) whose interpolants match the series to round-off (1e-14 relative) between their
    Chebyshev points; at MAX_CELLS, tol/100 is accepted, and anything worse raises."""
    d = TABLE_DEGREE
    u = np.cos(np.pi * (np.arange(d + 1) + 0.5) / (d + 1))  # Chebyshev points in [-1, 1]
    V = u[:, None] ** np.arange(d, -1, -1)[None, :]  # (d+1, d+1), highest power first
    probe = np.linspace(-1.0, 1.0, 4 * d + 3)  # between and beyond the interpolation points
    ncell = 64
    while True:
        h = (hi - lo) / ncell
        centres = lo + h * (np.arange(ncell) + 0.5)
        vals = _spectral(coef, kind, lo, hi, (centres[:, None] + 0.5 * h * u).ravel())
        table = np.linalg.solve(
            V, vals.reshape(2, ncell, d + 1).transpose(2, 1, 0).reshape(d + 1, -1)
        )
        table = table.reshape(d + 1, ncell, 2).transpose(1, 2, 0)  # (ncell, 2, d+1)
        series = _spectral(coef, kind, lo, hi, (centres[:, None] + 0.5 * h * probe).ravel())
        approx = np.zeros((ncell, 2, probe.size))
        for j in range(d + 1):
            approx = approx * probe + table[:, :, j : j + 1]
        approx = approx.transpose(1, 0, 2).reshape(2, -1)
        scale = np.maximum(np.max(np.abs(series), axis=1, keepdims=True), 1e-300)
        err = float(np.max(np.abs(approx - series) / scale))
        if err <= 1e-14 or (ncell >= MAX_CELLS and err <= tol / 100.0):
            return table
        if ncell >= MAX_CELLS:
            raise ValueError(
                f"premodel_dynamics: a table of {ncell} cells of degree {d} misses the spectral "
                f"fit by {err:.3g} (relative, > tol/100 = {tol / 100.0:g})"
            )
        ncell *= 2


@eqx.filter_jit
def _qdd_map(model: Model, q, qd):
    """q̈ at each (q_i, q̇_i) of a one-coordinate model; lax.map, since one point's graph compiles
    faster than a vmapped one and the run time is nothing. Keyed on the model's structure."""
    return jax.lax.map(
        lambda x: try_forward_dynamics(model, x[0][None], x[1][None], None, 0.0)[0][0], (q, qd)
    )


def _exact_qdd(model: Model, q, qd):
    """q̈ (n,) of the tree route at the states (q_i, q̇_i), one compiled call (shapes padded to
    buckets of 64: fits of different n share one compilation)."""
    q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
    n = q.shape[0]
    pad = -n % 64
    q = np.concatenate([q, np.full(pad, q[0])])
    qd = np.concatenate([qd, np.zeros(pad)])
    return np.asarray(_qdd_map(model, jnp.asarray(q), jnp.asarray(qd)))[:n]


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
        between the nodes, ``deviation`` the largest relative deviation of the q̈ it integrates
        from the exact route at ``n_verified`` states (between the nodes at speeds 0 to 10⁴ and,
        for a period, one to three periods away); a fit whose error or deviation exceeds tol
        raises.
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
    # every exact evaluation in one call: a = q̈(q, 0) and b = (q̈(q, v) − a) / v² at the nodes
    # and between them (v so large that b v² dominates a: no cancellation), and the verification
    # states: between the nodes at other speeds and, for a period, one to three periods away
    v = 1e4
    if kind == "fourier":
        vq = np.concatenate([checks + s * (hi - lo) for s in (-1.0, 1.0, 3.0)])
    else:
        vq = np.tile(checks, 3)
    vqd = np.resize(np.array([1.0, 30.0, 1e3]), vq.size)
    q_all = np.concatenate([nodes, checks, nodes, checks, vq])
    qd_all = np.concatenate(
        [np.zeros(len(nodes) + len(checks)), np.full(len(nodes) + len(checks), v), vqd]
    )
    qdd = _exact_qdd(model, q_all, qd_all)
    m = len(nodes) + len(checks)
    a_all, b_all = qdd[:m], (qdd[m : 2 * m] - qdd[:m]) / v**2
    vals = np.stack([a_all[: len(nodes)], b_all[: len(nodes)]])  # (2, n)
    exact = np.stack([a_all[len(nodes) :], b_all[len(nodes) :]])  # (2, n_check)
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
    fit = PremodelDynamics(jnp.asarray(coef), jnp.asarray(_table(coef, kind, lo, hi, tol)), lo, hi,
                           kind, (0.0, 0.0))  # fmt: skip
    # the check of what is integrated: the premodel's own a, b and q̈ (its table) against the
    # exact route at every state above
    q_check = np.concatenate([checks, vq])
    qd_check = np.concatenate([np.zeros(len(checks)), vqd])
    qdd_exact = np.concatenate([a_all[len(nodes) :], qdd[2 * m :]])
    got = jax.jit(
        jax.vmap(lambda q, qd: jnp.stack([*fit.terms(q[None]), fit(q[None], qd[None])[0]]))
    )
    a_fit, b_fit, qdd_fit = np.asarray(got(jnp.asarray(q_check), jnp.asarray(qd_check))).T
    n_fit = len(checks)
    approx = np.stack([a_fit[:n_fit], b_fit[:n_fit]])
    err = np.max(np.abs(approx - exact), axis=1) / np.maximum(np.max(np.abs(exact), axis=1), 1e-300)
    scale = np.abs(a_fit) + np.abs(b_fit) * qd_check**2 + np.finfo(float).tiny
    dev = np.abs(qdd_fit - qdd_exact) / scale
    deviation = float(np.max(np.where(np.isfinite(dev), dev, np.inf)))
    worst = max(float(np.max(err)), deviation)
    if not worst <= tol:  # NaN included
        raise ValueError(
            f"premodel_dynamics: {kind} fit with n = {n} misses the exact dynamics by "
            f"{worst:.3g} (relative, > tol = {tol:g}) between the nodes: increase n, shorten "
            "the interval, or check that the dynamics really has the given period"
        )
    return PremodelDynamics(
        fit.coef, fit.table, lo, hi, kind, (float(err[0]), float(err[1])), deviation, q_check.size
    )
