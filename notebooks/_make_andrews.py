"""Writes notebooks/andrews_squeezer.ipynb (run: python notebooks/_make_andrews.py)."""

from pathlib import Path

import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md(r"""
# Andrews' squeezing mechanism as a 1-DOF ODE

Seven bodies, three kinematic loops closing at one point E, one degree of freedom: the crank angle
β = q (seed 001 §4-4 B; Hairer & Wanner II, VII.7; IVP test set problem `andrews`).
jaxmb embeds the six loop-closure constraints in a **joint map** f(q) solved in closed form (circle
intersections), so the equations of motion are an ODE in (β, β̇): no multipliers, no drift, no
stabilization. This notebook shows

1. the joint variables against q (the seed's Fig. 17),
2. q(t) and q̇(t) for the seed's case q(0) = −0.0620 rad, q̇(0) = 0 over 0.05 s (Fig. 18), and the
   test set's published reference at t = 0.03 s,
3. the work-precision diagram against the index-1 DAE with Baumgarte stabilization and MuJoCo
   (`benchmarks/andrews.py`), and
4. the loop-closure violation over time of each route.
""")

code(r"""
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jaxmb as mb
from jaxmb.models import andrews as an
from jaxmb.simulation import simulate

model = mb.models.andrews_squeezer()
names = ["β", "Θ", "γ", "Φ", "δ", "Ω", "ε"]  # the test set's order
print(model.body_names, model.coordinate_names, model.nq)
""")

md(r"""
## 1. Joint variables against the generalized coordinate (Fig. 17)

Θ is measured relative to β, so it falls by 2π per turn of the crank; every other joint variable is
2π-periodic. The map is exact: the six loop closures hold to round-off everywhere.
""")

code(r"""
beta = jnp.linspace(-np.pi, np.pi, 721)
F = jax.jit(jax.vmap(lambda b: an.to_test_set(model.joint_map(b[None]))))(beta)
g = jax.jit(jax.vmap(lambda b: model.joint_map.constraint_residual(model.joint_map(b[None]))))(beta)
print(f"max |g(f(q))| over the turn: {float(jnp.max(jnp.abs(g))):.1e} m")

fig, ax = plt.subplots(figsize=(7, 4))
for k in range(1, 7):
    ax.plot(beta, F[:, k], label=names[k])
ax.set(xlabel="q = β (rad)", ylabel="joint variable (rad)", title="Joint variables f(q)")
ax.legend(ncol=3, fontsize=8)
plt.show()
""")

md(r"""
## 2. Forward dynamics (Fig. 18) and the published reference

The spring (between K3's point D and the ground point C) and the motor torque on β are force
elements of the model, so `simulate` integrates the free motion of the model.
""")

code(r"""
ts = jnp.linspace(0.0, 0.05, 201)
traj = simulate(model, jnp.array([-0.0620]), jnp.zeros(1), 0.05, ts=ts, solver="dopri8",
                rtol=1e-10, atol=1e-10)
print("steps:", {k: int(v) for k, v in traj.stats.items()})

fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
a1.plot(traj.ts, traj.q[:, 0]); a1.set(xlabel="t (s)", ylabel="q = β (rad)")
a2.plot(traj.ts, traj.qd[:, 0]); a2.set(xlabel="t (s)", ylabel="q̇ (rad/s)")
fig.suptitle("Seed's case: q(0) = −0.0620 rad, q̇(0) = 0")
plt.show()

# the test set's consistent initial state and its published reference at t = 0.03 s
ref = simulate(model, jnp.array([an.BETA0]), jnp.zeros(1), 0.03, ts=jnp.linspace(0, 0.03, 201),
               solver="dopri8", rtol=1e-10, atol=1e-10)
y = np.asarray(an.to_test_set(model.joint_map(ref.q[-1])))
ya, _ = an.reference_solution()
for n, a, b in zip(names, y, ya):
    print(f"{n}: jaxmb {a: .12f}   reference {b: .12f}   |diff| {abs(a - b):.1e}")
print(f"max error {np.max(np.abs(y - ya)):.1e} rad (target 1e-7)")
""")

