"""The ``jaxmb`` command.

    jaxmb models                         list the built-in models
    jaxmb simulate andrews               integrate Andrews' squeezer: summary table, PNG and CSV
    jaxmb simulate chain --t1 2 --q0 0.1,0,0,0,0,0,0 --out runs/ --no-plot

``simulate`` integrates a built-in model from its default (or the given) initial state with diffrax,
prints a summary (final state, error against a published reference where one is known, solver
steps, compiled wall time and compile time) and writes ``<out>/<model>.csv`` (t, q, q̇ and the joint
variables f(q)) and ``<out>/<model>.png`` (q and q̇ against t, and for planar models a drawing of the
mechanism at a few instants). Bad input ends with a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]

_ALIASES = {"andrews": "andrews_squeezer", "squeezer": "andrews_squeezer"}


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def _builtin_models() -> dict[str, str]:
    from . import models

    return {name: models._BUILTINS[name] for name in models.__all__}


def _available(module: str) -> bool:
    return importlib.util.find_spec(f"jaxmb.models.{module}") is not None


def _canonical(name: str) -> str:
    name = _ALIASES.get(name, name)
    table = _builtin_models()
    if name not in table:
        raise CliError(
            f"unknown model {name!r}; built-in models: {', '.join(sorted(table))} (alias: andrews)"
        )
    if not _available(table[name]):
        raise CliError(f"model {name!r} is not available in this installation")
    return name


def _defaults(name: str, model):
    """Default (q0, qd0, t1, solver, rtol, atol) and an optional reference check for a model."""
    import jax.numpy as jnp

    if name == "andrews_squeezer":
        from .models import andrews as an

        ref_angles, ref_vel = an.reference_solution()

        def reference(t1, q0, qd0, traj):
            if not (abs(t1 - 0.03) < 1e-15 and q0[0] == an.BETA0 and qd0[0] == 0.0):
                return None
            f, J, _ = model.joint_map.derivatives(jnp.asarray(traj.q[-1]))
            y = np.asarray(an.to_test_set(f))
            yd = np.asarray(an.to_test_set(J[:, 0])) * float(traj.qd[-1][0])
            return {
                "reference": "IVP test set 'andrews', t = 0.03 s (7 angles, test-set order)",
                "angles": y,
                "angle_error": float(np.max(np.abs(y - ref_angles))),
                "velocity_error_rel": float(np.max(np.abs(yd - ref_vel)) / np.max(np.abs(ref_vel))),
            }

        return np.array([an.BETA0]), np.zeros(1), 0.03, "dopri8", 1e-10, 1e-10, reference
    nq = model.nq
    return np.zeros(nq), np.zeros(nq), 1.0, "tsit5", 1e-8, 1e-8, None


def _parse_vector(text: str | None, n: int, what: str):
    if text is None:
        return None
    try:
        v = np.array([float(x) for x in text.replace(" ", ",").split(",") if x != ""])
    except ValueError:
        raise CliError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if v.shape != (n,):
        raise CliError(f"{what} needs {n} value(s) for this model, got {v.size}: {text!r}")
    if not np.all(np.isfinite(v)):
        raise CliError(f"{what} has non-finite values: {text!r}")
    return v


def _cmd_models(args) -> int:
    from .models import DESCRIPTIONS

    table = _builtin_models()
    for name in sorted(table):
        if _available(table[name]):
            print(f"{name:18s} {DESCRIPTIONS.get(name, '')}")
    print("alias: andrews -> andrews_squeezer")
    return 0


def _cmd_simulate(args) -> int:
    import jax

    from . import models  # noqa: F401  (x64 on)
    from .model import ModelError
    from .simulate import SOLVERS, SimulationError, simulate

    name = _canonical(args.model)
    model = getattr(models, name)()
    q0d, qd0d, t1d, solverd, rtold, atold, reference = _defaults(name, model)
    q0 = _parse_vector(args.q0, model.nq, "--q0")
    qd0 = _parse_vector(args.qd0, model.nq, "--qd0")
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
    run = lambda: simulate(model, q0, qd0, t1, ts=ts, solver=solver, rtol=rtol, atol=atol,
                           max_steps=args.max_steps)  # fmt: skip
    try:
        t = time.perf_counter()
        traj = jax.block_until_ready(run())
        first = time.perf_counter() - t
        t = time.perf_counter()
        traj = jax.block_until_ready(run())
        wall = time.perf_counter() - t
    except (SimulationError, ModelError, ValueError) as e:
        raise CliError(str(e).splitlines()[0]) from None

    tq, q, qd = np.asarray(traj.ts), np.asarray(traj.q), np.asarray(traj.qd)
    f = np.asarray(jax.jit(jax.vmap(model.joint_map))(traj.q))
    ref = reference(t1, q0, qd0, traj) if reference is not None else None
    stats = {k: int(np.asarray(v)) for k, v in traj.stats.items() if k != "max_steps"}

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{name}.csv"
    _write_csv(csv_path, model, tq, q, qd, f)
    png_path = None
    if not args.no_plot:
        png_path = out / f"{name}.png"
        _plot(png_path, model, tq, q, qd, f)

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
        ),  # fmt: skip
        ("wall time", f"{wall * 1e3:.2f} ms (compiled)"),
        ("compile time", f"{max(first - wall, 0.0):.2f} s"),
        ("csv", str(csv_path)),
    ]
    if png_path is not None:
        rows.append(("png", str(png_path)))
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    return 0


def _write_csv(path, model, t, q, qd, f):
    names = (["t"] + [f"q_{c}" for c in model.coordinate_names]
             + [f"qd_{c}" for c in model.coordinate_names]
             + [f"f_{b}" for b in model.body_names])  # fmt: skip
    data = np.column_stack([t, q, qd, f])
    np.savetxt(path, data, delimiter=",", header=",".join(names), comments="", fmt="%.17g")


def _is_planar(model) -> bool:
    z = np.array([0.0, 0.0, 1.0])
    ax = np.asarray(model.axis_theta)
    offs = np.asarray(model.axis_d) * np.asarray(model.d)[:, None]
    rev = model.is_revolute
    pts = [np.asarray(r) for _, r in model.points.values()]
    return bool(
        np.all(np.abs(np.abs(ax[rev] @ z) - 1.0) < 1e-12)
        and np.all(np.abs(offs[:, 2]) < 1e-12)
        and np.all(np.abs(np.asarray(model.axis_d)[~rev, 2]) < 1e-12)
        and all(abs(r[2]) < 1e-12 for r in pts)
    )


def _plot(path, model, t, q, qd, f):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planar = _is_planar(model)
    fig, axes = plt.subplots(1, 3 if planar else 2, figsize=(15 if planar else 10, 4.2))
    for k, c in enumerate(model.coordinate_names):
        axes[0].plot(t, q[:, k], label=c)
        axes[1].plot(t, qd[:, k], label=c)
    axes[0].set(xlabel="t (s)", ylabel="q", title=f"{model.name}: generalized coordinates")
    axes[1].set(xlabel="t (s)", ylabel="q̇", title="generalized speeds")
    for a in axes[:2]:
        if model.nq <= 10:
            a.legend(fontsize=7)
    if planar:
        _draw_mechanism(axes[2], model, t, q)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _draw_mechanism(ax, model, t, q, instants: int = 4):
    import jax
    import jax.numpy as jnp

    from .kinematics import body_transforms

    idx = np.unique(np.linspace(0, len(t) - 1, instants).round().astype(int))
    poses = np.asarray(jax.jit(jax.vmap(lambda x: body_transforms(model, x)))(jnp.asarray(q[idx])))
    by_body: dict[int, list] = {}
    for _, (b, r) in model.points.items():
        by_body.setdefault(b, []).append(np.asarray(r))
    springs = [e for e in model.forces if hasattr(e, "point_a") and hasattr(e, "body_a")]
    cmap = matplotlib_colormap(len(idx))
    for n, (k, A) in enumerate(zip(idx, poses, strict=True)):
        color = cmap(n)
        world = lambda b, r: r[:2] if b < 0 else (A[b, :3, :3] @ r + A[b, :3, 3])[:2]
        for i in range(model.nb):
            o = A[i, :3, 3][:2]
            p = model.parent[i]
            start = poses[n][p, :3, 3][:2] if p >= 0 else o
            segs = [start] + [world(i, r) for r in by_body.get(i, [])]
            segs += [A[c, :3, 3][:2] for c in range(model.nb) if model.parent[c] == i]
            for s in segs[1:]:
                ax.plot([o[0], s[0]], [o[1], s[1]], "-", color=color, lw=1.5)
            if p >= 0:
                ax.plot([start[0], o[0]], [start[1], o[1]], "-", color=color, lw=1.5)
            ax.plot(*o, "o", color=color, ms=3)
        for e in springs:
            ba, bb = _force_body(model, e.body_a), _force_body(model, e.body_b)
            pa, pb = world(ba, np.asarray(e.point_a)), world(bb, np.asarray(e.point_b))
            ax.plot([pa[0], pb[0]], [pa[1], pb[1]], ":", color=color, lw=1)
        ax.plot([], [], "-", color=color, label=f"t = {t[k]:.4g} s")
    for i in range(model.nb):
        if model.parent[i] < 0:
            o = poses[0][i, :3, 3][:2]
            ax.plot(*o, "^", color="k", ms=7)
    for b, r in model.points.values():
        if b < 0:
            ax.plot(*np.asarray(r)[:2], "x", color="k", ms=6)
    ax.set_aspect("equal")
    ax.set(xlabel="x (m)", ylabel="y (m)", title="mechanism (▲ ground pivots, x ground points)")
    ax.legend(fontsize=7)


def matplotlib_colormap(n):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    return lambda k: cmap(k / max(n - 1, 1) * 0.85)


def _force_body(model, body) -> int:
    if isinstance(body, str):
        return -1 if body == "ground" else model.body_names.index(body)
    return int(body)


def _cmd_inverse_dynamics(args) -> int:
    from .gait import GaitDataError
    from .newton_euler import NewtonEulerError

    try:
        return args.func(args)
    except (GaitDataError, NewtonEulerError, OSError) as e:
        raise CliError(str(e).splitlines()[0]) from None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="jaxmb", description="jaxmb: multibody dynamics with joint maps f(q), in JAX."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the built-in models")
    sp = sub.add_parser("simulate", help="integrate a built-in model; summary, PNG and CSV")
    sp.add_argument("model", help="built-in model name (e.g. andrews, chain)")
    sp.add_argument("--t1", type=float, default=None, help="final time, s (andrews: 0.03)")
    sp.add_argument("--solver", default=None, help="tsit5, dopri5, dopri8, kvaerno5, kencarp4")
    sp.add_argument("--rtol", type=float, default=None, help="relative tolerance")
    sp.add_argument("--atol", type=float, default=None, help="absolute tolerance")
    sp.add_argument("--q0", default=None, help="initial coordinates, comma-separated")
    sp.add_argument("--qd0", default=None, help="initial speeds, comma-separated")
    sp.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    sp.add_argument("--no-plot", action="store_true", help="write the CSV only")
    sp.add_argument("--points", type=int, default=301, help="output samples (default 301)")
    sp.add_argument("--max-steps", type=int, default=100_000, help="solver step budget")
    from .gait import add_inverse_dynamics_parser

    add_inverse_dynamics_parser(sub)
    return ap


def main(argv=None) -> int:
    """Entry point of the ``jaxmb`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "models":
            return _cmd_models(args)
        if args.command == "inverse-dynamics":
            return _cmd_inverse_dynamics(args)
        if args.points < 2:
            raise CliError(f"--points must be at least 2, got {args.points}")
        return _cmd_simulate(args)
    except CliError as e:
        print(f"jaxmb: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
