"""The seed's pre-modeling (§3-3) applied to muscle paths: each muscle's length a polynomial of the
coordinates it spans, fitted to the exact paths, its moment arms R = −∂L/∂q in closed form.

``fit_paths(model, ranges)`` samples the coordinates over their ranges, evaluates the exact paths
(:func:`~jaxmb.muscles.geometry.lengths_and_moment_arms`, OpenSim's wrapping) there, and fits, per
muscle, a polynomial of total degree d in the coordinates it spans to the lengths *and* the moment
arms together (weighted least squares, Hermite data), choosing the lowest d whose error at 99 % of
the fitting poses is within the tolerances. It then measures the fit on poses it did not fit and
returns a model whose paths are the fit (:class:`FittedPaths`, in ``model.muscles.fit``): every
function that evaluates paths (lengths, moment arms, velocities, Hill forces, force sharing, static
optimization) then evaluates the polynomials. The fit is smooth where the exact path has kinks
(a wrap switching on or off), which gradient-based optimizers need; the exact paths stay in the
model and :func:`exact_paths` returns to them.

The polynomials are tensor products of Chebyshev polynomials of the coordinates scaled to
[−1, 1] over the fitted ranges, of total degree ≤ d (well conditioned: float32 evaluates them
too), evaluated from a table of T_0 … T_d per coordinate and one small matrix product per
group of muscles with the same number of coordinates and degree (the program grows with the
groups, not the muscles). The fit is robust (Huber weights), so that the jumps of
OpenSim's exact wrapped paths do not drag it off elsewhere; its error there is about half the
jump, which the report's maximum shows. The fitting poses follow the Chebyshev (arcsine)
distribution per coordinate, which holds the error down at the range ends. Outside the fitted
ranges the polynomials extrapolate (as OpenSim's ``FunctionBasedPath`` does): keep poses in the
ranges, or fit wider ones. OpenSim 4.5+ offers the same idea as ``PolynomialPathFitter``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from math import comb

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..model import Model, ModelError
from .geometry import lengths_and_moment_arms
from .paths import MuscleSet

__all__ = [
    "ChebyshevBasis",
    "FittedPaths",
    "PathFitReport",
    "chebyshev_basis",
    "derivative_coefficients",
    "exact_paths",
    "fit_paths",
]


class ChebyshevBasis:
    """Tensor products of Chebyshev polynomials of k variables, T_e(x) = Π_j T_{e_j}(x_j), with
    total degree Σ e_j ≤ d, e sorted by degree (``exponents`` (terms, k)). |T_e| ≤ 1 on
    [−1, 1]^k, so that coefficients stay of the size of what they fit (no cancellation in float32,
    unlike monomials). The derivative of such a polynomial is one of the same basis:
    dT_n/dx = 2n Σ T_m over m = n−1, n−3, … ≥ 0 (T_0 counted once, not twice); ``derivative[j]``
    holds that map for x_j as triplets (source term, target term, factor)."""

    def __init__(self, k: int, degree: int):
        rows = [e for e in itertools.product(range(degree + 1), repeat=k) if sum(e) <= degree]
        rows.sort(key=lambda e: (sum(e), e[::-1]))
        self.degree = degree
        self.exponents = np.asarray(rows, dtype=np.int64).reshape(len(rows), k)
        where = {e: i for i, e in enumerate(rows)}
        self.derivative = []
        for j in range(k):
            src, dst, fac = [], [], []
            for i, e in enumerate(rows):
                n = e[j]
                for m in range(n - 1, -1, -2):
                    src.append(i)
                    dst.append(where[e[:j] + (m,) + e[j + 1 :]])
                    fac.append(2.0 * n if m else float(n))
            self.derivative.append(
                (np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(fac))
            )

    def __call__(self, x):
        """x (..., k) in [−1, 1] → the basis (..., terms): a table of T_0 … T_d per variable by
        the three-term recurrence, then one product of k table entries per term (elementwise
        work that XLA fuses into one loop)."""
        if x.shape[-1] == 0:  # no coordinate: the constant
            return jnp.ones(x.shape[:-1] + (1,), x.dtype)
        T = [jnp.ones_like(x), x]
        for _ in range(1, self.degree):
            T.append(2.0 * x * T[-1] - T[-2])
        P = jnp.stack(T[: self.degree + 1], -1)  # (..., k, d + 1)
        B = P[..., 0, self.exponents[:, 0]]
        for j in range(1, self.exponents.shape[1]):
            B = B * P[..., j, self.exponents[:, j]]
        return B

    def gradient_rows(self, B: np.ndarray) -> np.ndarray:
        """∂(basis)/∂x_j at the points where the basis is B (N, terms): (N, k, terms), numpy."""
        out = np.zeros((B.shape[0], len(self.derivative), B.shape[1]))
        for j, (src, dst, fac) in enumerate(self.derivative):
            np.add.at(out[:, j].T, src, fac[:, None] * B.T[dst])
        return out


def derivative_coefficients(basis: ChebyshevBasis, coef: np.ndarray) -> np.ndarray:
    """(1 + k, terms): the polynomial's coefficients, then those of ∂/∂x_j in the same basis."""
    out = np.zeros((1 + len(basis.derivative), coef.shape[0]))
    out[0] = coef
    for j, (src, dst, fac) in enumerate(basis.derivative):
        np.add.at(out[1 + j], dst, fac * coef[src])
    return out


