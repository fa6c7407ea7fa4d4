"""Writes notebooks/shoulder.ipynb (run: python notebooks/_make_shoulder.py)."""

from pathlib import Path

import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))  # noqa: E731
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))  # noqa: E731

md(r"""
# The human shoulder with the de Groot & Brand rhythm (seed 001 §4-4 A and C)

`jaxmb.models.shoulder()` is the MoBL-ARMS shoulder (Holzbaur joint axes, MoBL-ARMS inertias):
thorax (ground), clavicle, scapula, humerus, three generalized coordinates — plane of elevation,
elevation, axial rotation. The clavicle and scapula follow the humerus through a joint map f(q):

* `rhythm="degroot"`: the **full** de Groot & Brand (2001) regression — intercepts,
  plane-of-elevation and elevation terms, rest posture — a function of *two* coordinates;
* `rhythm="mobl"`: what MoBL-ARMS (and OpenSim, which ties each coupled coordinate to one
  independent coordinate) keeps: elevation-only straight lines, with the sternoclavicular elevation
  slope 0.1025 instead of the regression's 0.123.

This notebook shows the two rhythms side by side, then solves the seed's computed-torque tracking
problem (Eqs. 200–201), and with the 14 muscles of `jaxmb.models.shoulder_muscles` compares their
moment arms with OpenSim's and shares the tracking torques among them.
""")

code(r"""
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jaxmb
from jaxmb.simulation import MinimumJerk, simulate_tracking
import importlib
sh = importlib.import_module("jaxmb.models.shoulder")  # the module, not the function

full = sh.shoulder("degroot", muscles=False)
mobl = sh.shoulder("mobl", muscles=False)
print(full.body_names)
print(full.coordinate_names)
""")

md(r"""
## 1. Rhythm surfaces: full regression against elevation-only

Each clavicle / scapula joint variable (degrees, relative to the rest posture) over the plane of
elevation (0–120°) and the elevation (0–150°). Colour: the full regression; dashed black lines:
MoBL-ARMS's elevation-only couplings at the same levels. Where the dashed lines are horizontal the
MoBL rhythm ignores the plane of elevation — the full regression does not.
""")

code(r"""
plane = np.radians(np.linspace(0, 120, 41))
elev = np.radians(np.linspace(0, 150, 51))
P, E = np.meshgrid(plane, elev)
Q = jnp.asarray(np.stack([P.ravel(), E.ravel(), np.zeros(P.size)], axis=1))
f_full = np.degrees(np.asarray(jax.vmap(full.joint_map)(Q))).reshape(*P.shape, -1)
f_mobl = np.degrees(np.asarray(jax.vmap(mobl.joint_map)(Q))).reshape(*P.shape, -1)
names = ["sternoclavicular_r2", "sternoclavicular_r3", "acromioclavicular_r2",
         "acromioclavicular_r3", "acromioclavicular_r1"]
labels = ["clavicle protraction (Y)", "clavicle elevation (Z)", "scapula protraction (Y)",
          "scapula lateral rotation (Z)", "scapula tilt (X)"]
fig, axes = plt.subplots(1, 5, figsize=(20, 3.8), constrained_layout=True)
for ax, n, lab in zip(axes, names, labels):
    j = sh.JOINT_VARIABLES.index(n)
    levels = np.linspace(min(f_full[..., j].min(), f_mobl[..., j].min()),
                         max(f_full[..., j].max(), f_mobl[..., j].max()), 13)
    cs = ax.contourf(np.degrees(P), np.degrees(E), f_full[..., j], levels=levels, cmap="viridis")
    ax.contour(np.degrees(P), np.degrees(E), f_mobl[..., j], levels=levels, colors="k",
               linestyles="--", linewidths=0.8)
    fig.colorbar(cs, ax=ax, label="deg")
    ax.set(title=f"{lab}\n{n}", xlabel="plane of elevation (deg)")
axes[0].set_ylabel("elevation (deg)")
diff = np.abs(f_full - f_mobl)[..., [sh.JOINT_VARIABLES.index(n) for n in names]]
print("largest full − MoBL difference per angle (deg):", np.round(diff.max(axis=(0, 1)), 2))
""")

