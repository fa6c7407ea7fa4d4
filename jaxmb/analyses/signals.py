"""OpenSim's coordinate processing, reproduced: padding, the IIR low-pass filter, resampling and the
GCV splines its tools differentiate, as linear operators on the data.

OpenSim's InverseDynamicsTool (and the AnalyzeTool behind StaticOptimization) prepares coordinates
like this (``OpenSim/Tools/InverseDynamicsTool.cpp``, ``OpenSim/Common/Storage.cpp``,
``Signal.cpp``, ``GCVSpline.cpp``, ``gcvspl.c`` of opensim-core 4.6):

1. ``Storage::pad(size/2)``: each column (time included) is extended at both ends by its odd
   reflection about the end sample (``Signal::Pad``: ``2 x₀ − x_j``).
2. ``Storage::lowpassIIR(fc)``: if the time step is not uniform to machine epsilon
   (``avgDt − dtmin > SimTK::Eps``, which holds for any file whose times were rounded when written),
   the padded data are first resampled at ``dtmin`` with a degree-5 GCV spline, at times
   ``t₀, t₀+dt, t₀+dt+dt, ...`` accumulated in floating point while ``t ≤ t_last``
   (``GCVSplineSet::constructStorage``); then ``Signal::LowpassIIR``: a third-order Butterworth
   filter from the bilinear transform with pre-warping, run forwards and backwards, its first four
   outputs set to the inputs.
3. ``GCVSplineSet(5, storage)``: per column a GCV spline with error variance 0, which ``gcvspl``
   computes with smoothing parameter 0 — the natural interpolating spline of degree 2m−1 = 5
   (m = 3: derivatives 3 and 4 vanish at both ends). Its values and first and second derivatives at
   the storage's times in the tool's time range are q, q̇, q̈.
4. ExternalForce data are splined the same way with degree 3 (natural cubic interpolation).

Every step is linear in the data, so each is built here (NumPy, from the times alone) as a matrix;
:func:`coordinate_operators` composes them into ``(t, W0, W1, W2)`` with ``q = W0 @ data`` etc.,
so the data-dependent part is a matrix product that jit/vmap/grad see through.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .checks import check_finite, check_positive

__all__ = [
    "EPS",
    "opensim_pad",
    "iir_coefficients",
    "lowpass_iir",
    "lowpass_iir_matrix",
    "natural_spline_matrix",
    "block_tridiagonal_solve",
    "resample_times",
    "find_index",
    "CoordinateOperators",
    "coordinate_operators",
]

EPS = float(np.finfo(float).eps)  # SimTK::Eps


def opensim_pad(x: np.ndarray, pad: int) -> np.ndarray:
    """``Signal::Pad`` along axis 0: odd reflection of ``pad`` samples about each end sample.

    A pad not smaller than the length is applied in rounds, as OpenSim does.
    """
    x = np.asarray(x, dtype=float)
    if pad <= 0:
        return x
    n = x.shape[0]
    if pad >= n:
        new = n + 2 * pad
        p = n - 1
        while x.shape[0] < new:
            x = opensim_pad(x, p)
            p = (new - x.shape[0]) // 2
            if p >= x.shape[0]:
                p = x.shape[0] - 1
        return x
    head = 2.0 * x[0] - x[pad:0:-1]
    tail = 2.0 * x[-1] - x[::-1][1 : pad + 1]
    return np.concatenate([head, x, tail], axis=0)


def iir_coefficients(dt: float, cutoff: float) -> tuple[np.ndarray, np.ndarray, float]:
    """``(a, b, fc)`` of ``Signal::LowpassIIR``: numerator ``a`` (4,), denominator ``b`` (4,) with
    ``b[0] = 1`` (scipy's ``butter(3, fc, fs=1/dt)`` gives the same), and the cutoff used (OpenSim
    lowers it to 0.49·fs when it is not below half the sampling frequency). ``dt`` (s) and
    ``cutoff`` (Hz) positive."""
    check_positive(dt, "iir_coefficients", "dt", "s")
    check_positive(cutoff, "iir_coefficients", "cutoff", "Hz")
    fs = 1.0 / dt
    fc = cutoff if cutoff < 0.5 * fs else 0.49 * fs
    wc = 2.0 * math.pi * fc
    wa = math.tan(wc * dt / 2.0)
    wa2, wa3 = wa * wa, wa * wa * wa
    denom = (wa + 1.0) * (wa * wa + wa + 1.0)
    a = np.array([wa3, 3 * wa3, 3 * wa3, wa3]) / denom
    b = np.array(
        [
            1.0,
            (3 * wa3 + 2 * wa2 - 2 * wa - 3) / denom,
            (3 * wa3 - 2 * wa2 - 2 * wa + 3) / denom,
            (wa - 1) * (wa2 - wa + 1) / denom,
        ]
    )
    return a, b, fc


def _pass(a, b, sig):
    out = np.array(sig, dtype=float, copy=True)
    n = sig.shape[0]
    for i in range(3, n):
        out[i] = (
            a[0] * sig[i]
            + a[1] * sig[i - 1]
            + a[2] * sig[i - 2]
            + a[3] * sig[i - 3]
            - b[1] * out[i - 1]
            - b[2] * out[i - 2]
            - b[3] * out[i - 3]
        )
    return out


def lowpass_iir(dt: float, cutoff: float, x: np.ndarray) -> np.ndarray:
    """``Signal::LowpassIIR`` along axis 0 (columns filtered independently): forward pass, reverse,
    second pass, reverse; the first four samples of each pass are copied from its input."""
    x = np.asarray(x, dtype=float)
    if x.shape[0] < 4:
        raise ValueError(f"lowpass_iir: too few samples to filter ({x.shape[0]} < 4)")
    a, b, _ = iir_coefficients(dt, cutoff)
    y = _pass(a, b, x)[::-1]
    return _pass(a, b, y)[::-1]


def lowpass_iir_matrix(n: int, dt: float, cutoff: float) -> np.ndarray:
    """The (n, n) matrix of :func:`lowpass_iir` on n samples."""
    return lowpass_iir(dt, cutoff, np.eye(n))


def _rows(u, d: int, K: int) -> np.ndarray:
    """(len(u), K): d-th derivative in u of the monomials u^0 … u^(K-1) at each u."""
    k = np.arange(K)
    coef = np.array([math.factorial(j) / math.factorial(j - d) if j >= d else 0.0 for j in k])
    return coef[None, :] * np.asarray(u, dtype=float)[:, None] ** np.maximum(k - d, 0)[None, :]


def block_tridiagonal_solve(Lo: np.ndarray, Di: np.ndarray, Up: np.ndarray, B: np.ndarray):
    """X (n, r, k) solving ``Lo[i] X[i−1] + Di[i] X[i] + Up[i] X[i+1] = B[i]`` for i = 0 … n−1
    (blocks (n, r, r), right-hand sides (n, r, k); ``Lo[0]`` and ``Up[n−1]`` are ignored).

    Block cyclic reduction without pivoting (as block elimination, for the diagonally dominant
    systems of splines): each level eliminates the odd-numbered unknowns from the even-numbered
    equations, all at once in numpy, so a system of n blocks costs log₂ n levels of batched
    operations instead of n sequential small solves (a Python loop of ~4n numpy calls: about
    0.2 s of the coordinate and load splines of a gait trial)."""
    n = Di.shape[0]
    if n == 1:
        return np.linalg.solve(Di[0], B[0])[None]
    Lo, Up = Lo.copy(), Up.copy()
    Lo[0] = 0.0
    Up[-1] = 0.0
    ev, od = slice(0, None, 2), slice(1, None, 2)
    Dinv = np.linalg.inv(Di[od])  # the odd blocks' inverses: (n // 2, r, r)
    ne = (n + 1) // 2
    # even equation 2j: its neighbours are odd unknowns 2j−1 (left) and 2j+1 (right)
    a = np.zeros((ne,) + Di.shape[1:])  # −Lo[2j] Dinv[2j−1]
    c = np.zeros((ne,) + Di.shape[1:])  # −Up[2j] Dinv[2j+1]
    a[1:] = -Lo[ev][1:] @ Dinv[: ne - 1]
    no = n // 2
    c[:no] = -Up[ev][:no] @ Dinv
    Lo2, Up2 = np.zeros_like(a), np.zeros_like(c)
    D2 = Di[ev].copy()
    B2 = B[ev].copy()
    D2[1:] += a[1:] @ Up[od][: ne - 1]
    Lo2[1:] = a[1:] @ Lo[od][: ne - 1]
    B2[1:] += a[1:] @ B[od][: ne - 1]
    D2[:no] += c[:no] @ Lo[od]
    Up2[:no] = c[:no] @ Up[od]
    B2[:no] += c[:no] @ B[od]
    X = np.empty((n,) + B.shape[1:])
    X[ev] = block_tridiagonal_solve(Lo2, D2, Up2, B2)
    # odd unknowns from their own equations, the even neighbours known
    rhs = B[od] - Lo[od] @ X[ev][:no]
    right = X[ev][1 : no + 1]
    rhs[: right.shape[0]] -= Up[od][: right.shape[0]] @ right
    X[od] = Dinv @ rhs
    return X


def natural_spline_matrix(
    x: np.ndarray, x_eval: np.ndarray, degree: int = 5, derivative: int | tuple[int, ...] = 0
) -> np.ndarray:
    """(len(x_eval), len(x)) matrix of the natural interpolating spline of odd ``degree`` = 2m−1
    through knots ``x``, or its ``derivative``, at ``x_eval``: OpenSim's ``GCVSpline`` with error
    variance 0 (``gcvspl`` with smoothing parameter 0), interpolating, derivatives m … 2m−2 zero at
    both ends. Points outside ``[x₀, x_{n−1}]`` use the end pieces' polynomials. A tuple of
    derivative orders gives a (len(derivative), len(x_eval), len(x)) stack.

    Each piece is the degree-(2m−1) Hermite interpolant of the values and derivatives 1 … m−1 at
    its two knots; continuity of derivatives m … 2m−2 at the interior knots and the natural end
    conditions give a block-tridiagonal system in the knot derivatives ((m−1)×(m−1) blocks),
    solved by :func:`block_tridiagonal_solve` for every datum at once (or, when the evaluation
    points use few pieces, only for the knots of those pieces, through the transposed system).
    """
    x = np.asarray(x, dtype=float)
    x_eval = np.atleast_1d(np.asarray(x_eval, dtype=float))
    if degree % 2 != 1 or degree < 3:
        raise ValueError(f"natural_spline_matrix: degree must be odd and ≥ 3, got {degree}")
    n = x.shape[0]
    m = (degree + 1) // 2
    if n < 2 * m:
        raise ValueError(
            f"natural_spline_matrix: a degree-{degree} spline needs {2 * m} or more points, got {n}"
        )
    h = np.diff(x)
    if np.any(h <= 0):
        raise ValueError("natural_spline_matrix: knots must increase strictly")
    K, r = 2 * m, m - 1  # coefficients per piece; unknown derivatives per knot
    # local vector v = [y_a, h z_a1, …, h^r z_ar, y_b, h z_b1, …]: u-derivatives at u = 0 and 1
    E = np.concatenate([_rows(np.array([u]), d, K) for u in (0.0, 1.0) for d in range(m)])
    Einv = np.linalg.inv(E)  # coefficients = Einv @ v
    hs = float(np.mean(h))  # unknowns scaled: w_j = hs^j z_j

    # t-derivative k at u of a piece: row(u,k) @ Einv @ v / h^k; v in terms of (y, w):
    # v[j] = (h/hs)^j w_j for j ≥ 1 (and y for j = 0). Vectorized over pieces (u, hi arrays):
    # the knots of a trial are hundreds, and Python loops over them cost seconds per trial.
    def piece(u, k, hi):
        c = (_rows(u, k, K) @ Einv) / hi[:, None] ** k  # (N, K)
        sa = (hi[:, None] / hs) ** np.arange(m)[None, :]
        return c[:, :m] * sa, c[:, m:] * sa  # coefficients on [y_a, w_a], [y_b, w_b]

    # block rows: knot i, equations k = m..2m-2 (r of them), scaled by hs^k
    Lo = np.zeros((n, r, r))
    Di = np.zeros((n, r, r))
    Up = np.zeros((n, r, r))
    Gy = np.zeros((n, r, 3))  # coefficients on y_{i-1}, y_i, y_{i+1} (moved to the right side)
    sgn = np.where(np.arange(n - 1) > 0, -1.0, 1.0)[:, None]
    for e, k in enumerate(range(m, 2 * m - 1)):
        # knots 1 … n-1: the left piece i-1 at u = 1 (minus the right piece when interior)
        a, b = piece(np.ones(n - 1), k, h)
        Lo[1:, e] += a[:, 1:] * hs**k
        Di[1:, e] += b[:, 1:] * hs**k
        Gy[1:, e, 0] -= a[:, 0] * hs**k
        Gy[1:, e, 1] -= b[:, 0] * hs**k
        # knots 0 … n-2: the right piece i at u = 0
        a, b = piece(np.zeros(n - 1), k, h)
        Di[:-1, e] += sgn * a[:, 1:] * hs**k
        Up[:-1, e] += sgn * b[:, 1:] * hs**k
        Gy[:-1, e, 1] -= sgn[:, 0] * a[:, 0] * hs**k
        Gy[:-1, e, 2] -= sgn[:, 0] * b[:, 0] * hs**k
    # right-hand sides for every datum: (n, r, n)
    R = np.zeros((n, r, n))
    i = np.arange(n)
    R[i, :, i] = Gy[:, :, 1]
    R[i[1:], :, i[1:] - 1] = Gy[1:, :, 0]
    R[i[:-1], :, i[:-1] + 1] = Gy[:-1, :, 2]
    idx = np.clip(np.searchsorted(x, x_eval, side="right") - 1, 0, n - 2)
    rows = np.unique(np.concatenate([idx, idx + 1]))  # the knots whose derivatives are used
    if rows.size * r < n:
        # few evaluation pieces (a trial's frames among a force plate's samples): the needed rows
        # of A⁻¹ R from the transposed system, Aᵀ Z = E (E selects the rows), with r·|rows|
        # right-hand sides instead of n; R's three diagonals then give (A⁻¹ R)[rows] = Zᵀ R
        T = lambda B: np.swapaxes(B, 1, 2)
        LoT, UpT = np.zeros_like(Lo), np.zeros_like(Up)
        LoT[1:], UpT[:-1] = T(Up[:-1]), T(Lo[1:])
        E = np.zeros((n, r, rows.size * r))
        for p in range(r):
            E[rows, p, np.arange(rows.size) * r + p] = 1.0
        Z = block_tridiagonal_solve(LoT, T(Di), UpT, E)
        Y = Z.reshape(n, r, rows.size, r).transpose(2, 3, 0, 1)  # (rows, r, n, r): (A⁻¹)[rows]
        G = np.einsum("jpiq,iqs->jpis", Y, Gy)  # knot i's row of R on its columns i−1, i, i+1
        W = G[..., 1].copy()
        W[..., :-1] += G[..., 1:, 0]
        W[..., 1:] += G[..., :-1, 2]
        at, at1 = np.searchsorted(rows, idx), np.searchsorted(rows, idx + 1)
    else:
        W = block_tridiagonal_solve(Lo, Di, Up, R)
        at, at1 = idx, idx + 1
    orders = (derivative,) if isinstance(derivative, int) else tuple(derivative)
    out = []
    eye = np.eye(n)
    u = (x_eval - x[idx]) / h[idx]
    for d in orders:
        a, b = piece(u, d, h[idx])
        M = (
            a[:, :1] * eye[idx]
            + np.einsum("jr,jrn->jn", a[:, 1:], W[at])
            + b[:, :1] * eye[idx + 1]
            + np.einsum("jr,jrn->jn", b[:, 1:], W[at1])
        )
        out.append(M)
    return out[0] if isinstance(derivative, int) else np.stack(out)


def resample_times(t0: float, t1: float, dt: float) -> np.ndarray:
    """``GCVSplineSet::constructStorage(0, dt)``'s times: ``t = t0; t += dt`` while ``t ≤ t1``
    (finite t0 and t1 in s, dt positive)."""
    check_finite(np.array([t0, t1], dtype=float), "resample_times", "[t0, t1]")
    check_positive(dt, "resample_times", "dt", "s")
    out = []
    t = t0
    while t <= t1:
        out.append(t)
        t += dt
    return np.asarray(out)


def find_index(times: np.ndarray, t: float) -> int:
    """``Storage::findIndex``: the last index whose time is ≤ t (0 when t precedes them all)."""
    if math.isnan(t):
        raise ValueError("find_index: the time t is NaN")
    i = 0
    while i < len(times) and not t < times[i]:
        i += 1
    return max(i - 1, 0)


@dataclasses.dataclass(frozen=True)
class CoordinateOperators:
    """Linear maps from raw coordinate samples (n_raw, ...) to q, q̇, q̈ at the output times.

    Attributes:
        times: (nt,) the output times (those of OpenSim's processed storage within the range).
        W0, W1, W2: (nt, n_raw) value, first and second derivative operators.
        resampled: whether OpenSim's filter resampled the padded data (non-uniform times).
        cutoff: the cutoff frequency applied (Hz; None without filtering).
    """

    times: np.ndarray
    W0: np.ndarray
    W1: np.ndarray
    W2: np.ndarray
    resampled: bool
    cutoff: float | None


def coordinate_operators(
    times,
    cutoff: float | None = None,
    time_range: tuple[float, float] | None = None,
    acceleration: str = "second_derivative",
) -> CoordinateOperators:
    """OpenSim's coordinate preparation for inverse dynamics / static optimization as matrices.

    ``cutoff`` (Hz) ≥ 0 filters as ``lowpass_cutoff_frequency_for_coordinates`` does (negative or
    None: no filter). ``time_range`` selects output times as InverseDynamicsTool does: from the last
    storage time ≤ max(first time, start) to the last ≤ min(last time, end).

    ``acceleration``: ``"second_derivative"`` (InverseDynamicsTool: q̈ is the spline's second
    derivative) or ``"derivative_of_speed"`` (AnalyzeTool + StaticOptimization: the speeds are the
    spline's first derivative at the samples, ``formCompleteStorages``, and the target
    accelerations the first derivative of a second quintic spline through those speeds,
    ``StaticOptimization::begin``).
    """
    where = "coordinate_operators"
    if acceleration not in ("second_derivative", "derivative_of_speed"):
        raise ValueError(f"{where}: unknown acceleration {acceleration!r}")
    if cutoff is not None and math.isnan(cutoff):
        raise ValueError(f"{where}: the cutoff frequency is NaN (negative or None: no filter)")
    t = np.asarray(times, dtype=float)
    check_finite(t, where, "times")
    if time_range is not None:
        lo, hi = (float(v) for v in time_range)
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ValueError(f"{where}: time_range {tuple(time_range)} must run forward (s)")
    n = t.shape[0]
    P = np.eye(n)
    resampled = False
    applied = None
    if cutoff is not None and cutoff >= 0:
        pad = n // 2
        t = opensim_pad(t, pad)
        P = opensim_pad(P, pad)
        dtmin = float(np.min(np.diff(t)))
        if dtmin < EPS:
            raise ValueError("coordinate_operators: times do not increase; cannot filter")
        avg = (t[-1] - t[0]) / (t.shape[0] - 1)
        if avg - dtmin > EPS:
            tn = resample_times(t[0], t[-1], dtmin)
            P = natural_spline_matrix(t, tn, 5, 0) @ P
            t = tn
            resampled = True
        if t.shape[0] < 4:
            raise ValueError("coordinate_operators: too few samples to filter")
        P = lowpass_iir(dtmin, cutoff, P)  # the filter on P's columns: lowpass_iir_matrix @ P
        applied = iir_coefficients(dtmin, cutoff)[2]
    first, last = t[0], t[-1]
    lo, hi = (-np.inf, np.inf) if time_range is None else time_range
    i0 = find_index(t, max(first, lo))
    i1 = find_index(t, min(last, hi))
    te = t[i0 : i1 + 1]
    W = natural_spline_matrix(t, te, 5, (0, 1, 2)) @ P
    if acceleration == "derivative_of_speed":
        U = natural_spline_matrix(t, t, 5, 1) @ P
        W[2] = natural_spline_matrix(t, te, 5, 1) @ U
    return CoordinateOperators(te, W[0], W[1], W[2], resampled, applied)
