"""Motion data in the formats of this field: OpenSim ``.mot``/``.sto``, ``.trc`` markers, C3D.

- :func:`read_storage` / :func:`write_storage`: OpenSim Storage files (``.mot``, ``.sto``),
  version 1 headers (``name``, ``version=1``, ``nRows``, ``nColumns``, ``inDegrees=yes|no``,
  ``endheader``),
  tab-separated columns with ``time`` first.
- :func:`write_mot`: a jaxmb simulation as a ``.mot`` that OpenSim's GUI plays on the model
  (coordinate names as columns, rotational coordinates in degrees).
- :func:`read_trc` / :func:`write_trc`: marker trajectories (PathFileType 4, X/Y/Z); empty fields
  of a missing marker read as NaN.
- :func:`read_c3d`: markers, analog channels and force platforms through ``ezc3d``, an optional
  extra (``pip install "jaxmb[c3d]"``, or ``pip install ezc3d``).

These are plain NumPy readers and writers (files are I/O, not traced computation).
"""

from __future__ import annotations

import dataclasses
import math
import struct
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .osim import OsimImport

__all__ = [
    "MotionFileError",
    "Storage",
    "TRCData",
    "read_storage",
    "write_storage",
    "write_mot",
    "read_trc",
    "write_trc",
    "read_c3d",
    "check_c3d_layout",
]


class MotionFileError(ValueError):
    """A motion file that cannot be read; the message names the file and the line."""


# --------------------------------------------------------------------------------------------
# Storage (.mot / .sto)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Storage:
    """An OpenSim Storage table.

    Attributes:
        time: (n,) s.
        data: (n, m) values of the m columns after ``time`` (in the file's units: degrees for
            rotational coordinates when ``in_degrees``).
        columns: the m column labels.
        in_degrees: the header's ``inDegrees`` flag.
        name: the first header line.
        header: the other ``key=value`` header entries (strings), in file order; the counts
            (``version``, ``nRows``, ``nColumns``) are rewritten on output.
    """

    time: np.ndarray
    data: np.ndarray
    columns: tuple[str, ...]
    in_degrees: bool = False
    name: str = "jaxmb"
    header: dict[str, str] = dataclasses.field(default_factory=dict)

    def __getitem__(self, column: str) -> np.ndarray:
        """The (n,) values of a column by label (``"time"`` included)."""
        if column == "time":
            return self.time
        if column not in self.columns:
            raise KeyError(f"no column {column!r}; columns are {list(self.columns)}")
        return self.data[:, self.columns.index(column)]


def _split(line: str) -> list[str]:
    return line.rstrip("\r\n").split("\t") if "\t" in line else line.split()


