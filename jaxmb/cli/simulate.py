"""``jaxmb simulate MODEL``: integrate a model from its default (or the given) initial state with
diffrax; print a summary (final state, error against a published reference where one is known,
solver steps, compiled wall time and compile time) and write ``<out>/<model>.csv`` (t, q, q̇ and the
joint variables f(q)) and ``<out>/<model>.png``."""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from ..model import ModelError
from ..plots import plot_trajectory
from ..simulation import SOLVERS, SimulationError, simulate
from .common import CliError, default_run, output_dir, parse_vector, resolve_model

__all__ = ["add_parser", "run", "write_csv"]


def add_parser(subparsers):
    """Register ``simulate`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "simulate",
        help="integrate a model (built-in or file); summary, PNG and CSV",
        description="Integrate M q̈ + N q̇ = G + Q from an initial state with diffrax; print a "
        "summary and write <out>/<model>.csv and .png.",
        epilog="examples:\n  jaxmb simulate andrews\n  jaxmb simulate chain --t1 2 --solver "
        "dopri8 --rtol 1e-10 --atol 1e-10\n  jaxmb simulate my_model.json --q0 0.3 --no-plot",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="built-in model name (e.g. andrews, chain) or a model file")
    p.add_argument("--t1", type=float, default=None, help="final time, s (andrews: 0.03)")
    p.add_argument("--solver", default=None, help="tsit5, dopri5, dopri8, kvaerno5, kencarp4")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance")
    p.add_argument("--q0", default=None, help="initial coordinates, comma-separated")
    p.add_argument("--qd0", default=None, help="initial speeds, comma-separated")
    p.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    p.add_argument("--no-plot", action="store_true", help="write the CSV only")
    p.add_argument("--points", type=int, default=301, help="output samples (default 301)")
    p.add_argument("--max-steps", type=int, default=100_000, help="solver step budget")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    if args.points < 2:
        raise CliError(f"--points must be at least 2, got {args.points}")
    out = output_dir(args.out)
    name, model, builtin = resolve_model(args.model)
    q0d, qd0d, t1d, solverd, rtold, atold, reference = default_run(name if builtin else "", model)
    q0 = parse_vector(args.q0, model.nq, "--q0")
    qd0 = parse_vector(args.qd0, model.nq, "--qd0")
    q0 = q0d if q0 is None else q0
    qd0 = qd0d if qd0 is None else qd0
    t1 = t1d if args.t1 is None else args.t1
    solver = solverd if args.solver is None else args.solver
    rtol = rtold if args.rtol is None else args.rtol
    atol = atold if args.atol is None else args.atol
    if solver not in SOLVERS:
        raise CliError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if not (np.isfinite(t1) and t1 > 0):
        raise CliError(f"--t1 must be a positive number of seconds, got {t1}")
    for flag, v in (("--rtol", rtol), ("--atol", atol)):
        if not (np.isfinite(v) and v > 0):
            raise CliError(f"{flag} must be positive, got {v}")

    ts = np.linspace(0.0, t1, args.points)
    integrate = lambda: simulate(
        model, q0, qd0, t1, ts=ts, solver=solver, rtol=rtol, atol=atol, max_steps=args.max_steps
    )
    try:
        t = time.perf_counter()
        traj = jax.block_until_ready(integrate())
        first = time.perf_counter() - t
        t = time.perf_counter()
        traj = jax.block_until_ready(integrate())
        wall = time.perf_counter() - t
    except (SimulationError, ModelError, ValueError) as e:
        raise CliError(str(e).splitlines()[0]) from None

    tq, q, qd = np.asarray(traj.ts), np.asarray(traj.q), np.asarray(traj.qd)
    f = np.asarray(jax.jit(jax.vmap(model.joint_map))(traj.q))
    ref = reference(t1, q0, qd0, traj) if reference is not None else None
    stats = {k: int(np.asarray(traj.stats[k])) for k in STEP_COUNTS}

    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{name}.csv"
    write_csv(csv_path, model, tq, q, qd, f)
    png_path = None
    if not args.no_plot:
        png_path = out / f"{name}.png"
        plot_trajectory(png_path, model, tq, q, qd)

    rows = [
        ("model", f"{name} (nq = {model.nq}, bodies = {model.nb})"),
        ("solver", f"{solver}, rtol = {rtol:g}, atol = {atol:g}"),
        ("t", f"0 -> {t1:g} s"),
    ]
    for k, cname in enumerate(model.coordinate_names):
        rows.append((f"{cname}(t1)", f"{q[-1, k]:.12g}"))
        rows.append((f"{cname}'(t1)", f"{qd[-1, k]:.12g}"))
    if ref is not None:
        rows.append(("reference", ref["reference"]))
        rows.append(("angles(t1)", " ".join(f"{v:.10g}" for v in ref["angles"])))
        rows.append(("max angle error", f"{ref['angle_error']:.2e} rad"))
        rows.append(("max velocity error", f"{ref['velocity_error_rel']:.2e} (relative)"))
    rows += [
        (
            "steps",
            f"{stats['num_steps']} ({stats['num_accepted_steps']} accepted, "
            f"{stats['num_rejected_steps']} rejected)",
        ),
        ("route", _route(traj.stats)),
        ("wall time", f"{wall * 1e3:.2f} ms (compiled)"),
        ("compile time", f"{max(first - wall, 0.0):.2f} s"),
        ("csv", str(csv_path)),
    ]
    if png_path is not None:
        rows.append(("png", str(png_path)))
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    return 0


def write_csv(path, model, t, q, qd, f) -> None:
    """Write t (nt,) s, q, q̇ (nt, nq) and the joint variables f (nt, nb) as one CSV table."""
    names = (
        ["t"]
        + [f"q_{c}" for c in model.coordinate_names]
        + [f"qd_{c}" for c in model.coordinate_names]
        + [f"f_{b}" for b in model.body_names]
    )
    data = np.column_stack([t, q, qd, f])
    np.savetxt(path, data, delimiter=",", header=",".join(names), comments="", fmt="%.17g")


STEP_COUNTS = ("num_steps", "num_accepted_steps", "num_rejected_steps")


def _route(stats) -> str:
    """Which right-hand side ``simulate`` integrated: the exact tree route, or its checked premodel
    with the fit's cost and the run-time deviation from the exact route."""
    route = str(stats.get("route", "exact"))
    if route == "premodel":
        return (
            f"premodel (fit {float(stats.get('premodel_fit_s', 0.0)):.1f} s this call, "
            f"deviation from exact {float(np.asarray(stats['premodel_deviation'])):.1e})"
        )
    why = stats.get("premodel_declined")
    return f"exact ({why})" if why else route
