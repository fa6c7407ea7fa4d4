"""Print the per-muscle errors of imported OpenSim muscles against ``osim_muscles_reference.json``.

Markdown table per model: max |ΔL| and max |ΔR| (m) over the reference poses, split into poses
where OpenSim's path wraps that muscle and where it does not, plus muscles the import leaves out.
No OpenSim needed. Run from the repository root:
``python tests/data/report_osim_muscle_errors.py [model ...]`` (default: all models).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))  # this checkout's jaxmb, not an installed copy

import jaxmb  # noqa: E402, F401  (x64)
from jaxmb.io.osim import model_with_muscles, read_osim  # noqa: E402
from jaxmb.muscles import lengths_and_moment_arms  # noqa: E402


def main(keys) -> None:
    ref = json.loads((HERE / "osim_muscles_reference.json").read_text())
    for key in keys or list(ref["models"]):
        r = ref["models"][key]
        imp = read_osim(HERE / "osim" / r["file"], zero_inertia=tuple(r["phantoms"]), locked="free")
        skipped: dict[str, str] = {}
        model = model_with_muscles(imp, skip_unsupported=True, skipped=skipped)
        qs = jnp.asarray([p["q"] for p in r["poses"]])
        t = time.perf_counter()
        # lax.map over the poses: under vmap every wrapping branch runs (arm26 29x slower)
        f = eqx.filter_jit(lambda m, qs: jax.lax.map(lambda q: lengths_and_moment_arms(m, q), qs))
        L, R = (np.asarray(a) for a in f(model, qs))
        dt = time.perf_counter() - t
        print(
            f"\n### {key}: {len(model.muscle_names)} of {len(r['muscles'])} muscles built,"
            f" {len(r['poses'])} poses (compile + run {dt:.0f} s)\n"
        )
        print(
            "| muscle | wrapped poses | max dL unwrapped | max dR unwrapped |"
            " max dL wrapped | max dR wrapped |"
        )
        print("|---|---|---|---|---|---|")
        worst = [0.0] * 4
        for m, name in enumerate(model.muscle_names):
            k = r["muscles"].index(name)
            e = [0.0] * 4
            nw = 0
            for p, pose in enumerate(r["poses"]):
                dl = abs(L[p, m] - pose["muscle_lengths"][k])
                dr = np.abs(R[p, :, m] - np.asarray(pose["moment_arms_fd"])[:, k]).max()
                w = 2 if pose["wrap_points"][k] > 0 else 0
                nw += w > 0
                e[w], e[w + 1] = max(e[w], dl), max(e[w + 1], dr)
            worst = [max(a, b) for a, b in zip(worst, e, strict=True)]
            print(f"| {name} | {nw} | " + " | ".join(f"{x:.1e}" for x in e) + " |")
        print("| **max** | | " + " | ".join(f"**{x:.1e}**" for x in worst) + " |")
        for name, why in skipped.items():
            print(f"- not built: {name}: {why}")


if __name__ == "__main__":
    main(sys.argv[1:])
