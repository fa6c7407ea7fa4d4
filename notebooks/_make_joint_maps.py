"""Writes notebooks/joint_maps.ipynb (run: python notebooks/_make_joint_maps.py)."""

from pathlib import Path

import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md(r"""
# Joint maps of closed loops: the four-bar and the five-bar (seed 001 §3-3, §4-3)

A closed kinematic chain ties the joint variables f together by holonomic constraints g(f, q) = 0.
jaxmb's `ImplicitMap` solves them inside JAX with a fixed number of Newton iterations from a warm
start that chooses the assembly branch, and differentiates the solution by the implicit function
theorem, so ∇f and H are exact. `joint_gradients` / `joint_hessians` offer three more routes: the
seed's analytical projection method (Eqs. 101–120), the computational molecule (central
differences, Fig. 2) and pre-modeling (splines fitted to a sweep of q).

This notebook reproduces the seed's figures for its two mechanisms:

1. the q(t) trajectories (piecewise Hermite, Figs. 4 and 7),
2. the joint manifolds (Fig. 5: θ(q) of the four-bar; Fig. 11: θ4(q1, q2) of the five-bar),
3. |v_p| and |a_p| from jaxmb's closed form and from a classical absolute-coordinate analysis
   (Shabana) written below without jaxmb (Figs. 6 and 9),
4. |∇f3| and |∇f4| of the five-bar by projection and by the molecule (Fig. 10), and
5. the molecule's and the pre-model's error against step / grid size.
""")

code(r"""
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.interpolate import CubicHermiteSpline

import jaxmb as mb
from jaxmb.joint_maps import molecule_derivatives, premodel, projection_derivatives
from jaxmb.models.five_bar import five_bar
from jaxmb.models.four_bar import four_bar

four, five = four_bar(), five_bar()
t = np.linspace(0.0, 4.0, 201)


def hermite(values, slopes):
    sp = CubicHermiteSpline([0.0, 1.0, 2.0, 3.0, 4.0], values, slopes, axis=0)
    return sp(t), sp.derivative(1)(t), sp.derivative(2)(t)


q4, qd4, qdd4 = (a[:, None] for a in hermite([0.15, 0.45, 0.25, 0.52, 0.12], [0, 0.2, -0.3, 0, 0]))
q5, qd5, qdd5 = hermite(
    np.array([[0.0, -0.5], [1.2, 0.8], [2.5, -1.5], [1.0, 0.3], [-0.6, 2.0]]),
    np.array([[0.0, 0.0], [1.5, -0.5], [0.0, 1.0], [-2.0, 0.5], [0.0, 0.0]]),
)
fig, ax = plt.subplots(1, 2, figsize=(10, 3))
ax[0].plot(t, q4[:, 0])
ax[0].set(xlabel="t (s)", ylabel="q = y_cm2 (m)", title="four-bar (Fig. 4)")
ax[1].plot(t, q5[:, 0], label="q1 = θ1")
ax[1].plot(t, q5[:, 1], label="q2 = θ2")
ax[1].set(xlabel="t (s)", ylabel="rad", title="five-bar (Fig. 7)")
ax[1].legend()
plt.tight_layout()
""")

md(r"""
## Joint manifolds

Four-bar (Fig. 5): the three joint variables against q over the mechanism's range, with the
derivatives dθ/dq and d²θ/dq² from the implicit map. Near the ends of the range (the coupler's
centre of mass at its lowest / highest) dθ/dq grows without bound: q stops being a good coordinate
there. The dots are a 33-knot pre-model (cubic spline), the seed's route for this mechanism.
""")

