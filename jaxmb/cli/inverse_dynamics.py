"""``jaxmb inverse-dynamics DATA``: joint forces and moments of a gait trial (Winter's Appendix A
tables or a BMClab 3D trial) by the Newton–Euler matrix formalism; CSV and PNG.
``jaxmb inverse-dynamics SETUP.xml``: an OpenSim InverseDynamicsTool setup (coordinates filtered and
splined as OpenSim does, external loads), OpenSim's generalized-force ``.sto``, summary and PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..analyses import gait
from ..analyses import newton_euler as ne
from ..io.setup import run_inverse_dynamics
from ..plots import plot_joint_loads, plot_trial_columns
from .common import CliError, output_dir, table
from .opensim_runs import add_common_options, setup_errors, start_run

__all__ = ["add_parser", "run", "JOINT_OF"]

JOINT_OF = {"foot": "ankle", "leg": "knee", "shank": "knee", "thigh": "hip"}
"""The proximal joint of each segment of the gait chains (the CSV's and the plot's names)."""


def add_parser(subparsers):
    """Register ``inverse-dynamics DATA`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "inverse-dynamics",
        help="generalized forces of an OpenSim ID setup, or joint loads of a gait trial "
        "(Newton-Euler)",
        description="SETUP.xml: runs an OpenSim InverseDynamicsTool setup file (coordinate "
        "filter and spline differentiation as OpenSim, external loads) and writes the "
        "generalized forces as OpenSim's .sto, a summary and a PNG. Otherwise reads a directory "
        "of Winter (2009) Appendix A CSV tables or a BMClab 3D gait trial (.txt) and writes "
        "joint forces/moments as CSV and a PNG plot.",
    )
    p.add_argument(
        "data",
        help="OpenSim setup (.xml), Winter CSV directory or BMClab .txt trial ('winter' = bundled)",
    )
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
    p.add_argument(
        "--out",
        default=None,
        help="output directory (default: the setup's "
        "results_directory; jaxmb_out/ for gait tables)",
    )
    add_common_options(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Write ``<stem>_joint_loads.csv`` (time, then per joint F{x,y,z} N ground frame, M{x,y,z} N·m
    ground frame and the segment-frame moment) and ``<stem>_joint_loads.png``; print their paths.
    Returns the exit status; unusable data ends in a :class:`CliError` naming it. An ``.xml``
    is an OpenSim InverseDynamicsTool setup (:func:`opensim_setup`)."""
    if str(args.data).lower().endswith(".xml"):
        return opensim_setup(args)
    out = output_dir("jaxmb_out" if args.out is None else args.out)
    try:
        return _joint_loads_files(args, out)
    except (gait.GaitDataError, ne.NewtonEulerError, OSError) as e:
        raise CliError(str(e).splitlines()[0]) from None


def _joint_loads_files(args, out: Path) -> int:
    fmt = args.format
    src = Path(args.data)
    if fmt == "auto":
        fmt = "winter" if (args.data == "winter" or src.is_dir()) else "bmc3d"
    if fmt == "winter":
        data = gait.read_winter(None if args.data == "winter" else src)
        cutoff = args.cutoff if args.source == "markers" else None
        chain, motion, load = gait.winter_inputs(data, args.source, cutoff=cutoff)
        time, stem = data.time, f"winter_{args.source}"
        reference = gait.winter_reference(data)
    else:
        trial = gait.read_bmc3d(src)
        cutoff = 6.0 if args.cutoff is None else args.cutoff
        chain, motion, load, st = gait.bmc3d_inputs(trial, args.body_mass, cutoff)
        time, stem = trial.time[st], Path(trial.path).stem
        reference = None
    loads = ne.joint_loads(chain, motion, load)
    joints = [JOINT_OF.get(s, s) for s in chain.names]
    header, cols = ["time_s"], [np.asarray(time)]
    for i, (s, j) in enumerate(zip(chain.names, joints, strict=True)):
        for q, arr, unit in (
            ("F", loads.force, "N"), ("M", loads.moment_ground, "Nm"),
            ("Mlocal", loads.moment, "Nm"),
        ):  # fmt: skip
            for k, ax in enumerate("xyz"):
                header.append(f"{j}_{q}{ax}_on_{s}_{unit}")
                cols.append(np.asarray(arr[:, i, k]))
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{stem}_joint_loads.csv"
    np.savetxt(csv_path, np.stack(cols, 1), delimiter=",", header=",".join(header), comments="")
    png_path = out / f"{stem}_joint_loads.png"
    plot_joint_loads(png_path, time, chain.names, joints, loads, reference)
    rows = [
        ("data", f"{args.data} ({fmt}{', ' + args.source if fmt == 'winter' else ''})"),
        ("frames", f"{len(time)}, t = {float(time[0]):.4g} .. {float(time[-1]):.4g} s"),
    ]
    for i, (s, j) in enumerate(zip(chain.names, joints, strict=True)):
        mz = np.asarray(loads.moment[:, i, 2])
        fn = np.linalg.norm(np.asarray(loads.force[:, i]), axis=1)
        rows.append(
            (
                f"{j} on {s}",
                f"moment (segment z) {mz.min():.1f} .. {mz.max():.1f} N·m,"
                f" |force| max {fn.max():.1f} N",
            )
        )
    print(table(rows))
    if reference is not None:
        print()
        print(_winter_comparison(chain.names, joints, loads, reference))
    print()
    print(table([("csv", str(csv_path)), ("png", str(png_path))]))
    return 0


def opensim_setup(args) -> int:
    """``jaxmb inverse-dynamics SETUP.xml``: write OpenSim's generalized-force .sto and a PNG."""
    say = start_run(args)
    r = setup_errors(lambda: run_inverse_dynamics(args.data, args.out, progress=say))
    say(f"done: {r.times.shape[0]} frames")
    rows = [
        (
            lab,
            f"{np.min(r.tau[:, j]):.3f}",
            f"{np.max(r.tau[:, j]):.3f}",
            "N·m" if lab.endswith("_moment") else "N",
        )
        for j, lab in enumerate(r.labels)
    ]
    print(table(rows, ("generalized force", "min", "max", "unit")))
    c = r.coordinates.operators
    filt = f"low-pass {c.cutoff:g} Hz" if c.cutoff is not None else "no filter"
    print(
        f"frames: {r.times.shape[0]} ({r.times[0]:.4f} … {r.times[-1]:.4f} s); {filt}; "
        f"wall {say.elapsed:.1f} s"
    )
    print(r.output)
    if not args.no_plot:
        png = Path(r.output).with_suffix(".png")
        plot_trial_columns(
            png, r.times, r.tau, r.labels, "N·m or N", f"{r.setup.name}: inverse dynamics"
        )
        print(png)
    return 0


def _winter_comparison(segments, joints, loads, reference) -> str:
    """RMS and largest differences against Winter's Table A.5, per joint."""
    rows = []
    for i, (s, j) in enumerate(zip(segments, joints, strict=True)):
        dm = np.asarray(loads.moment[:, i, 2]) - reference["moment"][:, i]
        df = np.asarray(loads.force[:, i, :2]) - reference["force"][:, i]
        peak = np.abs(reference["moment"][:, i]).max()
        rows.append(
            (
                f"{j} on {s}",
                f"{np.sqrt(np.mean(dm**2)):.3f}",
                f"{np.abs(dm).max():.3f}",
                f"{peak:.1f}",
                f"{np.sqrt(np.mean(df**2)):.3f}",
                f"{np.abs(df).max():.3f}",
            )
        )
    head = (
        "against Winter's Table A.5",
        "moment RMS (N·m)",
        "max (N·m)",
        "|A.5 moment| max",
        "force RMS (N)",
        "max (N)",
    )
    return table(rows, head)
