"""Moment arms of all six arm26 muscles over 10,000 poses: jaxmb (compiled, batched) vs OpenSim 4.6.

The six muscles wrap over OpenSim's own objects (TRIlong: two cylinders and an ellipsoid, iterated;
BIClong: an ellipsoid; TRIlat, TRImed, BRA: a cylinder); jaxmb reproduces OpenSim's wrapping, so
both sides compute the same paths (tests/test_arm26_opensim.py: lengths 1e-12 m, moment arms 1e-9
m).

- **jaxmb**: ``moment_arms`` (the seed's closed form, Eq. 193, with the GMLAV from the exact
  derivative of the wrapped length) over the batch in one compiled call,
  ``jax.jit(jax.vmap(...))`` as users call it (the wrapped paths run pose by pose inside the
  program, see ``jaxmb.muscles.geometry``); ``jax.lax.map`` over the poses is measured too, on
  ``--map-poses`` poses. Compiled steady state, compile time apart, float64.
- **OpenSim, native**: a Python loop over poses that sets the two coordinates, realizes the
  position stage and calls ``Muscle.computeMomentArm`` for every muscle and coordinate.
- **OpenSim, -dL/dq**: the quantity jaxmb equals: central differences (h = 1e-6 rad) of
  ``Muscle.getLength`` (two realizations per coordinate and pose). ``computeMomentArm`` treats
  wrap tangent points as fixed on the wrap body, which is not the derivative of OpenSim's own
  length for its non-geodesic wrap constructions; the agreement of each OpenSim route with jaxmb is
  recorded. Where OpenSim's length jumps within the step (its discrete wrap choices flip; steps h
  and 4h disagree by > 1e-7 m) the differences are no derivative: those (pose, muscle) pairs are
  counted and left out of the agreement figure.

Every side runs every pose (no extrapolation), in one process, one after the other. For a
single-core comparison pin the process: ``taskset -c 0 python benchmarks/moment_arms.py``.

    python benchmarks/moment_arms.py [--poses 10000] [--repeats 3] [--map-poses 1000] [--no-opensim]

Writes benchmarks/results/moment_arms.json and moment_arms.png.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, compile_seconds, metadata, save_results, timeit_compiled

import jaxmb  # noqa: F401  (x64 on)
from jaxmb.models.arm26 import arm26
from jaxmb.muscles import moment_arms

H = 1e-6  # rad, OpenSim central differences


def _opensim(poses):
    """OpenSim's computeMomentArm loop and its -dL/dq by central differences over ``poses``."""
    import opensim as osim

    path = Path(jaxmb.__file__).resolve().parent / "data" / "arm26.osim"
    om = osim.Model(str(path))
    state = om.initSystem()
    coords, muscles = om.getCoordinateSet(), om.getMuscles()
    nm, nc = muscles.getSize(), coords.getSize()
    mus = [muscles.get(j) for j in range(nm)]
    crd = [coords.get(i) for i in range(nc)]

    def set_pose(q):
        for i in range(nc):
            crd[i].setValue(state, float(q[i]), False)
        om.realizePosition(state)

    n = len(poses)
    R_native = np.zeros((n, nc, nm))
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(n):
        set_pose(poses[k])
        for j in range(nm):
            for i in range(nc):
                R_native[k, i, j] = mus[j].computeMomentArm(state, crd[i])
    native = (time.perf_counter() - t0, time.process_time() - c0)

    def central_differences(h):
        R = np.zeros((n, nc, nm))
        for k in range(n):
            for i in range(nc):
                q = np.array(poses[k], float)
                q[i] += h
                set_pose(q)
                up = [m.getLength(state) for m in mus]
                q[i] -= 2 * h
                set_pose(q)
                dn = [m.getLength(state) for m in mus]
                R[k, i] = -(np.asarray(up) - np.asarray(dn)) / (2 * h)
        return R

    t0, c0 = time.perf_counter(), time.process_time()
    R_fd = central_differences(H)
    fd = (time.perf_counter() - t0, time.process_time() - c0)
    R_fd4 = central_differences(4 * H)  # untimed: where the two steps disagree, L is not smooth
    names = [m.getName() for m in mus]
    return osim.__version__, names, R_native, native, R_fd, fd, R_fd4


