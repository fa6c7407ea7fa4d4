"""Readers of OpenSim tool setup files: InverseKinematicsTool (with its IKTaskSet),
InverseDynamicsTool and AnalyzeTool with a StaticOptimization analysis.

Paths are resolved as OpenSim resolves them: a tool changes its working directory to the setup
file's folder, so relative names (model, data, results directory, ExternalLoads file,
force_set_files) are relative to that folder. Elements jaxmb does not read are ignored as OpenSim
ignores unknown ones; a value that cannot be used raises :class:`SetupError` naming file, line and
element.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ..osim import OsimImport, read_osim
from ..stored_programs import stored_value
from .xml import SetupError, SetupXml

__all__ = [
    "IKTask",
    "InverseKinematicsSetup",
    "InverseDynamicsSetup",
    "StaticOptimizationSetup",
    "read_inverse_kinematics_setup",
    "read_inverse_dynamics_setup",
    "read_static_optimization_setup",
    "read_model",
]


@dataclasses.dataclass(frozen=True)
class IKTask:
    """One entry of an IKTaskSet: ``kind`` "marker" or "coordinate"; for coordinates
    ``value_type`` is OpenSim's ``default_value``, ``manual_value`` or ``from_file``."""

    name: str
    kind: str
    apply: bool
    weight: float
    value_type: str = "default_value"
    value: float = 0.0


@dataclasses.dataclass(frozen=True)
class InverseKinematicsSetup:
    path: Path
    name: str
    model_file: Path
    marker_file: Path
    coordinate_file: Path | None
    time_range: tuple[float, float]
    output_motion_file: Path
    results_directory: Path
    report_errors: bool
    constraint_weight: float
    accuracy: float
    tasks: tuple[IKTask, ...]
    report_marker_locations: bool = False


@dataclasses.dataclass(frozen=True)
class InverseDynamicsSetup:
    path: Path
    name: str
    model_file: Path
    coordinates_file: Path
    external_loads_file: Path | None
    time_range: tuple[float, float]
    lowpass_cutoff: float
    forces_to_exclude: tuple[str, ...]
    output_gen_force_file: str
    results_directory: Path


@dataclasses.dataclass(frozen=True)
class StaticOptimizationSetup:
    """An AnalyzeTool setup whose AnalysisSet holds a StaticOptimization (its settings here)."""

    path: Path
    name: str
    model_file: Path
    coordinates_file: Path
    external_loads_file: Path | None
    force_set_files: tuple[Path, ...]
    replace_force_set: bool
    results_directory: Path
    initial_time: float
    final_time: float
    lowpass_cutoff: float
    start_time: float
    end_time: float
    step_interval: int
    use_model_force_set: bool
    activation_exponent: float
    use_muscle_physiology: bool
    convergence_criterion: float
    max_iterations: int


def _required(x: SetupXml, el, tag: str) -> Path:
    p = x.file(el, tag)
    if p is None:
        raise x.error(el, f"<{tag}> is empty: the tool needs it")
    return p


def _results(x: SetupXml, el) -> Path:
    return x.file(el, "results_directory") or x.path.parent


def _name(el, x: SetupXml) -> str:
    return el.get("name") or x.path.stem


def read_inverse_kinematics_setup(path: str | Path) -> InverseKinematicsSetup:
    """An ``InverseKinematicsTool`` setup file with its IKTaskSet."""
    x = SetupXml(path)
    el = x.tool(("InverseKinematicsTool",))
    tasks = []
    ts = el.find("IKTaskSet")
    for t in list(ts.find("objects")) if ts is not None and ts.find("objects") is not None else []:
        if t.tag == "IKMarkerTask":
            kind = "marker"
        elif t.tag == "IKCoordinateTask":
            kind = "coordinate"
        else:
            raise x.error(t, "unknown IK task type (IKMarkerTask or IKCoordinateTask)")
        name = t.get("name")
        if not name:
            raise x.error(t, "task without a name")
        vt = x.text(t, "value_type", "default_value")
        if vt not in ("default_value", "manual_value", "from_file"):
            raise x.error(t, f"value_type {vt!r} (default_value, manual_value or from_file)")
        tasks.append(
            IKTask(
                name,
                kind,
                x.flag(t, "apply", True),
                x.number(t, "weight", 1.0),
                vt,
                x.number(t, "value", 0.0),
            )
        )
    tr = x.numbers(el, "time_range", 2, (-math.inf, math.inf))
    out = x.text(el, "output_motion_file")
    results = _results(x, el)
    return InverseKinematicsSetup(
        path=x.path,
        name=_name(el, x),
        model_file=_required(x, el, "model_file"),
        marker_file=_required(x, el, "marker_file"),
        coordinate_file=x.file(el, "coordinate_file"),
        time_range=tr,
        output_motion_file=Path(out) if out else Path(f"{_name(el, x)}_ik.mot"),
        results_directory=results,
        report_errors=x.flag(el, "report_errors", True),
        constraint_weight=x.number(el, "constraint_weight", math.inf),
        accuracy=x.number(el, "accuracy", 1e-5),
        tasks=tuple(tasks),
        report_marker_locations=x.flag(el, "report_marker_locations", False),
    )


