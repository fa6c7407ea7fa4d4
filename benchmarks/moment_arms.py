"""Moment arms of all six arm26 muscles over 10,000 poses: jaxmb (compiled, batched) vs OpenSim.

jaxmb: ``jax.jit(jax.vmap(moment_arms))`` over the batch of poses (closed form, Eq. 193), compiled
steady state; compile time reported apart. OpenSim 4.6: a Python loop over poses that sets the two
coordinates, realizes the position stage and calls ``Muscle.computeMomentArm`` for every muscle and
coordinate (its native moment-arm API). OpenSim is timed on ``--opensim-poses`` poses (default
500) and the per-pose time is extrapolated to the full batch (stated in the output). The two
agree to the extent stated in tests/test_arm26_opensim.py; the max difference over the timed
OpenSim poses is recorded too.

    python benchmarks/moment_arms.py [--poses 10000] [--opensim-poses 500] [--no-opensim]

Writes benchmarks/results/moment_arms.json.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import compile_seconds, metadata, save_results, timeit_compiled

import jaxmb  # noqa: F401  (x64 on)
from jaxmb.models.arm26 import arm26
from jaxmb.muscles import moment_arms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--poses", type=int, default=10_000)
    ap.add_argument("--opensim-poses", type=int, default=500)
    ap.add_argument("--no-opensim", action="store_true")
    args = ap.parse_args()

    model = arm26()
    rng = np.random.default_rng(0)
    poses = np.stack(
        [rng.uniform(-1.2, 2.8, args.poses), rng.uniform(0.05, 2.2, args.poses)], axis=1
    )
    qs = jnp.asarray(poses, dtype=jnp.float64)
    fn = jax.jit(jax.vmap(lambda q: moment_arms(model, q)))
    t_compile = compile_seconds(fn, qs)
    t_jax = timeit_compiled(fn, qs, repeats=7)
    R_jax = np.asarray(fn(qs))
    print(
        f"jaxmb: {args.poses} poses in {t_jax * 1e3:.2f} ms (compile {t_compile:.1f} s), "
        f"{t_jax / args.poses * 1e6:.3f} µs/pose, {jax.default_backend()}, "
        "float64"
    )

    result = {
        "meta": metadata(batch=args.poses, benchmark="arm26 moment arms, 6 muscles x 2 coords"),
        "jaxmb": {
            "seconds": t_jax,
            "compile_seconds": t_compile,
            "us_per_pose": t_jax / args.poses * 1e6,
        },
    }

    if not args.no_opensim:
        import opensim as osim

        from jaxmb.models.arm26 import __file__ as arm_file  # the shipped .osim

        path = str(
            __import__("pathlib").Path(arm_file).resolve().parents[1] / "data" / "arm26.osim"
        )
        om = osim.Model(path)
        state = om.initSystem()
        coords, muscles = om.getCoordinateSet(), om.getMuscles()
        nm, nc = muscles.getSize(), coords.getSize()
        n_os = min(args.opensim_poses, args.poses)
        R_os = np.zeros((n_os, nc, nm))
        t0 = time.perf_counter()
        for k in range(n_os):
            for i in range(nc):
                coords.get(i).setValue(state, float(poses[k, i]), False)
            om.realizePosition(state)
            for j in range(nm):
                mus = muscles.get(j)
                for i in range(nc):
                    R_os[k, i, j] = mus.computeMomentArm(state, coords.get(i))
        t_os_sub = time.perf_counter() - t0
        t_os = t_os_sub / n_os * args.poses
        diff = float(np.abs(R_os - R_jax[:n_os]).max())
        print(
            f"OpenSim {osim.__version__}: {n_os} poses in {t_os_sub:.2f} s "
            f"({t_os_sub / n_os * 1e6:.1f} µs/pose), extrapolated to {args.poses}: {t_os:.1f} s"
        )
        print(
            f"ratio OpenSim / jaxmb = {t_os / t_jax:.1f}x ; max |R_jaxmb - R_OpenSim| over the "
            f"timed poses = {diff:.2e} m (wrapping differences, see tests/test_arm26_opensim.py)"
        )
        result["opensim"] = {
            "version": osim.__version__,
            "timed_poses": n_os,
            "seconds_timed": t_os_sub,
            "us_per_pose": t_os_sub / n_os * 1e6,
            "seconds_extrapolated": t_os,
            "extrapolated": n_os < args.poses,
            "api": "Muscle.computeMomentArm per muscle and coordinate, Python loop",
            "max_abs_diff_m": diff,
        }
        result["ratio_opensim_over_jaxmb"] = t_os / t_jax
    name = "moment_arms" + ("" if jax.default_backend() == "cpu" else f"_{jax.default_backend()}")
    print("saved", save_results(name, result))


if __name__ == "__main__":
    main()