def _plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("jaxmb, vmap", result["jaxmb"]["us_per_pose"])]
    if "lax_map" in result["jaxmb"]:
        rows.append(("jaxmb, lax.map", result["jaxmb"]["lax_map"]["us_per_pose"]))
    if "opensim" in result:
        o = result["opensim"]
        rows.append(("OpenSim computeMomentArm", o["native"]["us_per_pose"]))
        rows.append(("OpenSim -dL/dq (central diff.)", o["central_differences"]["us_per_pose"]))
    fig, ax = plt.subplots(figsize=(7, 2.8))
    ax.barh([r[0] for r in rows][::-1], [r[1] / 1e3 for r in rows][::-1], color="tab:blue")
    for y, (_, v) in enumerate(rows[::-1]):
        ax.text(v / 1e3, y, f" {v / 1e3:.2f}", va="center")
    ax.set_xscale("log")
    ax.set_xlabel("ms per pose (6 muscles x 2 coordinates, wrapped; log scale)")
    ax.set_title(f"arm26 moment arms, {result['meta']['batch']} poses, CPU, float64")
    ax.set_xlim(min(r[1] for r in rows) / 1e3 / 2, max(r[1] for r in rows) / 1e3 * 4)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--poses", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3, help="timed jaxmb calls (median)")
    ap.add_argument("--map-poses", type=int, default=1000, help="lax.map figure poses (0: skip)")
    ap.add_argument("--no-opensim", action="store_true")
    args = ap.parse_args()

    model = arm26()
    rng = np.random.default_rng(0)
    poses = np.stack(
        [rng.uniform(-1.2, 2.8, args.poses), rng.uniform(0.05, 2.2, args.poses)], axis=1
    )
    qs = jnp.asarray(poses, dtype=jnp.float64)
    one = lambda q: moment_arms(model, q)  # noqa: E731
    fn = jax.jit(jax.vmap(one))
    t_compile = compile_seconds(fn, qs)
    cpu = []
    t_jax = timeit_compiled(fn, qs, repeats=args.repeats, warmup=1, cpu_samples_out=cpu)
    c_jax = float(np.median(cpu))
    R_jax = np.asarray(fn(qs))
    print(
        f"jaxmb vmap: {args.poses} poses in {t_jax:.2f} s wall / {c_jax:.2f} s CPU "
        f"(compile {t_compile:.1f} s), {t_jax / args.poses * 1e6:.1f} us/pose, "
        f"{jax.default_backend()}, float64; finite: {bool(np.isfinite(R_jax).all())}"
    )
    result = {
        "meta": metadata(
            batch=args.poses,
            benchmark="arm26 moment arms, 6 wrapped muscles x 2 coordinates",
            cpu_affinity=sorted(os.sched_getaffinity(0)),
        ),
        "jaxmb": {
            "batching": "jax.jit(jax.vmap(...)); wrapped paths pose by pose inside",
            "seconds": t_jax,
            "cpu_seconds": c_jax,
            "compile_seconds": t_compile,
            "us_per_pose": t_jax / args.poses * 1e6,
            "repeats": args.repeats,
        },
    }
    if args.map_poses:
        nv = min(args.map_poses, args.poses)
        fv = jax.jit(lambda qs: jax.lax.map(one, qs))
        tcv = compile_seconds(fv, qs[:nv])
        cpu = []
        tv = timeit_compiled(fv, qs[:nv], repeats=1, warmup=1, cpu_samples_out=cpu)
        cv = cpu[0]
        dv = float(np.abs(np.asarray(fv(qs[:nv])) - R_jax[:nv]).max())
        print(
            f"jaxmb lax.map: {nv} poses in {tv:.2f} s (compile {tcv:.1f} s), "
            f"{tv / nv * 1e6:.1f} us/pose = {tv / nv / (t_jax / args.poses):.2f}x vmap; "
            f"max |map - vmap| = {dv:.1e} m"
        )
        result["jaxmb"]["lax_map"] = {
            "poses": nv,
            "seconds": tv,
            "cpu_seconds": cv,
            "compile_seconds": tcv,
            "us_per_pose": tv / nv * 1e6,
            "max_abs_diff_to_vmap_m": dv,
        }

    if not args.no_opensim:
        version, names, R_nat, (tn, cn), R_fd, (tf, cf), R_fd4 = _opensim(poses)
        assert names == list(model.muscle_names), (names, model.muscle_names)
        # OpenSim's length jumps at some poses (its discrete wrap choices and sample counts flip
        # within the step): there its differences are not a derivative; such (pose, muscle)
        # pairs, where the steps h and 4h disagree by more than 1e-7 m, are counted apart
        rough = np.abs(R_fd - R_fd4).max(axis=1) > 1e-7  # (poses, muscles)
        d_fd = np.abs(R_jax - R_fd)
        d_smooth = np.where(rough[:, None, :], 0.0, d_fd)
        d_nat = np.abs(R_jax - R_nat)
        n = args.poses
        print(
            f"OpenSim {version} computeMomentArm: {tn:.1f} s ({tn / n * 1e6:.1f} us/pose); "
            f"ratio OpenSim / jaxmb = {tn / t_jax:.2f}x"
        )
        print(
            f"OpenSim {version} -dL/dq central differences: {tf:.1f} s ({tf / n * 1e6:.1f} "
            f"us/pose); ratio OpenSim / jaxmb = {tf / t_jax:.2f}x"
        )
        print(
            f"max |R_jaxmb - (-dL/dq)_OpenSim| where OpenSim's length is smooth = "
            f"{d_smooth.max():.2e} m ({int(rough.sum())} of {rough.size} (pose, muscle) pairs "
            f"not smooth at the step); max |R_jaxmb - computeMomentArm| = {np.nanmax(d_nat):.2e} m"
            f" ({int(np.isnan(R_nat).sum())} NaN from OpenSim)"
        )
        per = {
            name: {
                "max_abs_diff_to_central_differences_m": float(d_smooth[:, :, j].max()),
                "poses_not_smooth": int(rough[:, j].sum()),
                "max_abs_diff_to_central_differences_all_poses_m": float(d_fd[:, :, j].max()),
                "max_abs_diff_to_computeMomentArm_m": float(np.nanmax(d_nat[:, :, j])),
                "computeMomentArm_nan": int(np.isnan(R_nat[:, :, j]).sum()),
            }
            for j, name in enumerate(names)
        }
        for name, v in per.items():
            print(
                f"  {name:9s} vs -dL/dq {v['max_abs_diff_to_central_differences_m']:.1e} m "
                f"({v['poses_not_smooth']} poses not smooth), vs computeMomentArm "
                f"{v['max_abs_diff_to_computeMomentArm_m']:.1e} m "
                f"({v['computeMomentArm_nan']} NaN)"
            )
        result["opensim"] = {
            "version": version,
            "poses": n,
            "native": {
                "api": "Muscle.computeMomentArm per muscle and coordinate, Python loop",
                "seconds": tn,
                "cpu_seconds": cn,
                "us_per_pose": tn / n * 1e6,
            },
            "central_differences": {
                "api": "Muscle.getLength at q +- 1e-6 rad per coordinate, Python loop",
                "seconds": tf,
                "cpu_seconds": cf,
                "us_per_pose": tf / n * 1e6,
            },
            "max_abs_diff_to_central_differences_m": float(d_smooth.max()),
            "pairs_not_smooth": int(rough.sum()),
            "max_abs_diff_to_computeMomentArm_m": float(np.nanmax(d_nat)),
            "per_muscle": per,
        }
        result["ratio_opensim_native_over_jaxmb"] = tn / t_jax
        result["ratio_opensim_central_differences_over_jaxmb"] = tf / t_jax
    name = "moment_arms" + ("" if jax.default_backend() == "cpu" else f"_{jax.default_backend()}")
    print("saved", save_results(name, result))
    _plot(result, RESULTS / f"{name}.png")
    print("saved", RESULTS / f"{name}.png")


if __name__ == "__main__":
    main()
