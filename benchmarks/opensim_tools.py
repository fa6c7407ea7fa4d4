"""jaxmb's OpenSim-setup commands against OpenSim 4.6's tools on the same setup files.

Per trial and tool: jaxmb cold (a fresh persistent compilation cache), jaxmb warm (the same cache,
later runs) — both as a user waits, the ``jaxmb`` command as typed (PNG included) in a new
process — and OpenSim's tool (InverseDynamicsTool / AnalyzeTool) in a new process. The warm runs
and OpenSim's alternate ``--repeat`` times and the medians are reported (each sample is in the
JSON), with the warm run without its PNG (``--no-plot``) beside them. Writes
``opensim_tools.json`` and ``opensim_tools.png`` in --out, with the machine's load average at the
start and end.

    PYTHONPATH=$PWD python benchmarks/opensim_tools.py --out bench_out --only id --trial gait
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPE = ROOT / "jaxmb" / "data" / "opensim_pipeline"
CASES = {
    ("arm26", "id"): PIPE
    / "arm26_tutorial"
    / "InverseDynamics"
    / "arm26_Setup_InverseDynamics.xml",
    ("gait", "id"): PIPE / "gait10dof18musc" / "walk_Setup_ID.xml",
    ("arm26", "so"): PIPE
    / "arm26_tutorial"
    / "StaticOptimization"
    / "arm26_Setup_StaticOptimization.xml",
    ("gait", "so"): PIPE / "gait10dof18musc" / "walk_Setup_SO.xml",
}
COMMAND = {"id": "inverse-dynamics", "so": "static-optimization"}
OPENSIM = {
    "id": "import opensim as o,sys; t=o.InverseDynamicsTool(sys.argv[1]); "
    "t.setResultsDir(sys.argv[2]); t.run()",
    "so": "import opensim as o,sys; t=o.AnalyzeTool(sys.argv[1]); t.setResultsDir(sys.argv[2]); "
    "t.run()",
}


def _wall(cmd, env=None, cwd=None) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--only", choices=["id", "so"], default=None)
    ap.add_argument("--trial", choices=["arm26", "gait"], default=None)
    ap.add_argument("--repeat", type=int, default=5, help="warm and OpenSim runs, alternating")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    results = {"load_start": os.getloadavg(), "cpus": os.cpu_count(), "runs": []}
    for (trial, tool), setup in CASES.items():
        if (args.only and tool != args.only) or (args.trial and trial != args.trial):
            continue
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as res:
            e = dict(env, JAXMB_CACHE_DIR=cache)
            cmd = [sys.executable, "-m", "jaxmb.cli", COMMAND[tool], str(setup), "--out", res,
                   "--quiet"]  # fmt: skip
            cold = _wall(cmd, e)
            warm, warm_no_plot, osim = [], [], []
            for _ in range(args.repeat):
                warm.append(_wall(cmd, e))
                osim.append(
                    _wall([sys.executable, "-c", OPENSIM[tool], setup.name, res], env, setup.parent)
                )
                warm_no_plot.append(_wall([*cmd, "--no-plot"], e))
        row = {
            "trial": trial,
            "tool": tool,
            "jaxmb_cold_s": cold,
            "jaxmb_warm_s": statistics.median(warm),
            "jaxmb_warm_no_plot_s": statistics.median(warm_no_plot),
            "opensim_s": statistics.median(osim),
            "warm_over_opensim": statistics.median(warm) / statistics.median(osim),
            "samples": {"jaxmb_warm_s": warm, "jaxmb_warm_no_plot_s": warm_no_plot,
                        "opensim_s": osim},  # fmt: skip
            "load": os.getloadavg(),
        }
        print(json.dumps(row), flush=True)
        results["runs"].append(row)
    results["load_end"] = os.getloadavg()
    (out / "opensim_tools.json").write_text(json.dumps(results, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [f"{r['trial']} {r['tool'].upper()}" for r in runs]
    x = range(len(runs))
    for k, (key, lab) in enumerate(
        [
            ("jaxmb_cold_s", "jaxmb cold"),
            ("jaxmb_warm_s", "jaxmb warm"),
            ("opensim_s", "OpenSim 4.6"),
        ]
    ):
        ax.bar([i + 0.27 * (k - 1) for i in x], [r[key] for r in runs], 0.27, label=lab)
    ax.set_xticks(list(x), names)
    ax.set_ylabel("wall time as a user waits (s)")
    ax.set_yscale("log")
    ax.set_title(f"{results['cpus']} CPUs, load {results['load_start'][0]:.1f}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "opensim_tools.png", dpi=110)
    print(out / "opensim_tools.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
