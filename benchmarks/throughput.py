"""Throughput of jaxmb against Pinocchio, MuJoCo and MJX, side by side in one script.

Sections (issue 8, "Throughput benchmarks"):

1. ``terms``: M, N q̇ and G together for ``chain(7)`` and ``chain(30)`` at batch 1, 64 and 4096,
   jaxmb's tree path (vmap of the per-state functions), closed-form path and the batch-last
   ``jaxmb.dynamics.tree`` entry points (``batched``: batch-first arrays in and out;
   ``batched_bm``: batch-last arrays end to end), float64 and float32, against Pinocchio's
   ``crba`` + ``nonLinearEffects`` per state. Pinocchio is timed two ways: (a) a tight Python loop
   over the states (includes the binding overhead of two calls per state), and (b) a C++ loop
   compiled against Pinocchio's own headers (``benchmarks/pin_chain_bench.cpp``, g++ -O3
   -march=native) when a compiler is present — the fair, overhead-free C++ cost.
   The 4096 batch is also run sharded over 2 forced host devices
   (``--xla_force_host_platform_device_count=2``, a subprocess), since vmap alone uses one core.
2. ``steps``: fixed-step RK4 forward-dynamics steps of ``chain(7)``, batch 4096, per state-step,
   against MuJoCo's C ``mj_step`` (RK4, contacts off) through ``mujoco.rollout`` (C loop, 1 thread
   and all threads) and a Python loop over ``mj_step``, and MJX (``mjx.step`` vmapped, same CPU
   backend, RK4).
3. ``andrews``: 4096 variants of Andrews' squeezer (spring stiffness × motor torque) to 0.03 s at
   1e-6 — run when ``jaxmb.models.andrews_squeezer`` exists; the MuJoCo peer of that mechanism is
   not built here (reported as such).
4. ``scaling``: per-state time of both paths against the number of bodies n (``chain(n)``) and
   against nq (``n`` bodies driven by nq coordinates through a dense linear joint map), fitted
   power laws, and peak temporary memory per state from XLA's compiled memory analysis.

Every timing is compiled steady state (``block_until_ready``; the first call's compile time is
reported apart), wall time and process CPU time (all threads; on a loaded shared machine the CPU
time is the comparable figure, so run pinned: ``taskset -c 0``), the best of several repeats (the
load average is recorded). Results: ``benchmarks/results/throughput.json``
and ``throughput_batch.png`` / ``throughput_scaling.png``. ``--quick`` runs tiny sizes (CI smoke).

    python benchmarks/throughput.py            # full run (~10-20 min on 2 cores)
    python benchmarks/throughput.py --quick    # seconds-to-a-minute smoke run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, for a CI smoke test")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="output directory")
    p.add_argument(
        "--sections", default="terms,steps,andrews,scaling", help="comma-separated subset"
    )
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-sharded", action="store_true", help="skip the 2-device subprocess")
    p.add_argument("--no-mjx", action="store_true", help="skip MJX (slow to compile on CPU)")
    p.add_argument("--json-name", default=None, help="output file name (default throughput.json)")
    p.add_argument("--terms-n", default=None, help="comma-separated chain sizes for 'terms'")
    p.add_argument(
        "--call-budget",
        type=float,
        default=30.0,
        help="skip a batch whose estimated call time exceeds this many seconds",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        default=None,
        help="merge these result JSONs (terms rows concatenated) into --json-name, plot",
    )
    p.add_argument(
        "--methods",
        default="tree,closed_form,batched,batched_bm",
        help="jaxmb routes for 'terms' (tree, closed_form, batched, batched_bm)",
    )
    p.add_argument(
        "--step-methods",
        default="tree,batched",
        help="jaxmb RK4 routes for 'steps': tree (vmap of forward_dynamics), batched",
    )
    p.add_argument("--batches", default=None, help="comma-separated batch sizes for 'terms'")
    p.add_argument("--dtypes", default=None, help="comma-separated dtypes (float64,float32)")
    p.add_argument("--step-k", type=int, default=None, help="RK4 steps per call in 'steps'")
    p.add_argument("--sharded-child", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--mjx-child", default="", help=argparse.SUPPRESS)
    return p.parse_args()


def mjcf_chain(n, timestep):
    """chain(n) in MJCF: hinge axes x, y, z, ...; bodies 0.3 m apart along z; contacts off."""
    axes = ("1 0 0", "0 1 0", "0 0 1")
    open_, close = [], []
    for i in range(n):
        pos = "0 0 0" if i == 0 else "0 0 0.3"
        open_.append(
            f'<body name="link{i}" pos="{pos}">'
            f'<joint name="j{i}" type="hinge" axis="{axes[i % 3]}" damping="0" armature="0"/>'
            f'<inertial pos="0 0 0.15" mass="{1.0 + 0.1 * i!r}" diaginertia="0.02 0.02 0.005"/>'
        )
        close.append("</body>")
    return (
        f'<mujoco model="chain{n}"><option timestep="{timestep!r}" integrator="RK4" '
        'gravity="0 0 -9.81"><flag contact="disable" constraint="disable"/></option>'
        "<worldbody>" + "".join(open_) + "".join(close) + "</worldbody></mujoco>"
    )


def _mjx_version():
    import importlib.metadata as md

    try:
        return md.version("mujoco-mjx")
    except Exception:
        return None


def mjx_child(spec):
    """MJX in its own process: JAX without jaxmb's float64 default (MJX's native float32)."""
    import time

    import jax
    import jax.numpy as jnp
    import mujoco
    import numpy as np
    from mujoco import mjx

    n, B, K, dt = (float(x) for x in spec.split(","))
    n, B, K = int(n), int(B), int(K)
    m = mujoco.MjModel.from_xml_string(mjcf_chain(n, dt))
    mx = mjx.put_model(m)
    rng = np.random.default_rng(2)
    q = jnp.asarray(rng.uniform(-np.pi, np.pi, (B, n)))
    qd = jnp.asarray(rng.uniform(-2, 2, (B, n)))

    def run(q, qd):
        d = mjx.make_data(mx).replace(qpos=q, qvel=qd)
        d = jax.lax.fori_loop(0, K, lambda _, d: mjx.step(mx, d), d)
        return d.qpos

    f = jax.jit(jax.vmap(run))
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(q, qd))
    compile_s = time.perf_counter() - t0
    samples, cpu = [], []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(f(q, qd))
        samples.append((time.perf_counter() - t0) / (B * K))
        cpu.append((time.process_time() - c0) / (B * K))
    res = dict(per_state_step_s=float(np.min(samples)), compile_s=compile_s,
               cpu_per_state_step_s=float(np.min(cpu)), mjx_version=_mjx_version(),
               out_dtype=str(out.dtype), q_final=np.asarray(out, float).tolist())  # fmt: skip
    print("MJX" + json.dumps(res), flush=True)


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None and ARGS.mjx_child:
    import json

    mjx_child(ARGS.mjx_child)
    sys.exit(0)
if ARGS is not None and ARGS.sharded_child:
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={ARGS.sharded_child}"
    )
    os.environ["JAX_PLATFORMS"] = "cpu"

sys.path.insert(0, ROOT)

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import jaxmb_source  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import batch  # noqa: E402
from jaxmb.dynamics import bias_forces, forward_dynamics, gravity_forces, mass_matrix  # noqa: E402
from jaxmb.dynamics import tree as bt  # noqa: E402
from jaxmb.model import Body, build_model  # noqa: E402
from jaxmb.models.chain import chain  # noqa: E402

# ------------------------------------------------------------------------------------------------
# helpers


def _block(x):
    return jax.block_until_ready(x)


TIMING_STATS = {}


def time_compiled(fn, *args, repeats=5, min_time=0.05):
    """(compile+first-call seconds, steady-state seconds per call) of a jitted fn.

    The steady-state figure is the *best* of ``repeats`` timed blocks (each of enough calls to last
    ``min_time``): on a shared machine the minimum is the least contaminated by other processes;
    the median is kept in ``TIMING_STATS`` for the record.
    """
    t0 = time.perf_counter()
    _block(fn(*args))
    first = time.perf_counter() - t0
    # how many calls per repeat to last at least min_time
    t0 = time.perf_counter()
    _block(fn(*args))
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(min_time / one))
    samples, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(inner):
            out = fn(*args)
        _block(out)
        samples.append((time.perf_counter() - t0) / inner)
        cpu.append((time.process_time() - c0) / inner)
    TIMING_STATS["last_median_s"] = float(np.median(samples))
    # process CPU time (all threads): on a loaded machine it is the least contaminated figure
    TIMING_STATS["last_cpu_s"] = float(np.min(cpu))
    return first, float(np.min(samples))


def cast_model(model, dtype):
    return jax.tree_util.tree_map(
        lambda x: (
            x.astype(dtype) if eqx.is_array(x) and jnp.issubdtype(x.dtype, jnp.floating) else x
        ),
        model,
    )


def peak_temp_bytes(jitted, *args):
    try:
        ma = jitted.lower(*args).compile().memory_analysis()
        return int(ma.temp_size_in_bytes + ma.output_size_in_bytes)
    except Exception:  # memory analysis is backend-dependent
        return None


def terms_fn(method):
    def f(model, q, qd):
        return (
            mass_matrix(model, q, method=method),
            bias_forces(model, q, qd, method=method),
            gravity_forces(model, q, method=method),
        )

    return f


TERMS = {m: terms_fn(m) for m in ("tree", "closed_form")}
# jaxmb.dynamics.tree: batch-last CRBA/RNEA over the whole batch (not vmapped). "batched" takes and
# returns batch-first arrays like the vmapped paths (transposes included); "batched_bm" works on
# batch-last (nq, B) arrays end to end, the layout a batch-last integrator keeps.
BATCHED = {
    "batched": lambda m, q, qd: bt.batched_terms(m, q, qd, identity_map=True),
}


class FastJit:
    """``jax.jit`` of ``fn(model, *args)`` with the model's static part closed over.

    ``eqx.filter_jit`` flattens the whole model pytree on every call (hundreds of µs of Python at
    batch 1); ``jax.jit`` on the model's array leaves uses JAX's C++ dispatch path instead.
    """

    def __init__(self, fn, model):
        dyn, self.static = eqx.partition(model, eqx.is_array)
        self.dyn = dyn
        self.jitted = jax.jit(lambda dyn, *a: fn(eqx.combine(dyn, self.static), *a))

    def __call__(self, model, *args):
        return self.jitted(self.dyn, *args)

    def lower(self, model, *args):
        return self.jitted.lower(self.dyn, *args)


def batched_terms(method, model, chunk=None):
    if method in ("batched", "batched_bm"):
        if method == "batched_bm":  # states are passed batch-last (nq, B): no transposes at all
            fn = lambda m, qT, qdT: bt.equations_of_motion_bm(m, qT, qdT, True, True)
            return FastJit(fn, model)
        return FastJit(BATCHED[method], model)
    f = TERMS[method]
    if chunk is None:
        return FastJit(jax.vmap(f, in_axes=(None, 0, 0)), model)

    def g(model, q, qd):
        return jax.lax.map(lambda x: f(model, *x), (q, qd), batch_size=chunk)

    return FastJit(g, model)


def closed_form_chunk(n, nq, B):
    """Chunk the closed form's vmap when its (nb,4,4,nq,nq) tensors would not fit in memory."""
    per_state = 8 * n * 16 * nq * nq * 6  # a few live copies of ddA-sized tensors
    budget = 1.5e9
    if per_state * B <= budget:
        return None
    return max(1, int(budget // per_state))


def states(B, nq, seed=0, dtype=jnp.float64):
    rng = np.random.default_rng(seed)
    q = jnp.asarray(rng.uniform(-np.pi, np.pi, (B, nq)), dtype=dtype)
    qd = jnp.asarray(rng.uniform(-2, 2, (B, nq)), dtype=dtype)
    return q, qd


def versions():
    out = {"python": platform.python_version(), "jax": jax.__version__}
    for name in ("jaxlib", "numpy", "equinox", "diffrax", "mujoco", "pinocchio"):
        try:
            out[name] = __import__(name).__version__
        except Exception:
            out[name] = None
    try:
        import importlib.metadata as md

        out["mujoco-mjx"] = md.version("mujoco-mjx")
    except Exception:
        out["mujoco-mjx"] = None
    return out


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "jax_devices": [str(d) for d in jax.devices()],
        "jax_backend": jax.default_backend(),
    }


# ------------------------------------------------------------------------------------------------
# peers: Pinocchio


def pin_chain(n):
    import pinocchio as pin

    model = pin.Model()
    model.gravity.linear = np.array([0.0, 0.0, -9.81])
    parent = 0
    joints = (pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ)
    for i in range(n):
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.0 if i == 0 else 0.3]))
        j = model.addJoint(parent, joints[i % 3](), placement, f"j{i}")
        inertia = pin.Inertia(1.0 + 0.1 * i, np.array([0, 0, 0.15]), np.diag([0.02, 0.02, 0.005]))
        model.appendBodyToJoint(j, inertia, pin.SE3.Identity())
        parent = j
    return model


