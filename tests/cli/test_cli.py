"""The `jaxmb` command: listing, the main job (Andrews' squeezer), one-line errors on bad input."""

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import PACKAGE_DATA

from jaxmb import gait
from jaxmb import newton_euler as ne
from jaxmb.cli import inverse_dynamics, main
from jaxmb.io.model_file import load_model
from jaxmb.models import andrews as an
from jaxmb.muscles import muscle_lengths


def test_models_lists_the_squeezer(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "andrews_squeezer" in out and "chain" in out
    assert "two_link_arm.json" in out and "five_bar_loop.json" in out  # the example files


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
    out = capsys.readouterr().out  # a summary, and the comparison with Winter's own table
    assert "against Winter's Table A.5" in out and "moment RMS (N·m)" in out
    assert "winter_tables_joint_loads.csv" in out


def test_inverse_dynamics_command_reports_a_missing_file(tmp_path, capsys):
    assert main(["inverse-dynamics", str(tmp_path / "missing.txt"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmb: error:") and "missing.txt" in err and "\n" not in err


def test_inverse_dynamics_parser_on_winter_and_bmc3d(tmp_path):
    parser = argparse.ArgumentParser()
    inverse_dynamics.add_parser(parser.add_subparsers())
    args = parser.parse_args(["inverse-dynamics", "winter", "--out", str(tmp_path)])
    assert args.func(args) == 0
    table = np.genfromtxt(tmp_path / "winter_tables_joint_loads.csv", delimiter=",", names=True)
    assert table.shape == (106,)
    chain, motion, load = gait.winter_inputs()
    out = ne.joint_loads(chain, motion, load)
    np.testing.assert_allclose(table["knee_Mz_on_leg_Nm"], np.asarray(out.moment_ground[:, 1, 2]))
    assert (tmp_path / "winter_tables_joint_loads.png").stat().st_size > 1000
    f = str(gait.DATA_DIR / "bmc3d" / "BiomecII2018_gait_n.txt")
    args = parser.parse_args(["inverse-dynamics", f, "--out", str(tmp_path), "--body-mass", "65"])
    assert args.func(args) == 0
    assert (tmp_path / "BiomecII2018_gait_n_joint_loads.csv").is_file()


# --------------------------------------------------------------------------------- model files
EXAMPLE = PACKAGE_DATA / "models" / "two_link_arm.json"


def test_help_teaches_with_examples(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for needle in ("examples:", "jaxmb save", "jaxmb moment-arms", "jaxmb benchmark", "model file"):
        assert needle in out
    with pytest.raises(SystemExit):
        main(["moment-arms", "--help"])
    assert "--coordinate" in capsys.readouterr().out


def test_save_then_simulate_the_file_matches_the_builtin(tmp_path, capsys):
    path = tmp_path / "chain.json"
    assert main(["save", "chain", str(path)]) == 0
    assert "jaxmb simulate" in capsys.readouterr().out and path.stat().st_size > 1000
    common = ["--t1", "0.05", "--points", "3", "--no-plot", "--q0", "0.3,0.2,0.1,0,0,0,0"]
    assert main(["simulate", "chain", "--out", str(tmp_path / "a")] + common) == 0
    assert main(["simulate", str(path), "--out", str(tmp_path / "b")] + common) == 0
    a = (tmp_path / "a" / "chain.csv").read_text()
    b = (tmp_path / "b" / "chain.csv").read_text()
    assert a == b  # the same model, bit for bit, integrated the same way


def test_moment_arms_of_a_model_file_against_autodiff(tmp_path, capsys):
    """The CSV's moment arms (closed form, Eq. 193) equal −∂L/∂q by autodiff to 1e-12 m."""

    argv = ["moment-arms", str(EXAMPLE), "--coordinate", "elbow", "--range", "0.1,2",
            "--steps", "7", "--q0", "0.4,0", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "flexor" in out and "extensor" in out and "max R (mm)" in out
    csv = tmp_path / "two_link_arm_moment_arms_elbow.csv"
    header = csv.read_text().splitlines()[0].split(",")
    assert header == ["elbow", "r_flexor", "r_extensor", "L_flexor", "L_extensor"]
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert data.shape == (7, 5)
    np.testing.assert_allclose(data[:, 0], np.linspace(0.1, 2, 7), rtol=0, atol=1e-15)
    assert (tmp_path / "two_link_arm_moment_arms_elbow.png").stat().st_size > 10_000
    model = load_model(EXAMPLE)
    qs = jnp.stack([jnp.full(7, 0.4), jnp.asarray(data[:, 0])], -1)
    L, dL = jax.jit(jax.vmap(lambda q: (muscle_lengths(model, q),
                                        jax.jacfwd(muscle_lengths, 1)(model, q))))(qs)  # fmt: skip
    np.testing.assert_allclose(data[:, 3:], np.asarray(L), rtol=0, atol=1e-14)
    np.testing.assert_allclose(data[:, 1:3], -np.asarray(dL)[:, :, 1], rtol=0, atol=1e-12)


def test_benchmark_quick_writes_a_record_and_agrees_with_pinocchio(tmp_path, capsys):
    assert main(["benchmark", "chain", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "M + N q̇ + G" in out and "forward dynamics" in out and "load average" in out
    rec = json.loads((tmp_path / "benchmark_chain.json").read_text())
    for key in ("eom_per_state_us", "forward_dynamics_per_state_us", "machine", "versions",
                "date", "load_average"):  # fmt: skip
        assert key in rec
    assert rec["eom_per_state_us"] > 0 and rec["batch"] == 16
    if rec["versions"]["pinocchio"] is not None:  # an independent mass matrix
        assert rec["pinocchio_mass_matrix_max_abs_diff"] < 1e-12


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["simulate", "missing_model.json"], "cannot read the model file"),
        (["moment-arms", "chain"], "has no muscles"),
        (["moment-arms", "no_such_model"], "unknown model 'no_such_model'"),
        (["moment-arms", str(EXAMPLE), "--coordinate", "knee"], "unknown coordinate 'knee'"),
        (["moment-arms", str(EXAMPLE), "--range", "2,1"], "--range needs finite LOW < HIGH"),
        (["moment-arms", str(EXAMPLE), "--range", "a,b"], "--range must be two"),
        (["moment-arms", str(EXAMPLE), "--steps", "1"], "--steps must be at least 2"),
        (["benchmark", "chain", "--batch", "0"], "--batch and --repeat must be positive"),
        (["benchmark", "nothing"], "unknown model 'nothing'"),
    ],
)
def test_new_commands_reject_bad_input_in_one_line(capsys, tmp_path, argv, needle):
    assert main(argv + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmb: error: ") and needle in err and "\n" not in err, err
    assert not (tmp_path / "o").exists()


def test_save_and_load_errors_are_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "jaxmb-model", "version": 1,\n "bodies": [\n  {"name": "a"}]}')
    assert main(["simulate", str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "bad.json: bodies[0] (line 3): missing required key" in err and "\n" not in err
    target = tmp_path / "x.json"
    target.write_text("{}")
    assert main(["save", "chain", str(target)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main(["save", "chain", str(tmp_path / "x.txt")]) == 2
    assert "must end in .json" in capsys.readouterr().err
    assert main(["save", "chain", str(target), "--force"]) == 0


def test_inverse_dynamics_command_runs_an_opensim_setup(tmp_path, capsys):
    setup = (
        PACKAGE_DATA / "opensim_pipeline" / "arm26_tutorial" / "InverseDynamics"
        / "arm26_Setup_InverseDynamics.xml"
    )  # fmt: skip
    argv = ["inverse-dynamics", str(setup), "--out", str(tmp_path), "--no-cache", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "r_elbow_flex_moment" in out and "low-pass 6 Hz" in out
    assert (tmp_path / "arm26_InverseDynamics.sto").is_file()
    assert (tmp_path / "arm26_InverseDynamics.png").is_file()


def test_static_optimization_command_names_a_bad_setup(tmp_path, capsys):
    bad = tmp_path / "s.xml"
    bad.write_text("<OpenSimDocument><AnalyzeTool name='a'></AnalyzeTool></OpenSimDocument>")
    assert main(["static-optimization", str(bad), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "s.xml:1: <AnalyzeTool name='a'>: no StaticOptimization" in err