md(r"""
## 3. Work-precision: embedded ODE vs index-1 DAE vs MuJoCo

From `benchmarks/results/andrews.json` (run `python benchmarks/andrews.py` to regenerate). Error =
max over the 7 angles at t = 0.03 s; cost = process-CPU time of the compiled solve (the benchmark
machine is shared; wall times are in the JSON too). `ode` is jaxmb's generic tree
dynamics through the joint map; `ode_projected` integrates the test set's own M and f projected on
the same joint map (what the embedding costs with hand-written equations); `dae_a<gain>` carries
7 coordinates and 6 multipliers with one 13×13 KKT solve per right-hand side, Baumgarte gains
α = β = gain (0: no stabilization), and is credited with its best gain; MuJoCo steps with fixed
RK4 steps and soft equality constraints.
""")

code(r"""
def find_results():
    for base in (Path.cwd(), Path.cwd().parent, Path(mb.__file__).resolve().parents[1]):
        p = base / "benchmarks" / "results" / "andrews.json"
        if p.exists():
            return json.loads(p.read_text())
    return None

res = find_results()
if res is None:
    print("benchmarks/results/andrews.json not found: run python benchmarks/andrews.py")
else:
    print(res["date"], res["machine"]["platform"], "cpus:", res["machine"]["cpu_count"],
          "load:", res["machine"]["load_average"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    marks = {"ode": "o-", "ode_projected": "^-"}
    marks.update({f"dae_a{g:g}": m + "--" for g, m in zip(res["baumgarte_gains"], "sDvP")})
    for solver, color in (("tsit5", "C0"), ("dopri8", "C1")):
        for route, m in marks.items():
            pts = [r for r in res["rows"] if r["route"] == route and r["solver"] == solver
                   and "error" in r]
            ax.loglog([r["cpu_s"] * 1e3 for r in pts], [r["error"] for r in pts], m, color=color,
                      label=f"{route}, {solver}", alpha=1 if route == "ode" else 0.45, ms=4, lw=1)
    mj = res["mujoco"]
    if mj:
        ax.loglog([r["cpu_s"] * 1e3 for r in mj], [r["error"] for r in mj], "d:", color="C2",
                  label="MuJoCo RK4")
    ax.axhline(1e-6, color="gray", lw=0.5)
    ax.set(xlabel="compiled solve, process CPU time (ms)",
           ylabel="max angle error at t = 0.03 (rad)")
    ax.legend(fontsize=7)
    plt.show()
    fmt = lambda x: "n/a" if x is None else f"{x:.2f}"
    for solver, by_clock in res["ratios_at_1e_6"].items():
        for clock, r in by_clock.items():
            print(f"{solver} ({clock}) at error 1e-6 rad: best DAE ({r['best_dae']}) / jaxmb ODE ="
                  f" {fmt(r['dae_over_ode'])}, best DAE / projected ODE = "
                  f"{fmt(r['dae_over_ode_projected'])}")
    print("RHS cost (process-CPU µs per evaluation):")
    for k, v in res.get("rhs_cost_us", {}).items():
        print(f"  {k}: {v:.2f}")
""")

md(r"""
## 4. Constraint drift

The embedded ODE satisfies the loop closures by construction (round-off only); the DAE integrates
accelerations and drifts unless stabilized; MuJoCo's constraints are soft.
""")

code(r"""
if res is not None:
    d = res["drift"]
    fig, ax = plt.subplots(figsize=(7, 4))
    tiny = 1e-20
    ax.semilogy(d["t"], np.maximum(d["ode"], tiny), label="jaxmb ODE")
    for g in res["baumgarte_gains"]:
        ax.semilogy(d["t"], np.maximum(d[f"dae_a{g:g}"], tiny), lw=1,
                    label=f"DAE, Baumgarte α=β={g:g}")
    if "mujoco" in d:
        ax.semilogy(d["mujoco_t"], np.maximum(d["mujoco"], tiny), label="MuJoCo")
    ax.set(xlabel="t (s)", ylabel="max |g| (m)", title=f"loop-closure violation, tol {d['tol']}")
    ax.legend(fontsize=8)
    plt.show()

# and along this notebook's own trajectory:
g = jax.jit(jax.vmap(lambda q: model.joint_map.constraint_residual(model.joint_map(q))))(traj.q)
print(f"max |g| along the simulated trajectory: {float(jnp.max(jnp.abs(g))):.1e} m")
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path(__file__).resolve().parent / "andrews_squeezer.ipynb"
nbf.write(nb, out)
print(f"wrote {out}")
