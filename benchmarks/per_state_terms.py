"""Issue 19's per-state check: the public tree functions called once per step inside a user's
compiled ``jax.lax.scan``, timed against another jaxmb tree (the code before the layout change,
commit 984ec0b) in a second process, interleaved.

For each model (Andrews' squeezer, chain(7), the shoulder with its rhythm) and each public
function — ``forward_dynamics``, ``mass_matrix``, ``bias_forces``, ``gravity_forces`` — a ``jax.jit`` of a ``lax.scan`` of
``--steps`` calls at ``q0 + 0.001 i`` (and a fixed q̇) is compiled once per tree; the time per call
is the best of ``--best`` scans in process CPU time (wall time, recorded too, is
dominated by the scheduler on a loaded 2-core machine). Both trees run as persistent worker processes (this script with
``--worker``, ``PYTHONPATH`` set to the tree) that time one function at a time in turn, so a busy
machine hits both alike. The ratio printed is base / this tree (> 1: this tree faster); the load
average is recorded with every round. Writes ``benchmarks/results/per_state_terms.json`` and
``per_state_terms.png``.

    python benchmarks/per_state_terms.py --base /work/base            # this tree vs the base tree
    python benchmarks/per_state_terms.py --base /work/base --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FUNCS = ("forward_dynamics", "mass_matrix", "bias_forces", "gravity_forces")
MODELS = ("andrews", "chain7", "shoulder")
HERE = Path(__file__).resolve()
TREE = HERE.parent.parent


# ------------------------------------------------------------------------------------------------
# worker: imports the jaxmb found on PYTHONPATH, answers "model func" lines with one JSON line


def _worker(steps: int, best: int) -> None:
    import jax
    import jax.numpy as jnp

    import jaxmb as mb

    def build(name):
        if name == "andrews":
            model = mb.models.andrews_squeezer()
            q0 = jnp.array([-0.0617])  # Hairer & Wanner's consistent initial angle β0 (rad)
        elif name == "shoulder":  # 14 joint variables from 3 coordinates by the de Groot rhythm
            model = mb.models.shoulder("degroot")
            q0 = jnp.array([1.5708, 0.8, -0.5])  # elevation plane, elevation, axial rotation (rad)
        else:
            model = mb.models.chain(int(name[5:]))
            q0 = jnp.linspace(0.1, 0.7, model.nq)
        return model, q0

    cache = {}

    def compiled(mname, fname):
        key = (mname, fname)
        if key in cache:
            return cache[key]
        model, q0 = build(mname)
        qd = (10.0 if mname == "andrews" else 0.3) * jnp.cos(jnp.arange(model.nq, dtype=q0.dtype))
        fn = getattr(mb, fname)
        call = {
            "forward_dynamics": lambda q: fn(model, q, qd),
            "mass_matrix": lambda q: fn(model, q),
            "bias_forces": lambda q: fn(model, q, qd),
            "gravity_forces": lambda q: fn(model, q),
        }[fname]

        def body(acc, i):
            out = call(q0 + 0.001 * i)
            return acc + jnp.sum(out), None  # keeps every call live

        run = jax.jit(lambda: jax.lax.scan(body, jnp.zeros((), q0.dtype), jnp.arange(steps))[0])
        t0 = time.perf_counter()
        jax.block_until_ready(run())
        cache[key] = (run, time.perf_counter() - t0)
        return cache[key]

    for line in sys.stdin:
        mname, fname = line.split()
        run, first = compiled(mname, fname)
        times, cpu = [], []
        for _ in range(best):
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(run())
            times.append((time.perf_counter() - t0) / steps)
            cpu.append((time.process_time() - c0) / steps)
        out = {"us": 1e6 * min(cpu), "wall_us": 1e6 * min(times), "first_call_s": first}
        print(json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------------
# driver


def _start(tree: Path, steps: int, best: int):
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(HERE), "--worker", "--steps", str(steps), "--best", str(best)]
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=str(tree))  # fmt: skip


def _ask(proc, mname, fname):
    proc.stdin.write(f"{mname} {fname}\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"worker died on {mname} {fname}")
    return json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="/work/base", help="the other jaxmb tree (PYTHONPATH root)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--funcs", default=",".join(FUNCS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--best", type=int, default=3)
    ap.add_argument("--name", default="per_state_terms")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return _worker(a.steps, a.best)
    sys.path.insert(0, str(HERE.parent))
    from _common import RESULTS, metadata, save_results

    trees = {"base": Path(a.base).resolve(), "this": TREE}
    procs = {k: _start(t, a.steps, a.best) for k, t in trees.items()}
    tags = {}
    for k, t in trees.items():
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=t, capture_output=True,
                           text=True)  # fmt: skip
        tags[k] = r.stdout.strip()
    rows = []
    try:
        for mname in a.models.split(","):
            for fname in a.funcs.split(","):
                samples = {"base": [], "this": []}
                first = {}
                loads = []
                for r in range(a.rounds):
                    order = ("base", "this") if r % 2 == 0 else ("this", "base")
                    for k in order:
                        out = _ask(procs[k], mname, fname)
                        samples[k].append(out["us"])
                        first[k] = out["first_call_s"]
                    loads.append(os.getloadavg()[0])
                med = {k: statistics.median(v) for k, v in samples.items()}
                row = {"model": mname, "func": fname, "us_per_call": samples,
                       "median_us": med, "first_call_s": first,
                       "ratio_base_over_this": med["base"] / med["this"], "load1": loads}  # fmt: skip
                rows.append(row)
                print(f"{mname:8s} {fname:17s} base {med['base']:7.2f} µs  this "
                      f"{med['this']:7.2f} µs  base/this {row['ratio_base_over_this']:.2f}  "
                      f"load {min(loads):.1f}-{max(loads):.1f}", flush=True)  # fmt: skip
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait(timeout=60)
    meta = metadata(trees={k: str(v) for k, v in trees.items()}, commits=tags, steps=a.steps,
                    best_of=a.best, rounds=a.rounds)  # fmt: skip
    path = save_results(a.name, {"meta": meta, "rows": rows})
    print("wrote", path)
    _plot(rows, RESULTS / f"{a.name}.png", tags)


def _plot(rows, path, tags):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r['model']}\n{r['func'].replace('_', ' ')}" for r in rows]
    x = range(len(rows))
    for off, k in ((-0.2, "base"), (0.2, "this")):
        ax.bar([i + off for i in x], [r["median_us"][k] for r in rows], width=0.4,
               label=f"{k} ({tags[k]})")  # fmt: skip
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("time per call inside lax.scan (µs)")
    ax.set_title("Per-state tree terms: this tree against the base tree (median of rounds)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("wrote", path)


if __name__ == "__main__":
    main()
