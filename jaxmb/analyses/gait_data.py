"""Gait data as published: readers and body-segment parameter tables.

* Readers for the CSV transcriptions of Winter (2009) Appendix A (Tables A.2, A.3, A.5) and for the
  BMClab 3D gait trials (``BiomecII2018_gait_*.txt``: 10 markers in mm, one force plate); copies of
  both, and of the BMClab body-segment parameter (BSP) tables, ship in ``jaxmb/data/gait/``.
* BSP tables: Dempster as tabulated by Winter, and Zatsiorsky as adjusted by de Leva (1996).

Every reader raises :class:`GaitDataError` naming the file, line, column or value it cannot use.
:mod:`jaxmb.analyses.gait` turns what these return into Newton–Euler inputs (and re-exports them, so
``jaxmb.gait.read_winter`` keeps working).
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = [
    "DATA_DIR",
    "WINTER_MASS",
    "WINTER_INERTIA",
    "BMC3D_MARKERS",
    "GaitDataError",
    "WinterData",
    "Bmc3dTrial",
    "SegmentParameters",
    "read_winter",
    "read_bmc3d",
    "read_bsp_table",
    "segment_parameters",
    "xyz_from_xy",
]

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "gait"
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


def xyz_from_xy(x, y):
    """Points (…, 3) in the sagittal plane z = 0 from their x and y coordinates (…,)."""
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
        markers[short] = xyz_from_xy(g("x_m"), g("y_m"))
        mvel[short] = xyz_from_xy(g("vx_m_s"), g("vy_m_s"))
        macc[short] = xyz_from_xy(g("ax_m_s2"), g("ay_m_s2"))
    segments = {}
    for s in _WINTER_SEGMENTS:
        g = lambda q, s=s: _numeric(p3, c3, f"{s}_{q}")
        segments[s] = {
            "theta": np.deg2rad(g("theta_deg")),
            "omega": g("omega_rad_s"),
            "alpha": g("alpha_rad_s2"),
            "com": xyz_from_xy(g("cm_x_m"), g("cm_y_m")),
            "vel": xyz_from_xy(g("vel_x_m_s"), g("vel_y_m_s")),
            "acc": xyz_from_xy(g("acc_x_m_s2"), g("acc_y_m_s2")),
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
    try:
        lines = p.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise GaitDataError(f"{p}: cannot read ({e})") from None
    header = lines[0].split() if lines else []
    if len(set(header)) != len(header):
        dup = next(h for k, h in enumerate(header) if h in header[:k])
        raise GaitDataError(f"{p}, line 1: column {dup!r} appears twice")
    rows = []
    for ln, line in enumerate(lines[1:], start=2):
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
    if not rows:
        raise GaitDataError(f"{p}: no data rows after the header line")
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
    time = get("Time")[:, 0]
    bad = np.flatnonzero(~np.isfinite(time[1:]) | (np.diff(time) <= 0))
    if bad.size or not np.isfinite(time[0]):
        k = 0 if not np.isfinite(time[0]) else int(bad[0]) + 1
        raise GaitDataError(
            f"{p}, line {k + 2}: Time {float(time[k])!r} is not finite or does not increase"
        )
    return Bmc3dTrial(time, markers, grf, cop, free, str(p))


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
