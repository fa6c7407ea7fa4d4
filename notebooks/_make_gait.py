"""Generate notebooks/gait_inverse_dynamics.ipynb (run: python notebooks/_make_gait.py).

The notebook is written as JSON via nbformat; execute it once with
``pytest --nbmake notebooks/gait_inverse_dynamics.ipynb``.
"""

from pathlib import Path

import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md(r"""
# Inverse dynamics of gait by the matrix formalism of the Newton–Euler equations

For a chain of segments in contact with the ground (foot, shank, thigh), the Newton–Euler equations
of all segments are stacked into one linear system (Watanabe, *Matrix formalism of the Newton–Euler
equations*, BMClab):

$$M\,\begin{bmatrix}a_{cm}\\ \dot\omega\end{bmatrix} = C + G + B\,x + E,\qquad
x = [F_A^G;\ M_A^F;\ F_K^G;\ M_K^S;\ \dots]$$

with forces in the ground frame, each moment in its own segment's frame, cross products as skew
matrices $S(r)$ and the transfer $R_S R_F^{-1}$ of a joint moment from the foot's to the shank's
frame. `jaxmb.newton_euler.joint_loads` solves $x = B^{-1}(M\,acc - C - G - E)$ with one linear
solve per frame, `vmap`ped over all frames and compiled with `jit`.

1. **Winter (2009), Appendix A** (planar, embedded in 3D): Table A.3 kinematics + A.5 ground
   reaction → ankle, knee and hip loads against the published Table A.5; then the same from the
   A.2 marker positions alone, differentiated here.
2. **A 3D trial** (BMClab, force plate + 10 markers at 150 Hz): ankle and knee forces and moments
   over stance.
""")

code(r"""
import matplotlib.pyplot as plt
import numpy as np

import jaxmb
from jaxmb import gait
from jaxmb import newton_euler as ne

winter = gait.read_winter()          # bundled copy of Winter's Tables A.2, A.3, A.5
ref = gait.winter_reference(winter)  # A.5 in the JointLoads layout: force (nt, 3, 2), moment (nt, 3)
print(winter.time.shape, winter.events, "dt = %.4f s" % winter.dt)
""")

md(r"""
## 1. Winter's stride from Table A.3

Inertial parameters: foot 0.7941 kg, 0.00279 kg·m²; leg 2.6642 kg, 0.0350 kg·m²; thigh 5.670 kg
with Dempster's radius of gyration (0.323 of the hip–knee length). Segment frames are rotations
about z by the A.3 segment angles; joints are the A.2 lateral malleolus, femoral epicondyle and
greater trochanter. Loads are those acting **on** the named segment, counter-clockwise positive
(A.5's convention), i.e. exactly the unknowns $x$ above.
""")

code(r"""
def errors(source, cutoff=None):
    chain, motion, load = gait.winter_inputs(winter, source, cutoff=cutoff)
    out = ne.joint_loads(chain, motion, load)
    dm = np.asarray(out.moment[:, :, 2]) - ref["moment"]
    df = np.asarray(out.force[:, :, :2]) - ref["force"]
    rms = lambda x: float(np.sqrt(np.mean(x**2)))
    table = {n: (rms(dm[:, i]), rms(df[:, i])) for i, n in enumerate(chain.names)}
    return out, table

tables, rms_tables = errors("tables")
print("RMS over all 106 frames vs Table A.5 (A.3 kinematics):")
for seg, joint in zip(("foot", "leg", "thigh"), ("ankle", "knee", "hip")):
    m, f = rms_tables[seg]
    print(f"  {joint:5s} (on {seg:5s}): moment {m:.3f} N·m   force {f:.3f} N")
assert rms_tables["foot"][0] <= 0.25 and rms_tables["leg"][0] <= 0.25
assert rms_tables["foot"][1] <= 0.5 and rms_tables["leg"][1] <= 0.5
""")

code(r"""
t = winter.time
fig, ax = plt.subplots(3, 3, figsize=(13, 9), sharex=True)
names = [("ankle", "foot"), ("knee", "leg"), ("hip", "thigh")]
for i, (j, s) in enumerate(names):
    ax[0, i].plot(t, tables.moment[:, i, 2], label="jaxmb (A.3)")
    ax[0, i].plot(t, ref["moment"][:, i], "k.", ms=3, label="Winter A.5")
    ax[0, i].set_title(f"{j} moment on {s} (N·m)")
    for k, c in enumerate("xy"):
        ax[1 + k, i].plot(t, tables.force[:, i, k])
        ax[1 + k, i].plot(t, ref["force"][:, i, k], "k.", ms=3)
        ax[1 + k, i].set_title(f"{j} force R{c} on {s} (N)")
    ax[2, i].set_xlabel("time (s)")
ax[0, 0].legend()
for a in ax.flat:
    for e in winter.events["HCR"]:
        a.axvline(winter.time[e - 1], color="0.8", lw=0.8)
fig.tight_layout()
""")

md(r"""
## From the A.2 markers alone

Only marker *positions* from Table A.2 are used: segment frames from the marker lines, centres of
mass from Dempster's table (0.433 from the proximal joint for leg and thigh), velocities and
accelerations by second-order central differences, ω from $\tilde\omega = R^T\dot R$ and α as its
derivative. A.2 has no toe or fifth-metatarsal marker, so the foot frame is the heel→ankle line and
its centre of mass a constant point in that frame (mean of A.3's foot centre expressed in it, a
"static calibration"). A.2 is already low-pass filtered by Winter; an extra zero-lag Butterworth
pass (cutoff a parameter) is shown for comparison — it mostly costs accuracy at the record's ends.
""")

