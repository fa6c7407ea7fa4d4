"""Batch 65,536 on an accelerator: tree dynamics (issue 21) and muscle paths (issue 24).

Two measurements of the public API at large batch, float64 and float32, on whatever backend JAX
picks (run it on a GPU machine):

1. ``terms``: ``jax.jit(jax.vmap(M, N q̇, G))`` of ``mb.mass_matrix``, ``mb.bias_forces`` and
   ``mb.gravity_forces`` on ``chain(7)`` and ``chain(30)`` (the chains of ``throughput.py``), at
   batch 4096 and 65,536: compile seconds and wall seconds per state (median of repeats, each call
   ended by ``block_until_ready``).
2. ``paths``: ``jax.jit(jax.vmap(lambda q: mb.lengths_and_moment_arms(model, q)))`` on gait2354
   (54 muscles, no wrap objects) and arm26 (6 muscles over cylinders and ellipsoids), at the
   given batches, poses uniform within the coordinate ranges (clipped to ±π). Wrapped muscle
   groups batch as ``--wrapped`` says (``jaxmb.muscles.wrapped_kernels.WRAPPED_BATCHING`` set per row:
   ``pose_by_pose``, a sequential loop inside the program, and/or ``vectorized``, every pose's
   wrap branches and loops across the batch; the rows say which).

The peers do not run on the GPU machine (no Pinocchio or OpenSim there), so their single-core
rates are measured on a CPU machine by the same script, ``--references``, which writes
``results/gpu_references.json``: Pinocchio's ``crba`` + ``nonLinearEffects`` per state from a
Python loop (the rate issue 21 compares against), and OpenSim 4.6's ``getLength`` +
``computeMomentArm`` of every muscle and coordinate per pose, on the same poses. The accelerator
run reads that file and prints throughput ratios (peer seconds per state / jaxmb seconds per
state; > 1: jaxmb faster). Both machines are recorded in the JSON.

    python benchmarks/gpu.py --references          # CPU machine with pinocchio and opensim
    python benchmarks/gpu.py [--budget 420]        # accelerator: writes results/gpu.json + .png

A section whose estimated time would overrun ``--budget`` seconds is skipped and recorded so.
Models with wrap objects run in float64 only (``--wrapped-dtypes``): OpenSim's wrap algorithms
iterate to float64 tolerances (in float32 arm26's lengths and moment arms deviated from float64 by
0.76 relative, max over outputs, at 8 poses on the CPU, at 7× the time), so jaxmb refuses wrapped
paths in float32 (``ModelError``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, metadata, timeit_compiled
from throughput import states
from vmap_terms import cast

import jaxmb as mb
from jaxmb.models.chain import chain
from jaxmb.muscles import wrapped_kernels

ROOT = Path(__file__).resolve().parent.parent
PATH_MODELS = {
    "gait2354": ROOT / "tests" / "data" / "osim" / "gait2354_simbody.osim",
    "arm26": ROOT / "jaxmb" / "data" / "arm26.osim",
}
CHAINS = (7, 15, 30, 60)  # Pinocchio references
REFERENCE_POSES = {"gait2354": 64, "arm26": 2000}
REFERENCE_STATES = 4096


@functools.cache
def coordinate_box(name: str) -> np.ndarray:
    """(nq, 2) ranges of the model's coordinates, clipped to ±π (rad or m): the file read once."""
    imp = mb.io.read_osim(PATH_MODELS[name])
    box = {c.name: c.range for c in imp.coordinates}
    return np.clip(np.asarray([box[n] for n in imp.model.coordinate_names], float), -np.pi, np.pi)


def poses(name: str, B: int, seed: int = 0) -> np.ndarray:
    """(B, nq) poses uniform within the model's coordinate ranges, clipped to ±π (rad or m)."""
    box = coordinate_box(name)
    return np.random.default_rng(seed).uniform(box[:, 0], box[:, 1], (B, len(box)))


# ----------------------------------------------------------------------------- peers (CPU)