class _FitGroup(eqx.Module):
    """The muscles fitted with the same number of coordinates k and degree d (G of them):
    ``coef[g] @ basis`` gives the length and its derivatives in the scaled coordinates."""

    center: Float[Array, "G k"]
    half: Float[Array, "G k"]
    coef: Float[Array, "G 1+k terms"]
    index: tuple = eqx.field(static=True)  # (G,) muscle indices
    coords: tuple = eqx.field(static=True)  # (G,) tuples of k coordinate indices
    degree: int = eqx.field(static=True)

    def evaluate(self, q):
        """Lengths (G,) m and ∂L/∂q at the group's coordinates (G, k) at q (nq,)."""
        k = len(self.coords[0])
        if k == 0:
            return self.coef[:, 0, 0], jnp.zeros((self.coef.shape[0], 0), self.coef.dtype)
        x = (q[np.asarray(self.coords)] - self.center) / self.half
        # full-precision products on accelerators too: TF32 (a GPU's default for float32 dots)
        # left an H200's float32 lengths 1e-4 m off float64
        out = jnp.einsum(
            "gct,gt->gc",
            self.coef,
            chebyshev_basis(k, self.degree)(x),
            precision=jax.lax.Precision.HIGHEST,
        )
        return out[:, 0], out[:, 1:] / self.half


@functools.cache
def chebyshev_basis(k: int, degree: int) -> ChebyshevBasis:
    """The (cached) :class:`ChebyshevBasis` of k variables up to total degree ``degree``."""
    return ChebyshevBasis(k, degree)