code(r"""
markers, rms_markers = errors("markers")
markers6, rms_markers6 = errors("markers", cutoff=6.0)
print("RMS over all 106 frames vs Table A.5        moment (N·m)   force (N)")
for label, tab in (("A.3 kinematics", rms_tables), ("A.2 markers", rms_markers),
                   ("A.2 markers + 6 Hz", rms_markers6)):
    for seg, j in (("foot", "ankle"), ("leg", "knee"), ("thigh", "hip")):
        print(f"  {label:20s} {j:6s}          {tab[seg][0]:8.3f}       {tab[seg][1]:8.3f}")
""")

code(r"""
fig, ax = plt.subplots(1, 3, figsize=(13, 3.5))
for i, (j, s) in enumerate(names):
    ax[i].plot(t, ref["moment"][:, i], "k.", ms=3, label="Winter A.5")
    ax[i].plot(t, tables.moment[:, i, 2], label="A.3 kinematics")
    ax[i].plot(t, markers.moment[:, i, 2], "--", label="A.2 markers")
    ax[i].set_title(f"{j} moment on {s} (N·m)")
    ax[i].set_xlabel("time (s)")
ax[0].legend()
fig.tight_layout()
""")

md(r"""
## The seed's matrices at one frame

The system for frame 40 (mid-stance), foot–leg–thigh: $B$ is block lower bidiagonal, with the
identity on its diagonal, $-I_3$ below it in the force rows and $-R_iS(r)$, $-R_iR_{i-1}^{T}$ in the
moment rows.
""")

code(r"""
chain, motion, load = gait.winter_inputs(winter, "tables")
k = 39
s = ne.newton_euler_system(chain, *(getattr(motion, f)[k] for f in ("R", "com", "acc", "omega", "alpha", "joint")),
                           load.force[k], load.cop[k], load.free_moment[k], ne.GRAVITY_Y_UP)
fig, ax = plt.subplots(1, 2, figsize=(9, 4))
ax[0].spy(np.asarray(s.M), precision=1e-12); ax[0].set_title("M")
ax[1].spy(np.asarray(s.B), precision=1e-12); ax[1].set_title("B")
x = np.linalg.solve(np.asarray(s.B), np.asarray(s.M @ s.acc - s.C - s.G - s.E))
print("x at frame 40 (F_A, M_A, F_K, M_K, F_H, M_H):\n", x.reshape(3, 2, 3).round(2))
""")

md(r"""
## 2. A 3D trial: foot and shank over stance

BMClab's `BiomecII2018_gait_n` (CC-BY-4.0): markers on the femoral epicondyles (LE, ME), fibula
head, tibial tuberosity, malleoli (LM, MM), calcaneus (CA), first and fifth metatarsal heads
(FM, VM), 150 Hz, and a force plate (force, centre of pressure, free moment). Markers are filtered
with a 6 Hz zero-lag Butterworth. Frames: shank y from the ankle centre to the knee centre, z along
LM−MM; foot x from the calcaneus to the metatarsal midpoint, y toward the ankle (x anterior,
y up/longitudinal, z lateral). Shank parameters from Zatsiorsky–de Leva, foot from Dempster. The
body mass is not in the file: 70 kg is an assumption (the vertical force peaks at about 1.1 body
weights for this mass). There is no published answer for this trial — the plots are the result.
""")

code(r"""
trial = gait.read_bmc3d("BiomecII2018_gait_n.txt")
chain3, motion3, load3, stance = gait.bmc3d_inputs(trial, body_mass=70.0, cutoff=6.0)
out3 = ne.joint_loads(chain3, motion3, load3)
res = ne.residual(chain3, motion3, load3, out3)
print("stance frames", stance, "segments", chain3.names, "masses", np.asarray(chain3.mass).round(3))
print("max Newton-Euler residual: %.2e" % float(np.abs(res).max()))
t3 = trial.time[stance] - trial.time[stance][0]
# force on the shank at the knee / foot at the ankle, expressed in the segment's own axes
F_local = np.einsum("tsab,tsb->tsa", np.asarray(motion3.R), np.asarray(out3.force))
fig, ax = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
labels = ("x anterior", "y longitudinal", "z lateral")
for i, (j, s) in enumerate((("ankle", "foot"), ("knee", "shank"))):
    for k in range(3):
        ax[0, i].plot(t3, F_local[:, i, k], label=labels[k])
        ax[1, i].plot(t3, out3.moment[:, i, k], label=labels[k])
    ax[0, i].set_title(f"{j} force on the {s}, {s} axes (N)")
    ax[1, i].set_title(f"{j} moment on the {s}, {s} axes (N·m)")
    ax[1, i].set_xlabel("time from heel strike (s)")
ax[0, 0].legend(); ax[1, 0].legend()
fig.tight_layout()
""")

md(r"""
The ankle moment on the foot about its lateral (z) axis is negative through most of stance — a
plantarflexor moment peaking in push-off — and the knee force along the shank carries about body
weight, as expected for walking. The command line does the same on any file:
`jaxmb inverse-dynamics path/to/trial.txt --body-mass 70 --out results/` (CSV + PNG).
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"] = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
out = Path(__file__).with_name("gait_inverse_dynamics.ipynb")
nbf.write(nb, out)
print(out)