code(r"""
qs = jnp.linspace(0.065, 0.585, 300)[:, None]
F, J, H = jax.jit(jax.vmap(four.joint_map.derivatives))(qs)
pm4 = premodel(four.joint_map, [(0.065, 0.585)], 33)
knots = jnp.linspace(0.065, 0.585, 33)[:, None]
fig, ax = plt.subplots(1, 3, figsize=(13, 3.2))
for i, name in enumerate(["θ1", "θ2", "θ3"]):
    ax[0].plot(qs[:, 0], F[:, i], label=name)
    ax[0].plot(knots[:, 0], jax.vmap(pm4)(knots)[:, i], "k.", ms=3)
    ax[1].plot(qs[:, 0], J[:, i, 0], label=name)
    ax[2].plot(qs[:, 0], H[:, i, 0, 0], label=name)
ax[0].set(xlabel="q (m)", ylabel="rad", title="f(q) (Fig. 5); dots: pre-model knots")
ax[1].set(xlabel="q (m)", ylabel="rad/m", title="∇f", ylim=(-30, 30))
ax[2].set(xlabel="q (m)", ylabel="rad/m²", title="H", ylim=(-300, 300))
ax[0].legend()
plt.tight_layout()
""")

md(r"""
Five-bar (Fig. 11): the fourth joint variable θ4 over the (q1, q2) plane. The loop assembles for
every q (the distance from joint 3 to the ground pivot stays between 1 and 5 < l3 + l4), and the
warm start keeps the "elbow-left" branch everywhere.
""")

code(r"""
g1 = jnp.linspace(-np.pi, np.pi, 121)
G1, G2 = jnp.meshgrid(g1, g1, indexing="ij")
f_grid = jax.jit(jax.vmap(five.joint_map))(jnp.stack([G1.ravel(), G2.ravel()], -1))
fig = plt.figure(figsize=(11, 4))
ax = fig.add_subplot(1, 2, 1, projection="3d")
ax.plot_surface(G1, G2, f_grid[:, 3].reshape(G1.shape), cmap="viridis")
ax.set(xlabel="q1 (rad)", ylabel="q2 (rad)", zlabel="θ4 (rad)", title="θ4(q1, q2) (Fig. 11)")
ax = fig.add_subplot(1, 2, 2)
cs = ax.contourf(G1, G2, f_grid[:, 2].reshape(G1.shape), 30, cmap="magma")
fig.colorbar(cs, ax=ax, label="θ3 (rad)")
ax.set(xlabel="q1 (rad)", ylabel="q2 (rad)", title="θ3(q1, q2)")
plt.tight_layout()
""")

md(r"""
## Velocity and acceleration of p: jaxmb against the classical method

The classical route (Shabana, *Dynamics of Multibody Systems*): each bar has absolute coordinates
(x, y, φ) of its centre of mass; revolute joints give r_i + A_i s_i − r_j − A_j s_j = 0; driving
constraints fix q; positions by Newton–Raphson with continuation along t; velocities from
C_q ẋ = −C_t; accelerations from C_q ẍ = Q_d. No jaxmb inside. jaxmb computes
v_p = D_iᵀ([r;1] ⊗ q̇) and a_p (Eqs. 44 and 57) with ∇f, H of the implicit map.
""")

