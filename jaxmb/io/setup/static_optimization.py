"""An OpenSim AnalyzeTool setup with a StaticOptimization analysis, run by jaxmb
(``jaxmb static-optimization SETUP.xml``): OpenSim's formulation (see
:mod:`jaxmb.analyses.static_optimization`), every frame in one compiled, batched solve; writes
``<name>_StaticOptimization_activation.sto`` and ``_force.sto`` as OpenSim does."""

from __future__ import annotations

import dataclasses
import time as _time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...analyses import (
    MuscleCapacity,
    active_force_along_tendon,
    external_generalized_forces,
    so_frame,
    trial_inverse_dynamics,
)
from ...kinematics import tree_kinematics
from ...math.functions import as_array
from ...muscles import lengths_and_moment_arms
from ..motion import Storage, write_storage
from ..osim import OsimImport, model_with_muscles, read_osim
from ..stored_programs import stored_program, stored_program_future, stored_value
from .actuators import actuator_loads, model_actuators, muscle_capacity, read_force_set
from .coordinates import TrialCoordinates, trial_coordinates
from .external_loads import read_external_loads, sample_external_loads
from .tools import StaticOptimizationSetup, check_exists, read_static_optimization_setup
from .xml import SetupError

__all__ = [
    "StaticOptimizationRun",
    "SOProblem",
    "so_problem",
    "so_problem_solve",
    "trial_paths",
    "run_static_optimization",
]


class SOProblem(eqx.Module):
    """Everything a trial's static optimization needs, as arrays (a pytree):
    muscles' capacity, coordinate actuators (indices, optimal forces), point/torque actuator loads
    (one unit-control load tuple per actuator), bounds, the exponent and physiology flag."""

    capacity: MuscleCapacity
    coord_index: tuple[int, ...] = eqx.field(static=True)
    coord_force: jax.Array
    body_loads: tuple
    lower: jax.Array
    upper: jax.Array
    exponent: float = eqx.field(static=True)
    physiology: bool = eqx.field(static=True)


def _frame_matrix(model, prob: SOProblem, q, u, L, R):
    """A (nq, na) generalized force per unit control and f (na,) force per unit control, from the
    frame's path lengths L (nm,) and moment arms R (nq, nm)."""
    vmt = -(R.T @ u)
    cap = prob.capacity
    f_m = active_force_along_tendon(cap, L, vmt) if prob.physiology else cap.max_isometric_force
    cols = [R * f_m[None, :]]
    f = [f_m]
    if prob.coord_index:
        E = jnp.zeros((model.nq, len(prob.coord_index)))
        E = E.at[jnp.asarray(prob.coord_index), jnp.arange(len(prob.coord_index))].set(1.0)
        cols.append(E * prob.coord_force[None, :])
        f.append(prob.coord_force)
    # one kinematics pass for every point/torque actuator (not one each: tracing it is costly)
    kin = tree_kinematics(model, q) if prob.body_loads else None
    for loads in prob.body_loads:
        cols.append(external_generalized_forces(model, q, loads, 0, kin)[:, None])
        f.append(jnp.ones(1))
    return jnp.concatenate(cols, axis=1), jnp.concatenate(f)


def trial_paths(model, q):
    """Path lengths (nt, nm) and moment arms (nt, nq, nm) of every frame (vmapped)."""
    return jax.vmap(lambda q1: lengths_and_moment_arms(model, q1))(q)


def so_problem_solve(
    model, prob: SOProblem, q, u, udot, loads, L=None, R=None, iterations: int = 40
):
    """The whole trial: τ from inverse dynamics with the loads, per-frame matrices, the batched
    solve. ``L``, ``R`` (from :func:`trial_paths`) are computed when not given. Returns
    ``(x, forces, residual, cost)``; jit/grad-able in every array argument."""
    if L is None or R is None:
        L, R = trial_paths(model, q)
    tau = trial_inverse_dynamics(model, q, u, udot, loads)
    A, f = jax.vmap(lambda *a: _frame_matrix(model, prob, *a))(q, u, L, R)
    x, _ = jax.vmap(
        lambda A1, b1: so_frame(A1, b1, prob.lower, prob.upper, prob.exponent, iterations)
    )(A, tau)
    res = jnp.einsum("tqa,ta->tq", A, x) - tau
    cost = jnp.sum(jnp.abs(x) ** prob.exponent, axis=1)
    return x, x * f, res, cost


@dataclasses.dataclass(frozen=True)
class StaticOptimizationRun:
    """What :func:`run_static_optimization` computed: ``activations`` (nt, na) (muscles then
    actuators, ``labels``), ``forces`` (nt, na), ``residual`` (nt, nq) N·m/N, ``cost`` (nt,),
    ``infeasible_times`` (s), output files, and wall times (``seconds`` of the compiled solve)."""

    setup: StaticOptimizationSetup
    times: np.ndarray
    labels: tuple[str, ...]
    activations: np.ndarray
    forces: np.ndarray
    residual: np.ndarray
    cost: np.ndarray
    infeasible_times: np.ndarray
    tol: float
    coordinates: TrialCoordinates
    outputs: tuple[Path, ...]
    seconds: float


