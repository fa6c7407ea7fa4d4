"""Throughput of the Newton–Euler matrix formalism: frames/s for a 3-segment chain.

Peers, same algebra (assemble M, C, G, B, E of seed 000 and solve ``B x = M acc − C − G − E``):
  * jaxmb: :func:`jaxmb.newton_euler.joint_loads` core, jit + vmap over all frames at once, with
    the default forward substitution (B is unit lower triangular) and with a general LU solve;
  * NumPy: a straightforward per-frame Python loop with ``numpy.linalg.solve``. It is run on a
    subset of the frames (``--numpy-frames``) and its per-frame time extrapolated to the full batch.
Both in float64; the two answers are compared on the subset. Compile time is reported apart;
steady state is the median of ``--repeats`` timed calls (``block_until_ready``).

    python benchmarks/newton_euler.py [--frames 100000] [--numpy-frames 2000] [--repeats 5]

Writes ``benchmarks/results/newton_euler.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import jaxmb_source

import jaxmb
from jaxmb import newton_euler as ne


def _rotations(rng, shape):
    """Uniformly random rotation matrices from unit quaternions."""
    q = rng.normal(size=shape + (4,))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    return np.stack([np.stack(r, -1) for r in rows], -2)


def problem(nt: int, seed: int = 0):
    """A 3-segment chain (foot, shank, thigh) and nt frames of random kinematics and ground load."""
    rng = np.random.default_rng(seed)
    chain = ne.segment_chain(
        ("foot", "shank", "thigh"),
        [1.0, 3.2, 7.1],
        [0.004 * np.eye(3), 0.05 * np.eye(3), 0.1 * np.eye(3)],
    )
    v = lambda s=1.0: jnp.asarray(rng.normal(size=(nt, 3, 3)) * s)
    motion = ne.ChainMotion(
        R=jnp.asarray(_rotations(rng, (nt, 3))), com=v(), acc=v(5), omega=v(3), alpha=v(30),
        joint=v(),
    )  # fmt: skip
    load = ne.ground_load(
        rng.normal(size=(nt, 3)) * 500, rng.normal(size=(nt, 3)), rng.normal(size=(nt, 3))
    )
    return chain, motion, load


def _skew(v):
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def numpy_loop(mass, inertia, R, com, acc, omega, alpha, joint, grf, cop, free, g):
    """The seed's algebra, one frame at a time, in plain NumPy."""
    nt, ns = R.shape[:2]
    out = np.empty((nt, ns, 6))
    eye = np.eye(3)
    for t in range(nt):
        M = np.zeros((6 * ns, 6 * ns))
        B = np.zeros((6 * ns, 6 * ns))
        a = np.empty(6 * ns)
        rhs0 = np.zeros(6 * ns)
        for i in range(ns):
            f, m = 6 * i, 6 * i + 3
            M[f:m, f:m] = mass[i] * eye
            M[m : m + 3, m : m + 3] = inertia[i]
            a[f:m], a[m : m + 3] = acc[t, i], alpha[t, i]
            rhs0[m : m + 3] = -np.cross(omega[t, i], inertia[i] @ omega[t, i])  # C
            rhs0[f:m] += mass[i] * g  # G
            B[f:m, f:m] = eye
            B[m : m + 3, f:m] = R[t, i] @ _skew(joint[t, i] - com[t, i])
            B[m : m + 3, m : m + 3] = eye
            if i > 0:
                B[f:m, f - 6 : f - 3] = -eye
                B[m : m + 3, f - 6 : f - 3] = -R[t, i] @ _skew(joint[t, i - 1] - com[t, i])
                B[m : m + 3, f - 3 : f] = -R[t, i] @ R[t, i - 1].T
            else:
                rhs0[0:3] += grf[t]
                rhs0[3:6] += R[t, 0] @ (_skew(cop[t] - com[t, 0]) @ grf[t] + free[t])
        out[t] = np.linalg.solve(B, M @ a - rhs0).reshape(ns, 6)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--numpy-frames", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "newton_euler.json"))
    args = ap.parse_args()

    chain, motion, load = problem(args.frames)
    g = jnp.asarray(ne.GRAVITY_Y_UP)
    jax_results = {}
    for method in ("triangular", "lu"):
        run = lambda method=method: ne._joint_loads(chain, motion, load, g, method)
        t0 = time.perf_counter()
        jax.block_until_ready(run())
        compile_s = time.perf_counter() - t0
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = jax.block_until_ready(run())
            times.append(time.perf_counter() - t0)
        steady = float(np.median(times))
        jax_results[method] = {
            "compile_s": compile_s,
            "steady_state_s": steady,
            "frames_per_s": args.frames / steady,
            "repeats": args.repeats,
        }
        if method == "triangular":
            F, Mloc, _ = out
    jax_s = jax_results["triangular"]["steady_state_s"]

    k = min(args.numpy_frames, args.frames)
    arr = lambda x: np.asarray(x[:k])
    np_args = (
        np.asarray(chain.mass), np.asarray(chain.inertia), arr(motion.R), arr(motion.com),
        arr(motion.acc), arr(motion.omega), arr(motion.alpha), arr(motion.joint),
        arr(load.force), arr(load.cop), arr(load.free_moment), np.asarray(g),
    )  # fmt: skip
    numpy_loop(*np_args[:2], *(a[:10] for a in np_args[2:11]), np_args[11])  # warm-up
    t0 = time.perf_counter()
    x_np = numpy_loop(*np_args)
    np_s_subset = time.perf_counter() - t0
    np_per_frame = np_s_subset / k
    np_s = np_per_frame * args.frames
    x_jax = np.concatenate([np.asarray(F[:k]), np.asarray(Mloc[:k])], -1)
    agree = float(np.abs(x_jax - x_np).max() / np.abs(x_np).max())

    dev = jax.devices()[0]
    result = {
        "benchmark": "newton_euler joint loads, 3-segment chain",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "jax_device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}",
            "load_average_1_5_15min": list(os.getloadavg()),
        },
        "versions": {
            "jax": jax.__version__,
            "numpy": np.__version__,
            "jaxmb": jaxmb.__version__,
            "python": platform.python_version(),
        },  # fmt: skip
        "jaxmb_source": jaxmb_source(),
        "precision": "float64",
        "batch_frames": args.frames,
        "jax": jax_results,
        "numpy_loop": {
            "frames_timed": k,
            "timed_s": np_s_subset,
            "per_frame_s": np_per_frame,
            "extrapolated_s": np_s,
            "frames_per_s": 1.0 / np_per_frame,
            "note": f"per-frame loop timed on {k} frames, extrapolated linearly to {args.frames}",
        },
        "speedup_jax_over_numpy": np_s / jax_s,
        "speedup_jax_lu_over_numpy": np_s / jax_results["lu"]["steady_state_s"],
        "max_relative_difference": agree,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
