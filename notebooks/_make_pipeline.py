"""Generate notebooks/opensim_pipeline.ipynb (run: python notebooks/_make_pipeline.py).

The notebook is written as JSON via nbformat; execute it once with
``pytest --nbmake notebooks/opensim_pipeline.ipynb``.
"""

from pathlib import Path

import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md(r"""
# OpenSim's workflow on a walking trial: inverse kinematics → inverse dynamics → static optimization

The Gait10dof18musc trial of opensim-models (a scaled 10-degree-of-freedom, 18-muscle model;
markers at 60 Hz; ground reactions of both feet), shipped with jaxmb with its OpenSim setup files.
Each step runs **the user's own setup file** through the same functions the `jaxmb` command calls
(`jaxmb inverse-kinematics walk_Setup_IK.xml`, `inverse-dynamics`, `static-optimization`), every
frame in one compiled, batched solve, and each step reads the previous step's output file as the
setups say: here the ID and SO setups' `subject01_walk_IK.mot` is jaxmb's own IK.

Referees, drawn beside jaxmb:
- IK and ID: OpenSim's published `subject01_walk_IK.mot` and `subject01_walk_ID.sto` of the
  trial (the ID from OpenSim's IK, so the ID panel also carries the two IKs' difference);
- SO: OpenSim 4.6's AnalyzeTool on the same SO setup (`opensim46_walk_SO_activation.sto`, made by
  `tests/data/opensim_pipeline/make_so_references.py`; OpenSim's optimizer reports failure to
  converge at its frames, with constraint violations ~3e-4 N·m).

The first run compiles each solve (tens of seconds); the compiled programs are stored in JAX's
persistent cache, so a second run of the same commands compiles nothing.
""")

code(r"""
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import jaxmb
from jaxmb.io import read_storage, setup

shipped = Path(jaxmb.__file__).parent / "data" / "opensim_pipeline" / "gait10dof18musc"
work = Path(tempfile.mkdtemp()) / "gait10dof18musc"
shutil.copytree(shipped, work)  # the setups write beside themselves: work in a copy
print(sorted(p.name for p in work.iterdir()))
""")

md(r"""
## 1. Inverse kinematics

Weighted marker least squares (the `IKTaskSet` of the setup), all frames as one batched
Gauss–Newton/Levenberg–Marquardt solve, coordinate bounds respected as OpenSim does. It writes
`subject01_walk_IK.mot` (degrees, as OpenSim) over the published copy in `work/`.
""")

code(r"""
ik = setup.run_inverse_kinematics(work / "walk_Setup_IK.xml", work)
print(f"{ik.times.shape[0]} frames, {len(ik.markers)} markers, "
      f"solve {ik.seconds:.1f} s (with compile)")
print("converged at every frame:", bool(np.all(ik.result.converged)))
print(f"marker RMS error: median {np.median(ik.result.rms_error) * 1e3:.2f} mm, "
      f"max {np.max(ik.result.rms_error) * 1e3:.2f} mm")

mine = read_storage(work / "subject01_walk_IK.mot")  # jaxmb's IK, just written
theirs = read_storage(shipped / "subject01_walk_IK.mot")  # OpenSim's, published
names = [c for c in mine.columns if c in theirs.columns]
diff = {c: np.max(np.abs(mine[c] - np.interp(mine.time, theirs.time, theirs[c]))) for c in names}
for c in names:
    print(f"{c:22s} max |jaxmb - OpenSim| = {diff[c]:.3f} " + ("m" if c[-3:-1] == "_t" else "deg"))
""")

code(r"""
show = ["pelvis_tilt", "pelvis_tx", "pelvis_ty", "hip_flexion_r", "knee_angle_r", "ankle_angle_r",
        "hip_flexion_l", "knee_angle_l", "ankle_angle_l", "lumbar_extension"]
fig, axes = plt.subplots(2, 5, figsize=(15, 5.5), sharex=True)
for ax, c in zip(axes.flat, show):
    ax.plot(theirs.time, theirs[c], "k-", lw=3, alpha=0.35, label="OpenSim (published)")
    ax.plot(mine.time, mine[c], "C0-", lw=1.2, label="jaxmb")
    ax.set_title(c, fontsize=9)
    ax.set_ylabel("m" if c in ("pelvis_tx", "pelvis_ty") else "deg")
for ax in axes[-1]:
    ax.set_xlabel("time (s)")
axes[0, 0].legend(fontsize=7)
fig.suptitle("Inverse kinematics of the walking trial")
fig.tight_layout()
""")

md(r"""
## 2. Inverse dynamics

The setup's coordinates low-pass filtered and splined as OpenSim does
(`lowpass_cutoff_frequency_for_coordinates`), the ground reactions of `subject01_walk_grf.xml`
applied at their points, generalized forces written as OpenSim's `.sto`. Run twice: on jaxmb's IK
(the pipeline) and, in a second copy of the folder, on OpenSim's published IK — the input of
OpenSim's published ID, so that this line isolates the inverse dynamics itself. Inverse dynamics
differentiates the coordinates twice, so the two IKs' 0.1° differences show in the torques.
""")