def _read_lines(path: Path) -> list[str]:
    """The file's lines; an unreadable file or one that ends in the middle of a line (no line end
    after the last line: a truncated file) raises :class:`MotionFileError`."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise MotionFileError(f"{path}: cannot read ({e})") from None
    if "\x00" in text:
        raise MotionFileError(f"{path}, line {text[: text.index(chr(0))].count(chr(10)) + 1}: "
                              "a NUL byte (binary data, not a text file)")
    lines = text.splitlines()
    if text and not text.endswith(("\n", "\r")) and lines[-1].strip():
        raise MotionFileError(
            f"{path}, line {len(lines)}: the file ends in the middle of this line (no line end):"
            " truncated? (if the line is complete, end it with a newline)"
        )
    return lines


_YES, _NO = ("yes", "true", "1"), ("no", "false", "0")


def _count(path, header, lines_of, key) -> int | None:
    """A header count (``nRows=...``) as an int, or None when absent."""
    if key not in header:
        return None
    v = header[key]
    if not v.isdigit():
        raise MotionFileError(
            f"{path}, line {lines_of[key]}: {key}={v!r} is not a non-negative integer"
        )
    return int(v)


def _check_time(path, time, where, what="time") -> None:
    """Time finite and increasing, naming the first bad row (``where[i]``: "line 7", "row 2")."""
    bad = np.flatnonzero(~np.isfinite(time))
    if bad.size:
        raise MotionFileError(
            f"{path}, {where[bad[0]]}: {what} {float(time[bad[0]])!r} is not a finite number"
        )
    back = np.flatnonzero(np.diff(time) <= 0)
    if back.size:
        k = back[0] + 1
        raise MotionFileError(
            f"{path}, {where[k]}: {what} {float(time[k])!r} does not increase (the row"
            f" before has {float(time[k - 1])!r}); rows must be in increasing time"
        )


def read_storage(path: str | Path) -> Storage:
    """Read an OpenSim ``.mot`` or ``.sto`` file (Storage version 1; OpenSim 3 and 4 headers).

    The header is checked against the data: ``inDegrees`` must be yes/no, ``nRows``/``datarows``
    and ``nColumns``/``datacolumns`` (time included) must match the table, labels must be unique,
    time finite and increasing; NaN is allowed in the data columns (OpenSim writes it for missing
    values).

    Raises:
        MotionFileError: missing ``endheader``, a header that disagrees with the data, a row of
            the wrong length or a non-number, time not increasing, a file truncated in the middle of
            a line — naming the file and the line.
    """
    path = Path(path)
    lines = _read_lines(path)
    end = next((i for i, ln in enumerate(lines) if ln.strip().lower() == "endheader"), None)
    if end is None:
        raise MotionFileError(f"{path}: no 'endheader' line; not an OpenSim Storage file")
    name, header, line_of = "", {}, {}
    for i, ln in enumerate(lines[:end]):
        s = ln.strip()
        if "=" in s:
            k, v = s.split("=", 1)
            header[k.strip()] = v.strip()
            line_of[k.strip()] = i + 1
        elif i == 0:
            name = s
    deg = header.pop("inDegrees", "no")
    if deg.lower() not in _YES + _NO:
        raise MotionFileError(
            f"{path}, line {line_of['inDegrees']}: inDegrees={deg!r}; expected yes or no"
        )
    in_degrees = deg.lower() in _YES
    k = end + 1
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k >= len(lines):
        raise MotionFileError(f"{path}: no column labels after 'endheader'")
    labels = [c.strip() for c in _split(lines[k]) if c.strip()]
    if not labels or labels[0].lower() != "time":
        raise MotionFileError(
            f"{path}, line {k + 1}: the first column must be 'time', got {labels[:1]}"
        )
    seen = set()
    for c in labels:
        if c in seen:
            raise MotionFileError(f"{path}, line {k + 1}: column label {c!r} appears twice")
        seen.add(c)
    rows, row_lines = [], []
    for j, ln in enumerate(lines[k + 1 :], start=k + 2):
        if not ln.strip():
            continue
        fields = _split(ln.strip())
        if len(fields) != len(labels):
            raise MotionFileError(
                f"{path}, line {j}: {len(fields)} values for {len(labels)} columns"
            )
        try:
            rows.append([float(f) for f in fields])
        except ValueError:
            raise MotionFileError(f"{path}, line {j}: not a number in {fields}") from None
        row_lines.append(j)
    arr = np.asarray(rows, dtype=float).reshape(len(rows), len(labels))
    for key in ("nRows", "datarows"):
        n = _count(path, header, line_of, key)
        if n is not None and n != arr.shape[0]:
            raise MotionFileError(
                f"{path}, line {line_of[key]}: header says {key}={n} but there are"
                f" {arr.shape[0]} data rows"
            )
    for key in ("nColumns", "datacolumns"):
        n = _count(path, header, line_of, key)
        if n is not None and n != len(labels):
            raise MotionFileError(
                f"{path}, line {line_of[key]}: header says {key}={n} but line {k + 1} has"
                f" {len(labels)} column labels (time included)"
            )
    _check_time(path, arr[:, 0], [f"line {j}" for j in row_lines])
    for key in ("version", "nRows", "nColumns", "datarows", "datacolumns"):
        header.pop(key, None)
    return Storage(
        time=arr[:, 0],
        data=arr[:, 1:],
        columns=tuple(labels[1:]),
        in_degrees=in_degrees,
        name=name,
        header=header,
    )


def write_storage(path: str | Path, storage: Storage) -> Path:
    """Write a :class:`Storage` as an OpenSim Storage file (version 1 header, tab-separated).

    Values are written with 17 significant digits, so reading the file back is exact.
    """
    path = Path(path)
    time = np.asarray(storage.time, dtype=float).reshape(-1)
    data = np.asarray(storage.data, dtype=float).reshape(time.shape[0], -1)
    if data.shape[1] != len(storage.columns):
        raise MotionFileError(
            f"{path}: {data.shape[1]} data columns for {len(storage.columns)} labels"
        )
    for c in storage.columns:
        if not c or c != c.strip() or any(ch in c for ch in "\t\n\r"):
            raise MotionFileError(f"{path}: invalid column label {c!r}")
    if len(set(storage.columns)) != len(storage.columns) or "time" in storage.columns:
        dup = next(c for c in storage.columns if storage.columns.count(c) > 1 or c == "time")
        raise MotionFileError(f"{path}: column label {dup!r} appears twice (time included)")
    _check_time(path, time, [f"row {i}" for i in range(time.shape[0])])
    header = {k: v for k, v in storage.header.items() if k not in ("nRows", "nColumns")}
    header.pop("inDegrees", None)
    header.pop("version", None)
    out = [storage.name or "jaxmb", "version=1", f"nRows={time.shape[0]}"]
    out += [f"nColumns={data.shape[1] + 1}", f"inDegrees={'yes' if storage.in_degrees else 'no'}"]
    out += [f"{k}={v}" for k, v in header.items()]
    out += ["endheader", "\t".join(("time",) + tuple(storage.columns))]
    table = np.column_stack([time, data])
    out += ["\t".join(f"{v:.17g}" for v in row) for row in table]
    path.write_text("\n".join(out) + "\n")
    return path


def _rotational_mask(model, q0) -> np.ndarray:
    """Coordinates that drive a revolute joint (rad) rather than only prismatic ones (m)."""
    J = np.asarray(model.joint_map.jacobian(jnp.asarray(q0, dtype=float)))
    rev = np.asarray(model.is_revolute)
    return np.any(np.abs(J[rev]) > 0, axis=0)


def write_mot(
    path: str | Path,
    trajectory: Any,
    model: Any,
    *,
    speeds: bool = False,
    in_degrees: bool = True,
    name: str | None = None,
) -> Path:
    """Export a simulation as a ``.mot`` motion for OpenSim's GUI (File ▸ Load Motion).

    Args:
        path: output file.
        trajectory: a :class:`jaxmb.simulate.Trajectory` (``.ts``, ``.q``, optional ``.qd``) or a
            pair ``(ts (n,), q (n, nq))``.
        model: the jaxmb :class:`~jaxmb.model.Model`, or the :class:`~jaxmb.io.osim.OsimImport`
            of an OpenSim model — then every OpenSim coordinate is written, coupled ones included,
            with OpenSim's rotational/translational kinds.
        speeds: also write ``<coordinate>_u`` columns (rad/s or deg/s, m/s); needs ``qd``.
        in_degrees: rotational coordinates in degrees (what the GUI expects), else radians.
        name: the header's first line (default: the model's name).

    Returns:
        the path written.
    """
    if isinstance(trajectory, tuple):
        ts, q = trajectory[0], trajectory[1]
        qd = trajectory[2] if len(trajectory) > 2 else None
    else:
        ts, q, qd = trajectory.ts, trajectory.q, getattr(trajectory, "qd", None)
    ts = np.asarray(ts, dtype=float).reshape(-1)
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[0] != ts.shape[0]:
        raise MotionFileError(
            f"{path}: q must be (n_times, nq), got {q.shape} for {ts.shape} times"
        )
    if speeds and qd is None:
        raise MotionFileError(f"{path}: speeds=True needs the trajectory's qd")
    if isinstance(model, OsimImport):
        jm = model.model.joint_map
        names = tuple(c.name for c in model.coordinates)
        rot = np.array([c.rotational for c in model.coordinates])
        if names == tuple(model.model.coordinate_names):  # no coupled, loop or locked ones
            values = q
            vel = np.asarray(qd, dtype=float) if speeds else None
        else:
            full = jax.jit(jax.vmap(jm.full_coordinates))
            values = np.asarray(full(jnp.asarray(q)))
            if speeds:
                jvp = jax.vmap(lambda a, b: jax.jvp(jm.full_coordinates, (a,), (b,))[1])
                vel = np.asarray(jax.jit(jvp)(jnp.asarray(q), jnp.asarray(qd, dtype=float)))
        label = name or model.model.name
    else:
        if q.shape[1] != model.nq:
            raise MotionFileError(f"{path}: q has {q.shape[1]} columns, model has {model.nq}")
        values, names = q, tuple(model.coordinate_names)
        rot = _rotational_mask(model, q[0])
        vel = np.asarray(qd, dtype=float) if speeds else None
        label = name or model.name
    scale = np.where(rot & in_degrees, 180.0 / math.pi, 1.0)
    data, cols = values * scale, names
    if speeds:
        data = np.column_stack([data, vel * scale])
        cols = names + tuple(f"{n}_u" for n in names)
    return write_storage(path, Storage(ts, data, cols, in_degrees=in_degrees, name=label))


# --------------------------------------------------------------------------------------------
# TRC markers
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class TRCData:
    """Marker trajectories of a ``.trc`` file.

    Attributes:
        time: (n,) s. frames: (n,) frame numbers.
        markers: marker names (m).
        positions: (n, m, 3) in ``units``; NaN where a marker is missing.
        units: e.g. ``"mm"`` or ``"m"``.
        data_rate, camera_rate: Hz.
        header: the remaining header fields (strings).
    """

    time: np.ndarray
    frames: np.ndarray
    markers: tuple[str, ...]
    positions: np.ndarray
    units: str = "m"
    data_rate: float = 100.0
    camera_rate: float = 100.0
    header: dict[str, str] = dataclasses.field(default_factory=dict)

    def __getitem__(self, marker: str) -> np.ndarray:
        """(n, 3) trajectory of one marker."""
        if marker not in self.markers:
            raise KeyError(f"no marker {marker!r}; markers are {list(self.markers)}")
        return self.positions[:, self.markers.index(marker)]


def read_trc(path: str | Path) -> TRCData:
    """Read a ``.trc`` marker file (PathFileType 4, X/Y/Z).

    The header is checked against the data (``NumMarkers`` against the marker names, ``NumFrames``
    against the rows, rates positive, marker names unique); every row must have ``2 + 3·NumMarkers``
    fields (a missing marker is empty fields, read as NaN; a short row is an error, as in
    OpenSim's TRCFileAdapter), frame numbers integers and time finite and increasing.

    Raises:
        MotionFileError: a malformed header or row, naming the file and the line.
    """
    path = Path(path)
    lines = _read_lines(path)
    if len(lines) < 5 or not lines[0].startswith("PathFileType"):
        raise MotionFileError(f"{path}, line 1: not a TRC file (no 'PathFileType' header)")
    keys = lines[1].rstrip("\r\n").split("\t")
    vals = lines[2].rstrip("\r\n").split("\t")
    if len(keys) != len(vals):
        raise MotionFileError(f"{path}, line 3: {len(vals)} values for {len(keys)} header fields")
    header = {k.strip(): v.strip() for k, v in zip(keys, vals, strict=True)}
    if "NumMarkers" not in header:
        raise MotionFileError(f"{path}, line 2: no NumMarkers field in the header")
    if not header["NumMarkers"].isdigit():
        raise MotionFileError(
            f"{path}, line 3: NumMarkers={header['NumMarkers']!r} is not a non-negative integer"
        )
    n_markers = int(header["NumMarkers"])
    rates = {}
    for key in ("DataRate", "CameraRate"):
        text = header.get(key, header.get("DataRate", "nan"))
        try:
            rates[key] = float(text)
        except ValueError:
            raise MotionFileError(f"{path}, line 3: {key}={text!r} is not a number") from None
        if key in header and not (math.isfinite(rates[key]) and rates[key] > 0):
            raise MotionFileError(f"{path}, line 3: {key}={text!r} must be a positive rate (Hz)")
    if "NumFrames" in header and not header["NumFrames"].isdigit():
        raise MotionFileError(
            f"{path}, line 3: NumFrames={header['NumFrames']!r} is not a non-negative integer"
        )
    names_row = lines[3].rstrip("\r\n").split("\t")
    if len(names_row) < 2 or names_row[0].strip() != "Frame#":
        raise MotionFileError(f"{path}, line 4: expected 'Frame#\\tTime\\t<markers>'")
    markers = tuple(n.strip() for n in names_row[2:] if n.strip())
    if len(markers) != n_markers:
        raise MotionFileError(
            f"{path}, line 4: {len(markers)} marker names but NumMarkers={n_markers}"
        )
    dup = [m for k, m in enumerate(markers) if m in markers[:k]]
    if dup:
        raise MotionFileError(f"{path}, line 4: marker name {dup[0]!r} appears twice")
    width = 2 + 3 * n_markers
    frames, times, pos, where = [], [], [], []
    for j, ln in enumerate(lines[5:], start=6):
        if not ln.strip():
            continue
        fields = ln.rstrip("\r\n").split("\t")
        # OpenSim and many exporters end each data row with a tab: one empty field, not data
        if len(fields) == width + 1 and not fields[-1].strip():
            fields.pop()
        if len(fields) != width:
            raise MotionFileError(
                f"{path}, line {j}: {len(fields)} fields, expected {width} (Frame#, Time and"
                f" X/Y/Z of {n_markers} markers): a truncated or malformed row"
            )
        try:
            frame = float(fields[0])
            if frame != int(frame):
                raise ValueError
            frames.append(int(frame))
            times.append(float(fields[1]))
            pos.append([float(v) if v.strip() else np.nan for v in fields[2:]])
        except (ValueError, OverflowError):
            raise MotionFileError(f"{path}, line {j}: not a number in {fields[:8]}...") from None
        where.append(f"line {j}")
    n = len(times)
    positions = np.asarray(pos, dtype=float).reshape(n, n_markers, 3)
    if "NumFrames" in header and int(header["NumFrames"]) != n:
        raise MotionFileError(
            f"{path}, line 3: NumFrames={header['NumFrames']} but there are {n} data rows"
        )
    _check_time(path, np.asarray(times, dtype=float), where)
    units = header.pop("Units", "m")
    for k in ("DataRate", "CameraRate", "NumFrames", "NumMarkers"):
        header.pop(k, None)
    return TRCData(
        time=np.asarray(times, dtype=float),
        frames=np.asarray(frames, dtype=int),
        markers=markers,
        positions=positions,
        units=units,
        data_rate=rates["DataRate"],
        camera_rate=rates["CameraRate"],
        header=header,
    )


def write_trc(path: str | Path, data: TRCData) -> Path:
    """Write marker trajectories as a ``.trc`` file (17 significant digits; NaN as empty fields)."""
    path = Path(path)
    P = np.asarray(data.positions, dtype=float)
    n, m = P.shape[0], len(data.markers)
    if P.shape != (n, m, 3) or np.asarray(data.time).shape != (n,):
        raise MotionFileError(
            f"{path}: positions {P.shape} and time {np.asarray(data.time).shape} do not match"
            f" {m} markers"
        )
    dup = [k for k in data.markers if data.markers.count(k) > 1]
    if dup or any(not k or k != k.strip() or any(c in k for c in "\t\n\r") for k in data.markers):
        raise MotionFileError(f"{path}: marker names must be unique and non-empty: {dup or data.markers}")
    _check_time(path, np.asarray(data.time, dtype=float), [f"row {i}" for i in range(n)])
    orig_start = data.header.get("OrigDataStartFrame", str(int(data.frames[0]) if n else 1))
    lines = [
        f"PathFileType\t4\t(X/Y/Z)\t{path.name}",
        "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame"
        "\tOrigNumFrames",
        f"{data.data_rate:.17g}\t{data.camera_rate:.17g}\t{n}\t{m}\t{data.units}"
        f"\t{data.header.get('OrigDataRate', f'{data.data_rate:.17g}')}\t{orig_start}"
        f"\t{data.header.get('OrigNumFrames', n)}",
        "\t".join(["Frame#", "Time"] + [f"{name}\t\t" for name in data.markers]).rstrip("\t"),
        "\t\t" + "\t".join(f"X{k + 1}\tY{k + 1}\tZ{k + 1}" for k in range(m)),
        "",
    ]
    for i in range(n):
        vals = ["" if np.isnan(v) else f"{v:.17g}" for v in P[i].reshape(-1)]
        lines.append("\t".join([str(int(data.frames[i])), f"{data.time[i]:.17g}"] + vals))
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------------
# C3D (optional ezc3d)
# --------------------------------------------------------------------------------------------


def check_c3d_layout(path: Path, raw: bytes) -> None:
    """Check a C3D file's header against its length before ``ezc3d`` reads it (ezc3d loops
    forever on some truncated files): the 512-byte header, the parameter section it points to,
    and the 3D/analog data its counts imply. Raises :class:`MotionFileError` naming what is short.
    """
    if len(raw) < 512:
        raise MotionFileError(f"{path}: {len(raw)} bytes, shorter than a C3D header (512)")
    if raw[1] != 0x50:
        raise MotionFileError(f"{path}: not a C3D file (byte 2 is {raw[1]:#x}, not 0x50)")
    pstart = (raw[0] - 1) * 512
    if raw[0] < 2 or len(raw) < pstart + 4:
        raise MotionFileError(
            f"{path}: the header puts the parameters at block {raw[0]}, beyond the file's"
            f" {len(raw)} bytes (truncated?)"
        )
    nblocks, processor = raw[pstart + 2], raw[pstart + 3]
    if len(raw) < pstart + nblocks * 512:
        raise MotionFileError(
            f"{path}: truncated in the parameter section ({nblocks} blocks from byte {pstart},"
            f" file has {len(raw)} bytes)"
        )
    end = ">" if processor == 86 else "<"  # 84 Intel, 85 DEC (integers little-endian), 86 MIPS
    _check_c3d_parameters(path, raw, pstart + 4, pstart + nblocks * 512, end)
    n_points, n_analog, first, last = struct.unpack(end + "4H", raw[2:10])
    (scale,) = struct.unpack(end + "f", raw[12:16]) if processor != 85 else (-1.0,)
    (data_block,) = struct.unpack(end + "H", raw[16:18])
    frames = last - first + 1
    if data_block < 2 or frames <= 0 or processor == 85:
        return  # more than 65535 frames (counted in the parameters) or DEC floats: ezc3d decides
    per_frame = (4 * n_points + n_analog) * (4 if scale < 0 else 2)
    need = (data_block - 1) * 512 + frames * per_frame
    if len(raw) < need:
        raise MotionFileError(
            f"{path}: truncated: the header's {frames} frames of {n_points} points and"
            f" {n_analog} analog samples need {need} bytes, the file has {len(raw)}"
        )


def _check_c3d_parameters(path: Path, raw: bytes, pos: int, stop: int, end: str) -> None:
    """Walk the parameter section's records (C3D manual, "The parameter section"): every name
    printable, every record's data and description inside the record and the section — ezc3d
    crashes (segmentation fault) on some corrupt sections instead of raising."""

    def bad(what):
        raise MotionFileError(f"{path}: corrupt parameter section at byte {pos}: {what}")

    printable = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-:+./ ")
    while pos + 2 <= stop:
        nlen = abs(struct.unpack("b", raw[pos : pos + 1])[0])
        if nlen == 0:
            return
        gid = struct.unpack("b", raw[pos + 1 : pos + 2])[0]
        body = pos + 2 + nlen
        if body + 2 > stop or not set(raw[pos + 2 : body]) <= printable:
            bad("a record name that is not printable or runs past the section")
        (off,) = struct.unpack(end + "H", raw[body : body + 2])
        nxt = body + off if off else stop
        if nxt > stop or (off and off < 2):
            bad(f"a record offset ({off}) outside the section")
        p = body + 2
        if gid > 0:  # a parameter: type, dimensions, data
            if p + 2 > nxt:
                bad("a parameter record too short for its type and dimensions")
            kind, nd = struct.unpack("b", raw[p : p + 1])[0], raw[p + 1]
            if kind not in (-1, 1, 2, 4) or nd > 7 or p + 2 + nd > nxt:
                bad(f"parameter type {kind} or {nd} dimensions")
            size = abs(kind) * math.prod(raw[p + 2 : p + 2 + nd])
            p += 2 + nd + size
        if p + 1 > nxt or p + 1 + raw[p] > nxt:
            bad("a record's data or description runs past the record")
        if not off:
            return
        pos = nxt


def read_c3d(path: str | Path) -> dict[str, Any]:
    """Markers, analog channels and force platforms of a C3D file, through ``ezc3d``.

    Returns:
        ``{"markers": TRCData, "analog_rate": Hz, "analog_labels": tuple, "analogs": (na, n_a),
        "platforms": [ {"force": (n_a, 3) N, "moment": (n_a, 3) N·mm or N·m, "center_of_pressure":
        (n_a, 3), "unit_force", "unit_moment", "unit_position"}, ... ]}``, marker positions in the
        file's units, NaN where a marker's residual is negative (invalid).

    Raises:
        ImportError: when ``ezc3d`` (the optional ``c3d`` extra) is not installed.
        MotionFileError: when the file cannot be read.
    """
    try:
        import ezc3d
    except ImportError:
        raise ImportError(
            "jaxmb.io.read_c3d needs the optional 'c3d' extra: pip install \"jaxmb[c3d]\""
            " (or pip install ezc3d)"
        ) from None
    path = Path(path)
    if not path.is_file():
        raise MotionFileError(f"{path}: file not found")
    check_c3d_layout(path, path.read_bytes())
    try:
        c = ezc3d.c3d(str(path), extract_forceplat_data=True)
    except Exception as e:  # ezc3d raises plain RuntimeErrors
        raise MotionFileError(f"{path}: ezc3d cannot read it ({e})") from None
    pts = np.asarray(c["data"]["points"], dtype=float)  # (4, m, n)
    try:
        labels = tuple(str(x).strip() for x in c["parameters"]["POINT"]["LABELS"]["value"])
        rate = float(np.asarray(c["parameters"]["POINT"]["RATE"]["value"]).reshape(-1)[0])
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise MotionFileError(f"{path}: POINT:LABELS or POINT:RATE missing or malformed ({e})") from None
    if len(labels) < pts.shape[1]:
        raise MotionFileError(
            f"{path}: POINT:LABELS names {len(labels)} markers for {pts.shape[1]} points"
        )
    labels = labels[: pts.shape[1]]
    dup = [x for k, x in enumerate(labels) if x in labels[:k]]
    if dup:
        raise MotionFileError(f"{path}: POINT:LABELS names marker {dup[0]!r} twice")
    if not (math.isfinite(rate) and rate > 0):
        raise MotionFileError(f"{path}: POINT:RATE = {rate} Hz; expected a positive rate")
    units_p = c["parameters"]["POINT"].get("UNITS", {}).get("value", ["mm"])
    positions = np.transpose(pts[:3], (2, 1, 0)).copy()
    if "meta_points" in c["data"] and "residuals" in c["data"]["meta_points"]:
        res = np.asarray(c["data"]["meta_points"]["residuals"], dtype=float)  # (1, m, n)
        positions[np.transpose(res[0] < 0)] = np.nan
    n = positions.shape[0]
    first = int(c["header"]["points"]["first_frame"])
    markers = TRCData(
        time=np.arange(n) / rate,
        frames=np.arange(first + 1, first + 1 + n),
        markers=labels,
        positions=positions,
        units=str(units_p[0]) if len(units_p) else "mm",
        data_rate=rate,
        camera_rate=rate,
    )
    analogs = np.asarray(c["data"]["analogs"], dtype=float)
    analogs = analogs.reshape(analogs.shape[-2], -1) if analogs.size else np.zeros((0, 0))
    a_labels = tuple(c["parameters"].get("ANALOG", {}).get("LABELS", {}).get("value", []))
    a_rate = c["parameters"].get("ANALOG", {}).get("RATE", {}).get("value", [np.nan])
    platforms = []
    for p in c["data"].get("platform", []):
        platforms.append(
            dict(
                force=np.asarray(p["force"], dtype=float).T,
                moment=np.asarray(p["moment"], dtype=float).T,
                center_of_pressure=np.asarray(p["center_of_pressure"], dtype=float).T,
                unit_force=p.get("unit_force"),
                unit_moment=p.get("unit_moment"),
                unit_position=p.get("unit_position"),
            )
        )
    return dict(
        markers=markers,
        analog_rate=float(np.asarray(a_rate).reshape(-1)[0]) if len(a_rate) else float("nan"),
        analog_labels=a_labels,
        analogs=analogs,
        platforms=platforms,
    )