@dataclasses.dataclass(frozen=True)
class PathFitReport:
    """What :func:`fit_paths` did and how well, per muscle (errors measured on validation poses
    it did not fit, against the exact paths).

    Attributes:
        names: the muscles. coordinates: per muscle, the coordinates its fit spans.
        degrees: per muscle, the polynomial's total degree; terms: its number of coefficients.
        max_length_error: per muscle, max |L_fit − L| over the validation poses (m).
        max_moment_arm_error: per muscle, max |R_fit − R| over those poses and every coordinate
            (m, or m/m for a translational coordinate).
        p99_length_error, p99_moment_arm_error: the same errors' 99th percentiles over the
            validation poses (OpenSim's exact wrapped paths jump where a wrap switches branch;
            a smooth fit is off there by about half the jump, and the maximum shows it).
        within_goal: per muscle, the fraction of validation poses at which both errors are
            within the tolerances.
        length_tolerance, moment_arm_tolerance: the goals the degree was chosen for (m).
        ranges: the fitted ranges (lo, hi) per model coordinate.
        samples, validation: numbers of fitting and validation poses.
        exact_seconds, fit_seconds: wall time of the exact evaluations (compile included) and of
            the least-squares fits.
    """

    names: tuple
    coordinates: tuple
    degrees: tuple
    terms: tuple
    max_length_error: tuple
    max_moment_arm_error: tuple
    p99_length_error: tuple
    p99_moment_arm_error: tuple
    within_goal: tuple
    length_tolerance: float
    moment_arm_tolerance: float
    ranges: tuple
    samples: int
    validation: int
    exact_seconds: float
    fit_seconds: float

    @property
    def met(self) -> tuple:
        """Per muscle: both validation errors within the tolerances."""
        return tuple(
            (a <= self.length_tolerance) and (b <= self.moment_arm_tolerance)
            for a, b in zip(self.max_length_error, self.max_moment_arm_error, strict=True)
        )

    def __str__(self) -> str:
        head = (
            f"{'muscle':<16} {'coordinates':<40} {'deg':>3} {'terms':>5} "
            f"{'max dL (mm)':>11} {'p99 dL':>8} {'max dR (mm)':>11} {'p99 dR':>8} {'in goal':>7}"
        )
        rows = [head, "-" * len(head)]
        for i, n in enumerate(self.names):
            rows.append(
                f"{n:<16} {', '.join(self.coordinates[i]) or '-':<40} {self.degrees[i]:>3} "
                f"{self.terms[i]:>5} {1e3 * self.max_length_error[i]:>11.4f} "
                f"{1e3 * self.p99_length_error[i]:>8.4f} "
                f"{1e3 * self.max_moment_arm_error[i]:>11.4f} "
                f"{1e3 * self.p99_moment_arm_error[i]:>8.4f} {100 * self.within_goal[i]:>6.1f}%"
            )
        rows.append(
            f"goal: lengths ≤ {1e3 * self.length_tolerance:g} mm, moment arms ≤ "
            f"{1e3 * self.moment_arm_tolerance:g} mm; met by {sum(self.met)} of "
            f"{len(self.names)} muscles on {self.validation} validation poses "
            f"({self.samples} fitted; exact paths {self.exact_seconds:.1f} s, fits "
            f"{self.fit_seconds:.1f} s)"
        )
        return "\n".join(rows)


class FittedPaths(eqx.Module):
    """Polynomial paths of every muscle of a model (``model.muscles.fit``), built by
    :func:`fit_paths`; one vectorized evaluation per (number of coordinates, degree) group."""

    groups: tuple
    nm: int = eqx.field(static=True)
    report: PathFitReport = eqx.field(static=True)

    def lengths_and_moment_arms(
        self, q: Float[Array, " nq"]
    ) -> tuple[Float[Array, " nm"], Float[Array, "nq nm"]]:
        """Fitted lengths L (nm,) m and moment arms R = −∂L/∂q (nq, nm) at q (nq,)."""
        L = jnp.zeros(self.nm, q.dtype)
        R = jnp.zeros((q.shape[0], self.nm), q.dtype)
        for g in self.groups:
            Lg, dL = g.evaluate(q)
            m = np.asarray(g.index)
            L = L.at[m].set(Lg)
            if dL.shape[1]:
                R = R.at[np.asarray(g.coords), m[:, None]].add(-dL)
        return L, R

    def lengths(self, q: Float[Array, " nq"]) -> Float[Array, " nm"]:
        """Fitted lengths L (nm,) m at q (nq,) (XLA drops the unused moment arms)."""
        return self.lengths_and_moment_arms(q)[0]


def exact_paths(model: Model) -> Model:
    """``model`` with its muscles' exact paths (the fit of :func:`fit_paths` dropped)."""
    ms = model.muscles
    if not isinstance(ms, MuscleSet) or ms.fit is None:
        return model
    return eqx.tree_at(lambda m: m.muscles, model, MuscleSet(ms.muscles))


