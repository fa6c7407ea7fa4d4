"""Closed-form D_i, D'_i against plain autodiff: per-state time versus the number of coordinates.

Model: the reference chain of DESIGN.md with 12 revolute joints (``jaxmb.models.chain(12)``
geometry and inertia), whose 12 joint variables are driven by nq = 1, 3, 6, 12 generalized
coordinates through a fixed random nonlinear joint map
``f(q) = A q + b + c ⊙ sin(P q) + e ⊙ (Q q)²`` (numpy seed 0, the form of
``tests/strategies.random_coupling``).

Compared, at every nq, on the same model and the same states, as functions q ↦ outputs:

* ``closed_form`` — ``jaxmb.kinematics`` closed form: first order ``kinematics(model, q,
  second_order=False)`` → (A, ∂A/∂q); second order ``transform_derivatives(model, q)`` →
  (A, ∂A/∂q, ∂²A/∂q²), i.e. every D_i and D'_i (tensor form; the seed's Kronecker arrangement is a
  reshape of it).
* ``autodiff`` — ``jax.jacfwd(body_transforms)`` and ``jax.jacfwd(jax.jacfwd(body_transforms))``
  with the same outputs.

Batch 1 (``jit(fn)``) and batch 1024 (``jit(vmap(fn))``), float64, compiled steady state (median
of repeated calls after warm-up, ``block_until_ready``); compile time is measured apart
(``lower().compile()``). Writes ``benchmarks/results/kinematics.json`` and ``kinematics.png``.

Run: ``python benchmarks/kinematics.py`` (a few minutes on 2 cores; ``--quick`` for a smoke run).
The recorded results were taken on a 2-core machine shared with other jobs, single-threaded:
``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"`` (the flags are
saved in the JSON); on a busy host, compare the ratios, which are measured in alternation.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

# run from a checkout without installing: the repository root and this folder on the path
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]
from _common import (  # noqa: E402
    RESULTS,
    compile_seconds,
    metadata,
    save_results,
    timeit_interleaved,
)

import jaxmb as mb  # noqa: E402
from jaxmb.kinematics import kinematics  # noqa: E402
from jaxmb.models.chain import chain  # noqa: E402

NB = 12
NQS = (1, 3, 6, 12)
BATCHES = (1, 1024)


def coupled_chain(nq: int, seed: int = 0) -> mb.Model:
    """chain(12) with its identity map replaced by a random smooth map of nq coordinates."""
    rng = np.random.default_rng(seed)
    params = {
        "A": jnp.asarray(rng.normal(size=(NB, nq))),
        "b": jnp.asarray(rng.normal(size=NB) * 0.3),
        "c": jnp.asarray(rng.normal(size=NB) * 0.5),
        "P": jnp.asarray(rng.normal(size=(NB, nq))),
        "e": jnp.asarray(rng.normal(size=NB) * 0.3),
        "Q": jnp.asarray(rng.normal(size=(NB, nq))),
    }

    def fn(q, p):
        return p["A"] @ q + p["b"] + p["c"] * jnp.sin(p["P"] @ q) + p["e"] * (p["Q"] @ q) ** 2

    return dataclasses.replace(
        chain(NB),
        joint_map=mb.ExplicitMap(fn, nq, NB, params),
        coordinate_names=tuple(f"q{k}" for k in range(nq)),
        name=f"chain{NB}_coupled_nq{nq}",
    )


def methods(model):
    bt = lambda q: mb.body_transforms(model, q)

    def closed_1(q):
        k = kinematics(model, q, second_order=False)
        return k.A, k.dA

    def closed_2(q):
        return mb.transform_derivatives(model, q)

    def auto_1(q):
        return bt(q), jax.jacfwd(bt)(q)

    def auto_2(q):
        return bt(q), jax.jacfwd(bt)(q), jax.jacfwd(jax.jacfwd(bt))(q)

    return {
        ("closed_form", "first"): closed_1,
        ("autodiff", "first"): auto_1,
        ("closed_form", "second"): closed_2,
        ("autodiff", "second"): auto_2,
    }


def fit_exponent(nqs, times):
    """Least-squares slope of log(time) against log(nq): time ∝ nq^slope."""
    return float(np.polyfit(np.log(nqs), np.log(times), 1)[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats, no files written")
    ap.add_argument("--replot", action="store_true", help="redraw the PNG from the saved JSON")
    args = ap.parse_args(argv)
    if args.replot:
        with open(RESULTS / "kinematics.json") as fh:
            plot(json.load(fh)["summary"], RESULTS / "kinematics.png")
        return
    repeats = 3 if args.quick else 15
    meta_start = metadata()  # machine load at the start
    rows = []
    max_rel_diff = [0.0]
    t_start = time.perf_counter()
    for nq in NQS:
        model = coupled_chain(nq)
        rng = np.random.default_rng(100 + nq)
        qs = jnp.asarray(rng.normal(size=(max(BATCHES), nq)))
        fns = methods(model)
        outputs = {}
        for order in ("first", "second"):
            for batch in BATCHES:
                x = qs[0] if batch == 1 else qs[:batch]
                pair = {}
                for method in ("closed_form", "autodiff"):
                    fn = fns[(method, order)]
                    f = jax.jit(fn) if batch == 1 else jax.jit(jax.vmap(fn))
                    pair[method] = (f, compile_seconds(f, x))
                # the two methods are timed in alternation, so that the shared machine's load
                # falls on both alike; the ratio is the median of the per-round ratios
                samples = timeit_interleaved(
                    [pair["closed_form"][0], pair["autodiff"][0]],
                    x,
                    repeats=repeats if batch == 1 else max(3, repeats // 2),
                    number=20 if batch == 1 else 1,
                )
                ratio = statistics.median(a / c for c, a in zip(*samples, strict=True))
                for method, smp in zip(("closed_form", "autodiff"), samples, strict=True):
                    f, tc = pair[method]
                    outputs[(method, order, batch)] = f(x)
                    t = statistics.median(smp)
                    rows.append(
                        dict(
                            nq=nq,
                            method=method,
                            order=order,
                            batch=batch,
                            seconds_per_call=t,
                            seconds_per_state=t / batch,
                            min_seconds_per_state=min(smp) / batch,
                            compile_seconds=tc,
                            median_round_ratio_autodiff_over_closed=ratio,
                        )
                    )
                    print(
                        f"nq={nq:2d} {order:6s} {method:11s} batch={batch:4d}: "
                        f"{t / batch * 1e6:10.2f} µs/state (compile {tc:5.2f} s)",
                        flush=True,
                    )
                print(f"{'':14s}autodiff / closed form = {ratio:.2f} (median of rounds)")
        # the two routes agree on every output (the tests check this on random trees to 1e-10)
        for order in ("first", "second"):
            for batch in BATCHES:
                ref = outputs[("autodiff", order, batch)]
                got = outputs[("closed_form", order, batch)]
                for r, g in zip(ref, got, strict=True):
                    err = float(jnp.max(jnp.abs(r - g)) / max(1.0, float(jnp.max(jnp.abs(r)))))
                    assert err < 1e-10, f"nq={nq}: closed form differs from autodiff by {err:.1e}"
                    max_rel_diff[0] = max(max_rel_diff[0], err)

    def per_state(method, order, batch):
        return [
            next(
                r["seconds_per_state"]
                for r in rows
                if (r["nq"], r["method"], r["order"], r["batch"]) == (nq, method, order, batch)
            )
            for nq in NQS
        ]

    def ratios(order, batch):
        return [
            next(
                r["median_round_ratio_autodiff_over_closed"]
                for r in rows
                if (r["nq"], r["order"], r["batch"]) == (nq, order, batch)
            )
            for nq in NQS
        ]

    summary = []
    lines = [
        "",
        f"Per-state time (µs), chain of {NB} bodies, coupled joint map, float64, "
        f"{jax.default_backend()}",
        f"{'order':7s}{'batch':>6s} | "
        + " | ".join(f"nq={nq:<2d} closed / autodiff = ratio" for nq in NQS)
        + " | exponent closed / autodiff",
    ]
    for order in ("first", "second"):
        for batch in BATCHES:
            c = per_state("closed_form", order, batch)
            a = per_state("autodiff", order, batch)
            ec, ea = fit_exponent(NQS, c), fit_exponent(NQS, a)
            summary.append(
                dict(
                    order=order,
                    batch=batch,
                    nq=list(NQS),
                    closed_form_us=[x * 1e6 for x in c],
                    autodiff_us=[x * 1e6 for x in a],
                    ratio_autodiff_over_closed_form=ratios(order, batch),
                    exponent_closed_form=ec,
                    exponent_autodiff=ea,
                )
            )
            cells = " | ".join(
                f"{x * 1e6:8.2f} / {y * 1e6:8.2f} = {r:5.2f}x"
                for x, y, r in zip(c, a, ratios(order, batch), strict=True)
            )
            lines.append(f"{order:7s}{batch:6d} | {cells} | {ec:5.2f} / {ea:5.2f}")
    print("\n".join(lines))
    wall = time.perf_counter() - t_start
    print(f"\ntotal {wall:.0f} s")
    if args.quick:
        return
    result = dict(
        benchmark="kinematics: closed-form D_i, D'_i vs autodiff of body_transforms",
        meta=dict(
            meta_start,
            batch_sizes=list(BATCHES),
            repeats=repeats,
            timing=(
                "closed form and autodiff sampled in alternation (timeit_interleaved); median of "
                "15 rounds of 20 calls at batch 1, of 7 rounds of 1 call at batch 1024; ratio = "
                "median over rounds of autodiff/closed-form"
            ),
            total_wall_seconds=wall,
            load_average_at_end=list(os.getloadavg()),
            max_relative_difference_closed_form_vs_autodiff=max_rel_diff[0],
        ),
        model=dict(
            description=(
                f"jaxmb.models.chain({NB}) (DESIGN.md reference chain: revolute joints about "
                "x, y, z cycling, 0.3 m links) whose 12 joint variables are "
                "f(q) = A q + b + c*sin(P q) + e*(Q q)**2 of nq coordinates"
            ),
            coupling_seed=0,
            coupling_scales=dict(A=1.0, b=0.3, c=0.5, P=1.0, e=0.3, Q=1.0),
            nb=NB,
            nq=list(NQS),
            states="standard normal q, numpy seed 100 + nq",
        ),
        methods=dict(
            closed_form_first="kinematics(model, q, second_order=False) -> A, dA",
            closed_form_second="transform_derivatives(model, q) -> A, dA, ddA (D_i, D'_i)",
            autodiff_first="body_transforms, jax.jacfwd(body_transforms)",
            autodiff_second="... and jax.jacfwd(jax.jacfwd(body_transforms))",
        ),
        rows=rows,
        summary=summary,
        table="\n".join(lines),
    )
    path = save_results("kinematics", result)
    plot(summary, RESULTS / "kinematics.png")
    print(f"wrote {path} and {RESULTS / 'kinematics.png'}")


def plot(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    axes[1].sharey(axes[0])
    for s in summary:
        axes[2].semilogx(
            s["nq"],
            s["ratio_autodiff_over_closed_form"],
            ("o-" if s["order"] == "second" else "o--"),
            color="C0" if s["batch"] == 1 else "C2",
            label=f"{s['order']} order, batch {s['batch']}",
        )
    axes[2].axhline(1.0, color="k", lw=0.8)
    axes[2].set_title("time ratio autodiff / closed form")
    axes[2].set_xlabel("generalized coordinates nq (12 bodies)")
    axes[2].set_xticks(NQS, [str(n) for n in NQS])
    axes[2].set_ylim(bottom=0)
    axes[2].grid(True, which="both", alpha=0.3)
    axes[2].legend(fontsize=7)
    for ax, batch in zip(axes[:2], BATCHES, strict=True):
        for s in summary:
            if s["batch"] != batch:
                continue
            style = "-" if s["order"] == "second" else "--"
            ax.loglog(
                s["nq"],
                s["closed_form_us"],
                "o" + style,
                color="C0",
                label=f"closed form, {s['order']} order (∝ nq^{s['exponent_closed_form']:.2f})",
            )
            ax.loglog(
                s["nq"],
                s["autodiff_us"],
                "s" + style,
                color="C3",
                label=f"autodiff, {s['order']} order (∝ nq^{s['exponent_autodiff']:.2f})",
            )
        ax.set_title(f"batch {batch}" + (" (vmap in jit)" if batch > 1 else ""))
        ax.set_xlabel("generalized coordinates nq (12 bodies)")
        ax.set_xticks(NQS, [str(n) for n in NQS])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("time per state (µs)")
    fig.suptitle(f"D_i and D'_i: closed form vs autodiff, float64, {jax.default_backend()}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