md(r"""
## 2. Computed-torque tracking (Eqs. 200–201, Figs. 19–20)

Desired motion: plane of elevation held at 90°, axial rotation at −30°, elevation from 0.1 rad to
2.1 rad by a minimum-jerk profile in 2 s (zero velocity and acceleration at both ends). The
controller commands `Q_d = q̈_des − 2K(q̇ − q̇_des) − K²(q − q_des)` with K = diag(100, 100, 1000)
(critically damped) and Eq. 200 gives the torques τ = M Q_d + N q̇ − G; the plant is the full
model's forward dynamics, integrated by diffrax (Dopri5, rtol = atol = 1e-10).
""")

code(r"""
K = (100.0, 100.0, 1000.0)
desired = MinimumJerk([np.pi / 2, 0.1, -np.pi / 6], [np.pi / 2, 2.1, -np.pi / 6], 2.0)
run = simulate_tracking(full, K, desired, 2.0, rtol=1e-10, atol=1e-10)
err = np.abs(np.asarray(run.error)).max(axis=0)
print("max tracking error (rad):", dict(zip(full.coordinate_names, err)))
print("solver steps:", int(run.stats["num_steps"]))

t = np.asarray(run.ts)
fig, ax = plt.subplots(1, 3, figsize=(16, 3.8), constrained_layout=True)
ax[0].plot(t, np.degrees(run.q_des[:, 1]), "k", lw=3, alpha=0.3, label="desired")
ax[0].plot(t, np.degrees(run.q[:, 1]), "C0--", label="simulated")
ax[0].set(xlabel="t (s)", ylabel="elevation (deg)", title="desired elevation (Fig. 19)")
ax[0].legend()
for k, n in enumerate(full.coordinate_names):
    ax[1].semilogy(t, np.abs(np.asarray(run.error[:, k])) + 1e-18, label=n)
ax[1].set(xlabel="t (s)", ylabel="|q − q_des| (rad)", title="tracking error")
ax[1].legend()
for k, n in enumerate(full.coordinate_names):
    ax[2].plot(t, run.tau[:, k], label=n)
ax[2].set(xlabel="t (s)", ylabel="τ (N·m)", title="required torques (Fig. 20)")
ax[2].legend();
""")

md(r"""
The error starts at zero and the error dynamics ë + 2Kė + K²e = 0 are homogeneous, so what is
left is the integrator's error (the seed reports 2e-4 rad on the elevation). The elevation torque
is mostly the arm's weight; the plane-of-elevation torque is not zero even though that coordinate is
held, because the full rhythm moves the clavicle and scapula with both coordinates.

The same problem as an index-1 DAE (clavicle and scapula angles as coordinates, the rhythm as 11
algebraic constraints, Baumgarte stabilization) is timed against this embedded ODE in
`benchmarks/shoulder.py` (results in `benchmarks/results/shoulder.json`).
""")

md(r"""
## 3. Muscles: moment arms against OpenSim (Figs. 14–15) and force sharing (Fig. 21)

The 14 muscles of the seed (`jaxmb.models.shoulder_muscles`) with their MoBL-ARMS paths: moving
path points and OpenSim's own wrapping over cylinders, ellipsoids, spheres and tori. So that the
curves can be laid over OpenSim's, they ride on the `"mobl"` rhythm here (OpenSim has the MoBL
couplings, not the full regression). One compiled function gives every muscle's length and its
moment arms (the seed's closed form, Eq. 193) at a pose; it is compiled once and serves the
sweeps and the force sharing (about a minute on one CPU core).

OpenSim's values are `tests/data/shoulder_muscle_reference.json`: OpenSim 4.6's path lengths and
−dL/dq by central differences, swept at 1° steps with the other coordinates at zero (the seed's
protocol). Fig. 14: moment arms about the elevation over the plane-of-elevation sweep; Fig. 15:
about the axial rotation over the elevation sweep; jaxmb lines, OpenSim dots (every 5°).
""")