def read_inverse_dynamics_setup(path: str | Path) -> InverseDynamicsSetup:
    """An ``InverseDynamicsTool`` setup file."""
    x = SetupXml(path)
    el = x.tool(("InverseDynamicsTool",))
    out = x.text(el, "output_gen_force_file", "inverse_dynamics.sto")
    return InverseDynamicsSetup(
        path=x.path,
        name=_name(el, x),
        model_file=_required(x, el, "model_file"),
        coordinates_file=_required(x, el, "coordinates_file"),
        external_loads_file=x.file(el, "external_loads_file"),
        time_range=x.numbers(el, "time_range", 2, (-math.inf, math.inf)),
        lowpass_cutoff=x.number(el, "lowpass_cutoff_frequency_for_coordinates", -1.0),
        forces_to_exclude=x.words(el, "forces_to_exclude"),
        output_gen_force_file=out,
        results_directory=_results(x, el),
    )


def read_static_optimization_setup(path: str | Path) -> StaticOptimizationSetup:
    """An ``AnalyzeTool`` setup file whose AnalysisSet holds a ``StaticOptimization``."""
    x = SetupXml(path)
    el = x.tool(("AnalyzeTool",))
    so = None
    aset = el.find("AnalysisSet")
    objs = aset.find("objects") if aset is not None else None
    for a in list(objs) if objs is not None else []:
        if a.tag == "StaticOptimization" and x.flag(a, "on", True):
            so = a
            break
    if so is None:
        raise x.error(el, "no StaticOptimization analysis switched on in its AnalysisSet")
    if x.text(el, "states_file") is not None:
        raise x.error(el.find("states_file"), "states_file is not supported; give coordinates_file")
    if x.text(el, "speeds_file") is not None:
        raise x.error(
            el.find("speeds_file"),
            "speeds_file is not supported (speeds are differentiated from the coordinates)",
        )
    ti = x.number(el, "initial_time", -math.inf)
    tf = x.number(el, "final_time", math.inf)
    ex = x.number(so, "activation_exponent", 2.0)
    if not ex > 1.0:
        raise x.error(so.find("activation_exponent"), f"activation_exponent must be > 1, got {ex}")
    si = int(x.number(so, "step_interval", 1))
    if si < 1:
        raise x.error(so.find("step_interval"), f"step_interval must be ≥ 1, got {si}")
    return StaticOptimizationSetup(
        path=x.path,
        name=_name(el, x),
        model_file=_required(x, el, "model_file"),
        coordinates_file=_required(x, el, "coordinates_file"),
        external_loads_file=x.file(el, "external_loads_file"),
        force_set_files=tuple(x.path.parent / f for f in x.words(el, "force_set_files")),
        replace_force_set=x.flag(el, "replace_force_set", False),
        results_directory=_results(x, el),
        initial_time=ti,
        final_time=tf,
        lowpass_cutoff=x.number(el, "lowpass_cutoff_frequency_for_coordinates", -1.0),
        start_time=x.number(so, "start_time", ti),
        end_time=x.number(so, "end_time", tf),
        step_interval=si,
        use_model_force_set=x.flag(so, "use_model_force_set", True),
        activation_exponent=ex,
        use_muscle_physiology=x.flag(so, "use_muscle_physiology", True),
        convergence_criterion=x.number(so, "optimizer_convergence_criterion", 1e-4),
        max_iterations=int(x.number(so, "optimizer_max_iterations", 100)),
    )


def read_model(
    model_file: Path, directory: str | Path | None = None, **options: str
) -> OsimImport:
    """A setup's ``.osim`` model, imported (:func:`~jaxmb.io.osim.read_osim` with ``options``,
    e.g. ``constraints="ignore"``) and kept for later runs with the same file and options
    (:func:`~jaxmb.io.stored_programs.stored_value`, ``directory`` overriding where): an import is
    ~0.1–0.2 s of Python per run."""
    return stored_value(lambda: read_osim(model_file, **options), name="osim_import",
                        files=(model_file,), params=tuple(sorted(options.items())),
                        directory=directory)  # fmt: skip


def check_exists(p: Path, what: str, setup: Path) -> Path:
    """``p`` if it exists, else :class:`SetupError` naming the setup file and the element."""
    if not Path(p).exists():
        raise SetupError(f"{setup}: {what} {p} does not exist")
    return Path(p)
