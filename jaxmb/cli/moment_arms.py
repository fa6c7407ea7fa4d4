"""``jaxmb moment-arms MODEL``: sweep one coordinate and write every muscle's moment arm
R = −∂L/∂q (the closed form of the seed, Eq. 193) and length L as CSV and PNG, with a summary."""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from ..model import ModelError
from ..muscles import lengths_and_moment_arms
from ..plots import plot_moment_arms
from .common import (
    CliError,
    default_run,
    output_dir,
    parse_vector,
    progress,
    resolve_model,
    table,
)

__all__ = ["add_parser", "run", "parse_range"]


def add_parser(subparsers):
    """Register ``moment-arms`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "moment-arms",
        help="sweep one coordinate: every muscle's moment arm and length; CSV, PNG, table",
        description="Moment arms R = −∂L/∂q by the closed form of the seed (Eq. 193) and "
        "musculotendon lengths L of every muscle while one coordinate sweeps a range and the "
        "others stay at --q0. Writes <out>/<model>_moment_arms_<coordinate>.csv and .png.",
        epilog="example:\n  jaxmb moment-arms arm26 --coordinate r_elbow_flex --range 0,2.2 "
        "--steps 45",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="a model with muscles (built-in name or model file)")
    p.add_argument("--coordinate", default=None, help="name or index (default: the first)")
    p.add_argument("--range", default="-1,1", help="LOW,HIGH of the sweep (rad or m)")
    p.add_argument("--steps", type=int, default=61, help="points of the sweep (default 61)")
    p.add_argument("--q0", default=None, help="the other coordinates, comma-separated (all nq)")
    p.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    p.add_argument("--no-plot", action="store_true", help="write the CSV only")
    p.set_defaults(func=run)
    return p


def parse_range(text: str) -> tuple[float, float]:
    """``(low, high)`` of a ``LOW,HIGH`` option, finite and increasing."""
    try:
        lo, hi = (float(x) for x in text.replace(" ", "").split(","))
    except ValueError:
        raise CliError(
            f"--range must be two comma-separated numbers LOW,HIGH, got {text!r}"
        ) from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise CliError(f"--range needs finite LOW < HIGH, got {text!r}")
    return lo, hi


def _sweep(model, k: int, Q: np.ndarray):
    """Row k of R (ns, nm) and L (ns, nm) at the poses Q (ns, nq), in compiled chunks."""
    # small chunks, so the bar moves: the first chunk compiles (most of the time), then each
    # chunk is one call of the compiled sweep
    chunk = min(len(Q), 8)

    # vmap: unwrapped paths vectorize over poses, wrapped ones run pose by pose inside
    # (see muscles.geometry)
    def row_and_lengths(q):
        L, R = lengths_and_moment_arms(model, q)
        return R[k], L

    f = jax.jit(jax.vmap(row_and_lengths))
    R, L = [], []
    n_chunks = -(-len(Q) // chunk)
    label = f"moment arms of {len(model.muscle_names)} muscles, {len(Q)} poses"
    progress(0, n_chunks, label + " (compiling)")
    for c in range(n_chunks):
        part = Q[c * chunk : (c + 1) * chunk]
        pad = np.concatenate([part, np.repeat(part[-1:], chunk - len(part), 0)])
        r, length = jax.block_until_ready(f(jnp.asarray(pad)))
        R.append(np.asarray(r)[: len(part)])
        L.append(np.asarray(length)[: len(part)])
        progress(c + 1, n_chunks, label + " " * len(" (compiling)"))
    return np.concatenate(R), np.concatenate(L)


def run(args) -> int:
    out = output_dir(args.out)
    name, model, builtin = resolve_model(args.model)
    if model.muscles is None or not model.muscle_names:
        raise CliError(f"model {name!r} has no muscles; moment arms need one (e.g. arm26)")
    try:
        k = (
            model.coordinate_index(
                int(args.coordinate) if args.coordinate.lstrip("-").isdigit() else args.coordinate
            )
            if args.coordinate is not None
            else 0
        )
    except ModelError as e:
        raise CliError(f"--coordinate: {e}") from None
    lo, hi = parse_range(args.range)
    if args.steps < 2:
        raise CliError(f"--steps must be at least 2, got {args.steps}")
    base = parse_vector(args.q0, model.nq, "--q0")
    if base is None:
        base = default_run(name if builtin else "", model)[0]
    cname = model.coordinate_names[k]
    xs = np.linspace(lo, hi, args.steps)
    Q = np.tile(base, (args.steps, 1))
    Q[:, k] = xs

    t0 = time.perf_counter()
    R, L = _sweep(model, k, Q)
    wall = time.perf_counter() - t0
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(L))):
        bad = xs[np.flatnonzero(~np.all(np.isfinite(R) & np.isfinite(L), axis=1))[0]]
        raise CliError(f"non-finite moment arm or length at {cname} = {bad:g}")

    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{name}_moment_arms_{cname}.csv"
    names = model.muscle_names
    header = [cname] + [f"r_{m}" for m in names] + [f"L_{m}" for m in names]
    np.savetxt(
        csv_path,
        np.column_stack([xs, R, L]),
        delimiter=",",
        header=",".join(header),
        comments="",
        fmt="%.17g",
    )
    png_path = None
    if not args.no_plot:
        png_path = out / f"{name}_moment_arms_{cname}.png"
        plot_moment_arms(png_path, model, cname, xs, R, L)
    rows = []
    for j, m in enumerate(names):
        at = xs[np.argmax(np.abs(R[:, j]))]
        rows.append(
            (
                m,
                f"{R[:, j].min() * 1e3:.3f}",
                f"{R[:, j].max() * 1e3:.3f}",
                f"{at:.4g}",
                f"{L[:, j].min():.5f}",
                f"{L[:, j].max():.5f}",
            )
        )
    print(
        table(
            rows,
            ("muscle", "min R (mm)", "max R (mm)", f"{cname} at max|R|", "min L (m)", "max L (m)"),
        )
    )
    print()
    print(
        table(
            [
                ("model", f"{name} ({len(names)} muscles, nq = {model.nq})"),
                (
                    "sweep",
                    f"{cname} from {lo:g} to {hi:g}, {args.steps} steps; other coordinates at "
                    f"{np.delete(base, k).tolist()}",
                ),
                ("time", f"{wall:.2f} s (compile included)"),
                ("csv", str(csv_path)),
            ]
            + ([("png", str(png_path))] if png_path else [])
        )
    )
    return 0