code(r"""
idr = setup.run_inverse_dynamics(work / "walk_Setup_ID.xml", work / "Results")
print(f"{idr.times.shape[0]} frames, solve {idr.seconds:.1f} s (with compile); "
      f"wrote {idr.output.name}")
published_ik = Path(tempfile.mkdtemp()) / "gait10dof18musc"
shutil.copytree(shipped, published_ik)
ido = setup.run_inverse_dynamics(published_ik / "walk_Setup_ID.xml", published_ik / "Results")
ref = read_storage(shipped / "subject01_walk_ID.sto")
show = ["hip_flexion_r_moment", "knee_angle_r_moment", "ankle_angle_r_moment",
        "hip_flexion_l_moment", "knee_angle_l_moment", "ankle_angle_l_moment",
        "pelvis_tx_force", "pelvis_ty_force", "lumbar_extension_moment", "pelvis_tilt_moment"]
fig, axes = plt.subplots(2, 5, figsize=(15, 5.5), sharex=True)
print(f"{'':26s} max |jaxmb - OpenSim| / OpenSim's peak:  on OpenSim's IK   on jaxmb's IK")
for ax, c in zip(axes.flat, show):
    j = idr.labels.index(c)
    ax.plot(ref.time, ref[c], "k-", lw=3, alpha=0.35, label="OpenSim (published, its IK)")
    ax.plot(ido.times, ido.tau[:, j], "C0--", lw=1.2, label="jaxmb on OpenSim's IK")
    ax.plot(idr.times, idr.tau[:, j], "C1-", lw=1.0, label="jaxmb on jaxmb's IK")
    ax.set_title(c, fontsize=9)
    ax.set_ylabel("N" if c.endswith("_force") else "N·m")
    peak = np.max(np.abs(ref[c]))
    dev = [np.max(np.abs(r.tau[:, j] - np.interp(r.times, ref.time, ref[c]))) / peak
           for r in (ido, idr)]
    print(f"{c:26s} {dev[0]:40.1e} {dev[1]:15.1%}")
for ax in axes[-1]:
    ax.set_xlabel("time (s)")
axes[0, 0].legend(fontsize=7)
fig.suptitle("Inverse dynamics with the measured ground reactions")
fig.tight_layout()
""")

md(r"""
## 3. Static optimization

OpenSim's formulation: minimize Σ aᵖ over the 18 muscles and the reserve actuators of
`gait10dof_Reserve_Actuators.xml` (`activation_exponent` p = 2) subject to R(q) F(a) = τ at every
frame, with the muscles' force–length–velocity (rigid tendon, pennation), the required τ from
inverse dynamics of the filtered coordinates with the external loads, activations bounded — all
frames in one batched solve. Frames where no activation satisfies the equations within tolerance
would be listed by time.
""")

code(r"""
so = setup.run_static_optimization(work / "walk_Setup_SO.xml", work / "Results")
print(f"{so.times.shape[0]} frames, solve {so.seconds:.1f} s (with compile); "
      f"max residual {np.max(np.abs(so.residual)):.1e} N·m; "
      f"infeasible frames: {so.infeasible_times.tolist()}")
ref = read_storage(shipped / "opensim46_walk_SO_activation.sto")
muscles = [c for c in so.labels[:18] if c in ref.columns]  # the muscles come first
fig, axes = plt.subplots(3, 6, figsize=(16, 7.5), sharex=True, sharey=True)
worst = 0.0
for ax, c in zip(axes.flat, muscles):
    j = so.labels.index(c)
    theirs_a = np.interp(so.times, ref.time, ref[c])
    worst = max(worst, float(np.sqrt(np.mean((so.activations[:, j] - theirs_a) ** 2))))
    ax.plot(ref.time, ref[c], "k-", lw=3, alpha=0.35, label="OpenSim 4.6")
    ax.plot(so.times, so.activations[:, j], "C2-", lw=1.2, label="jaxmb")
    ax.set_title(c, fontsize=9)
for ax in axes[:, 0]:
    ax.set_ylabel("activation (–)")
for ax in axes[-1]:
    ax.set_xlabel("time (s)")
axes[0, 0].legend(fontsize=7)
fig.suptitle("Static optimization: muscle activations")
fig.tight_layout()
print(f"largest RMS activation difference over the muscles: {worst:.3f} "
      "(jaxmb from its own IK; OpenSim from the published IK)")
""")

md(r"""
The three steps are also the Python API on arrays (`jaxmb.analyses.solve_inverse_kinematics`,
`trial_inverse_dynamics`, `solve_static_optimization`), jit-, vmap- and grad-able: e.g. the
gradient of the summed activations with respect to a muscle's maximum isometric force is one
`jax.grad` call through the batched solve.
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"] = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
out = Path(__file__).with_name("opensim_pipeline.ipynb")
nbf.write(nb, out)
print(out)
