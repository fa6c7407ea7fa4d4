"""``jaxmb static-optimization SETUP.xml``: an OpenSim AnalyzeTool setup with a StaticOptimization
analysis, every frame in one compiled solve; OpenSim's ``_activation.sto`` / ``_force.sto``, a
summary table and a PNG of the activations."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..io.setup import run_static_optimization
from ..plots import plot_trial_columns
from .common import table
from .opensim_runs import add_common_options, setup_errors, start_run

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register ``static-optimization SETUP.xml``."""
    p = subparsers.add_parser(
        "static-optimization",
        help="OpenSim static optimization (AnalyzeTool setup) of a trial, all frames at once",
        description="Runs an OpenSim AnalyzeTool setup file whose AnalysisSet holds a "
        "StaticOptimization: min Σ a^p over muscles and actuators with the generalized forces of "
        "inverse dynamics (filtered coordinates, external loads); writes "
        "<name>_StaticOptimization_activation.sto and _force.sto and a PNG.",
    )
    p.add_argument("setup", help="AnalyzeTool setup file (.xml)")
    p.add_argument(
        "--out", default=None, help="output folder (default: the setup's results_directory)"
    )
    p.add_argument(
        "--tol",
        type=float,
        default=1e-6,
        help="residual (N·m or N) above which a frame is reported infeasible",
    )
    add_common_options(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run the setup; print the summary and the files written. Returns the exit status."""
    say = start_run(args)
    r = setup_errors(
        lambda: run_static_optimization(args.setup, args.out, tol=args.tol, progress=say)
    )
    say(f"done: {r.times.shape[0]} frames")
    rows = [
        (
            lab,
            f"{np.mean(r.activations[:, j]):.4f}",
            f"{np.max(r.activations[:, j]):.4f}",
            f"{np.max(np.abs(r.forces[:, j])):.1f}",
        )
        for j, lab in enumerate(r.labels)
    ]
    print(table(rows, ("actuator", "mean control", "max control", "max |force| (N, N·m)")))
    print(
        f"frames: {r.times.shape[0]} ({r.times[0]:.4f} … {r.times[-1]:.4f} s); "
        f"max residual {np.max(np.abs(r.residual)):.2e} N·m; total cost Σ a^p "
        f"{np.sum(r.cost):.6g}; wall {say.elapsed:.1f} s"
    )
    if r.infeasible_times.size:
        print(
            f"infeasible frames (residual > {r.tol:g}) at t = "
            + ", ".join(f"{t:.4f}" for t in r.infeasible_times)
            + " s"
        )
    for p in r.outputs:
        print(p)
    if not args.no_plot and r.outputs:
        png = Path(r.outputs[0]).with_suffix(".png")
        plot_trial_columns(
            png,
            r.times,
            r.activations,
            r.labels,
            "control (activation)",
            f"{r.setup.name}: static optimization",
        )
        print(png)
    return 0
