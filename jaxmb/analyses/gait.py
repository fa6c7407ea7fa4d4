"""Gait data to Newton–Euler inputs: readers, segment parameters, filtering, segment kinematics.

* Readers for the CSV transcriptions of Winter (2009) Appendix A (Tables A.2, A.3, A.5) and for the
  BMClab 3D gait trials (``BiomecII2018_gait_*.txt``: 10 markers in mm, one force plate); copies of
  both, and of the BMClab body-segment parameter (BSP) tables, ship in ``jaxmb/data/gait/``.
* BSP tables: Dempster as tabulated by Winter, and Zatsiorsky as adjusted by de Leva (1996).
* Noisy marker data (100–1000 Hz) is low-pass filtered with a zero-lag Butterworth filter: a
  2nd-order filter run forward and backward (4th order, no phase lag), its (pre-warped) cutoff
  raised by Winter's correction ``1 / (2^{1/2} − 1)^{1/4} = 1/0.802`` so that the *two-pass*
  response is −3 dB at the requested cutoff (Winter 2009, §3.4.4.3). The cutoff is a parameter
  (6 Hz is the usual choice for walking). Edges are padded by odd reflection, as
  ``scipy.signal.filtfilt`` does.
  Derivatives are second-order central differences (one-sided second order at the ends); filtering
  before differencing is what keeps them usable — differencing amplifies noise by ~1/Δt per order.
* Segment kinematics from markers: orthonormal frames from three points or a least-squares rigid fit
  of three or more markers (SVD), angular velocity in the segment frame from ``ω̃ = Rᵀ Ṙ``, angular
  acceleration as its time derivative, centre-of-mass accelerations by differencing twice.

The pipelines :func:`winter_inputs` and :func:`bmc3d_inputs` return ``(chain, motion, load)`` for
:func:`jaxmb.newton_euler.joint_loads`; :func:`inverse_dynamics_command` is the ``jaxmb
inverse-dynamics`` command line.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..math import unskew
from . import newton_euler as ne

__all__ = [
    "DATA_DIR",
    "GaitDataError",
    "WinterData",
    "Bmc3dTrial",
    "SegmentParameters",
    "read_winter",
    "read_bmc3d",
    "read_bsp_table",
    "segment_parameters",
    "butterworth_coefficients",
    "lowpass",
    "derivative",
    "frame_from_markers",
    "rigid_fit",
    "angular_velocity",
    "angular_acceleration",
    "segment_motion",
    "winter_inputs",
    "WINTER_INERTIA",
    "bmc3d_inputs",
    "inverse_dynamics_command",
    "add_inverse_dynamics_parser",
]

DATA_DIR = Path(__file__).resolve().parent / "data" / "gait"
"""Bundled gait data: ``winter/`` (Winter 2009 App. A), ``bmc3d/``, ``bsp/`` (BMClab, CC-BY-4.0)."""

WINTER_MASS = 56.7
"""Body mass of Winter's subject (kg)."""

WINTER_INERTIA = {"foot": (0.7941, 0.00279), "leg": (2.6642, 0.0350), "thigh": (5.670, None)}
"""(mass kg, I_cm kg·m²) that reproduce Winter's Table A.5 (least squares over all frames, from the
data README). The thigh's I_cm is not given; :func:`winter_inputs` uses Dempster's radius of
gyration (0.323 of the hip–knee length)."""

_WINTER_FILES = {
    "A2": "winter_A2_filtered_markers.csv",
    "A3": "winter_A3_segment_kinematics.csv",
    "A5": "winter_A5_reaction_forces_moments.csv",
}
_WINTER_MARKERS = {
    "rib": "BASE_RIB_CAGE",
    "hip": "Greater_Trochanter_Hip",
    "knee": "RIGHT_Femoral_Lateral_Epicondyle_Knee",
    "fibula": "Head_of_RIGHT_FIBULA",
    "ankle": "Lateral_Malleolus_RIGHT_ANKLE",
    "heel": "RIGHT_HEEL",
}
_WINTER_SEGMENTS = ("foot", "leg", "thigh", "hat")
BMC3D_MARKERS = ("FH", "LE", "ME", "HF", "TT", "LM", "MM", "CA", "FM", "VM")
"""BMClab trial markers: femoral head (hip), lateral/medial femoral epicondyles, head of fibula,
tibial tuberosity, lateral/medial malleoli, calcaneus, first and fifth metatarsal heads."""


class GaitDataError(ValueError):
    """A gait data file or argument that cannot be used, naming the file, line, column or value."""


# ---------------------------------------------------------------------------------------------
# readers


