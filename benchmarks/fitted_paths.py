"""Fitted muscle paths (``mb.fit_paths``) against the exact paths and OpenSim 4.6, per pose.

For each model: ``mb.fit_paths(model, ranges)`` (its time and its own validation report), then
``jax.jit(jax.vmap(lambda q: mb.lengths_and_moment_arms(fitted, q)))`` timed at batch 1 to 4096
(compiled steady state, compile time apart, float64), the exact paths the same way at one batch,
and OpenSim's ``Muscle.getLength`` plus ``Muscle.computeMomentArm`` for every (muscle, coordinate)
pair the fit spans (fewer calls than every pair: the comparison favours OpenSim), in a Python loop
over the same poses in the same process. Poses are uniform over the fitted ranges.

Models: arm26 over its coordinates' full ranges (shoulder −90…180°, elbow 0…130°; six muscles
wrapping over cylinders and ellipsoids), and Gait10dof18musc (18 muscles) and gait2354 (54) over a
walking trial's range of motion (hip flexion −30…50°, knee −80…0°, ankle ±25°, pelvis tilt and
lumbar extension ±20°, hip adduction and rotation, subtalar, lumbar bending and rotation ±15°,
pelvis list and rotation ±10°, mtp ±20°; via, conditional and moving points).

    python benchmarks/fitted_paths.py [--models arm26,gait10dof18musc,gait2354] [--samples 2000]
        [--batches 1,64,4096] [--opensim-poses 500] [--dtypes float64,float32]
        [--opensim-us arm26=US,...]   (on a machine without OpenSim: its CPU figures)

Writes benchmarks/results/fitted_paths.json and fitted_paths.png.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, compile_seconds, metadata, save_results, timeit_compiled

import jaxmb as mb

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "arm26": ROOT / "jaxmb" / "data" / "arm26.osim",
    "gait10dof18musc": ROOT / "tests" / "data" / "osim" / "zoo" / "gait10dof18musc.osim",
    "gait2354": ROOT / "tests" / "data" / "osim" / "gait2354_simbody.osim",
}


def _ranges(name, imp, model):
    """arm26: its coordinates' full ranges; the gait models: a walking trial's range of motion
    (deg; pelvis translations held, as no muscle spans them)."""
    if name == "arm26":
        return {c.name: c.range for c in imp.coordinates if c.name in model.coordinate_names}
    r = np.radians
    out = {c: (0.0, 0.0) for c in model.coordinate_names}
    out["pelvis_ty"] = (0.95, 0.95)
    walk = {
        "pelvis_tilt": 20, "pelvis_list": 10, "pelvis_rotation": 10,
        "lumbar_extension": 20, "lumbar_bending": 15, "lumbar_rotation": 15,
    }  # fmt: skip
    for s in "rl":
        out[f"hip_flexion_{s}"] = (r(-30), r(50))
        out[f"knee_angle_{s}"] = (r(-80), r(0))
        out[f"ankle_angle_{s}"] = (r(-25), r(25))
        walk |= {f"mtp_angle_{s}": 20, f"hip_adduction_{s}": 15, f"hip_rotation_{s}": 15}
        walk[f"subtalar_angle_{s}"] = 15
    for c, v in walk.items():
        if c in out:
            out[c] = (r(-v), r(v))
    return out


def _opensim(path, names, poses, pairs):
    """Seconds per pose of getLength + computeMomentArm over ``pairs`` (muscle, coordinate)."""
    import opensim as osim

    om = osim.Model(str(path))
    state = om.initSystem()
    cs = om.getCoordinateSet()
    crd = [cs.get(n) for n in names]
    mus = om.getMuscles()
    by_name = {mus.get(j).getName(): mus.get(j) for j in range(mus.getSize())}
    calls = [(by_name[m], [cs.get(c) for c in cc]) for m, cc in pairs]
    t0 = time.perf_counter()
    for q in poses:
        for c, v in zip(crd, q, strict=True):
            c.setValue(state, float(v), False)
        om.realizePosition(state)
        for m, cc in calls:
            m.getLength(state)
            for c in cc:
                m.computeMomentArm(state, c)
    return (time.perf_counter() - t0) / len(poses), osim.__version__


def bench(name, args):
    path = MODELS[name]
    imp = mb.io.read_osim(path)
    model = mb.io.load_osim(path)
    ranges = _ranges(name, imp, model)
    t0 = time.perf_counter()
    fitted = mb.fit_paths(model, ranges, samples=args.samples, validation=args.validation)
    fit_s = time.perf_counter() - t0
    rep = fitted.muscles.fit.report
    print(f"{name}: fit_paths {fit_s:.1f} s\n{rep}")
    r = np.asarray([ranges[c] for c in model.coordinate_names])
    rng = np.random.default_rng(1)
    nmax = max(args.batches)
    poses = r[:, 0] + (r[:, 1] - r[:, 0]) * rng.uniform(size=(nmax, model.nq))

    def batched(m):
        # the model closed over, as users write it (an argument would be flattened every call)
        return jax.jit(jax.vmap(lambda q: mb.lengths_and_moment_arms(m, q)))

    f64 = batched(fitted)
    routes, by_dtype = {}, {}
    for dtype in args.dtypes:
        m = jax.tree_util.tree_map(
            lambda x: (
                x.astype(dtype)
                if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating)
                else x
            ),
            fitted,
        )
        f = batched(m)
        rows = {}
        for b in args.batches:
            qs = jnp.asarray(poses[:b], dtype)
            c = compile_seconds(f, qs)
            t = timeit_compiled(f, qs, repeats=args.repeats, warmup=2)
            rows[b] = {"us_per_pose": t / b * 1e6, "compile_seconds": c}
            print(f"  fitted {dtype}, batch {b}: {t / b * 1e6:.4f} us/pose (compile {c:.2f} s)")
        qs = jnp.asarray(poses[: min(args.batches[-1], 4096)])
        L64, R64 = f64(qs)
        L, R = f(qs.astype(dtype))
        rows["max_abs_diff_to_float64_m"] = {
            "lengths": float(jnp.max(jnp.abs(L.astype(L64.dtype) - L64))),
            "moment_arms": float(jnp.max(jnp.abs(R.astype(R64.dtype) - R64))),
        }
        by_dtype[dtype] = rows
        if dtype == "float64":
            routes = {b: rows[b] for b in args.batches}
    fe = jax.jit(jax.vmap(lambda q: mb.lengths_and_moment_arms(model, q)))
    be = args.exact_batch
    qe = jnp.asarray(poses[:be])
    ce = compile_seconds(fe, qe)
    te = timeit_compiled(fe, qe, repeats=2, warmup=1)
    print(f"  exact, batch {be}: {te / be * 1e6:.1f} us/pose (compile {ce:.1f} s)")
    pairs = [(m, cc) for m, cc in zip(rep.names, rep.coordinates, strict=True)]
    n_os = min(args.opensim_poses, nmax)
    if args.opensim_us:
        t_os, version = dict(args.opensim_us)[name] * 1e-6, "(CPU figure given)"
    else:
        t_os, version = _opensim(path, model.coordinate_names, poses[:n_os], pairs)
    best = routes[max(args.batches)]["us_per_pose"]
    print(
        f"  OpenSim {version}: {t_os * 1e6:.1f} us/pose; fitted at batch {nmax} is "
        f"{t_os * 1e6 / best:.0f}x faster; batch 1: "
        f"{t_os * 1e6 / routes[min(args.batches)]['us_per_pose']:.1f}x"
    )
    return {
        "model": name,
        "muscles": len(rep.names),
        "coordinates": model.nq,
        "ranges": {c: list(ranges[c]) for c in model.coordinate_names},
        "fit_seconds": fit_s,
        "fit_report": {
            "coordinates": dict(zip(rep.names, rep.coordinates, strict=True)),
            "degrees": dict(zip(rep.names, rep.degrees, strict=True)),
            "max_length_error_m": dict(zip(rep.names, rep.max_length_error, strict=True)),
            "p99_length_error_m": dict(zip(rep.names, rep.p99_length_error, strict=True)),
            "max_moment_arm_error_m": dict(zip(rep.names, rep.max_moment_arm_error, strict=True)),
            "p99_moment_arm_error_m": dict(zip(rep.names, rep.p99_moment_arm_error, strict=True)),
            "within_goal": dict(zip(rep.names, rep.within_goal, strict=True)),
            "samples": rep.samples,
            "validation": rep.validation,
            "exact_seconds": rep.exact_seconds,
        },
        "fitted": {str(b): v for b, v in routes.items()},
        "fitted_by_dtype": {d: {str(b): v for b, v in r.items()} for d, r in by_dtype.items()},
        "backend": jax.default_backend(),
        "exact": {"batch": be, "us_per_pose": te / be * 1e6, "compile_seconds": ce},
        "opensim": {
            "version": version,
            "poses": n_os,
            "api": "getLength + computeMomentArm per spanned (muscle, coordinate), Python loop",
            "us_per_pose": t_os * 1e6,
        },
        "ratio_opensim_over_fitted": {
            str(b): t_os * 1e6 / v["us_per_pose"] for b, v in routes.items()
        },
        "ratio_exact_over_fitted": te / be * 1e6 / best,
    }


def _plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for row, color in zip(result["models"], ("C0", "C1", "C2"), strict=False):
        bs = sorted(int(b) for b in row["fitted"])
        ax.loglog(
            bs,
            [row["fitted"][str(b)]["us_per_pose"] for b in bs],
            "o-",
            color=color,
            label=f"{row['model']}: jaxmb fitted",
        )
        ax.axhline(
            row["opensim"]["us_per_pose"],
            color=color,
            ls="--",
            label=f"{row['model']}: OpenSim {row['opensim']['version']}",
        )
        ax.plot(
            [row["exact"]["batch"]],
            [row["exact"]["us_per_pose"]],
            "s",
            color=color,
            mfc="none",
            label=f"{row['model']}: jaxmb exact",
        )
    ax.set_xlabel("batch size (poses)")
    ax.set_ylabel("time per pose (µs), lengths + moment arms")
    ax.set_title("Fitted muscle paths vs exact and OpenSim (float64, CPU)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="arm26,gait10dof18musc,gait2354")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--validation", type=int, default=500)
    ap.add_argument("--batches", default="1,64,4096")
    ap.add_argument("--exact-batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--opensim-poses", type=int, default=500)
    ap.add_argument("--name", default="fitted_paths")
    ap.add_argument("--dtypes", default="float64", help="e.g. float64,float32 (float64 first)")
    ap.add_argument(
        "--opensim-us",
        default="",
        help="MODEL=US,...: OpenSim's µs per pose measured elsewhere (a machine without OpenSim)",
    )
    args = ap.parse_args()
    args.dtypes = args.dtypes.split(",")
    args.opensim_us = [
        (kv.split("=")[0], float(kv.split("=")[1])) for kv in args.opensim_us.split(",") if kv
    ]
    args.batches = [int(b) for b in args.batches.split(",")]
    rows = [bench(m, args) for m in args.models.split(",")]
    result = {"meta": metadata(benchmark="fitted muscle paths vs exact vs OpenSim"), "models": rows}
    print("saved", save_results(args.name, result))
    _plot(result, RESULTS / f"{args.name}.png")
    print("saved", RESULTS / f"{args.name}.png")


if __name__ == "__main__":
    main()
