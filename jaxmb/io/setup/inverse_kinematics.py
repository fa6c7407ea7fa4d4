"""An OpenSim InverseKinematicsTool setup run by jaxmb (``jaxmb inverse-kinematics SETUP.xml``):
every frame in one batched Levenberg–Marquardt solve; writes the ``.mot`` (degrees; every OpenSim
coordinate, coupled and locked ones included, in the model's CoordinateSet order),
``<name>_ik_marker_errors.sto`` and, with ``report_marker_locations``,
``<name>_ik_model_marker_locations.sto`` (the model's markers in ground at the solution, m) as
OpenSim does."""

from __future__ import annotations

import dataclasses
import time as _time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ...analyses import InverseKinematicsResult, marker_positions, solve_inverse_kinematics
from ..motion import MotionFileError, Storage, read_trc, write_mot, write_storage
from ..osim import OsimImport
from ..stored_programs import stored_jit
from .coordinates import raw_coordinates
from .tools import InverseKinematicsSetup, check_exists, read_inverse_kinematics_setup, read_model
from .xml import SetupError

__all__ = ["InverseKinematicsRun", "run_inverse_kinematics", "ik_problem"]

_UNITS = {"m": 1.0, "mm": 1e-3, "cm": 1e-2, "meters": 1.0, "millimeters": 1e-3}


@dataclasses.dataclass(frozen=True)
class InverseKinematicsRun:
    setup: InverseKinematicsSetup
    times: np.ndarray
    q: np.ndarray
    coordinate_names: tuple[str, ...]
    result: InverseKinematicsResult
    markers: tuple[str, ...]
    outputs: tuple[Path, ...]
    seconds: float


def ik_problem(setup: InverseKinematicsSetup, imp: OsimImport):
    """The arrays of :func:`jaxmb.analyses.solve_inverse_kinematics` for a setup."""
    try:
        trc = read_trc(setup.marker_file)
    except (MotionFileError, OSError) as e:
        raise SetupError(
            f"{setup.path}: cannot read marker_file {setup.marker_file}: {e}"
        ) from None
    scale = _UNITS.get(trc.units.strip().lower())
    if scale is None:
        raise SetupError(f"{setup.marker_file}: unknown units {trc.units!r} (m, cm, mm)")
    t0, t1 = setup.time_range
    keep = (trc.time >= t0 - 1e-9) & (trc.time <= t1 + 1e-9)
    if not np.any(keep):
        raise SetupError(f"{setup.path}: no marker frames in time_range {setup.time_range}")
    times = trc.time[keep]
    model = imp.model
    tasks = {t.name: t for t in setup.tasks}
    names, bodies, points, weights = [], [], [], []
    for name in trc.markers:
        t = tasks.get(name)
        if t is None or t.kind != "marker" or not t.apply or t.weight <= 0:
            continue
        if name not in model.points:
            raise SetupError(
                f"{setup.path}: IK task {name!r}: no marker of that name in {imp.path}"
            )
        b, r = model.points[name]
        names.append(name)
        bodies.append(int(b))
        points.append(np.asarray(r, dtype=float))
        weights.append(t.weight)
    if not names:
        raise SetupError(f"{setup.path}: no marker task matches a marker of {setup.marker_file}")
    idx = [trc.markers.index(n) for n in names]
    meas = trc.positions[keep][:, idx] * scale
    coords = {c.name: c for c in imp.coordinates}
    cn = model.coordinate_names
    q0 = np.array([coords[n].default_value for n in cn])
    lo = np.array([coords[n].range[0] if coords[n].clamped else -np.inf for n in cn])
    hi = np.array([coords[n].range[1] if coords[n].clamped else np.inf for n in cn])
    free = np.array([not coords[n].locked for n in cn])
    nt = times.shape[0]
    cw, cv = np.zeros((nt, len(cn))), np.tile(q0, (nt, 1))
    file_q = None
    for t in setup.tasks:
        if t.kind != "coordinate" or not t.apply or t.weight <= 0:
            continue
        if t.name not in cn:
            raise SetupError(
                f"{setup.path}: coordinate task {t.name!r}: not an independent "
                f"coordinate of {imp.path}"
            )
        j = cn.index(t.name)
        cw[:, j] = t.weight
        if t.value_type == "manual_value":
            cv[:, j] = t.value
        elif t.value_type == "from_file":
            if setup.coordinate_file is None:
                raise SetupError(
                    f"{setup.path}: coordinate task {t.name!r} reads from_file but "
                    "coordinate_file is empty"
                )
            if file_q is None:
                ft, fq, _ = raw_coordinates(setup.coordinate_file, imp)
                file_q = np.stack([np.interp(times, ft, fq[:, k]) for k in range(len(cn))], 1)
            cv[:, j] = file_q[:, j]
    return (
        times,
        tuple(names),
        np.asarray(bodies),
        np.asarray(points),
        meas,
        np.tile(np.asarray(weights), (nt, 1)),
        q0,
        lo,
        hi,
        free,
        cw,
        cv,
    )


