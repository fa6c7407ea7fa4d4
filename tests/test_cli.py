"""The `jaxmb` command: listing, the main job (Andrews' squeezer), one-line errors on bad input."""

import numpy as np
import pytest

from jaxmb.cli import main
from jaxmb.models import andrews as an


def test_models_lists_the_squeezer(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "andrews_squeezer" in out and "chain" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["simulate", "no_such_model"], "unknown model 'no_such_model'"),
        (["simulate", "andrews", "--q0", "0.1,0.2"], "--q0 needs 1 value(s)"),
        (["simulate", "andrews", "--qd0", "abc"], "--qd0 must be comma-separated numbers"),
        (["simulate", "andrews", "--solver", "euler"], "unknown solver 'euler'"),
        (["simulate", "andrews", "--t1", "-1"], "--t1 must be a positive number"),
        (["simulate", "andrews", "--rtol", "0"], "--rtol must be positive"),
        (["simulate", "andrews", "--points", "1"], "--points must be at least 2"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, needle):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmb: error: ") and needle in err
    assert "\n" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_simulate_andrews_main_job(capsys, tmp_path):
    """`jaxmb simulate andrews`: summary with the reference error, CSV and PNG written."""
    assert main(["simulate", "andrews", "--out", str(tmp_path), "--points", "31"]) == 0
    out = capsys.readouterr().out
    for key in ("max angle error", "steps", "wall time", "compile time", "beta(t1)"):
        assert key in out
    err = float(out.split("max angle error")[1].split()[0])
    assert err < 1e-7
    csv = tmp_path / "andrews_squeezer.csv"
    png = tmp_path / "andrews_squeezer.png"
    assert csv.exists() and png.exists() and png.stat().st_size > 10_000
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:3] == ["t", "q_beta", "qd_beta"] and header[3:] == [
        f"f_{b}" for b in an.BODY_NAMES
    ]
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert data.shape == (31, 10)
    np.testing.assert_allclose(data[[0, -1], 0], [0.0, 0.03])
    ya, _ = an.reference_solution()
    np.testing.assert_allclose(data[-1, 3:][list(an.TEST_SET_ORDER)], ya, atol=1e-7)


def test_inverse_dynamics_command_on_winter_tables(tmp_path, capsys):
    assert main(["inverse-dynamics", "winter", "--out", str(tmp_path)]) == 0
    table = np.loadtxt(tmp_path / "winter_tables_joint_loads.csv", delimiter=",", skiprows=1)
    assert table.shape[0] == 106 and np.all(np.isfinite(table))
    assert (tmp_path / "winter_tables_joint_loads.png").stat().st_size > 0


def test_inverse_dynamics_command_reports_a_missing_file(tmp_path, capsys):
    assert main(["inverse-dynamics", str(tmp_path / "missing.txt"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmb: error:") and "missing.txt" in err and "\n" not in err
