"""Issue 21's check of the batched tree path: ``jax.jit(jax.vmap(M, N q̇, G))`` of the public
per-state functions against Pinocchio's ``crba`` + ``nonLinearEffects`` called per state from
Python, on ``chain(n)`` (the same chains as ``throughput.py``; agreement checked at one state).

For each n in ``--ns`` and batch B in ``--batches``: compile time of the jitted vmap, process-CPU
seconds per state (best of rounds; jaxmb and Pinocchio timed in the same rounds so load hits both
alike; the load average is recorded with every row), and the ratio Pinocchio / jaxmb (> 1: jaxmb
faster). Float32 rows use a float32 model and states. Writes
``benchmarks/results/vmap_terms.json`` and ``vmap_terms.png`` (time per state against n and B).

    python benchmarks/vmap_terms.py                       # n 7,15,30,60; B 1..65536 (long)
    python benchmarks/vmap_terms.py --ns 7,30 --batches 4096
"""

from __future__ import annotations

import argparse
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, metadata, save_results
from throughput import pin_chain, pin_check, states

import jaxmb as mb
from jaxmb.models import chain


def terms(model):
    return jax.jit(jax.vmap(lambda q, qd: (mb.mass_matrix(model, q), mb.bias_forces(model, q, qd),
                                           mb.gravity_forces(model, q))))  # fmt: skip


def pin_loop(pm, pdata, qs, qds):
    import pinocchio as pin

    crba, nle = pin.crba, pin.nonLinearEffects
    for a, b in zip(qs, qds, strict=True):
        crba(pm, pdata, a)
        nle(pm, pdata, a, b)


def cast(model, dtype):
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if eqx.is_array(x) and jnp.issubdtype(x.dtype, jnp.floating)
        else x, model)  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="7,15,30,60")
    ap.add_argument("--batches", default="1,64,4096,65536")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--name", default="vmap_terms")
    a = ap.parse_args()
    rows = []
    for n in [int(x) for x in a.ns.split(",")]:
        dM, dF = pin_check(n)
        pm = pin_chain(n)
        pdata = pm.createData()
        for dtype in a.dtypes.split(","):
            dt = getattr(jnp, dtype)
            model = chain(n) if dtype == "float64" else cast(chain(n), dt)
            for B in [int(x) for x in a.batches.split(",")]:
                q, qd = states(B, n, seed=1, dtype=dt)
                f = terms(model)
                t = time.perf_counter()
                f.lower(q, qd).compile()
                compile_s = time.perf_counter() - t
                jax.block_until_ready(f(q, qd))
                npb = min(B, 4096)  # Pinocchio's per-state rate from up to 4096 states
                qs, qds = np.asarray(q[:npb], float), np.asarray(qd[:npb], float)
                best_j, best_p = np.inf, np.inf
                for _ in range(a.rounds):
                    c = time.process_time()
                    jax.block_until_ready(f(q, qd))
                    best_j = min(best_j, (time.process_time() - c) / B)
                    c = time.process_time()
                    pin_loop(pm, pdata, qs, qds)
                    best_p = min(best_p, (time.process_time() - c) / npb)
                load = os.getloadavg()
                rows.append(dict(n=n, dtype=dtype, batch=B, compile_s=compile_s,
                                 jaxmb_per_state_s=best_j, pin_python_per_state_s=best_p,
                                 pin_over_jaxmb=best_p / best_j, load=load,
                                 pin_check_max_dM=dM, pin_check_max_dnle=dF))  # fmt: skip
                print(f"chain({n}) {dtype} B={B}: jaxmb {best_j * 1e6:.3f} us/state, Pinocchio "
                      f"{best_p * 1e6:.3f} us/state, Pinocchio/jaxmb = {best_p / best_j:.2f}, "
                      f"compile {compile_s:.1f} s  [load {load[0]:.1f}]", flush=True)  # fmt: skip
    save_results(a.name, dict(metadata(benchmark="vmap_terms"), rows=rows,
                              clock="process CPU s per state, best of rounds"))  # fmt: skip
    plot(rows, RESULTS / f"{a.name}.png")


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for dtype, st in (("float64", "o-"), ("float32", "s--")):
        B = 4096
        r = sorted((x for x in rows if x["dtype"] == dtype and x["batch"] == B), key=lambda x: x["n"])
        if r:
            a1.loglog([x["n"] for x in r], [x["jaxmb_per_state_s"] * 1e6 for x in r], st,
                      label=f"jaxmb jit(vmap), {dtype}, B={B}")  # fmt: skip
            if dtype == "float64":
                a1.loglog([x["n"] for x in r], [x["pin_python_per_state_s"] * 1e6 for x in r],
                          "k:", label="Pinocchio per state (Python loop)")  # fmt: skip
        for n in sorted({x["n"] for x in rows}):
            r = sorted((x for x in rows if x["dtype"] == dtype and x["n"] == n),
                       key=lambda x: x["batch"])  # fmt: skip
            if r and dtype == "float64":
                a2.loglog([x["batch"] for x in r], [x["jaxmb_per_state_s"] * 1e6 for x in r],
                          st, label=f"chain({n})")  # fmt: skip
    a1.set_xlabel("bodies n")
    a1.set_ylabel("µs per state (process CPU)")
    a1.legend(fontsize=7)
    a1.set_title("M, N q̇, G per state against n")
    a2.set_xlabel("batch B")
    a2.set_ylabel("µs per state, float64")
    a2.legend(fontsize=7)
    a2.set_title("against batch size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
