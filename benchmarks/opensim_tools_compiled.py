"""Compiled (warm) batched SO and IK solves against OpenSim's tools, Gait10dof walk, one process.

jaxmb: the jitted whole-trial call, compiled once, best of 3 (what "compiled batched solve" means);
OpenSim 4.6: AnalyzeTool (StaticOptimization) and InverseKinematicsTool on the same setup files (IK:
both interleaved over 5 rounds, best and median ratio),
wall time of ``tool.run()``. Prints and writes JSON (with load averages) to --out.

    PYTHONPATH=$PWD python benchmarks/opensim_tools_compiled.py --out bench_out
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import jax
from _common import jaxmb_source

import jaxmb as mb
from jaxmb.analyses import solve_inverse_kinematics
from jaxmb.io.setup import (
    ik_problem,
    read_external_loads,
    read_inverse_kinematics_setup,
    read_static_optimization_setup,
    sample_external_loads,
    so_problem,
    so_problem_solve,
    trial_coordinates,
)

G = (
    str(
        Path(__file__).resolve().parents[1]
        / "jaxmb"
        / "data"
        / "opensim_pipeline"
        / "gait10dof18musc"
    )
    + "/"
)
OUT = Path(sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "bench_out")
OUT.mkdir(parents=True, exist_ok=True)

TMP = tempfile.mkdtemp()
out = {"load_start": os.getloadavg(), "jaxmb_source": jaxmb_source()}
# SO
setup = read_static_optimization_setup(G + "walk_Setup_SO.xml")
imp = mb.io.read_osim(setup.model_file)
model, prob, labels = so_problem(setup, imp)
c = trial_coordinates(
    setup.coordinates_file, imp, setup.lowpass_cutoff, (0.5, 1.3), "derivative_of_speed"
)
loads = sample_external_loads(read_external_loads(setup.external_loads_file), imp, c.times)
f = jax.jit(so_problem_solve)
r = f(model, prob, c.q, c.qd, c.qdd, loads)
jax.block_until_ready(r)
ts = []
for _ in range(3):
    t = time.perf_counter()
    jax.block_until_ready(f(model, prob, c.q, c.qd, c.qdd, loads))
    ts.append(time.perf_counter() - t)
out["so_frames"] = int(c.times.shape[0])
out["so_jaxmb_compiled_s"] = min(ts)
import opensim as osim  # noqa: E402  (OpenSim after jaxmb, as a user would)

cwd = os.getcwd()
os.chdir(G)
t = time.perf_counter()
tool = osim.AnalyzeTool("walk_Setup_SO.xml")
tool.setResultsDir(TMP)
tool.run()
out["so_opensim_s"] = time.perf_counter() - t
# IK: jaxmb's compiled call and OpenSim's tool interleaved, 5 rounds (the load changes under us)
ik = read_inverse_kinematics_setup(G + "walk_Setup_IK.xml")
times, names, bodies, points, meas, w, q0, lo, hi, free, cw, cv = ik_problem(ik, imp)
g = jax.jit(solve_inverse_kinematics)
r = g(imp.model, bodies, points, meas, w, q0, lo, hi, free, cw, cv)
jax.block_until_ready(r)
out["ik_frames"] = int(times.shape[0])
out["ik_converged_frames"] = int(r.converged.sum())
tj, to = [], []
for _ in range(5):
    t = time.perf_counter()
    jax.block_until_ready(g(imp.model, bodies, points, meas, w, q0, lo, hi, free, cw, cv))
    tj.append(time.perf_counter() - t)
    t = time.perf_counter()
    it = osim.InverseKinematicsTool("walk_Setup_IK.xml")
    it.setResultsDir(TMP)
    it.set_output_motion_file(TMP + "/ik.mot")
    it.run()
    to.append(time.perf_counter() - t)
out["ik_jaxmb_compiled_s"] = min(tj)
out["ik_opensim_s"] = min(to)
out["ik_jaxmb_rounds_s"] = tj
out["ik_opensim_rounds_s"] = to
out["ik_ratio_best"] = min(to) / min(tj)
out["ik_ratio_median"] = sorted(o / j for o, j in zip(to, tj, strict=True))[2]
os.chdir(cwd)
out["load_end"] = os.getloadavg()
print(json.dumps(out))
(OUT / "opensim_tools_compiled.json").write_text(json.dumps(out, indent=1))
