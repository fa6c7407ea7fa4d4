"""Size and load time of the programs a warm ``jaxmb static-optimization`` loads from disk.

A warm run traces and compiles nothing: it loads its two stored programs (the trial's muscle
paths, the SO solve) and runs them. XLA rebuilds a loaded program's HLO module three times over,
so the load grows with the program's instruction count. For each setup this compiles both
programs as the command does (``stored_jit`` into a fresh directory), then loads each file
``--repeat`` times in this process and reports its HLO instruction count, serialized size, and
load time (CPU and wall, minimum over the repeats). Writes ``stored_programs.json`` in --out.

    PYTHONPATH=$PWD python benchmarks/stored_programs.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPE = ROOT / "jaxmb" / "data" / "opensim_pipeline"
SETUPS = {
    "gait10dof18musc": PIPE / "gait10dof18musc" / "walk_Setup_SO.xml",
    "arm26": PIPE / "arm26_tutorial" / "StaticOptimization" / "arm26_Setup_StaticOptimization.xml",
}


def measure(setup: Path, repeat: int) -> list[dict]:
    import jax
    import numpy as np
    from jax.experimental.serialize_executable import deserialize_and_load

    import jaxmb  # noqa: F401  (x64)
    from jaxmb.io import stored_programs as sp
    from jaxmb.io.setup import static_optimization as so

    with tempfile.TemporaryDirectory() as d:
        jax.config.update("jax_compilation_cache_dir", d)  # where stored_value keeps the model
        so.run_static_optimization(setup, Path(d) / "out")  # compiles and stores both programs
        rows = []
        for f in sorted(Path(sp.program_dir()).glob("*.xlaexec")):
            uses_lapack, *stored = pickle.loads(f.read_bytes())
            wall, cpu = [], []
            for _ in range(repeat):
                t, c = time.perf_counter(), time.process_time()
                program = deserialize_and_load(*stored)
                wall.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
            hlo = program.as_text()
            rows.append({
                "program": f.name.split("-")[0],
                "hlo_instructions": sum(1 for ln in hlo.splitlines() if " = " in ln),
                "serialized_mb": round(f.stat().st_size / 1e6, 3),
                "load_cpu_s": float(np.min(cpu)),
                "load_wall_s": float(np.min(wall)),
            })  # fmt: skip
        return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument(
        "--setups", default=",".join(SETUPS), help="comma-separated: " + ",".join(SETUPS)
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:  # one setup per process: a fresh process loads as a warm run does
        print(json.dumps(measure(SETUPS[args.child], args.repeat)))
        return 0
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    results = {"commit": commit, "load_start": os.getloadavg(), "setups": {}}
    for name in args.setups.split(","):
        r = subprocess.run(
            [sys.executable, __file__, "--child", name, "--repeat", str(args.repeat)],
            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"{name}: exit {r.returncode}\n{r.stderr[-2000:]}")
        rows = json.loads(r.stdout.strip().splitlines()[-1])
        results["setups"][name] = rows
        for row in rows:
            print(name, json.dumps(row), flush=True)
    results["load_end"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stored_programs.json").write_text(json.dumps(results, indent=1))
    print(out / "stored_programs.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