def _read_csv_columns(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    if not path.is_file():
        raise GaitDataError(f"{path}: file not found")
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if len(rows) < 2:
        raise GaitDataError(f"{path}: no data rows")
    header = [h.strip() for h in rows[0]]
    cols: dict[str, list[str]] = {h: [] for h in header}
    for ln, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise GaitDataError(f"{path}, line {ln}: {len(row)} fields, header has {len(header)}")
        for h, v in zip(header, row, strict=True):
            cols[h].append(v.strip())
    return header, cols


def _numeric(path: Path, cols: Mapping[str, list[str]], name: str) -> np.ndarray:
    if name not in cols:
        raise GaitDataError(f"{path}: missing column {name!r}")
    out = np.empty(len(cols[name]))
    for k, v in enumerate(cols[name]):
        try:
            out[k] = float(v)
        except ValueError:
            raise GaitDataError(
                f"{path}, line {k + 2}, column {name!r}: {v!r} is not a number"
            ) from None
    return out


@dataclasses.dataclass(frozen=True)
class WinterData:
    """Winter (2009) Appendix A, one right-leg stride at 69.9 frames/s (x forward, y up, SI units).

    Attributes:
        time: (nt,) s. frame: (nt,) frame numbers (1-based as printed).
        events: ``{"TOR": [frames], "HCR": [frames]}`` (toe-off / heel contact, right).
        markers: ``{name: (nt, 3)}`` positions (m) from Table A.2 with z = 0; names ``rib, hip,
            knee, fibula, ankle, heel``. marker_vel, marker_acc: Winter's own derivatives
            (m/s, m/s²).
        segments: Table A.3, ``{foot|leg|thigh|hat: {"theta" (rad), "omega", "alpha", "com"
            (nt, 3), "vel" (nt, 3), "acc" (nt, 3)}}``.
        reactions: Table A.5 columns by their CSV names (N, N·m, m).
    """

    time: np.ndarray
    frame: np.ndarray
    events: dict
    markers: dict
    marker_vel: dict
    marker_acc: dict
    segments: dict
    reactions: dict

    @property
    def dt(self) -> float:
        """Sample interval (s): Winter's 69.9 frames/s."""
        return 1.0 / 69.9

    @property
    def stance(self) -> np.ndarray:
        """Boolean (nt,) mask of the frames with ground contact (non-zero ground reaction)."""
        r = self.reactions
        return (np.abs(r["grf_rx_N"]) + np.abs(r["grf_ry_N"])) > 0


def _xy0(x, y):
    return np.stack([x, y, np.zeros_like(x)], -1)


def read_winter(directory: str | Path | None = None) -> WinterData:
    """Read Winter's Tables A.2, A.3 and A.5 (CSV files as bundled in ``jaxmb/data/gait/winter``).

    Raises:
        GaitDataError: a missing file or column, a non-numeric value (with file and line), or
            tables with different frame counts.
    """
    d = Path(directory) if directory is not None else DATA_DIR / "winter"
    tables = {}
    for key, fname in _WINTER_FILES.items():
        p = d / fname
        tables[key] = (p, *_read_csv_columns(p))
    p2, _, c2 = tables["A2"]
    p3, _, c3 = tables["A3"]
    p5, h5, c5 = tables["A5"]
    time = _numeric(p3, c3, "time")
    frame = _numeric(p3, c3, "frame").astype(int)
    for p, c in ((p2, c2), (p5, c5)):
        f = _numeric(p, c, "frame").astype(int)
        if f.shape != frame.shape or np.any(f != frame):
            raise GaitDataError(f"{p}: frames {f.min()}..{f.max()} ({f.size}) differ from {p3}")
    events: dict[str, list[int]] = {}
    for fr, s in zip(frame, c3["state"], strict=True):
        if s:
            events.setdefault(s, []).append(int(fr))
    markers, mvel, macc = {}, {}, {}
    for short, long in _WINTER_MARKERS.items():
        g = lambda q, long=long: _numeric(p2, c2, f"{long}_{q}")
        markers[short] = _xy0(g("x_m"), g("y_m"))
        mvel[short] = _xy0(g("vx_m_s"), g("vy_m_s"))
        macc[short] = _xy0(g("ax_m_s2"), g("ay_m_s2"))
    segments = {}
    for s in _WINTER_SEGMENTS:
        g = lambda q, s=s: _numeric(p3, c3, f"{s}_{q}")
        segments[s] = {
            "theta": np.deg2rad(g("theta_deg")),
            "omega": g("omega_rad_s"),
            "alpha": g("alpha_rad_s2"),
            "com": _xy0(g("cm_x_m"), g("cm_y_m")),
            "vel": _xy0(g("vel_x_m_s"), g("vel_y_m_s")),
            "acc": _xy0(g("acc_x_m_s2"), g("acc_y_m_s2")),
        }
    reactions = {h: _numeric(p5, c5, h) for h in h5 if h not in ("state", "frame")}
    return WinterData(time, frame, events, markers, mvel, macc, segments, reactions)


@dataclasses.dataclass(frozen=True)
class Bmc3dTrial:
    """A BMClab 3D gait trial (lab axes: x forward, y up, z to the right; SI units).

    Attributes:
        time: (nt,) s.
        markers: ``{name: (nt, 3)}`` m (see :data:`BMC3D_MARKERS`).
        grf: (nt, 3) N, force of the plate on the foot.
        cop: (nt, 3) m, centre of pressure (meaningless where ``grf`` is zero).
        free_moment: (nt, 3) N·m, the plate's free moment, about the vertical (y) axis only.
        path: the file read.
    """

    time: np.ndarray
    markers: dict
    grf: np.ndarray
    cop: np.ndarray
    free_moment: np.ndarray
    path: str = ""

    @property
    def dt(self) -> float:
        """Mean sample interval (s) (the file's time column is rounded to 1 ms)."""
        return float((self.time[-1] - self.time[0]) / (len(self.time) - 1))

    def stance(self, threshold: float = 20.0) -> slice:
        """Frames of the longest run with vertical ground reaction above ``threshold`` N."""
        on = self.grf[:, 1] > threshold
        if not on.any():
            raise GaitDataError(f"{self.path}: no frame with vertical force above {threshold} N")
        edges = np.flatnonzero(np.diff(np.concatenate([[0], on.astype(int), [0]])))
        starts, stops = edges[::2], edges[1::2]
        k = int(np.argmax(stops - starts))
        return slice(int(starts[k]), int(stops[k]))


def read_bmc3d(path: str | Path) -> Bmc3dTrial:
    """Read a BMClab ``BiomecII2018_gait_*.txt`` trial (tab separated, markers and COP in mm,
    forces in N, free moment ``My`` in N·mm), converting to SI.

    ``path`` may also be a bare file name of a bundled trial (``"BiomecII2018_gait_d.txt"``).

    Raises:
        GaitDataError: a missing file or column, or a non-numeric value (with line and column).
    """
    p = Path(path)
    if not p.is_file() and (DATA_DIR / "bmc3d" / p.name).is_file() and len(p.parts) == 1:
        p = DATA_DIR / "bmc3d" / p.name
    if not p.is_file():
        raise GaitDataError(f"{p}: file not found")
    with open(p) as fh:
        header = fh.readline().split()
        rows = []
        for ln, line in enumerate(fh, start=2):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != len(header):
                raise GaitDataError(
                    f"{p}, line {ln}: {len(fields)} fields, header has {len(header)}"
                )
            try:
                rows.append([float(v) for v in fields])
            except ValueError:
                bad = next(k for k, v in enumerate(fields) if not _isfloat(v))
                raise GaitDataError(
                    f"{p}, line {ln}, column {header[bad]!r}: {fields[bad]!r} is not a number"
                ) from None
    data = np.asarray(rows)
    col = {h: k for k, h in enumerate(header)}

    def get(*names):
        for n in names:
            if n not in col:
                raise GaitDataError(f"{p}: missing column {n!r}")
        return data[:, [col[n] for n in names]]

    markers = {m: get(f"{m}x", f"{m}y", f"{m}z") / 1000.0 for m in BMC3D_MARKERS}
    grf = get("Fx", "Fy", "Fz")
    cop = get("COPx", "COPy", "COPz") / 1000.0
    free = np.zeros_like(grf)
    free[:, 1] = get("My")[:, 0] / 1000.0
    return Bmc3dTrial(get("Time")[:, 0], markers, grf, cop, free, str(p))


def _isfloat(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# body-segment parameters


@dataclasses.dataclass(frozen=True)
class SegmentParameters:
    """Body-segment parameters of one segment, as fractions.

    Attributes:
        segment: name in the table. endpoints: (origin, other) landmark names.
        mass_fraction: segment mass / body mass.
        com_fraction: centre of mass distance from the origin landmark / segment length.
        radii: radii of gyration about the centre of mass / segment length, ``(sagittal,
            transverse, longitudinal)`` axes; Dempster gives one value, repeated.
    """

    segment: str
    endpoints: tuple[str, str]
    mass_fraction: float
    com_fraction: float
    radii: tuple[float, float, float]


_BSP_FILES = {
    "dempster": "BSP_DempsterWinter.txt",
    "deleva_male": "BSPmale_ZdeLeva.txt",
    "deleva_female": "BSPfemale_ZdeLeva.txt",
}


def read_bsp_table(table: str = "dempster") -> dict[str, SegmentParameters]:
    """Read a bundled BSP table: ``"dempster"`` (Dempster via Winter), ``"deleva_male"`` or
    ``"deleva_female"`` (Zatsiorsky–de Leva). Keys are lower-case segment names (``"leg"``,
    ``"foot"``, ``"thigh"``, ``"shank"``, ...)."""
    if table not in _BSP_FILES:
        raise GaitDataError(f"unknown BSP table {table!r}; choose one of {sorted(_BSP_FILES)}")
    p = DATA_DIR / "bsp" / _BSP_FILES[table]
    out = {}
    with open(p) as fh:
        header = fh.readline().rstrip("\n").split("\t")
        for ln, line in enumerate(fh, start=2):
            f = [x.strip() for x in line.rstrip("\n").split("\t")]
            if len(f) != len(header):
                raise GaitDataError(f"{p}, line {ln}: {len(f)} fields, header has {len(header)}")
            name = f[0].lower()
            ends = tuple(f[1].replace(" ", "").split("-", 1))
            try:
                if table == "dempster":
                    mass, cm, rg = float(f[2]), float(f[3]), float(f[5])
                    radii = (rg, rg, rg)
                else:
                    mass, cm = float(f[2]), float(f[3])
                    radii = (float(f[4]), float(f[5]), float(f[6]))
            except ValueError as e:
                raise GaitDataError(f"{p}, line {ln}: {e}") from None
            out[name] = SegmentParameters(name, ends, mass, cm, radii)
    return out


def segment_parameters(
    table: str, segment: str, body_mass: float, length: float
) -> tuple[float, float, np.ndarray]:
    """Mass (kg), centre-of-mass fraction from the origin landmark and inertia (3, 3) kg·m² in the
    segment axes used here (x anterior, y longitudinal, z lateral): ``I = m diag(r_sag², r_long²,
    r_trans²) L²``.

    Raises:
        GaitDataError: unknown segment (the table's segments listed), non-positive mass or length,
            or an undefined radius of gyration.
    """
    rows = read_bsp_table(table)
    key = segment.lower()
    if key not in rows:
        raise GaitDataError(
            f"BSP table {table!r} has no segment {segment!r}; it has {sorted(rows)}"
        )
    if not (body_mass > 0 and length > 0):
        raise GaitDataError(
            f"segment {segment!r}: body mass {body_mass} and length {length} must be > 0"
        )
    s = rows[key]
    if not np.all(np.isfinite(s.radii)):
        raise GaitDataError(f"BSP table {table!r}, segment {segment!r}: no radius of gyration")
    m = s.mass_fraction * body_mass
    r = np.asarray(s.radii) * length
    return m, s.com_fraction, m * np.diag([r[0] ** 2, r[2] ** 2, r[1] ** 2])


# ---------------------------------------------------------------------------------------------
# filtering and differentiation


def butterworth_coefficients(cutoff: float, fs: float, passes: int = 2) -> tuple[np.ndarray, ...]:
    """2nd-order low-pass Butterworth ``(b, a)`` (bilinear transform), designed so that ``passes``
    passes (forward/backward) together are exactly −3 dB at ``cutoff`` Hz: Winter's correction
    ``C = (2^{1/passes} − 1)^{1/4}`` applied to the pre-warped frequency, ``K = tan(π f_c/f_s) / C``
    (Winter 2009, §3.4.4.3).

    Raises:
        GaitDataError: a cutoff that is not in (0, fs/2).
    """
    if not (0 < cutoff < fs / 2):
        raise GaitDataError(
            f"cutoff {cutoff} Hz must lie in (0, {fs / 2:g}) for sampling at {fs:g} Hz"
        )
    C = (2.0 ** (1.0 / passes) - 1.0) ** 0.25
    K = np.tan(np.pi * cutoff / fs) / C
    n = 1.0 / (1.0 + np.sqrt(2.0) * K + K * K)
    b0 = K * K * n
    b = np.array([b0, 2 * b0, b0])
    a = np.array([1.0, 2 * (K * K - 1) * n, (1 - np.sqrt(2.0) * K + K * K) * n])
    return b, a


def _lfilter(b, a, x, zi):
    """Direct-form-II-transposed IIR filter along axis 0 (as ``scipy.signal.lfilter``)."""

    def step(z, xk):
        y = b[0] * xk + z[0]
        z = jnp.stack([b[1] * xk - a[1] * y + z[1], b[2] * xk - a[2] * y])
        return z, y

    return jax.lax.scan(step, zi, x)[1]


def lowpass(
    x: Float[Array, "nt ..."],
    fs: float,
    cutoff: float,
    passes: int = 2,
    padlen: int | None = None,
) -> Float[Array, "nt ..."]:
    """Zero-lag Butterworth low-pass along the time axis (axis 0): 2nd-order filter forward then
    backward (``passes=2``), odd-reflection padding of ``padlen`` samples (default 9, as
    ``scipy.signal.filtfilt``), steady-state initial conditions. JAX code (jit/vmap/grad-able).

    Args:
        x: (nt, ...) signals sampled at ``fs`` Hz. cutoff: Hz (−3 dB of the zero-lag filter).
    """
    if passes != 2:
        raise GaitDataError(
            f"lowpass is zero-lag forward-backward filtering: passes must be 2, got {passes}"
        )
    b, a = butterworth_coefficients(cutoff, fs, passes)
    x = jnp.asarray(x, dtype=float)
    nt = x.shape[0]
    edge = 9 if padlen is None else int(padlen)
    if nt <= edge:
        raise GaitDataError(f"lowpass needs more than padlen={edge} samples, got {nt}")
    # steady-state state of the filter for a unit step (scipy.signal.lfilter_zi)
    A = np.eye(2) - np.array([[-a[1], 1.0], [-a[2], 0.0]])
    zi = np.linalg.solve(A, b[1:] - a[1:] * b[0])
    return _filtfilt(jnp.asarray(b), jnp.asarray(a), jnp.asarray(zi), x, edge)


@functools.partial(jax.jit, static_argnums=4)
def _filtfilt(b, a, zi, x, edge: int):
    nt = x.shape[0]
    if edge > 0:
        x = jnp.concatenate(
            [2 * x[:1] - x[edge:0:-1], x, 2 * x[-1:] - x[-2 : -edge - 2 : -1]], axis=0
        )
    zs = lambda v: zi.reshape((2,) + (1,) * (x.ndim - 1)) * v[None]
    y = _lfilter(b, a, x, zs(x[0]))
    y = _lfilter(b, a, y[::-1], zs(y[-1]))[::-1]
    return y[edge : edge + nt] if edge > 0 else y


def derivative(x: Float[Array, "nt ..."], dt: float) -> Float[Array, "nt ..."]:
    """Time derivative along axis 0 by second-order central differences (second-order one-sided
    differences at the two ends, as ``numpy.gradient(..., edge_order=2)``)."""
    x = jnp.asarray(x, dtype=float)
    if x.shape[0] < 3:
        raise GaitDataError(f"derivative needs at least 3 samples, got {x.shape[0]}")
    return _derivative(x, dt)


@jax.jit
def _derivative(x, dt):
    mid = (x[2:] - x[:-2]) / (2 * dt)
    first = (-3 * x[0] + 4 * x[1] - x[2]) / (2 * dt)
    last = (3 * x[-1] - 4 * x[-2] + x[-3]) / (2 * dt)
    return jnp.concatenate([first[None], mid, last[None]], axis=0)


# ---------------------------------------------------------------------------------------------
# segment kinematics


_AXES = {"x": 0, "y": 1, "z": 2}


def frame_from_markers(
    origin: Float[Array, "... 3"],
    axis_point: Float[Array, "... 3"],
    plane_point: Float[Array, "... 3"],
    axes: str = "yz",
) -> Float[Array, "... 3 3"]:
    """Orthonormal right-handed segment frame from three markers (world-from-segment rotation,
    columns = segment axes in ground coordinates).

    Axis ``axes[0]`` points from ``origin`` to ``axis_point``; axis ``axes[1]`` is the part of
    ``plane_point − origin`` orthogonal to it; the third completes a right-handed frame.

    Raises:
        GaitDataError: ``axes`` not two distinct letters of ``xyz``; coincident or collinear
            markers (frame index named) when the inputs are concrete.
    """
    if len(axes) != 2 or axes[0] == axes[1] or any(c not in _AXES for c in axes):
        raise GaitDataError(f"axes must be two distinct letters of 'xyz', got {axes!r}")
    origin, axis_point, plane_point = (
        jnp.asarray(v, dtype=float) for v in (origin, axis_point, plane_point)
    )
    if not isinstance(origin, jax.core.Tracer):
        u = np.asarray(axis_point) - np.asarray(origin)
        w = np.asarray(plane_point) - np.asarray(origin)
        nu = np.linalg.norm(u, axis=-1, keepdims=True)
        e = u / np.maximum(nu, 1e-300)
        nv = np.linalg.norm(w - np.sum(w * e, -1, keepdims=True) * e, axis=-1, keepdims=True)
        scale = np.maximum(np.linalg.norm(w, axis=-1, keepdims=True), 1e-300)
        bad = (nu < 1e-9) | (nv < 1e-6 * scale)
        if np.any(bad):
            idx = np.argwhere(bad[..., 0])
            where = f" (frame {tuple(int(i) for i in idx[0])})" if idx.size else ""
            raise GaitDataError(f"markers are coincident or collinear{where}: no frame defined")
    return _frame(origin, axis_point, plane_point, axes)


@functools.partial(jax.jit, static_argnums=3)
def _frame(origin, axis_point, plane_point, axes: str):
    u = axis_point - origin
    w = plane_point - origin
    e1 = u / jnp.linalg.norm(u, axis=-1, keepdims=True)
    v = w - jnp.sum(w * e1, -1, keepdims=True) * e1
    e2 = v / jnp.linalg.norm(v, axis=-1, keepdims=True)
    i, j = _AXES[axes[0]], _AXES[axes[1]]
    k = 3 - i - j
    e3 = jnp.cross(e1, e2) if (j - i) % 3 == 1 else jnp.cross(e2, e1)
    cols = [None, None, None]
    cols[i], cols[j], cols[k] = e1, e2, e3
    return jnp.stack(cols, axis=-1)


def rigid_fit(
    reference: Float[Array, "k 3"], markers: Float[Array, "nt k 3"]
) -> tuple[Float[Array, "nt 3 3"], Float[Array, "nt 3"]]:
    """Least-squares rigid motion of k ≥ 3 markers (Söderkvist & Wedin 1993, SVD):
    ``markers[t] ≈ R[t] @ reference + p[t]``. Returns the world-from-segment ``R`` (nt, 3, 3) and
    ``p`` (nt, 3) (m) for a segment frame in which the markers sit at ``reference``.

    Raises:
        GaitDataError: fewer than 3 markers, mismatched shapes or collinear reference markers.
    """
    ref = jnp.asarray(reference, dtype=float)
    mk = jnp.asarray(markers, dtype=float)
    if ref.ndim != 2 or ref.shape[1] != 3 or ref.shape[0] < 3:
        raise GaitDataError(f"rigid_fit needs a (k>=3, 3) reference, got shape {ref.shape}")
    if mk.ndim != 3 or mk.shape[1:] != ref.shape:
        raise GaitDataError(f"markers have shape {mk.shape}, expected (nt, {ref.shape[0]}, 3)")
    rc = ref - ref.mean(0)
    if np.linalg.matrix_rank(np.asarray(rc), tol=1e-9) < 2:
        raise GaitDataError("rigid_fit: the reference markers are collinear")
    mc = mk - mk.mean(1, keepdims=True)
    H = jnp.einsum("ka,tkb->tab", rc, mc)
    U, _, Vt = jnp.linalg.svd(H)
    d = jnp.sign(jnp.linalg.det(jnp.einsum("tab,tbc->tac", U, Vt)))
    D = jnp.ones((mk.shape[0], 3)).at[:, 2].set(d)
    R = jnp.einsum("tba,tb,tcb->tac", Vt, D, U)
    p = mk.mean(1) - jnp.einsum("tab,b->ta", R, ref.mean(0))
    return R, p


def angular_velocity(R: Float[Array, "nt 3 3"], dt: float) -> Float[Array, "nt 3"]:
    """Angular velocity (rad/s) in the segment frame from world-from-segment rotations sampled at
    ``dt``: ``ω̃ = Rᵀ Ṙ`` with ``Ṙ`` by :func:`derivative` (its skew part is taken)."""
    return _angular_velocity(jnp.asarray(R, dtype=float), dt)


@jax.jit
def _angular_velocity(R, dt):
    return unskew(jnp.einsum("tba,tbc->tac", R, _derivative(R, dt)))


def angular_acceleration(omega: Float[Array, "nt 3"], dt: float) -> Float[Array, "nt 3"]:
    """Angular acceleration (rad/s²) in the segment frame: ``d/dt`` of the segment-frame ω (equal
    to the segment-frame components of the ground-frame α, since ``Ṙ ω_b = R ω̃_b ω_b = 0``)."""
    return derivative(omega, dt)


def segment_motion(
    R: Float[Array, "nt 3 3"],
    com: Float[Array, "nt 3"],
    joint: Float[Array, "nt 3"],
    dt: float,
) -> ne.SegmentMotion:
    """Newton–Euler inputs of one segment from its pose history by differentiation.

    Args:
        R: world-from-segment rotations (columns = axes); the seed's R is its transpose.
        com: centre of mass (m), joint: proximal joint centre (m), ground frame.
        dt: sample interval (s). Filter the markers first (:func:`lowpass`) for noisy data.
    """
    R = jnp.asarray(R, dtype=float)
    if R.ndim != 3 or R.shape[1:] != (3, 3) or R.shape[0] < 3:
        raise GaitDataError(f"R has shape {R.shape}, expected (nt >= 3, 3, 3)")
    return _segment_motion(R, jnp.asarray(com, dtype=float), jnp.asarray(joint, dtype=float), dt)


@jax.jit
def _segment_motion(R, com, joint, dt):
    w = _angular_velocity(R, dt)
    return ne.SegmentMotion(
        R=jnp.swapaxes(R, -1, -2),
        com=com,
        acc=_derivative(_derivative(com, dt), dt),
        omega=w,
        alpha=_derivative(w, dt),
        joint=joint,
    )


def _rot_z(theta):
    c, s = jnp.cos(theta), jnp.sin(theta)
    o, z = jnp.ones_like(theta), jnp.zeros_like(theta)
    return jnp.stack(
        [jnp.stack([c, -s, z], -1), jnp.stack([s, c, z], -1), jnp.stack([z, z, o], -1)], -2
    )


# ---------------------------------------------------------------------------------------------
# pipelines


def winter_chain(data: WinterData, segments: Sequence[str] = ("foot", "leg", "thigh")):
    """:class:`~jaxmb.newton_euler.SegmentChain` with :data:`WINTER_INERTIA` (isotropic I_cm; in
    plane motion only the out-of-plane component acts). The thigh I_cm is Dempster's 0.323 of the
    mean hip–knee distance, squared, times its mass."""
    masses, inertias = [], []
    for s in segments:
        if s not in WINTER_INERTIA:
            raise GaitDataError(f"no Winter inertial parameters for segment {s!r}")
        m, I = WINTER_INERTIA[s]
        if I is None:
            L = np.mean(np.linalg.norm(data.markers["hip"] - data.markers["knee"], axis=-1))
            I = m * (0.323 * L) ** 2
        masses.append(m)
        inertias.append(I)
    return ne.segment_chain(segments, masses, inertias)


_WINTER_PROXIMAL = {"foot": "ankle", "leg": "knee", "thigh": "hip"}
_WINTER_DISTAL = {"foot": "heel", "leg": "ankle", "thigh": "knee"}
_DEMPSTER_PROXIMAL = {"leg": 0.433, "thigh": 0.433}


def winter_inputs(
    data: WinterData | None = None,
    source: str = "tables",
    segments: Sequence[str] = ("foot", "leg", "thigh"),
    cutoff: float | None = None,
):
    """Newton–Euler inputs for Winter's stride, planar data embedded in 3D (z out of the page).

    Args:
        data: :func:`read_winter` output (default: the bundled tables).
        source: ``"tables"``: segment angles, ω, α, centres of mass and their accelerations from
            Table A.3; ``"markers"``: only the A.2 marker positions, differentiated here
            (:func:`segment_motion`), optionally low-pass filtered at ``cutoff`` Hz first.
            Leg and thigh centres of mass are Dempster's (0.433 from the proximal joint). Table A.2
            has no toe or MT5 marker, so the foot frame is the heel→ankle line and the foot centre
            of mass is a constant point in that frame, calibrated as the mean over frames of Table
            A.3's foot centre expressed in it (a "static calibration").
        segments: distal-first chain, a prefix of ``("foot", "leg", "thigh")``.
        cutoff: Hz, for ``source="markers"`` (None: no extra filtering; A.2 is already filtered).

    Returns:
        ``(chain, motion, load)`` for :func:`jaxmb.newton_euler.joint_loads`; the joints are the
        lateral malleolus (ankle), femoral epicondyle (knee), greater trochanter (hip) of A.2.
    """
    data = read_winter() if data is None else data
    segments = tuple(segments)
    if segments != ("foot", "leg", "thigh")[: len(segments)] or not segments:
        raise GaitDataError(
            f"segments must be a prefix of ('foot', 'leg', 'thigh'), got {segments}"
        )
    chain = winter_chain(data, segments)
    mk = {k: jnp.asarray(v) for k, v in data.markers.items()}
    if source == "markers" and cutoff is not None:
        mk = {k: lowpass(v, 1.0 / data.dt, cutoff) for k, v in mk.items()}
    motions = {}
    for s in segments:
        joint = mk[_WINTER_PROXIMAL[s]]
        if source == "tables":
            t = data.segments[s]
            th = jnp.asarray(t["theta"])
            z3 = lambda v: jnp.stack([jnp.zeros_like(v), jnp.zeros_like(v), jnp.asarray(v)], -1)
            motions[s] = ne.SegmentMotion(
                R=jnp.swapaxes(_rot_z(th), -1, -2),
                com=jnp.asarray(t["com"]),
                acc=jnp.asarray(t["acc"]),
                omega=z3(t["omega"]),
                alpha=z3(t["alpha"]),
                joint=joint,
            )
        elif source == "markers":
            prox, dist = joint, mk[_WINTER_DISTAL[s]]
            e = jnp.broadcast_to(jnp.array([0.0, 0.0, 1.0]), prox.shape)
            R = frame_from_markers(dist, prox, dist + e, axes="xz")
            if s == "foot":
                c3 = jnp.asarray(data.segments["foot"]["com"])
                local = jnp.mean(jnp.einsum("tba,tb->ta", R, c3 - prox), axis=0)
                com = prox + jnp.einsum("tab,b->ta", R, local)
            else:
                com = prox + _DEMPSTER_PROXIMAL[s] * (dist - prox)
            motions[s] = segment_motion(R, com, joint, data.dt)
        else:
            raise GaitDataError(f"source must be 'tables' or 'markers', got {source!r}")
    r = data.reactions
    grf = _xy0(r["grf_rx_N"], r["grf_ry_N"])
    cop = _xy0(r["cop_x_m"], np.zeros_like(r["cop_x_m"]))
    return chain, ne.chain_motion(chain, motions), ne.ground_load(grf, cop)


def winter_reference(data: WinterData) -> dict[str, np.ndarray]:
    """Table A.5's loads in the :class:`~jaxmb.newton_euler.JointLoads` layout: ``force``
    (nt, 3, 2) N and ``moment`` (nt, 3) N·m (z) on foot (ankle), leg (knee), thigh (hip)."""
    r = data.reactions
    force = np.stack(
        [
            np.stack([r["ankle_on_foot_rx_N"], r["ankle_on_foot_ry_N"]], -1),
            np.stack([r["knee_on_leg_rx_N"], r["knee_on_leg_ry_N"]], -1),
            np.stack([r["hip_on_thigh_rx_N"], r["hip_on_thigh_ry_N"]], -1),
        ],
        1,
    )
    moment = np.stack(
        [r["ankle_moment_on_foot_Nm"], r["knee_moment_on_leg_Nm"], r["hip_moment_on_thigh_Nm"]], 1
    )
    return {"force": force, "moment": moment}


def bmc3d_inputs(
    trial: Bmc3dTrial,
    body_mass: float = 70.0,
    cutoff: float = 6.0,
    threshold: float = 20.0,
):
    """Foot + shank Newton–Euler inputs for a BMClab 3D trial over its stance phase.

    Segment frames (x anterior, y longitudinal/up, z lateral for the right leg):
    shank: origin ankle centre ``AJC = (LM + MM)/2``, y toward the knee centre
    ``KJC = (LE + ME)/2``,
    z along ``LM − MM`` made orthogonal; foot: origin calcaneus, x toward the metatarsal midpoint
    ``(FM + VM)/2``, y toward ``AJC`` made orthogonal. Centres of mass and inertias: shank from
    Zatsiorsky–de Leva (male, KJC–AJC: 0.4395 from the knee), foot from Dempster (0.5 of the
    ankle–metatarsal length, single radius of gyration 0.475 used for all axes). Markers are
    low-pass filtered (:func:`lowpass`, ``cutoff`` Hz) over the whole trial before differentiation;
    the force-plate signals are used as recorded.

    Args:
        trial: :func:`read_bmc3d` output. body_mass: kg (not in the files; an assumption).
        cutoff: Hz. threshold: N, vertical force defining stance.

    Returns:
        ``(chain, motion, load, stance)``: inputs restricted to the stance frames and the
        :class:`slice` of those frames in the trial.
    """
    fs = 1.0 / trial.dt
    mk = {k: lowpass(jnp.asarray(v), fs, cutoff) for k, v in trial.markers.items()}
    ajc = 0.5 * (mk["LM"] + mk["MM"])
    kjc = 0.5 * (mk["LE"] + mk["ME"])
    mt = 0.5 * (mk["FM"] + mk["VM"])
    R_shank = frame_from_markers(ajc, kjc, ajc + (mk["LM"] - mk["MM"]), axes="yz")
    R_foot = frame_from_markers(mk["CA"], mt, ajc, axes="xy")
    L_shank = float(jnp.mean(jnp.linalg.norm(kjc - ajc, axis=-1)))
    L_foot = float(jnp.mean(jnp.linalg.norm(mt - ajc, axis=-1)))
    m_s, c_s, I_s = segment_parameters("deleva_male", "shank", body_mass, L_shank)
    m_f, c_f, I_f = segment_parameters("dempster", "foot", body_mass, L_foot)
    com_shank = kjc + c_s * (ajc - kjc)
    com_foot = ajc + c_f * (mt - ajc)
    chain = ne.segment_chain(("foot", "shank"), [m_f, m_s], [I_f, I_s])
    st = trial.stance(threshold)
    foot = segment_motion(R_foot, com_foot, ajc, trial.dt)
    shank = segment_motion(R_shank, com_shank, kjc, trial.dt)
    cut = lambda m: jax.tree_util.tree_map(lambda a: a[st], m)
    motion = ne.chain_motion(chain, {"foot": cut(foot), "shank": cut(shank)})
    load = ne.ground_load(trial.grf[st], trial.cop[st], trial.free_moment[st])
    return chain, motion, load, st


# ---------------------------------------------------------------------------------------------
# command line


def add_inverse_dynamics_parser(subparsers):
    """Register ``inverse-dynamics DATA`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "inverse-dynamics",
        help="joint forces and moments of a gait trial (Newton-Euler matrix formalism)",
        description="Reads a directory of Winter (2009) Appendix A CSV tables or a BMClab 3D gait "
        "trial (.txt) and writes joint forces/moments as CSV and a PNG plot.",
    )
    p.add_argument("data", help="Winter CSV directory or BMClab .txt trial ('winter' = bundled)")
    p.add_argument("--format", choices=["auto", "winter", "bmc3d"], default="auto")
    p.add_argument(
        "--source",
        choices=["tables", "markers"],
        default="tables",
        help="Winter only: use Table A.3 kinematics or differentiate A.2 markers",
    )
    p.add_argument(
        "--cutoff",
        type=float,
        default=None,
        help="low-pass cutoff (Hz) of the markers; default 6 for BMClab trials, none for Winter's "
        "already filtered A.2 markers",
    )
    p.add_argument("--body-mass", type=float, default=70.0, help="BMClab trials: body mass (kg)")
    p.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    p.set_defaults(func=inverse_dynamics_command)
    return p


_JOINT_OF = {"foot": "ankle", "leg": "knee", "shank": "knee", "thigh": "hip"}


def inverse_dynamics_command(args) -> int:
    """``jaxmb inverse-dynamics DATA``: writes ``<stem>_joint_loads.csv`` (time, then per joint
    F{x,y,z} N ground frame, M{x,y,z} N·m ground frame and the segment-frame moment) and
    ``<stem>_joint_loads.png``; prints their paths. Returns the exit status."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fmt = args.format
    src = Path(args.data)
    if fmt == "auto":
        fmt = "winter" if (args.data == "winter" or src.is_dir()) else "bmc3d"
    if fmt == "winter":
        data = read_winter(None if args.data == "winter" else src)
        cutoff = args.cutoff if args.source == "markers" else None
        chain, motion, load = winter_inputs(data, args.source, cutoff=cutoff)
        time, stem = data.time, f"winter_{args.source}"
    else:
        trial = read_bmc3d(src)
        cutoff = 6.0 if args.cutoff is None else args.cutoff
        chain, motion, load, st = bmc3d_inputs(trial, args.body_mass, cutoff)
        time, stem = trial.time[st], Path(trial.path).stem
    loads = ne.joint_loads(chain, motion, load)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header, cols = ["time_s"], [np.asarray(time)]
    for i, s in enumerate(chain.names):
        j = _JOINT_OF.get(s, s)
        for q, arr, unit in (
            ("F", loads.force, "N"), ("M", loads.moment_ground, "Nm"),
            ("Mlocal", loads.moment, "Nm"),
        ):  # fmt: skip
            for k, ax in enumerate("xyz"):
                header.append(f"{j}_{q}{ax}_on_{s}_{unit}")
                cols.append(np.asarray(arr[:, i, k]))
    csv_path = out / f"{stem}_joint_loads.csv"
    np.savetxt(csv_path, np.stack(cols, 1), delimiter=",", header=",".join(header), comments="")
    fig, ax = plt.subplots(2, chain.ns, figsize=(4 * chain.ns, 6), squeeze=False)
    for i, s in enumerate(chain.names):
        j = _JOINT_OF.get(s, s)
        for k, axn in enumerate("xyz"):
            ax[0, i].plot(time, loads.force[:, i, k], label=axn)
            ax[1, i].plot(time, loads.moment_ground[:, i, k], label=axn)
        ax[0, i].set_title(f"{j} force on {s} (N)")
        ax[1, i].set_title(f"{j} moment on {s} (N·m, ground axes)")
        ax[1, i].set_xlabel("time (s)")
        ax[0, i].legend()
    fig.tight_layout()
    png_path = out / f"{stem}_joint_loads.png"
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    print(csv_path)
    print(png_path)
    return 0
