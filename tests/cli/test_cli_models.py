"""Every built-in model with every command that takes a MODEL (issue 22: `jaxmb simulate
four_bar` once crashed on every call, and no test ran it). The cheap combinations run by default;
the ones that compile a large model (the squeezer at 1e-10, the wrapped muscles of arm26 and the
shoulder) are marked slow."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import DATA

from jaxmb.cli import main
from jaxmb import models
from jaxmb.cli.common import builtin_models, default_run

MUSCLED = ("arm26", "shoulder")
# chain is simulated by the README test and test_cli.py; four_bar (which once crashed, with
# five_bar, on every call) compiles its implicit loop in about 15 s, five_bar's joins the slow ones;
# test_default_run_of_every_builtin covers the code path that crashed for both
HEAVY_SIMULATE = ("andrews_squeezer", "arm26", "shoulder", "chain", "five_bar")


def _params(models, heavy):
    return [pytest.param(m, marks=pytest.mark.slow) if m in heavy else m for m in models]


def _ok(capsys, argv):
    code = main(argv)
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return cap.out


def test_the_lists_agree():
    out = set(builtin_models())
    assert out == {"andrews_squeezer", "arm26", "chain", "five_bar", "four_bar", "shoulder"}


@pytest.mark.parametrize("name", _params(builtin_models(), ("shoulder",)))
def test_save_every_builtin(tmp_path, capsys, name):
    out = _ok(capsys, ["save", name, str(tmp_path / f"{name}.json")])
    assert "read back" in out and (tmp_path / f"{name}.json").stat().st_size > 100


@pytest.mark.parametrize("name", _params(builtin_models(), HEAVY_SIMULATE))
def test_simulate_every_builtin(tmp_path, capsys, name):
    argv = ["simulate", name, "--out", str(tmp_path), "--points", "3", "--no-plot"]
    if name != "andrews_squeezer":
        argv += ["--t1", "0.01"]
    out = _ok(capsys, argv)
    assert "steps" in out and (tmp_path / f"{name}.csv").exists()


@pytest.mark.parametrize("name", _params(builtin_models(), ("shoulder",)))
def test_default_run_of_every_builtin(name):
    """The default initial state of every built-in (where `jaxmb simulate four_bar` crashed)."""
    model = getattr(models, name)()
    q0, qd0, t1, solver, rtol, atol, _ = default_run(name, model)
    assert np.shape(q0) == np.shape(qd0) == (model.nq,) and np.all(np.isfinite(q0))
    assert t1 > 0 and rtol > 0 and atol > 0 and solver


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_models())
def test_benchmark_every_builtin(tmp_path, capsys, name):
    out = _ok(capsys, ["benchmark", name, "--quick", "--out", str(tmp_path)])
    assert "peer" in out and (tmp_path / f"benchmark_{name}.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", MUSCLED)
def test_moment_arms_every_muscled_builtin(tmp_path, capsys, name):
    out = _ok(capsys, ["moment-arms", name, "--steps", "3", "--out", str(tmp_path), "--no-plot"])
    assert "max R (mm)" in out


@pytest.mark.parametrize("name", ["chain", "four_bar"])
def test_moment_arms_of_a_model_without_muscles_says_so(tmp_path, capsys, name):
    assert main(["moment-arms", name, "--out", str(tmp_path)]) == 2
    assert f"model {name!r} has no muscles" in capsys.readouterr().err


def test_an_osim_file_is_a_model(tmp_path, capsys):
    """`.osim` wherever a model is taken (the CLI said "invalid JSON"): saved as a model file."""
    osim = DATA / "osim" / "double_pendulum.osim"
    out = _ok(capsys, ["save", str(osim), str(tmp_path / "dp.json")])
    assert "double_pendulum" in out and (tmp_path / "dp.json").exists()


@pytest.mark.slow
def test_simulate_an_osim_file(tmp_path, capsys):
    osim = DATA / "osim" / "double_pendulum.osim"
    argv = ["simulate", str(osim), "--t1", "0.01", "--points", "3", "--no-plot"]
    out = _ok(capsys, argv + ["--out", str(tmp_path)])
    assert "double_pendulum" in out