def pinocchio_per_state(n: int) -> float:
    """Pinocchio's crba + nonLinearEffects per state (s), best of 5 Python loops over 4096."""
    import pinocchio as pin
    from throughput import pin_chain

    pm = pin_chain(n)
    data = pm.createData()
    q, qd = states(REFERENCE_STATES, n, seed=1)
    qs, qds = np.asarray(q, float), np.asarray(qd, float)
    best = np.inf
    for _ in range(5):
        c = time.process_time()
        for a, b in zip(qs, qds, strict=True):
            pin.crba(pm, data, a)
            pin.nonLinearEffects(pm, data, a, b)
        best = min(best, (time.process_time() - c) / len(qs))
    return best


def opensim_per_pose(name: str) -> tuple[float, int, int]:
    """OpenSim's getLength + computeMomentArm of every muscle and coordinate per pose (s)."""
    import opensim as osim

    model = osim.Model(str(PATH_MODELS[name]))
    state = model.initSystem()
    imp = mb.io.read_osim(PATH_MODELS[name])
    crd = [model.getCoordinateSet().get(c) for c in imp.model.coordinate_names]
    mus = [model.getMuscles().get(j) for j in range(model.getMuscles().getSize())]
    qs = poses(name, REFERENCE_POSES[name])
    c = time.process_time()
    for q in qs:
        for ci, v in zip(crd, q, strict=True):
            ci.setValue(state, float(v), False)
        model.realizePosition(state)
        for m in mus:
            m.getLength(state)
            for ci in crd:
                m.computeMomentArm(state, ci)
    return (time.process_time() - c) / len(qs), len(mus), len(crd)


def references(out: Path) -> None:
    import opensim as osim

    ref = {"meta": metadata(benchmark="gpu.py peers, single core"), "opensim": osim.__version__}
    ref["pinocchio_per_state_s"] = {}
    for n in CHAINS:
        ref["pinocchio_per_state_s"][str(n)] = t = pinocchio_per_state(n)
        print(f"Pinocchio chain({n}): {t * 1e6:.2f} us/state", flush=True)
    ref["opensim_per_pose_s"] = {}
    for name in PATH_MODELS:
        t, nm, nc = opensim_per_pose(name)
        ref["opensim_per_pose_s"][name] = t
        print(f"OpenSim {name} ({nm} muscles x {nc} coordinates): {t * 1e3:.3f} ms/pose",
              flush=True)  # fmt: skip
    out.write_text(json.dumps(ref, indent=2) + "\n")
    print(f"wrote {out}")


# ----------------------------------------------------------------------------- jaxmb


def timed(fn, args, repeats: int):
    t = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    first = time.perf_counter() - t
    # at least one call after the first (which may load and tune kernels), about 3 s of calls in all
    n = max(1, min(repeats, int(3.0 / max(first, 1e-9))))
    run = timeit_compiled(compiled, *args, repeats=n, warmup=0) if first < 30 else first
    return compile_s, run, out


def deviation(out, ref) -> float:
    """max over outputs of max |out - ref| / max |ref| (``ref``: the first float64 run)."""
    return max(
        float(jnp.max(jnp.abs(a.astype(b.dtype) - b)) / jnp.max(jnp.abs(b)))
        for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref), strict=True)
    )


def terms_rows(rows, save, chains, batches, dtypes, repeats, ref, deadline):
    f64 = {}
    for n in chains:
        for dtype in dtypes:
            dt = getattr(jnp, dtype)
            model = chain(n) if dtype == "float64" else cast(chain(n), dt)
            fn = jax.jit(jax.vmap(lambda q, qd, m=model: (mb.mass_matrix(m, q),
                                  mb.bias_forces(m, q, qd), mb.gravity_forces(m, q))))  # fmt: skip
            for B in batches:
                if time.monotonic() > deadline:
                    rows.append(dict(n=n, dtype=dtype, batch=B, skipped="over --budget"))
                    continue
                q, qd = states(B, n, seed=1, dtype=dt)
                compile_s, run, out = timed(fn, (q, qd), repeats)
                row = dict(n=n, dtype=dtype, batch=B, compile_s=compile_s, seconds=run,
                           per_state_s=run / B, states_per_s=B / run,
                           finite=bool(all(np.isfinite(np.asarray(x)).all() for x in out)),
                           out_dtype=str(out[0].dtype))  # fmt: skip
                if dtype == "float64":
                    f64[n, B] = out
                elif (n, B) in f64:
                    row["rel_deviation_from_float64"] = deviation(out, f64[n, B])
                pin = (ref or {}).get("pinocchio_per_state_s", {}).get(str(n))
                if pin:
                    row["pinocchio_per_state_s"] = pin
                    row["throughput_over_pinocchio"] = pin / row["per_state_s"]
                rows.append(row)
                save()
                print(f"chain({n}) {dtype} B={B}: {row['per_state_s'] * 1e9:.1f} ns/state, "
                      f"compile {compile_s:.1f} s, deviation from float64 "
                      f"{row.get('rel_deviation_from_float64', 0.0):.1e}"
                      + (f", {row['throughput_over_pinocchio']:.0f}x Pinocchio's single-core rate"
                         if pin else ""), flush=True)  # fmt: skip
    return rows


