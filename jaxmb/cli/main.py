"""The ``jaxmb`` command.

    jaxmb models                         list the built-in models
    jaxmb simulate andrews               integrate Andrews' squeezer: summary table, PNG and CSV
    jaxmb simulate chain --t1 2 --q0 0.1,0,0,0,0,0,0 --out runs/ --no-plot
    jaxmb simulate my_model.json         a model file (docs/model_file.md) instead of a built-in
    jaxmb save four_bar four_bar.json    write a model (built-in or file) as a model file
    jaxmb moment-arms arm26 --coordinate r_elbow_flex --range 0,2.2 --steps 45
    jaxmb benchmark chain --quick        compiled per-state times (and Pinocchio's, if installed)

``simulate`` integrates a built-in model (or a model file) from its default (or the given) initial
state with diffrax, prints a summary (final state, error against a published reference where one is
known, solver steps, compiled wall time and compile time) and writes ``<out>/<model>.csv`` (t, q, q̇
and the joint variables f(q)) and ``<out>/<model>.png`` (q and q̇ against t, and for planar models a
drawing of the mechanism at a few instants). ``moment-arms`` sweeps one coordinate and writes every
muscle's moment arm R = −∂L/∂q and length L (CSV + PNG + summary). ``benchmark`` times the compiled
equations of motion per state and writes a JSON record. Bad input ends with a one-line error and
exit status 2.
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
    from .. import models

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


def _is_file(spec: str) -> bool:
    return spec.endswith(".json") or "/" in spec or Path(spec).is_file()


def _resolve_model(spec: str):
    """``(name, model, builtin)`` for a built-in model name or a model-file path."""
    from .. import models  # noqa: F401  (x64 on)

    if _is_file(spec):
        from ..io.model_file import ModelFileError, load_model

        try:
            model = load_model(spec)
        except ModelFileError as e:
            raise CliError(" ".join(str(e).split())) from None
        return Path(spec).stem, model, False
    name = _canonical(spec)
    return name, getattr(models, name)(), True


def _defaults(name: str, model):
    """Default (q0, qd0, t1, solver, rtol, atol) and an optional reference check for a model."""
    import jax.numpy as jnp

    if name == "andrews_squeezer":
        from ..models import andrews as an

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
    q0 = np.zeros(nq)
    if name in ("four_bar", "five_bar"):  # q = 0 is outside (four_bar) or far from the assembly
        from ..models import five_bar as fb
        from ..models import four_bar as fo

        q0 = np.atleast_1d(np.asarray((fo if name == "four_bar" else fb).Q_REF, dtype=float))
    return q0, np.zeros(nq), 1.0, "tsit5", 1e-8, 1e-8, None


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
    from ..models import DESCRIPTIONS

    table = _builtin_models()
    for name in sorted(table):
        if _available(table[name]):
            print(f"{name:18s} {DESCRIPTIONS.get(name, '')}")
    print("alias: andrews -> andrews_squeezer")
    print(
        "model files: any command taking MODEL also takes a *.json model file "
        "(jaxmb save NAME FILE writes one; docs/model_file.md)"
    )
    examples = sorted((Path(__file__).parent / "data" / "models").glob("*.json"))
    if examples:
        print("example model files:")
        for path in examples:
            print(f"  {path}")
    return 0


def _cmd_simulate(args) -> int:
    import jax

    from ..model import ModelError
    from ..simulation import SOLVERS, SimulationError, simulate

    name, model, builtin = _resolve_model(args.model)
    q0d, qd0d, t1d, solverd, rtold, atold, reference = _defaults(name if builtin else "", model)
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
    run = lambda: simulate(
        model, q0, qd0, t1, ts=ts, solver=solver, rtol=rtol, atol=atol, max_steps=args.max_steps
    )
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
        ),
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
    names = (
        ["t"]
        + [f"q_{c}" for c in model.coordinate_names]
        + [f"qd_{c}" for c in model.coordinate_names]
        + [f"f_{b}" for b in model.body_names]
    )
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

    from ..kinematics import body_transforms

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
    from ..analyses import GaitDataError, NewtonEulerError

    try:
        return args.func(args)
    except (GaitDataError, NewtonEulerError, OSError) as e:
        raise CliError(str(e).splitlines()[0]) from None


def _progress(k: int, n: int, label: str) -> None:
    """A one-line text progress bar on stderr (only for runs of several steps)."""
    if n < 2:
        return
    width = 30
    done = int(width * k / n)
    end = "\n" if k >= n else ""
    sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (width - done)}] {k}/{n}{end}")
    sys.stderr.flush()


def _table(rows, header=None) -> str:
    rows = [tuple(str(c) for c in r) for r in rows]
    if header is not None:
        rows = [tuple(header)] + rows
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if header is not None:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cmd_save(args) -> int:
    from ..io.model_file import ModelFileError, save_model

    name, model, _ = _resolve_model(args.model)
    out = Path(args.file)
    if out.suffix != ".json":
        raise CliError(f"the model file must end in .json, got {str(out)!r}")
    if out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        raise CliError(f"directory {str(out.parent)!r} does not exist")
    try:
        save_model(model, out)
    except ModelFileError as e:
        raise CliError(" ".join(str(e).split())) from None
    print(
        _table(
            [
                (
                    "model",
                    f"{name} (nq = {model.nq}, bodies = {model.nb}, "
                    f"muscles = {len(model.muscle_names)})",
                ),
                ("file", f"{out} ({out.stat().st_size} bytes)"),
                ("read back", f"jaxmb simulate {out}"),
            ]
        )
    )
    return 0


def _parse_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.replace(" ", "").split(","))
    except ValueError:
        raise CliError(
            f"--range must be two comma-separated numbers LOW,HIGH, got {text!r}"
        ) from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise CliError(f"--range needs finite LOW < HIGH, got {text!r}")
    return lo, hi


def _cmd_moment_arms(args) -> int:
    import jax
    import jax.numpy as jnp

    from ..model import ModelError
    from ..muscles import lengths_and_moment_arms

    name, model, builtin = _resolve_model(args.model)
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
    lo, hi = _parse_range(args.range)
    if args.steps < 2:
        raise CliError(f"--steps must be at least 2, got {args.steps}")
    base = _parse_vector(args.q0, model.nq, "--q0")
    if base is None:
        base = _defaults(name if builtin else "", model)[0]
    cname = model.coordinate_names[k]
    xs = np.linspace(lo, hi, args.steps)
    Q = np.tile(base, (args.steps, 1))
    Q[:, k] = xs

    chunk = min(args.steps, 32)

    # lax.map, not vmap: wrapped paths branch (OpenSim's choices, early-exit iterations), and a
    # vmapped branch runs every side for every pose (see muscles.muscle_lengths)
    def row_and_lengths(q):
        L, R = lengths_and_moment_arms(model, q)
        return R[k], L

    f = jax.jit(lambda Q: jax.lax.map(row_and_lengths, Q))
    R, L = [], []
    t0 = time.perf_counter()
    n_chunks = -(-args.steps // chunk)
    for c in range(n_chunks):
        part = Q[c * chunk : (c + 1) * chunk]
        pad = np.concatenate([part, np.repeat(part[-1:], chunk - len(part), 0)])
        r, length = jax.block_until_ready(f(jnp.asarray(pad)))
        R.append(np.asarray(r)[: len(part)])
        L.append(np.asarray(length)[: len(part)])
        _progress(c + 1, n_chunks, f"moment arms of {len(model.muscle_names)} muscles")
    R, L = np.concatenate(R), np.concatenate(L)
    wall = time.perf_counter() - t0
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(L))):
        bad = xs[np.flatnonzero(~np.all(np.isfinite(R) & np.isfinite(L), axis=1))[0]]
        raise CliError(f"non-finite moment arm or length at {cname} = {bad:g}")

    out = Path(args.out)
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
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
        for j, m in enumerate(names):
            ax[0].plot(xs, R[:, j] * 1e3, label=m)
            ax[1].plot(xs, L[:, j], label=m)
        ax[0].axhline(0.0, color="k", lw=0.5)
        ax[0].set(
            xlabel=cname,
            ylabel="moment arm R = −∂L/∂q (mm per unit of q)",
            title=f"{model.name}: moment arms about {cname}",
        )
        ax[1].set(xlabel=cname, ylabel="musculotendon length L (m)", title="lengths")
        if len(names) <= 20:
            ax[0].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        png_path = out / f"{name}_moment_arms_{cname}.png"
        fig.savefig(png_path, dpi=110)
        plt.close(fig)
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
        _table(
            rows,
            ("muscle", "min R (mm)", "max R (mm)", f"{cname} at max|R|", "min L (m)", "max L (m)"),
        )
    )
    print()
    print(
        _table(
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


def _pinocchio_twin(model):
    """Pinocchio's model of a jaxmb tree of revolute joints with f = q about x, y or z (chain)."""
    import pinocchio as pin

    from ..joint_maps import LinearMap

    jm = model.joint_map
    if not (
        isinstance(jm, LinearMap)
        and np.array_equal(np.asarray(jm.A), np.eye(model.nb))
        and not np.asarray(jm.b).any()
        and all(t == "revolute" for t in model.joint_type)
    ):
        return None
    pm = pin.Model()
    joint_of = {
        (1, 0, 0): pin.JointModelRX,
        (0, 1, 0): pin.JointModelRY,
        (0, 0, 1): pin.JointModelRZ,
    }
    ids = []
    for i in range(model.nb):
        ax = tuple(int(v) for v in np.asarray(model.axis_theta[i]))
        if ax not in joint_of or not np.array_equal(np.asarray(model.axis_theta[i]), ax):
            return None
        r = np.asarray(model.axis_d[i]) * float(model.d[i])
        parent = 0 if model.parent[i] < 0 else ids[model.parent[i]]
        jid = pm.addJoint(parent, joint_of[ax](), pin.SE3(np.eye(3), r), model.body_names[i])
        pm.appendBodyToJoint(
            jid,
            pin.Inertia(
                float(model.mass[i]), np.asarray(model.com[i]), np.asarray(model.inertia[i])
            ),
            pin.SE3.Identity(),
        )
        ids.append(jid)
    pm.gravity = pin.Motion(np.asarray(model.gravity), np.zeros(3))
    return pm