code(r"""
def rot(p):
    return np.array([[np.cos(p), -np.sin(p)], [np.sin(p), np.cos(p)]])


def drot(p):
    return np.array([[-np.sin(p), -np.cos(p)], [np.cos(p), -np.sin(p)]])


def classical(l0, L, driver, x0, q, qd, qdd, p_body, p_local):
    nb, n = len(L), 3 * len(L)
    pins = [(-1, np.zeros(2), 0, np.array([-L[0] / 2, 0.0]))]
    pins += [(i, np.array([L[i] / 2, 0]), i + 1, np.array([-L[i + 1] / 2, 0]))
             for i in range(nb - 1)]
    pins += [(nb - 1, np.array([L[-1] / 2, 0.0]), -1, np.array([l0, 0.0]))]
    D = np.zeros((len(driver), n))  # linear driving constraints D x = q
    for k, row in enumerate(driver):
        for idx, c in row:
            D[k, idx] = c

    def C(x, qk):
        r = x.reshape(nb, 3)
        pt = lambda b, s: s if b < 0 else r[b, :2] + rot(r[b, 2]) @ s
        closure = [pt(i, si) - pt(j, sj) for i, si, j, sj in pins]
        return np.concatenate([np.concatenate(closure), D @ x - qk])

    def Cq(x):
        r = x.reshape(nb, 3)
        rows = []
        for i, si, j, sj in pins:
            blk = np.zeros((2, n))
            for b, s, sign in ((i, si, 1.0), (j, sj, -1.0)):
                if b >= 0:
                    blk[:, 3 * b : 3 * b + 2] += sign * np.eye(2)
                    blk[:, 3 * b + 2] += sign * drot(r[b, 2]) @ s
            rows.append(blk)
        return np.concatenate(rows + [D])

    def Qd(x, xd, qddk):
        r, rd = x.reshape(nb, 3), xd.reshape(nb, 3)
        term = lambda b, s: np.zeros(2) if b < 0 else rot(r[b, 2]) @ s * rd[b, 2] ** 2
        gamma = [term(i, si) - term(j, sj) for i, si, j, sj in pins]
        return np.concatenate([np.concatenate(gamma), qddk])

    x, s, out = np.array(x0, float), np.asarray(p_local) - np.array([L[p_body] / 2, 0]), []
    for k in range(len(q)):
        for _ in range(30):
            dx = np.linalg.solve(Cq(x), -C(x, q[k]))
            x += dx
            if np.abs(dx).max() < 1e-15:
                break
        A = Cq(x)
        xd = np.linalg.solve(A, np.concatenate([np.zeros(2 * len(pins)), qd[k]]))
        xdd = np.linalg.solve(A, Qd(x, xd, qdd[k]))
        r, rd, rdd = (v.reshape(nb, 3)[p_body] for v in (x, xd, xdd))
        out.append((rd[:2] + drot(r[2]) @ s * rd[2],
                    rdd[:2] + drot(r[2]) @ s * rdd[2] - rot(r[2]) @ s * rd[2] ** 2))
    return [np.asarray(v) for v in zip(*out)]


def sketch(L, angles):  # rough absolute coordinates from link angles, to start Newton on a branch
    x, p = [], np.zeros(2)
    for l, a in zip(L, angles):
        u = np.array([np.cos(a), np.sin(a)])
        x += [*(p + u * l / 2), a]
        p = p + u * l
    return x


def jaxmb_vp_ap(model, q, qd, qdd):
    fn = jax.jit(jax.vmap(lambda q, qd, qdd: (mb.point_velocity(model, "p", None, q, qd),
                                              mb.point_acceleration(model, "p", None, q, qd, qdd))))
    return [np.asarray(a)[:, :2] for a in fn(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd))]


cl4 = classical(1.0, [0.4, 1.0, 0.8], [[(4, 1.0)]], sketch([0.4, 1.0, 0.8], [0.5, 0.3, -1.2]),
                q4, qd4, qdd4, 1, (0.5, 0.25))
cl5 = classical(3.0, [1.0, 1.0, 3.0, 3.0], [[(2, 1.0)], [(5, 1.0), (2, -1.0)]],
                sketch([1, 1, 3, 3], [0.0, -0.5, 0.9, -1.2]), q5, qd5, qdd5, 2, (2.0, 0.0))
mb4, mb5 = jaxmb_vp_ap(four, q4, qd4, qdd4), jaxmb_vp_ap(five, q5, qd5, qdd5)

fig, ax = plt.subplots(1, 4, figsize=(16, 3.2))
cases = [("four-bar (Fig. 6)", cl4, mb4), ("five-bar (Fig. 9)", cl5, mb5)]
for k, (name, cl, mm) in enumerate(cases):
    for j, what in enumerate(["|v_p| (m/s)", "|a_p| (m/s²)"]):
        a = ax[2 * k + j]
        a.plot(t, np.linalg.norm(mm[j], axis=1), lw=3, label="jaxmb (closed form)")
        a.plot(t, np.linalg.norm(cl[j], axis=1), "k:", lw=1.5, label="classical (Shabana)")
        a.set(xlabel="t (s)", ylabel=what, title=name)
ax[0].legend()
plt.tight_layout()
for name, cl, mm in [("four-bar", cl4, mb4), ("five-bar", cl5, mb5)]:
    for j, what in enumerate(["v_p", "a_p"]):
        err = np.abs(mm[j] - cl[j]).max() / np.abs(cl[j]).max()
        print(f"{name}: max |Δ{what}| / max |{what}| = {err:.1e}"
              f"  (≈ {-np.log10(err):.0f} significant figures)")
""")

