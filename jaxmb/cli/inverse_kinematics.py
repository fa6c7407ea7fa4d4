"""``jaxmb inverse-kinematics SETUP.xml``: an OpenSim InverseKinematicsTool setup, every frame in
one compiled solve; the ``.mot``, the marker errors, a summary table and a PNG of the
coordinates."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..io.setup import run_inverse_kinematics
from ..plots import plot_trial_columns
from .common import table
from .opensim_runs import add_common_options, setup_errors, start_run

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register ``inverse-kinematics SETUP.xml``."""
    p = subparsers.add_parser(
        "inverse-kinematics",
        help="OpenSim inverse kinematics (InverseKinematicsTool setup), all frames at once",
        description="Runs an OpenSim InverseKinematicsTool setup file: weighted marker and "
        "coordinate-task least squares of every frame in one batched Levenberg-Marquardt solve; "
        "writes the .mot (degrees), <name>_ik_marker_errors.sto and a PNG.",
    )
    p.add_argument("setup", help="InverseKinematicsTool setup file (.xml)")
    p.add_argument("--out", default=None, help="output folder (default: the setup's "
                   "results_directory)")
    add_common_options(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run the setup; print the summary and the files written."""
    say = start_run(args)
    r = setup_errors(lambda: run_inverse_kinematics(args.setup, args.out, progress=say))
    say(f"done: {r.times.shape[0]} frames")
    res = r.result
    print(table(
        [("marker RMS error (mm)", f"{1e3 * np.mean(res.rms_error):.2f}",
          f"{1e3 * np.max(res.rms_error):.2f}"),
         ("marker max error (mm)", f"{1e3 * np.mean(res.max_error):.2f}",
          f"{1e3 * np.max(res.max_error):.2f}"),
         ("weighted squared error (m²)", f"{np.mean(res.weighted_squared_error):.3g}",
          f"{np.max(res.weighted_squared_error):.3g}")],
        ("per frame", "mean", "max"),
    ))  # fmt: skip
    print(f"frames: {r.times.shape[0]}; markers: {len(r.markers)}; wall {say.elapsed:.1f} s")
    for p in r.outputs:
        print(p)
    if not args.no_plot and r.outputs:
        png = Path(r.outputs[0]).with_suffix(".png")
        plot_trial_columns(png, r.times, r.q, r.coordinate_names, "rad or m",
                           f"{r.setup.name}: inverse kinematics")
        print(png)
    return 0
