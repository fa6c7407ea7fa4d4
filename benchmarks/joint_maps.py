"""Per-state cost of ∇f and H of the five-bar's implicit joint map by each backend.

Backends (``jaxmb.joint_gradients`` / ``joint_hessians``): ``autodiff`` (jacfwd through the
implicit-function JVP), ``projection`` (Eqs. 101–120), ``molecule`` (central differences, 9 Newton
solves), ``premodel`` (tensor-product spline fitted once over [−π, π]², 65×65 knots; fitting time
reported apart), plus ``ImplicitMap.derivatives`` (one Newton solve, one LU shared by ∇f and H:
what the kinematics and dynamics call). Batch 1 and 1024 (vmap inside jit), compiled steady state,
float64. Each backend's time is printed as a ratio to ``autodiff`` in the same run; the max
relative error against ``autodiff`` is recorded too.

Run: ``python benchmarks/joint_maps.py [--quick]``; writes ``benchmarks/results/joint_maps.json``.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import compile_seconds, metadata, save_results, timeit_compiled

import jaxmb as mb
from jaxmb.joint_maps import premodel
from jaxmb.models.five_bar import five_bar


def time_both(fn, qs, repeats):
    """(median, min) seconds of one compiled call in steady state (min: less load noise)."""
    med = timeit_compiled(fn, qs, repeats=repeats)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(qs))
        samples.append(time.perf_counter() - t0)
    return med, min(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
    args = ap.parse_args()
    repeats = 3 if args.quick else 30

    model = five_bar()
    jm = model.joint_map
    t0 = time.perf_counter()
    pm = premodel(jm, [(-np.pi, np.pi), (-np.pi, np.pi)], 65)
    fit_s = time.perf_counter() - t0

    backends = {
        "autodiff": dict(method="autodiff"),
        "projection": dict(method="projection"),
        "molecule": dict(method="molecule"),
        "premodel": dict(method="premodel", premodel_map=pm),
    }
    rng = np.random.default_rng(0)
    results = {"backends": {}, "premodel_fit_seconds": fit_s, "premodel_knots": [65, 65]}
    for batch in (1, 1024):
        qs = jnp.asarray(rng.uniform(-3.0, 3.0, (batch, 2)))
        ref_J = jax.jit(jax.vmap(lambda q: mb.joint_gradients(model, q)))(qs)
        ref_H = jax.jit(jax.vmap(lambda q: mb.joint_hessians(model, q)))(qs)
        rows = {}
        fns = {}
        for name, kw in backends.items():
            hJ = {"h": 1e-5} if name == "molecule" else {}
            hH = {"h": 1e-4} if name == "molecule" else {}
            fns[name] = (
                jax.jit(jax.vmap(lambda q, kw=kw, hJ=hJ: mb.joint_gradients(model, q, **kw, **hJ))),
                jax.jit(jax.vmap(lambda q, kw=kw, hH=hH: mb.joint_hessians(model, q, **kw, **hH))),
            )
        fns["shared_lu"] = (
            jax.jit(jax.vmap(lambda q: jm.derivatives(q)[1])),
            jax.jit(jax.vmap(lambda q: jm.derivatives(q)[2])),
        )
        for name, (fJ, fH) in fns.items():
            cJ, cH = compile_seconds(fJ, qs), compile_seconds(fH, qs)
            tJ, tJmin = time_both(fJ, qs, repeats)
            tH, tHmin = time_both(fH, qs, repeats)
            eJ = float(jnp.abs(fJ(qs) - ref_J).max() / jnp.abs(ref_J).max())
            eH = float(jnp.abs(fH(qs) - ref_H).max() / jnp.abs(ref_H).max())
            rows[name] = {
                "grad_seconds_per_state": tJ / batch,
                "hess_seconds_per_state": tH / batch,
                "grad_seconds_per_state_min": tJmin / batch,
                "hess_seconds_per_state_min": tHmin / batch,
                "grad_compile_seconds": cJ,
                "hess_compile_seconds": cH,
                "grad_max_rel_error_vs_autodiff": eJ,
                "hess_max_rel_error_vs_autodiff": eH,
            }
        base = rows["autodiff"]
        print(f"\nbatch {batch}: µs per state, median / min; ratio = median / autodiff median")
        print(
            f"{'backend':12s} {'∇f':>15s} {'ratio':>7s} {'H':>15s} {'ratio':>7s}"
            f" {'err ∇f':>9s} {'err H':>9s}"
        )
        for name, r in rows.items():
            for k in ("grad", "hess"):
                r[f"{k}_ratio_to_autodiff"] = (
                    r[f"{k}_seconds_per_state"] / base[f"{k}_seconds_per_state"]
                )
            us = {}
            for k in ("grad", "hess"):
                med, mn = 1e6 * r[f"{k}_seconds_per_state"], 1e6 * r[f"{k}_seconds_per_state_min"]
                us[k] = f"{med:7.2f}/{mn:<7.2f}"
            print(
                f"{name:12s} {us['grad']:>15s} {r['grad_ratio_to_autodiff']:7.2f} "
                f"{us['hess']:>15s} {r['hess_ratio_to_autodiff']:7.2f} "
                f"{r['grad_max_rel_error_vs_autodiff']:9.1e} "
                f"{r['hess_max_rel_error_vs_autodiff']:9.1e}"
            )
        results["backends"][f"batch_{batch}"] = rows
    out = save_results(
        "joint_maps",
        {
            **metadata(
                model="five_bar",
                batch=[1, 1024],
                newton_iterations=jm.iterations,
                quick=args.quick,
                note="compiled steady state (median, and min over the same number of samples), "
                "vmap inside jit; compile time apart; the 2-core host was shared (see load)",
            ),
            **results,
        },
    )
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
