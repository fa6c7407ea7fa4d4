"""Smoke test: benchmarks/throughput.py --quick runs end to end and writes its JSON."""

import json
import subprocess
import sys

import pytest
from helpers import ROOT


@pytest.mark.slow
def test_throughput_quick(tmp_path):
    pytest.importorskip("pinocchio")
    pytest.importorskip("mujoco")
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "throughput.py"),
        "--quick",
        "--no-sharded",
        "--out",
        str(tmp_path),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "throughput_quick.json").read_text())
    assert res["quick"] is True
    rows = [row for row in res["terms"] if "per_state_s" in row]
    assert rows and all(row["per_state_s"] > 0 for row in rows)
    # the script's default routes: the per-state tree and closed forms, vmapped, and the batched
    # kernel, batch-first and batch-last
    assert {row["method"] for row in rows} == {"tree", "closed_form", "batched", "batched_bm"}
    # the peers model the same chain: M and the bias terms agree
    for dM, dn in res["terms_checks"].values():
        assert dM < 1e-10 and dn < 1e-10
    dM, db = res["steps"]["mujoco_check_maxabs_M_bias"]
    assert dM < 1e-10 and db < 1e-10
    # one row per route and precision, jaxmb_<route>_<dtype>: float64 rollouts equal MuJoCo's RK4
    f64 = [v for k, v in res["steps"].items() if k.startswith("jaxmb_") and k.endswith("_float64")]
    assert f64 and all(v["max_abs_q_diff_vs_mujoco"] < 1e-8 for v in f64)
    assert "rows" in res["scaling"]


def test_exact_paths_runs_and_agrees_with_opensim(tmp_path):
    """benchmarks/exact_paths.py on Gait10dof18musc at small batches: its JSON, and jaxmb's
    lengths and moment arms equal OpenSim's on the timed poses (1e-9 m)."""
    pytest.importorskip("opensim")
    out = tmp_path / "exact"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "exact_paths.py"), "--models",
           "gait10dof18musc", "--batches", "1,16", "--repeats", "2", "--opensim-poses", "3",
           "--name", str(out)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = json.loads(out.with_suffix(".json").read_text())["models"]
    assert row["muscles"] == 18 and set(row["jaxmb"]) == {"1", "16"}
    assert all(v["us_per_pose"] > 0 and v["compile_seconds"] > 0 for v in row["jaxmb"].values())
    assert row["opensim"]["max_abs_length_diff_m"] < 1e-9
    assert row["opensim"]["max_abs_moment_arm_diff_m"] < 1e-9
