"""The 14 MoBL-ARMS shoulder muscles: moment arms against OpenSim 4.6 (accuracy and speed).

Protocol (seed §4-4 C): each of ``elv_angle``, ``shoulder_elv``, ``shoulder_rot`` swept over its
range at 1° steps with the other two at 0 (511 poses); model ``shoulder("mobl")`` +
:func:`jaxmb.models.shoulder_muscles.add_shoulder_muscles`.

Accuracy: jaxmb's closed-form R (Eq. 193) against ``tests/data/shoulder_muscle_reference.json``,
OpenSim's −dL/dq by central differences (h = 1e-6 rad) of its assembled path length. Per muscle
and swept coordinate, the max |ΔR| over the sweep in the swept coordinate's row ("swept") and
over all three rows ("all rows"). Variants: ``nowrap`` (every wrap object inactive on both sides)
and ``wrapped`` (the model as written; needs OpenSim-exact wrapping in ``jaxmb.muscles``).

Speed: jaxmb ``moment_arms`` over the 511 poses in one compiled call (``jax.lax.map``: the
wrapped paths branch, and vmap would run every branch for every pose), compiled steady state,
against the peer that produced the referee, OpenSim's path length at q ± h for the three
coordinates (six realizations per pose, a Python loop over poses) on ``--opensim-poses`` poses
(default all 511; fewer are extrapolated, as the output says).

    python benchmarks/shoulder_moment_arms.py [--variants nowrap wrapped] [--opensim-poses 511]
        [--no-opensim] [--no-plot]

Writes benchmarks/results/shoulder_moment_arms.json and shoulder_moment_arms.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, compile_seconds, metadata, save_results, timeit_compiled

import jaxmb
from jaxmb.models import shoulder_muscles as sm
from jaxmb.models.shoulder import shoulder

ROOT = Path(__file__).resolve().parent.parent
REF = json.loads((ROOT / "tests" / "data" / "shoulder_muscle_reference.json").read_text())
ORDER = sm.GROUP_LEADERS + tuple(m for m in sm.MUSCLES if m not in sm.GROUP_LEADERS)


def sweep_poses(variant):
    qs, owner = [], []
    for ci, c in enumerate(REF["coordinates"]):
        for x in REF[variant][c]["q"]:
            q = np.zeros(3)
            q[ci] = x
            qs.append(q)
            owner.append(ci)
    return np.asarray(qs), np.asarray(owner)


def errors(R, variant):
    """Per swept coordinate: (swept-row error (nm,), all-rows error (nm,))."""
    out, k = {}, 0
    for ci, c in enumerate(REF["coordinates"]):
        Ro = np.asarray(REF[variant][c]["moment_arm"])  # (n, 3, nm)
        Rj = R[k : k + len(Ro)]
        k += len(Ro)
        d = np.abs(Rj - Ro)
        out[c] = {"swept": d[:, ci, :].max(axis=0), "all_rows": d.max(axis=(0, 1))}
    return out


def opensim_peer(qs, n):
    sys.path.insert(0, str(ROOT / "tests" / "data"))
    from make_shoulder_muscle_reference import H, Lengths

    L = Lengths(True)
    idx = np.linspace(0, len(qs) - 1, n).astype(int)
    t0 = time.perf_counter()
    for i in idx:
        for c in REF["coordinates"]:
            base = dict(zip(REF["coordinates"], qs[i], strict=True))
            plus, minus = dict(base), dict(base)
            plus[c] += H
            minus[c] -= H
            L(plus)
            L(minus)
    return (time.perf_counter() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="+", default=["nowrap", "wrapped"])
    ap.add_argument("--opensim-poses", type=int, default=511)
    ap.add_argument("--no-opensim", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()

    result = {"meta": metadata(benchmark="MoBL-ARMS 14 shoulder muscles, seed sweeps (511 poses)")}
    curves = {}
    for variant in args.variants:
        if variant == "wrapped" and sm._wrap_api() is not None:
            print(f"wrapped: skipped ({sm._wrap_api()})")
            result[variant] = {"skipped": sm._wrap_api()}
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sm.add_shoulder_muscles(
                shoulder("mobl", muscles=False), wrapping=variant == "wrapped"
            )
        qs, _ = sweep_poses(variant)
        fn = jax.jit(lambda Q, model=model: jax.lax.map(lambda q: jaxmb.moment_arms(model, q), Q))
        Q = jnp.asarray(qs)
        t_compile = compile_seconds(fn, Q)
        t_jax = timeit_compiled(fn, Q, repeats=3, warmup=1)
        R = np.asarray(fn(Q))
        curves[variant] = R
        err = errors(R, variant)
        res = {
            "jaxmb_seconds": t_jax,
            "jaxmb_compile_seconds": t_compile,
            "jaxmb_us_per_pose": t_jax / len(qs) * 1e6,
            "max_error_m": {
                m: {c: float(err[c]["swept"][sm.MUSCLES.index(m)]) for c in REF["coordinates"]}
                for m in ORDER
            },
            "max_error_all_rows_m": {
                m: max(float(err[c]["all_rows"][sm.MUSCLES.index(m)]) for c in REF["coordinates"])
                for m in ORDER
            },
        }
        worst = max(res["max_error_all_rows_m"].values())
        res["max_error_overall_m"] = worst
        print(f"\n{variant}: max |R - R_opensim| (m) about the swept coordinate")
        print(f"{'muscle':8s}" + "".join(f"{c:>14s}" for c in REF["coordinates"]) + "  all rows")
        for m in ORDER:
            row = res["max_error_m"][m]
            print(
                f"{m:8s}"
                + "".join(f"{row[c]:14.2e}" for c in REF["coordinates"])
                + f"  {res['max_error_all_rows_m'][m]:.2e}"
            )
        print(f"overall {worst:.2e} m; jaxmb {res['jaxmb_us_per_pose']:.1f} us/pose")
        if not args.no_opensim and variant == "wrapped":
            per = opensim_peer(qs, min(args.opensim_poses, len(qs)))
            res["opensim_us_per_pose"] = per * 1e6
            res["opensim_poses_timed"] = args.opensim_poses
            res["speedup_vs_opensim"] = per * len(qs) / t_jax
            print(
                f"OpenSim -dL/dq (6 path evaluations per pose): {per * 1e6:.0f} us/pose "
                f"(timed on {min(args.opensim_poses, len(qs))} poses); "
                f"OpenSim / jaxmb {res['speedup_vs_opensim']:.2f}x"
            )
        result[variant] = res
    path = save_results("shoulder_moment_arms", result)
    print(f"wrote {path}")
    if not args.no_plot and curves:
        plot(curves, RESULTS / "shoulder_moment_arms.png")


def plot(curves, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variant = "wrapped" if "wrapped" in curves else next(iter(curves))
    R = curves[variant]
    start = np.cumsum([0] + [len(REF[variant][c]["q"]) for c in REF["coordinates"]])
    # (swept coordinate, moment arm about): the seed's Fig. 14, Fig. 15, and the elevation itself
    panels = (("elv_angle", "shoulder_elv"), ("shoulder_elv", "shoulder_rot"),
              ("shoulder_elv", "shoulder_elv"))  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for (swept, about), ax in zip(panels, axes, strict=True):
        ci, ai = REF["coordinates"].index(swept), REF["coordinates"].index(about)
        d = REF[variant][swept]
        q = np.degrees(d["q"])
        Ro = np.asarray(d["moment_arm"])
        k = start[ci]
        for m in sm.GROUP_LEADERS:
            j = sm.MUSCLES.index(m)
            (ln,) = ax.plot(q, 100 * R[k : k + len(q), ai, j], lw=1.5, label=m)
            ax.plot(q[::6], 100 * Ro[::6, ai, j], "o", ms=3, color=ln.get_color())
        ax.set_xlabel(f"{swept} (deg)")
        ax.set_ylabel(f"moment arm about {about} (cm)")
    axes[0].legend(fontsize=8, frameon=False)
    fig.suptitle(f"Group leaders, jaxmb (lines) vs OpenSim −dL/dq (dots), {variant}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