def _time(fn, repeat: int, label: str) -> tuple[float, float]:
    """(compile + first call, median of ``repeat`` compiled calls), seconds."""
    import jax

    t = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t
    times = []
    for r in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
        _progress(r + 1, repeat, label)
    return first, float(np.median(times))


def _cmd_benchmark(args) -> int:
    import datetime
    import json
    import os
    import platform

    import jax
    import jax.numpy as jnp

    from ..dynamics import bias_forces, forward_dynamics, gravity_forces, mass_matrix

    if args.batch < 1 or args.repeat < 1:
        raise CliError(f"--batch and --repeat must be positive, got {args.batch}, {args.repeat}")
    name, model, builtin = _resolve_model(args.model)
    B, repeat = (
        (min(args.batch, 16), min(args.repeat, 5)) if args.quick else (args.batch, args.repeat)
    )
    rng = np.random.default_rng(0)
    q0 = _defaults(name if builtin else "", model)[0]
    scale = 0.05 if name in ("four_bar", "five_bar", "andrews_squeezer") else 0.5
    Q = jnp.asarray(q0 + scale * rng.uniform(-1, 1, (B, model.nq)))
    QD = jnp.asarray(rng.normal(size=(B, model.nq)))
    eom = jax.jit(
        jax.vmap(
            lambda q, qd: (
                mass_matrix(model, q),
                bias_forces(model, q, qd),
                gravity_forces(model, q),
            )
        )
    )
    fd = jax.jit(jax.vmap(lambda q, qd: forward_dynamics(model, q, qd)))
    c_eom, t_eom = _time(lambda: eom(Q, QD), repeat, "M + N q̇ + G")
    c_fd, t_fd = _time(lambda: fd(Q, QD), repeat, "forward dynamics")
    res = {
        "model": name,
        "nq": model.nq,
        "bodies": model.nb,
        "batch": B,
        "repeat": repeat,
        "eom_per_state_us": t_eom / B * 1e6,
        "forward_dynamics_per_state_us": t_fd / B * 1e6,
        "eom_compile_s": max(c_eom - t_eom, 0.0),
        "forward_dynamics_compile_s": max(c_fd - t_fd, 0.0),
    }
    rows = [
        ("M + N q̇ + G", f"{res['eom_per_state_us']:.2f}"),
        ("forward dynamics q̈", f"{res['forward_dynamics_per_state_us']:.2f}"),
    ]
    peer = "-"
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    pm = _pinocchio_twin(model) if pin is not None else None
    if pm is not None:
        data = pm.createData()
        qs, qds = np.asarray(Q), np.asarray(QD)
        M0 = np.asarray(eom(Q, QD)[0][0])
        Mp = pin.crba(pm, data, qs[0]).copy()
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        res["pinocchio_mass_matrix_max_abs_diff"] = float(np.max(np.abs(Mp - M0)))

        def pin_eom():
            for q, v in zip(qs, qds, strict=True):
                pin.crba(pm, data, q)
                pin.rnea(pm, data, q, v, np.zeros_like(v))

        def pin_fd():
            for q, v in zip(qs, qds, strict=True):
                pin.aba(pm, data, q, v, np.zeros_like(v))

        _, tp_eom = _time(pin_eom, repeat, "Pinocchio crba + rnea")
        _, tp_fd = _time(pin_fd, repeat, "Pinocchio aba")
        res["pinocchio_eom_per_state_us"] = tp_eom / B * 1e6
        res["pinocchio_forward_dynamics_per_state_us"] = tp_fd / B * 1e6
        peer = f"Pinocchio {pin.__version__} (Python loop over states)"
        rows = [
            (r[0], r[1], f"{p:.2f}", f"{float(r[1]) / p:.2f}")
            for r, p in zip(
                rows,
                (res["pinocchio_eom_per_state_us"], res["pinocchio_forward_dynamics_per_state_us"]),
                strict=True,
            )
        ]
    else:
        rows = [(r[0], r[1], "-", "-") for r in rows]
    if name == "andrews_squeezer" or args.andrews:
        rows += _andrews_ode_dae(res, B, repeat)
    res.update(
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        machine={
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "jax_devices": [str(d) for d in jax.devices()],
        },
        versions={
            "python": platform.python_version(),
            "jax": jax.__version__,
            "numpy": np.__version__,
            "pinocchio": pin.__version__ if pin else None,
        },
        load_average=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"benchmark_{name}.json"
    path.write_text(json.dumps(res, indent=2) + "\n")
    print(_table(rows, ("quantity", "jaxmb (µs/state)", "peer (µs/state)", "ratio")))
    print()
    print(
        _table(
            [
                ("model", f"{name} (nq = {model.nq}, bodies = {model.nb})"),
                ("states", f"{B} per batch (vmap, jit), median of {repeat} runs, compiled"),
                ("peer", peer),
                (
                    "compile",
                    f"{res['eom_compile_s']:.2f} s (M + N q̇ + G), "
                    f"{res['forward_dynamics_compile_s']:.2f} s (q̈)",
                ),
                ("load average", " ".join(f"{v:.2f}" for v in res["load_average"] or [])),
                ("json", str(path)),
            ]
        )
    )
    return 0


def _andrews_ode_dae(res: dict, B: int, repeat: int):
    """One right-hand side of Andrews' squeezer two ways: the embedded 1-DOF ODE (q̈ of jaxmb)
    and the test set's 7-coordinate index-1 DAE (the KKT system [M Gᵀ; G 0] [ÿ; λ] =
    [f; −g_qq]), per state; their ratio is a quick proxy of the ODE/DAE cost per step."""
    import jax
    import jax.numpy as jnp

    from ..dynamics import forward_dynamics
    from ..models import andrews as an

    model = an.andrews_squeezer()
    p = an.andrews_data()["p"]
    rng = np.random.default_rng(1)
    beta = jnp.asarray(an.BETA0 + rng.uniform(-0.5, 0.5, (B, 1)))
    bd = jnp.asarray(rng.normal(size=(B, 1)))
    f = jax.jit(jax.vmap(model.joint_map))(beta)
    y = an.to_test_set(f)
    J = jax.jit(jax.vmap(jax.jacfwd(model.joint_map)))(beta)
    yd = an.to_test_set(J[:, :, 0] * bd)

    def kkt(y, yd):
        M = an.dae_mass_matrix(p, y)
        G = an.dae_constraint_jacobian(p, y)
        A = jnp.block([[M, G.T], [G, jnp.zeros((6, 6), M.dtype)]])
        rhs = jnp.concatenate([an.dae_forces(p, y, yd), -an.dae_gqq(p, y, yd)])
        return jnp.linalg.solve(A, rhs)[:7]

    ode = jax.jit(jax.vmap(lambda q, qd: forward_dynamics(model, q, qd)))
    dae = jax.jit(jax.vmap(kkt))
    _, t_ode = _time(lambda: ode(beta, bd), repeat, "Andrews ODE right-hand side")
    _, t_dae = _time(lambda: dae(y, yd), repeat, "Andrews DAE right-hand side")
    res["andrews_ode_rhs_per_state_us"] = t_ode / B * 1e6
    res["andrews_dae_rhs_per_state_us"] = t_dae / B * 1e6
    return [
        (
            "Andrews RHS: ODE (1 DOF) vs DAE (7+6 KKT)",
            f"{t_ode / B * 1e6:.2f}",
            f"{t_dae / B * 1e6:.2f}",
            f"{t_ode / t_dae:.2f}",
        )
    ]


_EPILOG = """examples:
  jaxmb models                                   the built-in models, one line each
  jaxmb simulate andrews                         Andrews' squeezer against the published solution
  jaxmb simulate chain --t1 2 --q0 0.1,0,0,0,0,0,0 --out runs/
  jaxmb save five_bar five_bar.json              a built-in as a model file (docs/model_file.md)
  jaxmb simulate five_bar.json --t1 0.5          ... and simulated from the file
  jaxmb moment-arms arm26 --coordinate r_elbow_flex --range 0,2.2
  jaxmb benchmark chain --quick                  compiled per-state times vs Pinocchio
  jaxmb inverse-dynamics winter                  Winter's gait tables, Newton-Euler

MODEL is a built-in name (jaxmb models) or the path of a model file (*.json). Outputs go to
--out (default jaxmb_out/). Exit status 0 on success, 2 with a one-line error on bad input.
"""


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(
        prog="jaxmb",
        description="jaxmb: multibody dynamics with joint maps f(q), in JAX.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("models", help="list the built-in models")
    sp = sub.add_parser(
        "simulate",
        help="integrate a model (built-in or file); summary, PNG and CSV",
        description="Integrate M q̈ + N q̇ = G + Q from an initial state with diffrax; print a "
        "summary and write <out>/<model>.csv and .png.",
        epilog="examples:\n  jaxmb simulate andrews\n  jaxmb simulate chain --t1 2 --solver "
        "dopri8 --rtol 1e-10 --atol 1e-10\n  jaxmb simulate my_model.json --q0 0.3 --no-plot",
        formatter_class=fmt,
    )
    sp.add_argument("model", help="built-in model name (e.g. andrews, chain) or a model file")
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

    sv = sub.add_parser(
        "save",
        help="write a model (built-in or file) as a jaxmb model file",
        description="Write MODEL as a versioned JSON model file (reference: docs/model_file.md). "
        "Reading it back gives the same model, bit for bit.",
        epilog="example:\n  jaxmb save four_bar four_bar.json && jaxmb simulate four_bar.json",
        formatter_class=fmt,
    )
    sv.add_argument("model", help="built-in model name or model file")
    sv.add_argument("file", help="the model file to write (*.json)")
    sv.add_argument("--force", action="store_true", help="overwrite an existing file")

    ma = sub.add_parser(
        "moment-arms",
        help="sweep one coordinate: every muscle's moment arm and length; CSV, PNG, table",
        description="Moment arms R = −∂L/∂q by the closed form of the seed (Eq. 193) and "
        "musculotendon lengths L of every muscle while one coordinate sweeps a range and the "
        "others stay at --q0. Writes <out>/<model>_moment_arms_<coordinate>.csv and .png.",
        epilog="example:\n  jaxmb moment-arms arm26 --coordinate r_elbow_flex --range 0,2.2 "
        "--steps 45",
        formatter_class=fmt,
    )
    ma.add_argument("model", help="a model with muscles (built-in name or model file)")
    ma.add_argument("--coordinate", default=None, help="name or index (default: the first)")
    ma.add_argument("--range", default="-1,1", help="LOW,HIGH of the sweep (rad or m)")
    ma.add_argument("--steps", type=int, default=61, help="points of the sweep (default 61)")
    ma.add_argument("--q0", default=None, help="the other coordinates, comma-separated (all nq)")
    ma.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    ma.add_argument("--no-plot", action="store_true", help="write the CSV only")

    bm = sub.add_parser(
        "benchmark",
        help="compiled per-state time of M + N q̇ + G and q̈ (vs Pinocchio when installed)",
        description="Times the compiled (jit + vmap) equations of motion and forward dynamics "
        "per state, against Pinocchio for chains of x/y/z hinges, and for Andrews' squeezer the "
        "embedded ODE's right-hand side against the 7-coordinate DAE's. Prints a table and "
        "writes <out>/benchmark_<model>.json (machine, versions, date, load average).",
        epilog="examples:\n  jaxmb benchmark chain --quick\n  jaxmb benchmark andrews --batch "
        "256 --repeat 50",
        formatter_class=fmt,
    )
    bm.add_argument("model", nargs="?", default="chain", help="built-in or file (default chain)")
    bm.add_argument("--batch", type=int, default=256, help="states per batch (default 256)")
    bm.add_argument("--repeat", type=int, default=30, help="timed runs (default 30)")
    bm.add_argument("--quick", action="store_true", help="16 states, 5 runs")
    bm.add_argument("--andrews", action="store_true", help="add the Andrews ODE/DAE comparison")
    bm.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    from ..analyses import add_inverse_dynamics_parser

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
        if args.command == "save":
            return _cmd_save(args)
        if args.command == "moment-arms":
            return _cmd_moment_arms(args)
        if args.command == "benchmark":
            return _cmd_benchmark(args)
        if args.points < 2:
            raise CliError(f"--points must be at least 2, got {args.points}")
        return _cmd_simulate(args)
    except CliError as e:
        print(f"jaxmb: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