def _ranges_array(model: Model, ranges) -> np.ndarray:
    names = model.coordinate_names
    if isinstance(ranges, Mapping):
        unknown = sorted(set(ranges) - set(names))
        if unknown:
            raise ModelError(
                f"fit_paths: ranges name {unknown}, not coordinates of model {model.name!r} "
                f"(its coordinates: {list(names)})"
            )
        missing = [n for n in names if n not in ranges]
        if missing:
            raise ModelError(
                f"fit_paths: no range for coordinates {missing} of model {model.name!r}; give "
                "(lo, hi) for each (lo == hi holds one fixed)"
            )
        r = np.asarray([ranges[n] for n in names], dtype=float)
    else:
        r = np.asarray(ranges, dtype=float)
    if r.shape != (len(names), 2):
        raise ModelError(f"fit_paths: ranges must be ({len(names)}, 2), got shape {r.shape}")
    for n, (lo, hi) in zip(names, r, strict=True):
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
            raise ModelError(
                f"fit_paths: coordinate {n!r}: range ({lo}, {hi}) must be finite, lo ≤ hi"
            )
    return r


def _exact(model, q, batch, say):
    """Exact lengths (N, nm) and moment arms (N, nq, nm) at poses q (N, nq), in fixed-size chunks
    (one compiled program)."""
    f = jax.jit(jax.vmap(lambda x: lengths_and_moment_arms(model, x)))
    N = q.shape[0]
    Ls, Rs = [], []
    t0 = time.perf_counter()
    for i in range(0, N, batch):
        chunk = q[i : i + batch]
        pad = batch - chunk.shape[0]
        chunk = np.concatenate([chunk, np.repeat(chunk[-1:], pad, 0)]) if pad else chunk
        L, R = jax.device_get(f(jnp.asarray(chunk, dtype=model.axis_d.dtype)))
        Ls.append(L[: batch - pad])
        Rs.append(R[: batch - pad])
        say(f"exact paths: {min(i + batch, N)}/{N} poses ({time.perf_counter() - t0:.1f} s)")
    L, R = np.concatenate(Ls), np.concatenate(Rs)
    bad = ~(np.all(np.isfinite(L), 1) & np.all(np.isfinite(R), (1, 2)))
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ModelError(
            f"fit_paths: the exact paths are not finite at pose {q[i].tolist()}; narrow the ranges"
        )
    return L, R


def _fit_one(x, half, L, dLdq, degree, wl, wr, rounds=8):
    """Coefficients (terms,) of one muscle's polynomial of total degree ``degree`` in the scaled
    coordinates x (N, k), fitted to lengths L (N,) and derivatives dL/dq (N, k) by least squares
    weighted 1/tolerance (wl, wr), made robust by Huber weights (a residual beyond one tolerance
    counts linearly, not squared: the exact path's jumps, where OpenSim's wrap switches branch, do
    not drag the fit off elsewhere). Returns (coefficients, residuals in tolerances (1 + k, N))."""
    basis = chebyshev_basis(x.shape[1], degree)
    M = np.asarray(basis(jnp.asarray(x)))
    G = basis.gradient_rows(M)
    A = np.concatenate([wl * M] + [wr * G[:, j] / half[j] for j in range(x.shape[1])])
    b = np.concatenate([wl * L] + [wr * dLdq[:, j] for j in range(x.shape[1])])
    w = np.ones_like(b)
    for _ in range(rounds):
        coef = np.linalg.lstsq(A * w[:, None], b * w, rcond=None)[0]
        r = np.abs(A @ coef - b)
        w_new = np.sqrt(1.0 / np.maximum(r, 1.0))
        if np.allclose(w_new, w, rtol=1e-3, atol=0.0):
            break
        w = w_new
    return coef, r.reshape(1 + x.shape[1], -1)


