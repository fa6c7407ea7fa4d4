"""Exact muscle paths, lengths and moment arms per pose: jaxmb against OpenSim 4.6, side by side.

Issue 24's table, exact route: ``jax.jit(jax.vmap(lambda q: mb.lengths_and_moment_arms(model,
q)))`` with the model closed over (as users write it), float64, at each batch size: compiled
steady-state seconds per pose (best of ``--repeats``), compile seconds, and the compiled program's
temporary memory (XLA's memory analysis) and the process's peak resident memory. OpenSim, in the
same process on the same poses: ``Muscle.getLength`` and ``Muscle.computeMomentArm`` for every
muscle and every coordinate (the whole matrix jaxmb returns), after ``realizePosition``, in a
Python loop (every OpenSim coordinate set at each pose, coupled and locked ones as jaxmb's joint
map gives them), whose values are compared with jaxmb's (the largest differences are recorded: both
sides compute the same paths). Poses are uniform over each coordinate's range clipped to
±``--span`` rad (or m).

    python benchmarks/exact_paths.py [--models gait2354,gait10dof18musc] [--batches 1,256,4096]
        [--opensim-poses 100] [--name exact_paths]

Writes ``benchmarks/results/<name>.json``. Run one model per process when peak memory matters
(``ru_maxrss`` is the process's peak so far).

Before against after: ``--base TREE`` (another jaxmb checkout) compiles the same program at batch
``--base-batch`` with that tree's jaxmb (a second process, ``PYTHONPATH=TREE``, which serializes
its executable) and this tree's, loads both here and times them in turn with OpenSim's loop, for
``--rounds`` rounds (a busy machine hits all three alike); their moment arms are compared. Both
compile times are recorded.

    python benchmarks/exact_paths.py --models arm26 --base ../base --batches 4096 --name NAME
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import metadata, save_results, timeit_compiled
from jax.experimental.serialize_executable import deserialize_and_load, serialize

# XLA_FLAGS as the user gave them: the base tree's process starts from these, and sets its own
# XLA options, as this tree's jaxmb does on import
USER_XLA_FLAGS = os.environ.get("XLA_FLAGS")

import jaxmb as mb  # noqa: E402
from jaxmb.io.stored_programs import _initialize_lapack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "arm26": ROOT / "jaxmb" / "data" / "arm26.osim",
    "gait10dof18musc": ROOT / "tests" / "data" / "osim" / "zoo" / "gait10dof18musc.osim",
    "gait2354": ROOT / "tests" / "data" / "osim" / "gait2354_simbody.osim",
    "hamner2010": ROOT / "tests" / "data" / "osim" / "zoo" / "FullBodyModel_Hamner2010_v2_0.osim",
    "mobl_arms": ROOT / "tests" / "data" / "osim" / "MoBL_ARMS_module6_7_CMC.osim",
}


def _poses(imp, model, n, span, seed=0):
    lo, hi = [], []
    by_name = {c.name: c for c in imp.coordinates}
    for c in model.coordinate_names:
        r = by_name[c].range if c in by_name else (-span, span)
        lo.append(max(r[0], -span))
        hi.append(min(r[1], span))
    lo, hi = np.asarray(lo), np.asarray(hi)
    return lo + (hi - lo) * np.random.default_rng(seed).uniform(size=(n, model.nq))


def _opensim(path, names, muscle_names, poses, full):
    """Seconds per pose of getLength + computeMomentArm for every (muscle, coordinate), and the
    values of the last pass: lengths (P, nm) and moment arms (P, nq, nm), jaxmb's muscle order.
    ``full``: (names, values (P, nfull)) of every OpenSim coordinate at each pose (coupled and
    locked ones included, as jaxmb's joint map gives them), all set before realizing."""
    import opensim as osim

    om = osim.Model(str(path))
    state = om.initSystem()
    cs = om.getCoordinateSet()
    crd = [cs.get(n) for n in names]
    all_crd = [cs.get(n) for n in full[0]]
    mus = om.getMuscles()
    by_name = {mus.get(j).getName(): mus.get(j) for j in range(mus.getSize())}
    ms = [by_name[n] for n in muscle_names]
    L = np.zeros((len(poses), len(ms)))
    R = np.zeros((len(poses), len(crd), len(ms)))
    t0 = time.perf_counter()
    for p, Q in enumerate(full[1]):
        for c, v in zip(all_crd, Q, strict=True):
            c.setValue(state, float(v), False)
        om.realizePosition(state)
        for j, m in enumerate(ms):
            L[p, j] = m.getLength(state)
            for i, c in enumerate(crd):
                R[p, i, j] = m.computeMomentArm(state, c)
    return (time.perf_counter() - t0) / len(poses), osim.__version__, mus.getSize(), L, R


def _load(name):
    """(OpenSim import, jaxmb model) of a benchmark model; muscles left out are named in the JSON
    instead of warned about."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.io.read_osim(MODELS[name]), mb.io.load_osim(MODELS[name])


def _program(model):
    """The benchmarked program: lengths and moment arms, jit of vmap over poses."""
    return jax.jit(jax.vmap(lambda q: mb.lengths_and_moment_arms(model, q)))


def _serialize(name, batch, out, span):
    """(In the base tree's process) compile the benchmark's program at ``batch`` poses and write
    the serialized executable and its compile seconds to ``out``."""
    imp, model = _load(name)
    qs = jnp.asarray(_poses(imp, model, batch, span))
    t = time.perf_counter()
    compiled = _program(model).lower(qs).compile()
    seconds = time.perf_counter() - t
    Path(out).write_bytes(pickle.dumps((serialize(compiled), seconds, mb.__file__)))


def _against_base(name, args, model, f, poses, full):
    """Time the base tree's program, this tree's and OpenSim's loop in turn (``--rounds``)."""
    b = args.base_batch
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "base.pkl"
        env = dict(os.environ, PYTHONPATH=str(Path(args.base).resolve()))
        env.pop("XLA_FLAGS", None)
        if USER_XLA_FLAGS is not None:
            env["XLA_FLAGS"] = USER_XLA_FLAGS
        cmd = [sys.executable, __file__, "--serialize", str(out), "--models", name,
               "--base-batch", str(b), "--span", str(args.span)]  # fmt: skip
        subprocess.run(cmd, env=env, check=True)
        stored, base_compile, base_file = pickle.loads(out.read_bytes())
    _initialize_lapack()  # the base's program may call LAPACK, which a fresh process has not loaded
    base = deserialize_and_load(*stored)
    qs = jnp.asarray(poses[:b])
    jax.clear_caches()  # a batch the table above compiled would otherwise come back compiled
    t = time.perf_counter()
    this = f.lower(qs).compile()
    this_compile = time.perf_counter() - t
    dR = float(np.max(np.abs(np.asarray(base(qs)[1]) - np.asarray(this(qs)[1]))))
    n = len(full[1])  # the poses OpenSim's coordinates were set for
    us = {"base": [], "this": [], "opensim": []}
    for _ in range(args.rounds):
        for key, fn in (("base", base), ("this", this)):
            s = timeit_compiled(fn, qs, repeats=1, warmup=1)
            us[key].append(s / b * 1e6)
        t_os = _opensim(MODELS[name], model.coordinate_names, model.muscle_names, poses[:n], full)
        us["opensim"].append(t_os[0] * 1e6)
    med = {k: statistics.median(v) for k, v in us.items()}
    print(f"{name} batch {b}, median of {args.rounds} rounds in turn: base {med['base']:.1f}, this "
          f"{med['this']:.1f}, OpenSim {med['opensim']:.1f} us/pose; this/base "
          f"{med['this'] / med['base']:.3f}, this/OpenSim {med['this'] / med['opensim']:.3f}; "
          f"compile base {base_compile:.1f} s, this {this_compile:.1f} s; moment arms differ by "
          f"{dR:.1e} m")  # fmt: skip
    compile_s = dict(base=base_compile, this=this_compile)
    return dict(base_tree=str(Path(args.base).resolve()), base_jaxmb=base_file, batch=b,
                us_per_pose=us, median_us_per_pose=med, compile_seconds=compile_s,
                max_abs_moment_arm_diff_m=dR)  # fmt: skip


def _full_coordinates(imp, model, poses):
    """(names, values (P, nfull)) of every OpenSim coordinate at each pose."""
    jm = model.joint_map
    if hasattr(jm, "full_coordinates"):  # an imported model: OpenSim's every coordinate
        return ([c.name for c in imp.coordinates],
                np.asarray(jax.vmap(jm.full_coordinates)(jnp.asarray(poses))))  # fmt: skip
    return (list(model.coordinate_names), poses)


def bench(name, args):
    path = MODELS[name]
    imp, model = _load(name)
    poses = _poses(imp, model, max(args.batches), args.span)
    f = _program(model)
    rows = {}
    for b in args.batches:
        qs = jnp.asarray(poses[:b])
        t = time.perf_counter()
        compiled = f.lower(qs).compile()
        c = time.perf_counter() - t
        temp = compiled.memory_analysis().temp_size_in_bytes
        s = timeit_compiled(compiled, qs, repeats=args.repeats, warmup=1)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rows[str(b)] = dict(us_per_pose=s / b * 1e6, compile_seconds=c, temp_bytes=int(temp),
                            peak_rss_bytes_so_far=int(rss))  # fmt: skip
        print(f"{name} batch {b}: {s / b * 1e6:.2f} us/pose, compile {c:.1f} s, temp "
              f"{temp / 1e9:.2f} GB, peak RSS so far {rss / 1e9:.2f} GB", flush=True)  # fmt: skip
    out = dict(model=name, muscles=len(model.muscles.muscles), coordinates=model.nq, jaxmb=rows)
    n = min(args.opensim_poses or 100, len(poses))  # OpenSim's poses (100 with --base alone)
    if args.opensim_poses or args.base:
        full = _full_coordinates(imp, model, poses[:n])
    if args.opensim_poses:
        names = model.muscle_names
        t_os, version, nm, L_os, R_os = _opensim(path, model.coordinate_names, names,
                                                 poses[:n], full)  # fmt: skip
        L, R = f(jnp.asarray(poses[:n]))
        dL = float(np.max(np.abs(np.asarray(L) - L_os)))
        dR = float(np.max(np.abs(np.asarray(R) - R_os)))
        out["opensim"] = dict(version=version, poses=n, muscles=nm, us_per_pose=t_os * 1e6,
                              api="getLength + computeMomentArm, every muscle and coordinate",
                              max_abs_length_diff_m=dL, max_abs_moment_arm_diff_m=dR)  # fmt: skip
        print(f"{name}: against OpenSim on those poses, lengths within "
              f"{out['opensim']['max_abs_length_diff_m']:.1e} m, moment arms within "
              f"{out['opensim']['max_abs_moment_arm_diff_m']:.1e} m")  # fmt: skip
        for r in rows.values():
            r["ratio_jaxmb_over_opensim"] = r["us_per_pose"] / (t_os * 1e6)
        print(
            f"{name} OpenSim {version}: {t_os * 1e6:.1f} us/pose; jaxmb / OpenSim at batch "
            + ", ".join(f"{b}: {r['ratio_jaxmb_over_opensim']:.4f}" for b, r in rows.items())
        )
    if args.base:
        out["against_base"] = _against_base(name, args, model, f, poses, full)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gait2354")
    ap.add_argument("--batches", default="1,256,4096")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--span", type=float, default=0.5, help="pose range clip (rad or m)")
    ap.add_argument("--opensim-poses", type=int, default=100, help="0: skip OpenSim")
    ap.add_argument("--name", default="exact_paths")
    ap.add_argument("--base", default=None, help="another jaxmb tree to time in turn with this one")
    ap.add_argument("--base-batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--serialize", default=None, help=argparse.SUPPRESS)  # the base's process
    args = ap.parse_args()
    if args.serialize:
        _serialize(args.models, args.base_batch, args.serialize, args.span)
        return
    args.batches = [int(b) for b in args.batches.split(",")]
    results = [bench(m, args) for m in args.models.split(",")]
    save_results(args.name, {"meta": metadata(precision="float64"), "models": results})


if __name__ == "__main__":
    main()