md(r"""
## ∇f3 and ∇f4 of the five-bar: projection against the molecule (Fig. 10)

The projection method eliminates the constraint Jacobian column by column with orthogonal
projectors (Eqs. 105–119); the molecule re-solves the loop at q ± h e_k (here h = 10⁻⁵ rad).
""")

code(r"""
proj = jax.jit(jax.vmap(lambda q: projection_derivatives(five.joint_map, q)))(jnp.asarray(q5))
mol = jax.jit(jax.vmap(lambda q: molecule_derivatives(five.joint_map, q, 1e-5)))(jnp.asarray(q5))
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
for i, a in zip((2, 3), ax):
    a.plot(t, np.linalg.norm(proj[1][:, i], axis=1), lw=3, label="projection")
    a.plot(t, np.linalg.norm(mol[1][:, i], axis=1), "k--", lw=1.5, label="molecule, h = 1e-5")
    a.set(xlabel="t (s)", ylabel=f"|∇f{i + 1}|", title=f"joint {i + 1} (Fig. 10)")
ax[0].legend()
plt.tight_layout()
print("max relative difference:", float(jnp.abs(proj[1] - mol[1]).max() / jnp.abs(proj[1]).max()))
""")

md(r"""
## Error against step size and grid size

The molecule's error (against the exact ∇f, H) falls as h² until round-off (≈ ε/h for ∇f,
ε/h² for H) takes over; the pre-model's falls as the knot spacing to the power 4, 3, 2 for f, ∇f, H
(not-a-knot cubic spline, four-bar).
""")

code(r"""
qs5 = jnp.asarray(q5[::10])
exact = jax.jit(jax.vmap(five.joint_map.derivatives))(qs5)
mol_h = jax.jit(jax.vmap(lambda q, h: molecule_derivatives(five.joint_map, q, h), (0, None)))
hs = np.logspace(-8, -1, 22)
eJ, eH = [], []
for h in hs:
    _, Jm, Hm = mol_h(qs5, h)
    eJ.append(float(jnp.abs(Jm - exact[1]).max() / jnp.abs(exact[1]).max()))
    eH.append(float(jnp.abs(Hm - exact[2]).max() / jnp.abs(exact[2]).max()))

qs4 = jnp.linspace(0.15, 0.5, 41)[:, None]
ex4 = jax.jit(jax.vmap(four.joint_map.derivatives))(qs4)
ns = [17, 33, 65, 129, 257]
ep = []
for n in ns:
    pm = premodel(four.joint_map, [(0.1, 0.55)], n)
    fit = jax.jit(jax.vmap(pm.derivatives))(qs4)
    ep.append([float(jnp.abs(a - b).max() / jnp.abs(b).max()) for a, b in zip(fit, ex4)])
ep = np.asarray(ep)

fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
ax[0].loglog(hs, eJ, "o-", ms=3, label="∇f")
ax[0].loglog(hs, eH, "s-", ms=3, label="H")
ax[0].loglog(hs, hs**2, "k:", label="h²")
ax[0].set(xlabel="step h (rad)", ylabel="max relative error", title="molecule, five-bar")
ax[0].legend()
dh = 0.45 / (np.asarray(ns) - 1)
for k, lab in enumerate(["f", "∇f", "H"]):
    ax[1].loglog(dh, ep[:, k], "o-", label=lab)
ax[1].set(xlabel="knot spacing (m)", ylabel="max relative error", title="pre-model, four-bar")
ax[1].xaxis.set_minor_formatter(plt.NullFormatter())
ax[1].legend()
plt.tight_layout()
for k, lab in enumerate(["f", "∇f", "H"]):
    order = np.polyfit(np.log(dh[1:]), np.log(ep[1:, k]), 1)[0]
    print(f"pre-model {lab}: observed order {order:.2f}")
print(f"molecule: best ∇f error {min(eJ):.1e} at h = {hs[int(np.argmin(eJ))]:.0e}, "
      f"best H error {min(eH):.1e} at h = {hs[int(np.argmin(eH))]:.0e}")
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path(__file__).with_name("joint_maps.ipynb")
nbf.write(nb, out)
print(f"wrote {out}")