def fit_paths(
    model: Model,
    ranges: Mapping[str, tuple[float, float]] | Sequence | np.ndarray,
    *,
    samples: int = 2000,
    validation: int = 500,
    min_degree: int = 2,
    max_degree: int = 12,
    max_terms: int = 500,
    length_tolerance: float = 1e-4,
    moment_arm_tolerance: float = 1e-3,
    moment_arm_threshold: float = 1e-6,
    seed: int = 0,
    batch: int = 256,
    progress: Callable[[str], None] | None = None,
) -> Model:
    """``model`` with every muscle's path replaced by a polynomial fit of its exact path.

    Args:
        model: a model with muscles (``model.muscles``), float64.
        ranges: per coordinate (lo, hi) (rad or m), a mapping by coordinate name or an (nq, 2)
            array in ``model.coordinate_names`` order (for an imported model,
            ``{c.name: c.range for c in imp.coordinates if c.name in model.coordinate_names}``);
            lo == hi holds a coordinate fixed (a muscle's moment arm about it is then not fitted,
            and a warning names the muscles that span it).
        samples: fitting poses (Chebyshev-distributed per coordinate over the ranges).
        validation: poses drawn uniformly over the ranges, not fitted, on which the report's
            errors are measured.
        min_degree, max_degree: the total polynomial degrees tried, lowest first; the search
            stops at the first degree within the tolerances, or when three degrees in a row do not
            cut the error by 5 % (a jump or kink of the exact path hardly yields to degree).
        max_terms: no degree whose polynomial has more coefficients than this is tried (C(k + d,
            d) for k coordinates: 495 at k = 4, d = 8), which bounds the cost per pose and of
            the fit for muscles that span many coordinates.
        length_tolerance, moment_arm_tolerance: the largest length (m) and moment-arm (m) errors
            at 99 % of the fitting poses at which a degree is accepted; a muscle that does not
            meet them keeps the degree with the smallest error, and the report says so.
        moment_arm_threshold: a muscle spans a coordinate when its exact moment arm about it
            exceeds this (m) at some fitting pose.
        seed: the poses' random seed. batch: poses per exact evaluation (one compiled program).
        progress: called with a line of text as the exact evaluations and the fits go.

    Returns:
        The model whose ``muscles.fit`` is the :class:`FittedPaths`; ``model.muscles.fit.report``
        (:class:`PathFitReport`) gives each muscle's coordinates, degree and validation errors.
        Lengths and moment arms of the fitted model are jit/vmap/grad-able polynomials.
    """
    ms = model.muscles
    if not isinstance(ms, MuscleSet):
        raise ModelError(f"fit_paths: model {model.name!r} has no muscles")
    for name, v, lo in (
        ("samples", samples, 1),
        ("validation", validation, 1),
        ("batch", batch, 1),
    ):
        if int(v) != v or v < lo:
            raise ModelError(f"fit_paths: {name} must be a positive integer, got {v!r}")
    if int(max_terms) != max_terms or max_terms < 1:
        raise ModelError(f"fit_paths: max_terms must be a positive integer, got {max_terms!r}")
    if not 0 <= min_degree <= max_degree:
        raise ModelError(
            f"fit_paths: need 0 ≤ min_degree ≤ max_degree, got {min_degree}, {max_degree}"
        )
    for name, v in (
        ("length_tolerance", length_tolerance),
        ("moment_arm_tolerance", moment_arm_tolerance),
        ("moment_arm_threshold", moment_arm_threshold),
    ):
        if not (np.isfinite(v) and v > 0):
            raise ModelError(f"fit_paths: {name} must be positive, got {v!r}")
    say = progress or (lambda msg: None)
    r = _ranges_array(model, ranges)
    lo, hi = r[:, 0], r[:, 1]
    varied = hi > lo
    center, half = 0.5 * (lo + hi), np.where(varied, 0.5 * (hi - lo), 1.0)
    rng = np.random.default_rng(seed)
    nq = model.nq
    q_fit = center - half * np.cos(np.pi * rng.uniform(size=(samples, nq)))
    q_val = lo + (hi - lo) * rng.uniform(size=(validation, nq))
    q_fit[:, ~varied], q_val[:, ~varied] = lo[~varied], lo[~varied]

    t0 = time.perf_counter()
    # both sets in one call: one compiled program (arm26's exact paths compile for ~1 min)
    L_all, R_all = _exact(model, np.concatenate([q_fit, q_val]), batch, say)
    L_fit, L_val = L_all[:samples], L_all[samples:]
    R_fit, R_val = R_all[:samples], R_all[samples:]
    exact_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    names = ms.names
    spans = np.max(np.abs(R_fit), axis=0) > moment_arm_threshold  # (nq, nm)
    held = [
        (names[m], model.coordinate_names[c])
        for m in range(len(names))
        for c in range(nq)
        if spans[c, m] and not varied[c]
    ]
    if held:
        warnings.warn(
            f"fit_paths: muscles span coordinates held fixed, whose moment arms the fit leaves "
            f"out: {held}",
            stacklevel=2,
        )
    spans &= varied[:, None]
    chosen = []  # per muscle: (coords, degree, coef)
    wl, wr = 1.0 / length_tolerance, 1.0 / moment_arm_tolerance
    for m, name in enumerate(names):
        c = list(int(i) for i in np.flatnonzero(spans[:, m]))
        x = (q_fit[:, c] - center[c]) / half[c]
        dLdq = -R_fit[:, c, m]
        best, stale = None, 0
        degrees = [d for d in range(min_degree, max_degree + 1) if comb(len(c) + d, d) <= max_terms]
        for d in (degrees or [min_degree]) if c else (0,):
            coef, res = _fit_one(x, half[c], L_fit[:, m], dLdq, d, wl, wr)
            # in units of the tolerances; the 99th percentile, as the fit gives up on jumps
            score = max(np.percentile(r, 99) for r in res)
            if best is None or score < 0.95 * best[0]:
                best, stale = (score, d, coef), 0
            else:
                stale += 1
            if score <= 1.0 or stale == 3:
                break  # within the tolerances, or three degrees in a row no better (a jump, say)
            say(f"fit {name}: degree {d}: 99th percentile error {score:.3g}× the tolerance")
        chosen.append((tuple(c), best[1], best[2]))

    groups: dict[tuple[int, int], list[int]] = {}
    for m, (c, d, _) in enumerate(chosen):
        groups.setdefault((len(c), d), []).append(m)
    dtype = model.axis_d.dtype
    fit_groups = []
    for (_, d), idx in sorted(groups.items()):
        cs = [chosen[m][0] for m in idx]
        fit_groups.append(
            _FitGroup(
                jnp.asarray(np.array([center[list(c)] for c in cs]).reshape(len(idx), -1), dtype),
                jnp.asarray(np.array([half[list(c)] for c in cs]).reshape(len(idx), -1), dtype),
                jnp.asarray(
                    np.stack(
                        [
                            derivative_coefficients(chebyshev_basis(len(cs[0]), d), chosen[m][2])
                            for m in idx
                        ]
                    ),
                    dtype,
                ),
                tuple(idx),
                tuple(cs),
                d,
            )
        )
    fit_seconds = time.perf_counter() - t0
    provisional = FittedPaths(tuple(fit_groups), len(names), None)
    L_hat, R_hat = jax.device_get(
        jax.jit(jax.vmap(provisional.lengths_and_moment_arms))(jnp.asarray(q_val, dtype))
    )
    eL, eR = np.abs(L_hat - L_val), np.abs(R_hat - R_val)
    report = PathFitReport(
        names=tuple(names),
        coordinates=tuple(tuple(model.coordinate_names[i] for i in c) for c, _, _ in chosen),
        degrees=tuple(d for _, d, _ in chosen),
        terms=tuple(int(coef.shape[0]) for _, _, coef in chosen),
        max_length_error=tuple(float(v) for v in eL.max(0)),
        max_moment_arm_error=tuple(float(v) for v in eR.max((0, 1))),
        p99_length_error=tuple(float(v) for v in np.percentile(eL, 99, axis=0)),
        p99_moment_arm_error=tuple(float(v) for v in np.percentile(eR.max(1), 99, axis=0)),
        within_goal=tuple(
            float(v)
            for v in np.mean((eL <= length_tolerance) & (eR.max(1) <= moment_arm_tolerance), 0)
        ),
        length_tolerance=float(length_tolerance),
        moment_arm_tolerance=float(moment_arm_tolerance),
        ranges=tuple((float(a), float(b)) for a, b in r),
        samples=int(samples),
        validation=int(validation),
        exact_seconds=exact_seconds,
        fit_seconds=fit_seconds,
    )
    fit = FittedPaths(tuple(fit_groups), len(names), report)
    say(str(report))
    return eqx.tree_at(lambda mm: mm.muscles, model, MuscleSet(ms.muscles, fit=fit))