def so_problem(setup: StaticOptimizationSetup, imp: OsimImport):
    """``(model with muscles, SOProblem, actuator labels)`` from a setup and its imported model."""
    if not setup.use_model_force_set:
        raise SetupError(
            f"{setup.path}: use_model_force_set false (coordinate actuators for "
            "every degree of freedom) is not supported"
        )
    if setup.replace_force_set:
        raise SetupError(f"{setup.path}: replace_force_set true is not supported")
    model = model_with_muscles(imp, skip_unsupported=False)
    names = tuple(model.muscle_names)
    cap, lo_m, hi_m = muscle_capacity(imp, names)
    acts = list(model_actuators(imp.path))
    for f in setup.force_set_files:
        check_exists(f, "force_set_files entry", setup.path)
        acts += list(read_force_set(f))
    coord_names = list(imp.model.coordinate_names)
    ci, cf, bl, labels_c, labels_b = [], [], [], [], []
    lo_c, hi_c, lo_b, hi_b = [], [], [], []
    for a in acts:
        if a.kind == "CoordinateActuator":
            if a.coordinate not in coord_names:
                raise SetupError(
                    f"{a.where}: coordinate {a.coordinate!r} is not an independent "
                    f"coordinate of {imp.path}"
                )
            ci.append(coord_names.index(a.coordinate))
            cf.append(a.optimal_force)
            labels_c.append(a.name)
            lo_c.append(a.min_control)
            hi_c.append(a.max_control)
        else:
            bl.append(actuator_loads(a, imp))
            labels_b.append(a.name)
            lo_b.append(a.min_control)
            hi_b.append(a.max_control)
    prob = SOProblem(
        capacity=cap,
        coord_index=tuple(ci),
        coord_force=as_array(cf),
        body_loads=tuple(bl),
        lower=as_array(np.concatenate([lo_m, lo_c, lo_b])),
        upper=as_array(np.concatenate([hi_m, hi_c, hi_b])),
        exponent=float(setup.activation_exponent),
        physiology=bool(setup.use_muscle_physiology),
    )
    return model, prob, names + tuple(labels_c) + tuple(labels_b)


def run_static_optimization(
    setup_path: str | Path,
    out: str | Path | None = None,
    *,
    write: bool = True,
    tol: float = 1e-6,
    progress=None,
) -> StaticOptimizationRun:
    """Run an AnalyzeTool + StaticOptimization setup (see the module docstring)."""
    say = progress or (lambda msg: None)
    setup = read_static_optimization_setup(setup_path)
    check_exists(setup.model_file, "model_file", setup.path)
    check_exists(setup.coordinates_file, "coordinates_file", setup.path)
    say(f"reading {setup.model_file.name}")

    def build():
        imp = read_osim(setup.model_file)
        return (imp, *so_problem(setup, imp))

    # kept for later runs with the same files: an imported model is ~0.2 s of Python per run
    imp, model, prob, labels = stored_value(
        build,
        name="so_problem",
        files=(setup.model_file, *setup.force_set_files),
        params=(setup.use_model_force_set, setup.replace_force_set,
                float(setup.activation_exponent), bool(setup.use_muscle_physiology)),
    )  # fmt: skip
    t0, t1 = max(setup.initial_time, setup.start_time), min(setup.final_time, setup.end_time)
    coords = trial_coordinates(
        setup.coordinates_file,
        imp,
        setup.lowpass_cutoff,
        (t0, t1),
        acceleration="derivative_of_speed",
    )
    keep = np.arange(coords.times.shape[0])[:: setup.step_interval]
    times = coords.times[keep]
    q, u, udot = coords.q[keep], coords.qd[keep], coords.qdd[keep]
    # stored programs: a later run with this model and trial length traces nothing. The paths
    # program needs only the model and the frames, so it loads (or compiles) while the external
    # loads are sampled; the solve's, whose inputs include the loads and the paths' outputs (known
    # by their shapes), loads beside it
    t_start = _time.perf_counter()
    nt, nm = q.shape[0], len(model.muscle_names)
    paths_program = stored_program_future(trial_paths, model, q, name="trial_paths")
    loads = ()
    if setup.external_loads_file is not None:
        check_exists(setup.external_loads_file, "external_loads_file", setup.path)
        loads = sample_external_loads(read_external_loads(setup.external_loads_file), imp, times)
    say(f"compiling and solving {times.shape[0]} frames")
    dtype = jnp.result_type(q.dtype, float)
    paths_out = (
        jax.ShapeDtypeStruct((nt, nm), dtype),
        jax.ShapeDtypeStruct((nt, model.nq, nm), dtype),
    )
    solve_args = (model, prob, q, u, udot, loads)
    solve = stored_program(so_problem_solve, *solve_args, *paths_out, name="so_problem_solve")
    paths = paths_program.result()
    L, R = paths(model, q)
    say("muscle paths done")
    if [(v.shape, v.dtype) for v in (L, R)] != [(v.shape, v.dtype) for v in paths_out]:
        solve = stored_program(so_problem_solve, *solve_args, L, R, name="so_problem_solve")
    x, F, res, cost = (np.asarray(v) for v in solve(*solve_args, L, R))
    secs = _time.perf_counter() - t_start
    mx = np.max(np.abs(res), axis=1)
    bad = times[~(mx <= tol)]
    outs: list[Path] = []
    if write:
        d = Path(out) if out is not None else setup.results_directory
        d.mkdir(parents=True, exist_ok=True)
        hdr = {"description": "This file contains static optimization results."}
        outs.append(
            write_storage(
                d / f"{setup.name}_StaticOptimization_activation.sto",
                Storage(times, x, labels, False, "Static Optimization", hdr),
            )
        )
        outs.append(
            write_storage(
                d / f"{setup.name}_StaticOptimization_force.sto",
                Storage(times, F, labels, False, "Static Optimization", hdr),
            )
        )
    return StaticOptimizationRun(
        setup, times, labels, x, F, res, cost, bad, tol, coords, tuple(outs), secs
    )