code(r"""
import json
import warnings
from pathlib import Path

from jaxmb import plots
from jaxmb.models import shoulder_muscles as smus

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the .osim's phantom inertias are zeroed, as documented
    muscular = smus.add_shoulder_muscles(sh.shoulder("mobl", muscles=False), wrapping=True)
paths = jax.jit(lambda q: jaxmb.lengths_and_moment_arms(muscular, q))
jax.block_until_ready(paths(jnp.zeros(3)))  # compile once

ref_file = Path.cwd().parent / "tests" / "data" / "shoulder_muscle_reference.json"
ref = json.loads(ref_file.read_text())
leaders = smus.GROUP_LEADERS
names = muscular.muscle_names
fig, axes = plt.subplots(1, 2, figsize=(15, 4.2), constrained_layout=True)
worst = 0.0
for ax, (swept, about, fig_no) in zip(
    axes, [("elv_angle", "shoulder_elv", 14), ("shoulder_elv", "shoulder_rot", 15)]
):
    d = ref["wrapped"][swept]
    q_sw = np.asarray(d["q"])[::5]
    k_sw = muscular.coordinate_names.index(swept)
    row = ref["coordinates"].index(about)
    R = []
    for x in q_sw:
        q = np.zeros(3)
        q[k_sw] = x
        R.append(np.asarray(paths(jnp.asarray(q))[1])[muscular.coordinate_names.index(about)])
    R = np.array(R)
    R_os = np.asarray(d["moment_arm"])[::5, row]
    for c, n in enumerate(leaders):
        j, jo = names.index(n), ref["muscles"].index(n)
        ax.plot(np.degrees(q_sw), 100 * R[:, j], color=f"C{c}", label=n)
        ax.plot(np.degrees(q_sw), 100 * R_os[:, jo], "o", color=f"C{c}", ms=3)
    cols = [ref["muscles"].index(n) for n in names]
    worst = max(worst, float(np.abs(R - R_os[:, cols]).max()))
    ax.set(xlabel=f"{swept} (deg)", ylabel=f"moment arm about {about} (cm)",
           title=f"Fig. {fig_no}: group leaders, jaxmb (lines) and OpenSim 4.6 (dots)")
axes[0].legend(ncol=3, fontsize=8)
print(f"max |R_jaxmb − R_OpenSim| over the plotted poses, all 14 muscles: {worst:.1e} m")
""")

md(r"""
The largest difference is the reference's own central-difference error (its step is 1e-6 rad);
`tests/test_shoulder_muscles.py` holds every pose of all three sweeps to 1e-6 m (measured
≤ 1.2e-8 m, and 2.9e-6 m at one pose where OpenSim's length bends so sharply that its central
difference is off; jaxmb equals a five-point difference there to 5.6e-10 m).

**Muscle forces (Fig. 21).** The torques of the tracking task above — here by inverse dynamics of
the desired trajectory on this model, which the controller tracks to ~1e-11 rad — shared among the
14 muscles: minimum Σa² subject to R(q) F(a, q, q̇) = τ and 0 ≤ a ≤ 1, rigid-tendon Hill muscles
(De Groote et al. 2016 curves), solved for all frames at once by an augmented Lagrangian with
projected optax steps (`jaxmb.sharing`). The paths come from the compiled function above.
""")

code(r"""
t_f = np.linspace(0.0, 2.0, 21)
qf, qdf, qddf = (np.asarray(x) for x in jax.vmap(desired)(jnp.asarray(t_f)))
tau_f = np.asarray(jax.jit(jax.vmap(lambda a, b, c: jaxmb.inverse_dynamics(muscular, a, b, c)))(
    qf, qdf, qddf))
LR = [paths(jnp.asarray(q)) for q in qf]
shared = smus.share_shoulder_forces(
    muscular, qf, qdf, tau_f,
    lengths=jnp.stack([x[0] for x in LR]), moment_arms=jnp.stack([x[1] for x in LR]))
fig, ax = plt.subplots(figsize=(11, 4.5))
plots.plot_muscle_forces(t_f, shared.forces, names, infeasible=shared.infeasible_frames, ax=ax)
ok = np.setdiff1d(np.arange(len(t_f)), shared.infeasible_frames)
print("torque residual max |R F − τ| at feasible frames (N·m):",
      f"{float(np.max(np.asarray(shared.max_residual)[ok])):.1e}")
print("infeasible frames (elevation, deg):",
      [round(float(np.degrees(qf[i, 1])), 1) for i in shared.infeasible_frames])
""")

md(r"""
Every frame up to 108° of elevation is feasible, with a torque residual at rounding level (1.9e-15
N·m when this was written). From 114° on the solver reports the frames it cannot satisfy (grey
bands) instead of hiding them: at this
plane of elevation (90°) and rotation (−30°) MoBL-ARMS's teres major and latissimus paths wrap
the long way round their cylinders (OpenSim 4.6 gives the same lengths: teres major 0.289 m at
120° against 0.196 m without its wrap objects), which stretches teres major to 1.7 optimal fibre
lengths; its passive force alone then produces more torque than the arm needs.
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path(__file__).resolve().parent / "shoulder.ipynb"
nbf.write(nb, out)
print("wrote", out)