_IK_FIELDS = tuple(f.name for f in dataclasses.fields(InverseKinematicsResult))


def _ik_solve(*args):
    """:func:`solve_inverse_kinematics` with its result as a tuple of arrays (``_IK_FIELDS``): a
    stored program's outputs must be a plain pytree."""
    r = solve_inverse_kinematics(*args)
    return tuple(getattr(r, f) for f in _IK_FIELDS)


def _marker_locations(model, q, bodies, points):
    return jax.vmap(lambda q1: marker_positions(model, q1, bodies, points))(q)


def run_inverse_kinematics(setup_path, out=None, *, write: bool = True, progress=None):
    """Run an InverseKinematicsTool setup (see the module docstring)."""
    say = progress or (lambda msg: None)
    setup = read_inverse_kinematics_setup(setup_path)
    check_exists(setup.model_file, "model_file", setup.path)
    check_exists(setup.marker_file, "marker_file", setup.path)
    say(f"reading {setup.model_file.name}")
    imp = read_model(setup.model_file)
    times, names, bodies, points, meas, w, q0, lo, hi, free, cw, cv = ik_problem(setup, imp)
    say(f"compiling and solving {times.shape[0]} frames")
    t_start = _time.perf_counter()
    # both passes start from (nt, nq) poses: one program (stored: a later run traces nothing)
    q0 = np.broadcast_to(np.asarray(q0, dtype=float), (times.shape[0], np.size(lo)))
    args = (bodies, points, meas, w)
    rest = (lo, hi, free, cw, cv)
    r = InverseKinematicsResult(
        *stored_jit(_ik_solve, imp.model, *args, q0, *rest, name="ik_solve")
    )
    # second pass: each frame restarted from its predecessor's solution (OpenSim tracks frame
    # to frame); the better of the two is kept per frame
    q_prev = np.vstack([np.asarray(r.q[:1]), np.asarray(r.q[:-1])])
    r2 = InverseKinematicsResult(
        *stored_jit(_ik_solve, imp.model, *args, q_prev, *rest, name="ik_solve")
    )
    better = np.asarray(r2.cost) < np.asarray(r.cost)
    pick = lambda a, b: np.where(better.reshape((-1,) + (1,) * (np.ndim(a) - 1)), b, a)  # noqa
    res = InverseKinematicsResult(
        *(pick(np.asarray(getattr(r, f)), np.asarray(getattr(r2, f))) for f in _IK_FIELDS)
    )
    secs = _time.perf_counter() - t_start
    q = np.asarray(res.q)
    outs = []
    if write:
        d = Path(out) if out is not None else setup.results_directory
        d.mkdir(parents=True, exist_ok=True)
        # every OpenSim coordinate (coupled, loop and locked ones through the joint map), degrees
        # for the rotational ones, as OpenSim's IK motion file
        motion = d / setup.output_motion_file.name
        outs.append(write_mot(motion, (times, q), imp, name="Coordinates"))
        if setup.report_marker_locations:
            xyz = stored_jit(
                _marker_locations, imp.model, jnp.asarray(q), bodies, jnp.asarray(points),
                name="ik_marker_locations",
            )  # fmt: skip
            labels = tuple(f"{n}_{a}" for n in names for a in ("tx", "ty", "tz"))
            outs.append(
                write_storage(
                    d / f"{setup.name}_ik_model_marker_locations.sto",
                    Storage(
                        times,
                        np.asarray(xyz).reshape(times.shape[0], -1),
                        labels,
                        False,
                        "Model Marker Locations from IK",
                    ),
                )
            )
        if setup.report_errors:
            err = np.column_stack([res.total_squared_error, res.rms_error, res.max_error])
            outs.append(
                write_storage(
                    d / f"{setup.name}_ik_marker_errors.sto",
                    Storage(
                        times,
                        err,
                        ("total_squared_error", "marker_error_RMS", "marker_error_max"),
                        False,
                        "Model Marker Errors from IK",
                    ),
                )
            )
    return InverseKinematicsRun(
        setup, times, q, tuple(imp.model.coordinate_names), res, names, tuple(outs), secs
    )