def paths_rows(
    rows, save, models, batches, dtypes, repeats, ref, deadline, wrapped, probe, wrapped_dtypes
):
    f64 = {}
    setting = wrapped_kernels.WRAPPED_BATCHING
    for name in models:
        base = mb.io.load_osim(PATH_MODELS[name])
        wraps = any(m.wraps for m in base.muscles.muscles)
        dts = [d for d in dtypes if d in wrapped_dtypes] if wraps else dtypes
        for dtype, how in [(d, w) for d in dts for w in (wrapped if wraps else wrapped[:1])]:
            wrapped_kernels.WRAPPED_BATCHING = how
            dt = getattr(jnp, dtype)
            model = base if dtype == "float64" else cast(base, dt)
            fn = jax.jit(jax.vmap(lambda q, m=model: mb.lengths_and_moment_arms(m, q)))
            label = f"{name} {dtype}" + (f" wrapped {how}" if wraps else "")
            est = None
            for B in probe if wraps and how == "pose_by_pose" else batches:
                left = deadline - time.monotonic()
                if left < 0 or (est is not None and est * B > left):
                    rows.append(dict(model=name, dtype=dtype, batch=B, wrapped=how,
                                     skipped="over --budget"))  # fmt: skip
                    print(f"{label} B={B}: skipped (over --budget)", flush=True)
                    continue
                q = jnp.asarray(poses(name, B), dt)
                compile_s, run, (L, R) = timed(fn, (q,), repeats)
                est = run / B
                row = dict(model=name, dtype=dtype, batch=B, wrapped=how if wraps else None,
                           compile_s=compile_s, seconds=run, per_pose_s=run / B,
                           muscles=int(L.shape[-1]), out_dtype=str(L.dtype),
                           finite=bool(np.isfinite(np.asarray(L)).all()
                                       and np.isfinite(np.asarray(R)).all()))  # fmt: skip
                if name not in f64:  # the first float64 row; poses(name, B) share their first rows
                    f64[name] = (L, R) if dtype == "float64" else None
                elif f64[name] is not None:
                    k = min(B, f64[name][0].shape[0])
                    row["rel_deviation_from_float64"] = deviation(
                        (L[:k], R[:k]), (f64[name][0][:k], f64[name][1][:k])
                    )
                    row["deviation_over_poses"] = k
                osim_t = (ref or {}).get("opensim_per_pose_s", {}).get(name)
                if osim_t:
                    row["opensim_per_pose_s"] = osim_t
                    row["time_over_opensim"] = row["per_pose_s"] / osim_t
                rows.append(row)
                save()
                print(f"{label} B={B}: {row['per_pose_s'] * 1e6:.2f} us/pose, "
                      f"compile {compile_s:.1f} s, finite {row['finite']}, deviation from float64 "
                      f"{row.get('rel_deviation_from_float64', 0.0):.1e}"
                      + (f", {row['time_over_opensim']:.4f}x OpenSim's single-core time"
                         if osim_t else ""), flush=True)  # fmt: skip
    wrapped_kernels.WRAPPED_BATCHING = setting


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for dtype, st in (("float64", "o-"), ("float32", "s--")):
        for n in sorted({x["n"] for x in result["terms"]}):
            r = [x for x in result["terms"]
                 if x["n"] == n and x["dtype"] == dtype and "seconds" in x]  # fmt: skip
            if r:
                a1.loglog([x["batch"] for x in r], [x["per_state_s"] * 1e9 for x in r], st,
                          label=f"chain({n}) {dtype}")  # fmt: skip
        for name in PATH_MODELS:
            for how in ("pose_by_pose", "vectorized", None):
                r = [x for x in result["paths"] if x["model"] == name and x["dtype"] == dtype
                     and x.get("wrapped") == how and "seconds" in x]  # fmt: skip
                if r:
                    a2.loglog([x["batch"] for x in r], [x["per_pose_s"] * 1e6 for x in r], st,
                              label=f"{name} {dtype}" + (f", {how}" if how else ""))  # fmt: skip
    ref = result.get("references") or {}
    for n, t in (ref.get("pinocchio_per_state_s") or {}).items():
        a1.axhline(t * 1e9, ls=":", color="k", lw=0.8)
        a1.text(a1.get_xlim()[0], t * 1e9, f" Pinocchio chain({n}), 1 core", fontsize=7,
                va="bottom")  # fmt: skip
    for name, t in (ref.get("opensim_per_pose_s") or {}).items():
        a2.axhline(t * 1e6, ls=":", color="k", lw=0.8)
        a2.text(a2.get_xlim()[0], t * 1e6, f" OpenSim {name}, 1 core", fontsize=7, va="bottom")
    dev = result["meta"]["machine"]["jax_devices"][0]
    a1.set(xlabel="batch", ylabel="ns per state (wall)", title=f"M, N q̇, G on {dev}")
    a2.set(xlabel="batch", ylabel="µs per pose (wall)", title=f"lengths and moment arms on {dev}")
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--references", action="store_true", help="time the peers (CPU machine)")
    ap.add_argument("--sections", default="terms,paths")
    ap.add_argument("--chains", default="7,30", help="chain sizes n for 'terms'")
    ap.add_argument("--term-batches", default="4096,65536")
    ap.add_argument("--path-batches", default="4096,65536")
    ap.add_argument("--path-models", default=",".join(PATH_MODELS))
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--wrapped", default="pose_by_pose", help="pose_by_pose,vectorized")
    ap.add_argument(
        "--wrapped-dtypes",
        default="float64",
        help="dtypes for models with wrap objects (OpenSim's wrapping iterates to float64 "
        "tolerances: in float32 it deviates, see the module docstring)",
    )
    ap.add_argument(
        "--pose-by-pose-batches",
        default="4096,65536",
        help="batches of wrapped pose-by-pose rows (sequential inside the program: the time per "
        "pose hardly depends on the batch; a batch whose estimate overruns --budget is skipped)",
    )
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all sections")
    ap.add_argument("--out", default=str(RESULTS), help="folder for NAME.json and NAME.png")
    ap.add_argument("--name", default="gpu")
    ap.add_argument(
        "--matmul-precision",
        default=None,
        help="jax_default_matmul_precision ('highest': full float32 products; JAX's default on "
        "NVIDIA GPUs rounds float32 products to TF32)",
    )
    a = ap.parse_args()
    ref_path = RESULTS / "gpu_references.json"
    if a.references:
        references(ref_path)
        return
    deadline = time.monotonic() + a.budget
    ref = json.loads(ref_path.read_text()) if ref_path.exists() else None
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    dtypes = a.dtypes.split(",")
    print(f"backend {jax.default_backend()}: {jax.devices()}", flush=True)
    if a.matmul_precision:
        jax.config.update("jax_default_matmul_precision", a.matmul_precision)
    meta = metadata(benchmark="gpu.py", matmul_precision=jax.config.jax_default_matmul_precision)
    result = {"meta": meta, "references": ref, "terms": [], "paths": []}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def save():  # after every row: a run stopped at its time limit keeps what it measured
        (out / f"{a.name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")

    if "terms" in a.sections:
        terms_rows(
            result["terms"], save, ints(a.chains), ints(a.term_batches), dtypes, a.repeats, ref,
            deadline,
        )  # fmt: skip
    if "paths" in a.sections:
        paths_rows(
            result["paths"], save, a.path_models.split(","), ints(a.path_batches), dtypes,
            a.repeats, ref, deadline, a.wrapped.split(","), ints(a.pose_by_pose_batches),
            a.wrapped_dtypes.split(","),
        )  # fmt: skip
    save()
    plot(result, out / f"{a.name}.png")
    print(f"wrote {out / a.name}.json and .png")


if __name__ == "__main__":
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    main()