def pin_check(n):
    """Max |Δ| of M and (N q̇ − G) between Pinocchio and jaxmb on chain(n) at one random state."""
    import pinocchio as pin

    pm = pin_chain(n)
    pdata = pm.createData()
    q, qd = states(1, n, seed=3)
    q, qd = np.asarray(q[0]), np.asarray(qd[0])
    M = pin.crba(pm, pdata, q)
    M = np.triu(M) + np.triu(M, 1).T
    nle = pin.nonLinearEffects(pm, pdata, q, qd)
    m = chain(n)
    Mj = np.asarray(mass_matrix(m, q))
    nj = np.asarray(bias_forces(m, q, qd) - gravity_forces(m, q))
    return float(np.abs(M - Mj).max()), float(np.abs(nle - nj).max())


def pin_python_loop(n, B):
    """Seconds per state of crba + nonLinearEffects in a tight Python loop."""
    import pinocchio as pin

    pm = pin_chain(n)
    pdata = pm.createData()
    q, qd = states(B, n, seed=1)
    qs, qds = [np.asarray(x) for x in q], [np.asarray(x) for x in qd]
    crba, nle = pin.crba, pin.nonLinearEffects
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for a, b in zip(qs, qds, strict=True):
            crba(pm, pdata, a)
            nle(pm, pdata, a, b)
        samples.append((time.perf_counter() - t0) / B)
    return float(np.min(samples))


