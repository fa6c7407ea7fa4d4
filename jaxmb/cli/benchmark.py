"""``jaxmb benchmark MODEL``: compiled (jit + vmap) per-state time of M + N q̇ + G and of q̈, against
Pinocchio (when installed) for models with f = q, and for Andrews' squeezer the embedded ODE's
right-hand side against the test set's 7-coordinate DAE; a table and a JSON record."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics import bias_forces, forward_dynamics, gravity_forces, mass_matrix
from ..io import pinocchio as pin_export
from ..models import andrews as an
from .common import CliError, default_run, output_dir, progress, resolve_model, table

__all__ = ["add_parser", "run", "time_compiled"]


def add_parser(subparsers):
    """Register ``benchmark`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "benchmark",
        help="compiled per-state time of M + N q̇ + G and q̈ (vs Pinocchio when installed)",
        description="Times the compiled (jit + vmap) equations of motion and forward dynamics "
        "per state, against Pinocchio for chains of x/y/z hinges, and for Andrews' squeezer the "
        "embedded ODE's right-hand side against the 7-coordinate DAE's. Prints a table and "
        "writes <out>/benchmark_<model>.json (machine, versions, date, load average).",
        epilog="examples:\n  jaxmb benchmark chain --quick\n  jaxmb benchmark andrews --batch "
        "256 --repeat 50",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", nargs="?", default="chain", help="built-in or file (default chain)")
    p.add_argument("--batch", type=int, default=256, help="states per batch (default 256)")
    p.add_argument("--repeat", type=int, default=30, help="timed runs (default 30)")
    p.add_argument("--quick", action="store_true", help="16 states, 5 runs")
    p.add_argument("--andrews", action="store_true", help="add the Andrews ODE/DAE comparison")
    p.add_argument("--out", default="jaxmb_out", help="output directory (default jaxmb_out/)")
    p.set_defaults(func=run)
    return p


def time_compiled(fn, repeat: int, label: str) -> tuple[float, float]:
    """(compile + first call, median of ``repeat`` compiled calls), seconds."""
    t = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t
    times = []
    for r in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
        progress(r + 1, repeat, label)
    return first, float(np.median(times))


def _import_pinocchio():
    """Pinocchio, or None when it is not installed (the peer columns then stay empty)."""
    try:
        import pinocchio
    except ImportError:
        return None
    return pinocchio


def _pinocchio_twin(model):
    """Pinocchio's model of ``model`` when its configuration is jaxmb's q (f = q, bodies already
    in depth-first order), else None: only then are per-state times comparable."""
    if not (
        pin_export.is_identity_map(model)
        and pin_export.depth_first_order(model.parent) == list(range(model.nb))
    ):
        return None
    return pin_export.to_pinocchio(model)


def _pinocchio_rows(pin, pm, res, rows, eom, Q, QD, B, repeat):
    """Time Pinocchio's crba + rnea and aba on the same states (a Python loop over states)."""
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

    _, tp_eom = time_compiled(pin_eom, repeat, "Pinocchio crba + rnea")
    _, tp_fd = time_compiled(pin_fd, repeat, "Pinocchio aba")
    res["pinocchio_eom_per_state_us"] = tp_eom / B * 1e6
    res["pinocchio_forward_dynamics_per_state_us"] = tp_fd / B * 1e6
    return [
        (r[0], r[1], f"{p:.2f}", f"{float(r[1]) / p:.2f}")
        for r, p in zip(
            rows,
            (res["pinocchio_eom_per_state_us"], res["pinocchio_forward_dynamics_per_state_us"]),
            strict=True,
        )
    ]


def _andrews_ode_dae(res: dict, B: int, repeat: int):
    """One right-hand side of Andrews' squeezer two ways: the embedded 1-DOF ODE (q̈ of jaxmb)
    and the test set's 7-coordinate index-1 DAE (:func:`jaxmb.models.andrews.dae_acceleration`),
    per state; their ratio is a quick proxy of the ODE/DAE cost per step."""
    model = an.andrews_squeezer()
    p = an.andrews_data()["p"]
    rng = np.random.default_rng(1)
    beta = jnp.asarray(an.BETA0 + rng.uniform(-0.5, 0.5, (B, 1)))
    bd = jnp.asarray(rng.normal(size=(B, 1)))
    f = jax.jit(jax.vmap(model.joint_map))(beta)
    y = an.to_test_set(f)
    J = jax.jit(jax.vmap(jax.jacfwd(model.joint_map)))(beta)
    yd = an.to_test_set(J[:, :, 0] * bd)

    ode = jax.jit(jax.vmap(lambda q, qd: forward_dynamics(model, q, qd)))
    dae = jax.jit(jax.vmap(lambda y, yd: an.dae_acceleration(p, y, yd)))
    _, t_ode = time_compiled(lambda: ode(beta, bd), repeat, "Andrews ODE right-hand side")
    _, t_dae = time_compiled(lambda: dae(y, yd), repeat, "Andrews DAE right-hand side")
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


def run(args) -> int:
    if args.batch < 1 or args.repeat < 1:
        raise CliError(f"--batch and --repeat must be positive, got {args.batch}, {args.repeat}")
    out = output_dir(args.out)
    name, model, builtin = resolve_model(args.model)
    B, repeat = (
        (min(args.batch, 16), min(args.repeat, 5)) if args.quick else (args.batch, args.repeat)
    )
    rng = np.random.default_rng(0)
    q0 = default_run(name if builtin else "", model)[0]
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
    c_eom, t_eom = time_compiled(lambda: eom(Q, QD), repeat, "M + N q̇ + G")
    c_fd, t_fd = time_compiled(lambda: fd(Q, QD), repeat, "forward dynamics")
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
    pin = _import_pinocchio()
    pm = _pinocchio_twin(model) if pin is not None else None
    if pm is not None:
        rows = _pinocchio_rows(pin, pm, res, rows, eom, Q, QD, B, repeat)
        peer = f"Pinocchio {pin.__version__} (Python loop over states)"
    else:
        # say why the peer columns are empty
        peer = (
            "none: Pinocchio is not installed (pip install pin) — the peer columns stay empty"
            if pin is None
            else f"none: Pinocchio {pin.__version__} has no twin of this model (only open chains"
            " with f(q) = q in depth-first body order) — the peer columns stay empty"
        )
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
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"benchmark_{name}.json"
    path.write_text(json.dumps(res, indent=2) + "\n")
    print(table(rows, ("quantity", "jaxmb (µs/state)", "peer (µs/state)", "ratio")))
    print()
    print(
        table(
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
