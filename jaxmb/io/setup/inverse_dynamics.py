"""An OpenSim InverseDynamicsTool setup run by jaxmb (`jaxmb inverse-dynamics SETUP.xml`)."""

from __future__ import annotations

import dataclasses
import time as _time
import warnings
from pathlib import Path

import numpy as np

from ...analyses import trial_inverse_dynamics
from ..motion import Storage, write_storage
from ..osim import OsimImport
from ..stored_programs import stored_jit
from .coordinates import TrialCoordinates, trial_coordinates
from .external_loads import read_external_loads, sample_external_loads
from .tools import InverseDynamicsSetup, check_exists, read_inverse_dynamics_setup, read_model
from .xml import SetupError

__all__ = ["InverseDynamicsRun", "generalized_force_labels", "run_inverse_dynamics"]


@dataclasses.dataclass(frozen=True)
class InverseDynamicsRun:
    """What :func:`run_inverse_dynamics` computed and wrote.

    ``tau`` (nt, nc) N·m / N at ``times``, one column per OpenSim coordinate (coupled, loop and
    locked ones included: OpenSim's residual forces ignoring the constraints) in OpenSim 4.6's
    column order (multibody tree order); ``labels`` OpenSim's column names
    (``<coordinate>_moment`` / ``_force``); ``output`` the .sto written (None when not written);
    ``seconds`` wall time of the compiled solve.
    """

    setup: InverseDynamicsSetup
    times: np.ndarray
    tau: np.ndarray
    labels: tuple[str, ...]
    coordinates: TrialCoordinates
    output: Path | None
    seconds: float


def generalized_force_labels(imp: OsimImport) -> tuple[str, ...]:
    """OpenSim's ID column labels for the model's coordinates (in the model's order)."""
    return tuple(
        f"{n}_{'moment' if r else 'force'}"
        for n, r in zip(imp.model.coordinate_names, imp.rotational, strict=True)
    )


def _tree_order(imp: OsimImport) -> np.ndarray:
    """The model's coordinates reordered as OpenSim 4.6's InverseDynamicsTool writes them
    (multibody tree order, :attr:`OsimImport.tree_order`), as indices into the model's."""
    names = list(imp.model.coordinate_names)
    return np.asarray([names.index(n) for n in imp.tree_order if n in names])


def _check_excluded(setup: InverseDynamicsSetup, imp: OsimImport) -> None:
    ex = {s.lower() for s in setup.forces_to_exclude}
    if imp.muscles and not ({"muscles", "all", "actuators"} & ex):
        warnings.warn(
            f"{setup.path}: forces_to_exclude does not exclude Muscles, but jaxmb's inverse "
            "dynamics does not apply muscle forces: the generalized forces are those with the "
            "muscles excluded",
            stacklevel=3,
        )


def run_inverse_dynamics(
    setup_path: str | Path, out: str | Path | None = None, *, write: bool = True, progress=None
) -> InverseDynamicsRun:
    """Run an InverseDynamicsTool setup: coordinates filtered and splined as OpenSim does,
    external loads applied, generalized forces written as ``<out>/<output_gen_force_file>``
    (``out`` defaults to the setup's results directory). As OpenSim's tool, every coordinate of
    the model gets a column, its residual force with the constraints ignored: a coupled, loop or
    locked coordinate moves as its column of the coordinates file says (its default value when
    the file has none), not as its constraint would move it."""
    say = progress or (lambda msg: None)
    setup = read_inverse_dynamics_setup(setup_path)
    check_exists(setup.model_file, "model_file", setup.path)
    check_exists(setup.coordinates_file, "coordinates_file", setup.path)
    say(f"reading {setup.model_file.name}")
    # OpenSim's tool reports every coordinate's residual force ignoring the constraints (Simbody's
    # calcResidualForceIgnoringConstraints), each coordinate moving as the file says: the model
    # with its constraints not applied and its locked coordinates free is that system
    imp = read_model(setup.model_file, locked="free", constraints="ignore")
    _check_excluded(setup, imp)
    coords = trial_coordinates(setup.coordinates_file, imp, setup.lowpass_cutoff, setup.time_range)
    loads = ()
    if setup.external_loads_file is not None:
        check_exists(setup.external_loads_file, "external_loads_file", setup.path)
        loads = sample_external_loads(
            read_external_loads(setup.external_loads_file), imp, coords.times
        )
    say(f"solving {coords.times.shape[0]} frames")
    t0 = _time.perf_counter()
    # a stored program: a later run with this model and trial length traces nothing
    tau = np.asarray(
        stored_jit(
            trial_inverse_dynamics,
            imp.model,
            coords.q,
            coords.qd,
            coords.qdd,
            loads,
            name="trial_inverse_dynamics",
        )
    )
    secs = _time.perf_counter() - t0
    if not np.all(np.isfinite(tau)):
        bad = coords.times[~np.all(np.isfinite(tau), axis=1)]
        raise SetupError(f"{setup.path}: non-finite generalized forces at t = {bad[:5]} s")
    order = _tree_order(imp)
    tau = tau[:, order]
    labels = tuple(np.asarray(generalized_force_labels(imp))[order])
    path = None
    if write:
        d = Path(out) if out is not None else setup.results_directory
        d.mkdir(parents=True, exist_ok=True)
        path = write_storage(
            d / setup.output_gen_force_file,
            Storage(coords.times, tau, labels, False, "Inverse Dynamics Generalized Forces"),
        )
    return InverseDynamicsRun(setup, coords.times, tau, labels, coords, path, secs)
