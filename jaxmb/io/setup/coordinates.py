"""Coordinates of a trial from an OpenSim motion file, prepared as OpenSim's tools prepare them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ...analyses import CoordinateOperators, coordinate_operators
from ..motion import MotionFileError, read_storage
from ..osim import OsimImport
from .xml import SetupError

__all__ = ["TrialCoordinates", "trial_coordinates", "raw_coordinates"]


@dataclasses.dataclass(frozen=True)
class TrialCoordinates:
    """q, q̇, q̈ (nt, nq) in model units (rad, m) at ``times`` (nt,), with the operators that made
    them from the raw samples (``q = W0 @ raw``) and the raw samples (n_raw, nq)."""

    times: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    raw: np.ndarray
    operators: CoordinateOperators
    missing: tuple[str, ...]


def raw_coordinates(path: Path, imp: OsimImport) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(times, values (n, nq) in rad/m, names missing from the file)`` of a .mot/.sto: the
    model's coordinates by name, degrees converted for rotational ones; a coordinate the file
    lacks takes its default value (as InverseDynamicsTool does)."""
    try:
        st = read_storage(path)
    except (MotionFileError, OSError) as e:
        raise SetupError(f"cannot read coordinates file {path}: {e}") from None
    model = imp.model
    default = {c.name: c.default_value for c in imp.coordinates}
    rot = imp.rotational
    cols = list(st.columns)
    out = np.zeros((st.time.shape[0], model.nq))
    missing = []
    for j, name in enumerate(model.coordinate_names):
        if name in cols:
            v = np.asarray(st.data[:, cols.index(name)], dtype=float)
            out[:, j] = np.deg2rad(v) if (st.in_degrees and rot[j]) else v
        else:
            out[:, j] = default[name]
            missing.append(name)
    return np.asarray(st.time, dtype=float), out, tuple(missing)


def trial_coordinates(
    path: Path,
    imp: OsimImport,
    cutoff: float | None,
    time_range,
    acceleration: str = "second_derivative",
) -> TrialCoordinates:
    """q, q̇, q̈ of a coordinates file: OpenSim's pad + IIR low-pass (``cutoff`` ≥ 0) and its
    quintic GCV spline differentiation, at the processed storage's times within ``time_range``."""
    t, raw, missing = raw_coordinates(path, imp)
    if t.shape[0] < 6:
        raise SetupError(f"{path}: {t.shape[0]} rows; the quintic spline needs at least 6")
    ops = coordinate_operators(t, cutoff, tuple(time_range), acceleration)
    q, qd, qdd = ops.W0 @ raw, ops.W1 @ raw, ops.W2 @ raw
    for j, name in enumerate(imp.model.coordinate_names):
        if name in missing:  # Constant(default): no motion
            q[:, j], qd[:, j], qdd[:, j] = raw[0, j], 0.0, 0.0
    return TrialCoordinates(ops.times, q, qd, qdd, raw, ops, missing)