def pin_cpp_build():
    """Compile benchmarks/pin_chain_bench.cpp against the pip-installed Pinocchio, or None."""
    cxx = shutil.which("g++") or shutil.which("c++")
    try:
        import pinocchio

        prefix = os.path.abspath(os.path.join(os.path.dirname(pinocchio.__file__), *[".."] * 4))
    except Exception:
        return None, "pinocchio not importable"
    inc = os.path.join(prefix, "include")
    if cxx is None or not os.path.exists(os.path.join(inc, "pinocchio", "algorithm", "crba.hpp")):
        return None, "no C++ compiler or Pinocchio headers"
    exe = os.path.join(os.environ.get("TMPDIR", "/tmp"), "jaxmb_pin_chain_bench")
    src = os.path.join(HERE, "pin_chain_bench.cpp")
    if os.path.exists(exe) and os.path.getmtime(exe) > os.path.getmtime(src):
        return exe, "cached"
    cmd = [
        cxx, "-O3", "-march=native", "-DNDEBUG", "-std=c++17",
        # the defines Pinocchio's CMake config exports (its joint variant has 25 alternatives)
        "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_MPL_LIMIT_LIST_SIZE=30",
        "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
        f"-I{inc}", f"-I{os.path.join(inc, 'eigen3')}", src, "-o", exe,
        f"-L{os.path.join(prefix, 'lib')}", "-lpinocchio_default",
        f"-Wl,-rpath,{os.path.join(prefix, 'lib')}",
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, "compile failed: " + r.stderr[-500:]
    return exe, " ".join(cmd)


PIN_CPU = {}


def pin_cpp(exe, n, B, repeats=20):
    """Wall seconds per state (best pass); the best pass's process CPU time goes to PIN_CPU[n]."""
    r = subprocess.run([exe, str(n), str(B), str(repeats)], capture_output=True, text=True)
    wall = None
    for line in r.stdout.splitlines():
        if line.startswith("ns_per_state"):
            wall = float(line.split()[1]) * 1e-9
        if line.startswith("cpu_ns_per_state"):
            PIN_CPU[n] = float(line.split()[1]) * 1e-9
    return wall


# ------------------------------------------------------------------------------------------------
# peers: MuJoCo and MJX


def mujoco_check(n):
    """Max |Δ| of M and qfrc_bias (= N q̇ − G) between MuJoCo and jaxmb on chain(n)."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(mjcf_chain(n, 1e-3))
    d = mujoco.MjData(m)
    q, qd = states(1, n, seed=4)
    d.qpos[:], d.qvel[:] = np.asarray(q[0]), np.asarray(qd[0])
    mujoco.mj_forward(m, d)
    M = np.zeros((n, n))
    mujoco.mj_fullM(m, d, M) if hasattr(d, "M") else mujoco.mj_fullM(m, M, d.qM)
    ch = chain(n)
    Mj = np.asarray(mass_matrix(ch, q[0]))
    bj = np.asarray(bias_forces(ch, q[0], qd[0]) - gravity_forces(ch, q[0]))
    return float(np.abs(M - Mj).max()), float(np.abs(d.qfrc_bias - bj).max())


def mujoco_steps(n, B, K, dt):
    import mujoco
    from mujoco import rollout

    m = mujoco.MjModel.from_xml_string(mjcf_chain(n, dt))
    q, qd = states(B, n, seed=2)
    d = mujoco.MjData(m)
    nstate = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    x0 = np.zeros((B, nstate))
    for b in range(B):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = np.asarray(q[b]), np.asarray(qd[b])
        mujoco.mj_getState(m, d, x0[b], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    res = {}
    nthreads = os.cpu_count() or 1
    for label, nth in (("rollout_1thread", 1), (f"rollout_{nthreads}threads", nthreads)):
        datas = [mujoco.MjData(m) for _ in range(nth)]
        rollout.rollout(m, datas, x0, nstep=K)  # warm-up (thread pool, allocation)
        samples, cpu = [], []
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            st, _ = rollout.rollout(m, datas, x0, nstep=K)
            samples.append((time.perf_counter() - t0) / (B * K))
            cpu.append((time.process_time() - c0) / (B * K))
        res[label] = float(np.min(samples))
        res[label + "_cpu"] = float(np.min(cpu))
        res[label + "_state"] = st
    # tight Python loop over mj_step (one state, many steps)
    mujoco.mj_resetData(m, d)
    d.qpos[:], d.qvel[:] = np.asarray(q[0]), np.asarray(qd[0])
    Kp = max(K, 2000)
    t0 = time.perf_counter()
    for _ in range(Kp):
        mujoco.mj_step(m, d)
    res["python_loop_mj_step"] = (time.perf_counter() - t0) / Kp
    return res


def mjx_steps(n, B, K, dt, timeout=480):
    """MJX per state-step (float32, its native precision) from a subprocess; dict or error."""
    cmd = [sys.executable, os.path.abspath(__file__), "--mjx-child", f"{n},{B},{K},{dt!r}"]
    env = dict(os.environ, JAX_ENABLE_X64="0", JAX_PLATFORMS="cpu")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"MJX compile+run exceeded {timeout} s"}
    for line in r.stdout.splitlines():
        if line.startswith("MJX"):
            return json.loads(line[3:])
    return {"error": r.stderr[-1500:]}


# ------------------------------------------------------------------------------------------------
# jaxmb RK4


def rk4_rollout(model, q, qd, dt, K):
    """K fixed RK4 steps of q̈ = forward_dynamics(q, q̇) from (q, q̇): one state."""

    def f(y):
        q, qd = y
        return qd, forward_dynamics(model, q, qd)

    def step(y, _):
        k1 = f(y)
        k2 = f(jax.tree_util.tree_map(lambda a, b: a + 0.5 * dt * b, y, k1))
        k3 = f(jax.tree_util.tree_map(lambda a, b: a + 0.5 * dt * b, y, k2))
        k4 = f(jax.tree_util.tree_map(lambda a, b: a + dt * b, y, k3))
        y = jax.tree_util.tree_map(
            lambda a, b1, b2, b3, b4: a + dt / 6 * (b1 + 2 * b2 + 2 * b3 + b4), y, k1, k2, k3, k4
        )
        return y, None

    y, _ = jax.lax.scan(step, (q, qd), None, length=K)
    return y


RK4_BATCHED = jax.vmap(rk4_rollout, in_axes=(None, 0, 0, None, None))


# ------------------------------------------------------------------------------------------------
# sections


def section_terms(cfg, results):
    rows = []
    checks = {}
    exe, how = pin_cpp_build()
    results["pinocchio_cpp_build"] = how if exe else f"not available: {how}"
    for n in cfg["terms_n"]:
        last_per = {}
        checks[f"chain{n}_vs_pinocchio_maxabs_M_nle"] = pin_check(n)
        model64 = chain(n)
        pin_py = pin_python_loop(n, cfg["pin_states"])
        pin_c = pin_cpp(exe, n, cfg["pin_states"]) if exe else None
        print(
            f"[terms] chain({n}) Pinocchio: python loop {pin_py * 1e6:.2f} us/state, "
            f"C++ loop {pin_c * 1e6 if pin_c else float('nan'):.2f} us/state "
            f"(CPU {PIN_CPU.get(n, float('nan')) * 1e6:.2f})",
            flush=True,
        )
        for dtype in (jnp.dtype(d).type for d in cfg["dtypes"]):
            model = cast_model(model64, dtype)
            for method in ARGS.methods.split(","):
                for B in cfg["batches"]:
                    key = (jnp.dtype(dtype).name, method)
                    if key in last_per and last_per[key] * B > ARGS.call_budget:
                        est = last_per[key] * B
                        why = f"estimated {est:.0f} s per call > budget {ARGS.call_budget} s"
                        rows.append(dict(n=n, method=method, dtype=key[0], batch=B, skipped=why))
                        print(f"[terms] chain({n}) {method} {key[0]} B={B}: skipped "
                              f"(estimated {est:.0f} s per call)", flush=True)  # fmt: skip
                        continue
                    chunk = closed_form_chunk(n, n, B) if method == "closed_form" else None
                    f = batched_terms(method, model, chunk)
                    q, qd = states(B, n, dtype=dtype)
                    if method == "batched_bm":
                        q, qd = q.T, qd.T
                    try:
                        compile_s, t = time_compiled(f, model, q, qd, repeats=cfg["repeats"])
                        out_dtype = str(f(model, q, qd)[0].dtype)
                        mem = peak_temp_bytes(f, model, q, qd)
                    except Exception as e:  # report, don't hide (e.g. out of memory)
                        print(f"[terms] chain({n}) {method} B={B}: FAILED {e!r}"[:300], flush=True)
                        rows.append(dict(n=n, method=method, batch=B, error=repr(e)[:300]))
                        continue
                    per = t / B
                    last_per[(jnp.dtype(dtype).name, method)] = per
                    row = dict(
                        n=n,
                        method=method,
                        dtype=jnp.dtype(dtype).name,
                        out_dtype=out_dtype,
                        batch=B,
                        chunk=chunk,
                        compile_s=compile_s,
                        per_state_s=per,
                        per_state_median_s=TIMING_STATS["last_median_s"] / B,
                        cpu_per_state_s=TIMING_STATS["last_cpu_s"] / B,
                        pin_cpp_cpu_per_state_s=PIN_CPU.get(n),
                        ratio_cpu_vs_pin_cpp_cpu=(
                            TIMING_STATS["last_cpu_s"] / B / PIN_CPU[n] if n in PIN_CPU else None
                        ),
                        pin_python_per_state_s=pin_py,
                        pin_cpp_per_state_s=pin_c,
                        ratio_vs_pin_python=per / pin_py,
                        ratio_vs_pin_cpp=per / pin_c if pin_c else None,
                        peak_bytes_per_state=mem / B if mem else None,
                    )
                    rows.append(row)
                    results["terms"] = rows
                    _save_partial(results)
                    print(
                        f"[terms] chain({n}) {method:11s} {row['dtype']} B={B:5d}: "
                        f"{per * 1e6:9.3f} us/state (compile {compile_s:.1f} s), "
                        f"x{row['ratio_vs_pin_python']:.2f} of Pinocchio-python"
                        + (f", x{row['ratio_vs_pin_cpp']:.2f} of Pinocchio-C++" if pin_c else "")
                        + (
                            f"; CPU {row['cpu_per_state_s'] * 1e6:.3f} us/state, "
                            f"x{row['ratio_cpu_vs_pin_cpp_cpu']:.2f} of Pinocchio-C++ CPU"
                            if row["ratio_cpu_vs_pin_cpp_cpu"]
                            else ""
                        ),
                        flush=True,
                    )
    results["terms"] = rows
    results["terms_checks"] = checks
    if not ARGS.no_sharded:
        results["terms_sharded_2dev"] = run_sharded_child(cfg, 2)


def _save_partial(results):
    path = results.get("_path")
    if path:
        with open(path, "w") as f:
            json.dump({k: v for k, v in results.items() if k != "_path"}, f, indent=1, default=str)


def run_sharded_child(cfg, ndev):
    cmd = [sys.executable, os.path.abspath(__file__), "--sharded-child", str(ndev)]
    if ARGS.quick:
        cmd.append("--quick")
    r = subprocess.run(cmd, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("SHARDED"):
            rows = json.loads(line[len("SHARDED") :])
            for row in rows:
                print(
                    f"[terms-sharded x{ndev}] chain({row['n']}) {row['method']} {row['dtype']} "
                    f"B={row['batch']}: {row['per_state_s'] * 1e6:.3f} us/state",
                    flush=True,
                )
            return rows
    return {"error": r.stderr[-2000:]}


def sharded_child(cfg):
    rows = []
    B = cfg["batches"][-1]
    for n in cfg["terms_n"]:
        for dtype in (jnp.dtype(d).type for d in cfg["dtypes"]):
            model = cast_model(chain(n), dtype)
            for method in ("tree",):
                q, qd = states(B, n, dtype=dtype)
                f = lambda model, q, qd, method=method: batch.shard_batch(
                    TERMS[method], model, q, qd, in_axes=(None, 0, 0)
                )
                compile_s, t = time_compiled(f, model, q, qd, repeats=cfg["repeats"])
                rows.append(
                    dict(
                        n=n,
                        method=method,
                        dtype=jnp.dtype(dtype).name,
                        batch=B,
                        devices=len(jax.devices()),
                        compile_s=compile_s,
                        per_state_s=t / B,
                    )
                )
    print("SHARDED" + json.dumps(rows), flush=True)


def section_steps(cfg, results):
    n, B, K, dt = 7, cfg["step_batch"], cfg["step_K"], 1e-3
    out = {"n": n, "batch": B, "steps": K, "dt": dt, "integrator": "RK4 (fixed step)"}
    out["mujoco_check_maxabs_M_bias"] = mujoco_check(n)
    mj = mujoco_steps(n, B, K, dt)
    ref = mj.pop("rollout_1thread_state")
    mj = {k: v for k, v in mj.items() if not k.endswith("_state")}
    out["mujoco_per_state_step_s"] = mj
    q, qd = states(B, n, seed=2)
    nq = n
    mj_q = ref[:, -1, 1 : 1 + nq]  # FULLPHYSICS state = (time, qpos, qvel, ...)
    for dtype in (jnp.dtype(d).type for d in cfg["dtypes"]):
        dname = jnp.dtype(dtype).name
        model = cast_model(chain(n), dtype)
        qq, qqd = q.astype(dtype), qd.astype(dtype)
        dtj = jnp.asarray(dt, dtype)
        for method in ARGS.step_methods.split(","):
            if method == "tree":
                rk4 = FastJit(lambda m, q, qd, dt: RK4_BATCHED(m, q, qd, dt, K), model)
                args = (qq, qqd, dtj)
            else:  # batch-last state (nq, B) through the whole rollout (diffrax, classical RK4)
                rk4 = FastJit(lambda m, q, qd, dt: mb.batched_rk4(m, q, qd, dt, K, True), model)
                args = (qq.T, qqd.T, dtj)
            compile_s, t = time_compiled(rk4, model, *args, repeats=cfg["repeats"])
            cpu = TIMING_STATS["last_cpu_s"] / (B * K)
            qK = rk4(model, *args)[0]
            qK = qK if method == "tree" else qK.T
            per = t / (B * K)
            key = f"jaxmb_{method}_{dname}"
            # agreement with MuJoCo's RK4 states after K steps (same integrator, same dt)
            out[key] = dict(
                per_state_step_s=per,
                cpu_per_state_step_s=cpu,
                compile_s=compile_s,
                out_dtype=str(qK.dtype),
                ratio_vs_mujoco_rollout_1thread=per / mj["rollout_1thread"],
                ratio_cpu_vs_mujoco_rollout_1thread_cpu=cpu / mj["rollout_1thread_cpu"],
                max_abs_q_diff_vs_mujoco=float(np.abs(np.asarray(qK, float) - mj_q).max()),
            )
            print(
                f"[steps] jaxmb {method} RK4 chain(7) {dname} B={B}: {per * 1e6:.3f} "
                f"us/state-step, CPU {cpu * 1e6:.3f} (x{per / mj['rollout_1thread']:.2f} of "
                f"MuJoCo rollout 1 thread, CPU "
                f"x{out[key]['ratio_cpu_vs_mujoco_rollout_1thread_cpu']:.2f}; "
                f"|q - q_mujoco| = {out[key]['max_abs_q_diff_vs_mujoco']:.1e})",
                flush=True,
            )
            results["steps"] = out
            _save_partial(results)
    if not ARGS.no_mjx and not ARGS.quick:
        r = mjx_steps(n, B, K, dt)
        if "per_state_step_s" in r:
            qf = np.asarray(r.pop("q_final"))
            r["max_abs_q_diff_vs_mujoco"] = float(np.abs(qf - mj_q).max())
            for key, row in out.items():
                if key.startswith("jaxmb_"):
                    row["ratio_vs_mjx_float32"] = row["per_state_step_s"] / r["per_state_step_s"]
                    if r.get("cpu_per_state_step_s"):
                        row["ratio_cpu_vs_mjx_float32_cpu"] = (
                            row["cpu_per_state_step_s"] / r["cpu_per_state_step_s"]
                        )
            print(
                f"[steps] MJX chain(7) {r['out_dtype']} B={B}: "
                f"{r['per_state_step_s'] * 1e6:.3f} us/state-step (compile {r['compile_s']:.0f} s)",
                flush=True,
            )
        else:
            print(f"[steps] MJX failed: {r['error'][-300:]}", flush=True)
        out["mjx"] = r
    else:
        out["mjx"] = {"status": "skipped (--quick or --no-mjx)"}
    for k, v in mj.items():
        print(f"[steps] MuJoCo {k}: {v * 1e6:.3f} us/state-step", flush=True)
    results["steps"] = out


def section_andrews(cfg, results):
    """4096 variants (spring stiffness c0 × motor torque mom, ±20 %) to t = 0.03 s at 1e-6."""
    try:
        from jaxmb.models import andrews as an
    except Exception as e:
        results["andrews"] = {"status": f"not run: jaxmb.models.andrews not available ({e!r})"}
        print("[andrews] not run: jaxmb.models.andrews not available", flush=True)
        return
    T1, B = 0.03, cfg["andrews_batch"]
    out = {"t1": T1, "batch": B, "tolerance": "rtol = atol = 1e-6 (diffrax Tsit5, PID)"}
    model = an.andrews_squeezer()
    get = lambda m: (m.forces[0].stiffness, m.forces[1].value)
    out["varied"] = ["forces[0].stiffness (spring c0)", "forces[1].value (torque mom on beta)"]
    rng = np.random.default_rng(0)
    c0, mom = (float(x) for x in get(model))
    scale = rng.uniform(0.8, 1.2, (B, 2))
    stiff, torque = c0 * scale[:, 0], mom * scale[:, 1]
    bm = batch.vary(model, get, (jnp.asarray(stiff), jnp.asarray(torque)))
    q0 = jnp.full((B, 1), an.BETA0)
    qd0 = jnp.zeros((B, 1))
    kw = dict(batched_model=True, rtol=1e-6, atol=1e-6)
    try:
        t0 = time.perf_counter()
        tr = mb.simulate_batch(bm, q0, qd0, T1, None, **kw)
        _block(tr.q)
        out["jaxmb_compile_and_first_s"] = time.perf_counter() - t0
        walls = []
        for _ in range(2 if not ARGS.quick else 1):
            t0 = time.perf_counter()
            tr = mb.simulate_batch(bm, q0, qd0, T1, None, **kw)
            _block(tr.q)
            walls.append(time.perf_counter() - t0)
        out["jaxmb_wall_s"] = float(min(walls))
        out["jaxmb_all_successful"] = bool(np.all(np.asarray(tr.successful)))
        out["jaxmb_steps_mean"] = float(np.mean(np.asarray(tr.stats["num_steps"])))
        print(
            f"[andrews] jaxmb {B} variants to {T1} s at 1e-6: {out['jaxmb_wall_s']:.3f} s "
            f"(compile+first {out['jaxmb_compile_and_first_s']:.1f} s)",
            flush=True,
        )
    except Exception as e:
        out["jaxmb_error"] = repr(e)[:500]
        print(f"[andrews] jaxmb failed: {e!r}"[:300], flush=True)
    # MuJoCo: the same variants one after another (MJCF of benchmarks/andrews.py)
    try:
        import importlib.util

        import mujoco

        spec = importlib.util.spec_from_file_location(
            "bench_andrews", os.path.join(HERE, "andrews.py")
        )
        ba = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ba)
        dt = 5e-6  # between 1e-5 (2.1e-6 rad error) and 3e-6 (1.9e-7) in benchmarks/andrews.py
        solref = f"{-0.1 / dt**2:.6g} {-1.0 / dt:.6g}"
        mm = mujoco.MjModel.from_xml_string(ba.mjcf().replace("{solref}", solref))
        mm.opt.timestep = dt
        d = mujoco.MjData(mm)
        qpos0 = np.asarray(an.from_test_set(jnp.asarray(ba.Y0)))
        nstep = int(round(T1 / dt))
        nrun = min(B, cfg["andrews_mujoco_runs"])
        t0 = time.perf_counter()
        for k in range(nrun):
            mujoco.mj_resetData(mm, d)
            mm.tendon_stiffness[0] = stiff[k]
            d.qpos[:], d.qvel[:] = qpos0, 0.0
            d.qfrc_applied[0] = torque[k]
            mujoco.mj_step(mm, d, nstep=nstep)
        per = (time.perf_counter() - t0) / nrun
        out["mujoco"] = dict(
            dt=dt,
            steps_per_run=nstep,
            runs_timed=nrun,
            per_run_s=per,
            wall_s_for_batch=per * B,
            note=f"timed {nrun} variants one after another, total extrapolated linearly to {B}",
        )
        if "jaxmb_wall_s" in out:
            out["ratio_jaxmb_over_mujoco"] = out["jaxmb_wall_s"] / (per * B)
        print(
            f"[andrews] MuJoCo (dt {dt:g}, {nstep} steps) sequential: {per:.3f} s/variant -> "
            f"{per * B:.1f} s for {B}"
            + (
                f"; jaxmb/MuJoCo = {out['ratio_jaxmb_over_mujoco']:.3f}"
                if "jaxmb_wall_s" in out
                else ""
            ),
            flush=True,
        )
    except Exception as e:
        out["mujoco_error"] = repr(e)[:500]
        print(f"[andrews] MuJoCo failed: {e!r}"[:300], flush=True)
    results["andrews"] = out


def linear_chain(n, nq, seed=0):
    """chain(n)'s bodies driven by nq coordinates through a dense linear joint map."""
    base = chain(n)
    bodies = [
        Body(
            name=f"link{i}",
            parent=i - 1,
            axis=np.asarray(base.axis_theta[i]),
            position=(0.0, 0.0, 0.0 if i == 0 else 0.3),
            mass=float(base.mass[i]),
            com=(0.0, 0.0, 0.15),
            inertia=np.asarray(base.inertia[i]),
        )
        for i in range(n)
    ]
    A = np.random.default_rng(seed).normal(size=(n, nq)) / np.sqrt(nq)
    return build_model(bodies, mb.LinearMap(A), name=f"chain{n}_nq{nq}")


def section_scaling(cfg, results):
    B = cfg["scaling_batch"]
    rows = []
    for kind, sizes in (("bodies", cfg["scaling_n"]), ("coordinates", cfg["scaling_nq"])):
        for s in sizes:
            model = chain(s) if kind == "bodies" else linear_chain(cfg["scaling_nq_bodies"], s)
            nq = model.nq
            q, qd = states(B, nq)
            for method in ("tree", "closed_form"):
                f = batched_terms(method, model)
                try:
                    compile_s, t = time_compiled(f, model, q, qd, repeats=cfg["repeats"])
                    mem = peak_temp_bytes(f, model, q, qd)
                except Exception as e:
                    rows.append(dict(kind=kind, size=s, method=method, error=repr(e)[:300]))
                    continue
                rows.append(
                    dict(
                        kind=kind,
                        n=model.nb,
                        nq=nq,
                        size=s,
                        method=method,
                        batch=B,
                        per_state_s=t / B,
                        compile_s=compile_s,
                        peak_bytes_per_state=mem / B if mem else None,
                    )
                )
                print(
                    f"[scaling] {kind} n={model.nb} nq={nq} {method:11s}: {t / B * 1e6:9.3f} "
                    f"us/state, {(mem or 0) / B / 1024:8.1f} KiB/state, compile {compile_s:.1f} s",
                    flush=True,
                )
    fits = {}
    for kind in ("bodies", "coordinates"):
        for method in ("tree", "closed_form"):
            pts = [
                (r["size"], r["per_state_s"], r["peak_bytes_per_state"])
                for r in rows
                if r.get("kind") == kind and r.get("method") == method and "per_state_s" in r
            ]
            if len(pts) >= 2:
                x = np.log([p[0] for p in pts])
                slope_t = float(np.polyfit(x, np.log([p[1] for p in pts]), 1)[0])
                mems = [p[2] for p in pts if p[2]]
                slope_m = (
                    float(np.polyfit(x[: len(mems)], np.log(mems), 1)[0])
                    if len(mems) == len(pts)
                    else None
                )
                fits[f"{kind}/{method}"] = {"time_exponent": slope_t, "memory_exponent": slope_m}
                print(
                    f"[scaling] {kind} {method}: time ~ size^{slope_t:.2f}, memory ~ size^"
                    f"{slope_m if slope_m is None else round(slope_m, 2)}",
                    flush=True,
                )
    results["scaling"] = {"rows": rows, "power_law_fits": fits}


# ------------------------------------------------------------------------------------------------
# plots


def plots(results, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "terms" in results:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
        for ax, n in zip(axes, sorted({r["n"] for r in results["terms"]}), strict=False):
            for method, ls in (("tree", "-"), ("closed_form", "--")):
                for dtype, mk in (("float64", "o"), ("float32", "s")):
                    pts = [
                        (r["batch"], r["per_state_s"])
                        for r in results["terms"]
                        if r.get("n") == n
                        and r.get("method") == method
                        and r.get("dtype") == dtype
                        and "per_state_s" in r
                    ]
                    if pts:
                        b, t = zip(*pts, strict=True)
                        ax.loglog(
                            b, np.array(t) * 1e6, ls, marker=mk, label=f"jaxmb {method} {dtype}"
                        )
            rows = [
                r for r in results["terms"] if r.get("n") == n and "pin_python_per_state_s" in r
            ]
            if rows:
                ax.axhline(rows[0]["pin_python_per_state_s"] * 1e6, color="k", lw=1,
                           label="Pinocchio (Python loop)")  # fmt: skip
                if rows[0].get("pin_cpp_per_state_s"):
                    ax.axhline(rows[0]["pin_cpp_per_state_s"] * 1e6, color="k", ls=":",
                               label="Pinocchio (C++ loop)")  # fmt: skip
            sh = results.get("terms_sharded_2dev")
            if isinstance(sh, list):
                for r in sh:
                    if r["n"] == n:
                        ax.plot([r["batch"]], [r["per_state_s"] * 1e6], "r*", ms=10,
                                label=f"jaxmb tree {r['dtype']}, 2 devices")  # fmt: skip
            ax.set_title(f"M, N q̇, G of chain({n})")
            ax.set_xlabel("batch size")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("time per state (µs)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "throughput_batch.png"), dpi=120)
        plt.close(fig)
    if "scaling" in results:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, kind in zip(axes, ("bodies", "coordinates"), strict=True):
            for method, ls in (("tree", "-o"), ("closed_form", "--s")):
                pts = [
                    (r["size"], r["per_state_s"])
                    for r in results["scaling"]["rows"]
                    if r.get("kind") == kind and r.get("method") == method and "per_state_s" in r
                ]
                if pts:
                    s, t = zip(*pts, strict=True)
                    e = results["scaling"]["power_law_fits"].get(f"{kind}/{method}", {})
                    lab = f"{method} (~size^{e.get('time_exponent', float('nan')):.2f})"
                    ax.loglog(s, np.array(t) * 1e6, ls, label=lab)
            ax.set_xlabel("bodies n (chain(n))" if kind == "bodies" else "coordinates nq")
            ax.set_ylabel("time per state (µs)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "throughput_scaling.png"), dpi=120)
        plt.close(fig)


# ------------------------------------------------------------------------------------------------


def config(quick):
    if quick:
        return dict(
            skip_in_quick=("andrews",),
            dtypes=("float64",),
            terms_n=(3,),
            batches=(4,),
            pin_states=64,
            repeats=2,
            step_batch=8,
            step_K=5,
            andrews_batch=4,
            andrews_mujoco_runs=1,
            scaling_n=(2, 3),
            scaling_nq=(),
            scaling_nq_bodies=3,
            scaling_batch=4,
        )
    return dict(
        skip_in_quick=(),
        dtypes=("float64", "float32"),
        terms_n=(7, 30),
        batches=(1, 64, 4096),
        pin_states=4096,
        repeats=3,
        step_batch=4096,
        step_K=20,
        andrews_batch=4096,
        andrews_mujoco_runs=8,
        scaling_n=(2, 4, 7, 12, 20, 30),
        scaling_nq=(1, 2, 4, 8, 12),
        scaling_nq_bodies=12,
        scaling_batch=64,
    )


def merge(paths, out_path):
    merged = {}
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        for k, v in r.items():
            if k in ("terms", "terms_sharded_2dev") and isinstance(v, list):
                merged.setdefault(k, []).extend(v)
            elif k == "terms_checks":
                merged.setdefault(k, {}).update(v)
            elif k not in merged:
                merged[k] = v
            else:
                merged.setdefault("merged_extra", {}).setdefault(os.path.basename(p), {})[k] = v
    merged["merged_from"] = [os.path.basename(p) for p in paths]
    with open(out_path, "w") as f:
        json.dump(merged, f, indent=1, default=str)
    return merged


def main():
    if ARGS.merge:
        path = os.path.join(ARGS.out, ARGS.json_name or "throughput.json")
        res = merge(ARGS.merge, path)
        plots(res, ARGS.out)
        print(f"merged into {path}; plots in {ARGS.out}")
        return
    cfg = config(ARGS.quick)
    if ARGS.terms_n:
        cfg["terms_n"] = tuple(int(x) for x in ARGS.terms_n.split(","))
    if ARGS.batches:
        cfg["batches"] = tuple(int(x) for x in ARGS.batches.split(","))
    if ARGS.dtypes:
        cfg["dtypes"] = tuple(ARGS.dtypes.split(","))
    if ARGS.step_k:
        cfg["step_K"] = ARGS.step_k
    if ARGS.sharded_child:
        sharded_child(cfg)
        return
    os.makedirs(ARGS.out, exist_ok=True)
    results = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": ARGS.quick,
        "config": cfg,
        "machine": machine(),
        "versions": versions(),
        "jaxmb_source": jaxmb_source(),
        "precisions": ["float64", "float32"],
        "timing": (
            "compiled steady state, best of repeats (median also stored for the terms), "
            "block_until_ready; compile time apart"
        ),
        "load_average_at_start": os.getloadavg(),
        "pinocchio_timing": (
            "per state: crba + nonLinearEffects; 'python' = tight Python loop over the states "
            "(includes the binding overhead of two calls); 'cpp' = C++ loop compiled against "
            "Pinocchio's headers (benchmarks/pin_chain_bench.cpp), best of 20 passes"
        ),
        "mujoco_timing": (
            "mj_step with RK4, contacts/constraints disabled; 'rollout' = mujoco.rollout C loop "
            "over the batch (1 thread / all threads); 'python_loop' = Python loop over mj_step"
        ),
    }
    sections = ARGS.sections.split(",")
    t0 = time.perf_counter()
    name = ARGS.json_name or ("throughput_quick.json" if ARGS.quick else "throughput.json")
    path = os.path.join(ARGS.out, name)
    results["_path"] = path
    order = ("terms", "andrews", "scaling", "steps")  # steps last: MJX compiles slowly
    for name in sorted(sections, key=lambda x: order.index(x) if x in order else 99):
        if name in sections and not (ARGS.quick and name in cfg["skip_in_quick"]):
            try:
                globals()[f"section_{name}"](cfg, results)
            except Exception as e:  # keep the other sections' figures, report the failure
                import traceback

                results[f"{name}_error"] = traceback.format_exc()[-3000:]
                print(f"[{name}] FAILED: {e!r}", flush=True)
            results["total_wall_s"] = time.perf_counter() - t0
            results["load_average_at_end"] = os.getloadavg()
            _save_partial(results)  # after every section, so a late failure loses nothing
    print(f"wrote {path}", flush=True)
    if not ARGS.no_plots and not ARGS.quick:
        plots(results, ARGS.out)
        print(f"wrote plots to {ARGS.out}", flush=True)


if __name__ == "__main__":
    main()
