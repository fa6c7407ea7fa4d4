"""Bad inputs a user can produce, one per case: each must raise the documented error type with a
message that names the offending element, value or line (issue 22). Cases are cheap: the checks run
at trace time or before anything is compiled. NaN-preservation checks (no error, but never a
plausible number) follow at the end.
"""

from __future__ import annotations

import json
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import DATA, PACKAGE_DATA

import jaxmb as mb
from jaxmb.analyses.gait_data import GaitDataError, read_bmc3d
from jaxmb.cli import main
from jaxmb.forces import JointSpring, PointToPointSpring
from jaxmb.io import (
    MotionFileError,
    Storage,
    TRCData,
    read_c3d,
    read_storage,
    read_trc,
    write_storage,
    write_trc,
)
from jaxmb.io.model_file import ModelFileError, load_model, loads_model, save_model
from jaxmb.io.osim import OsimImportError, read_osim
from jaxmb.io.setup import SetupError, read_inverse_dynamics_setup
from jaxmb.muscles import MuscleParameters
from jaxmb.muscles.hill import musculoskeletal_rhs

CHAIN = mb.models.chain(3)
TWO_LINK = PACKAGE_DATA / "models" / "two_link_arm.json"
Z3 = jnp.zeros(3)
BAD_SHAPE = r"must have shape \(nq,\) = \(3,\) for model 'chain3'.*got shape "

# --------------------------------------------------------------------------------------------
# shapes at the public entry points: the function, the vector, nq and the shape given
# --------------------------------------------------------------------------------------------

SHAPE_CASES = {
    "mass_matrix q (4,)": (lambda: mb.mass_matrix(CHAIN, jnp.zeros(4)), "mass_matrix: q " + BAD_SHAPE + r"\(4,\)"),
    "mass_matrix q (3,1)": (lambda: mb.mass_matrix(CHAIN, jnp.zeros((3, 1))), r"mass_matrix: q .*\(3, 1\)"),
    "mass_matrix closed_form q (2,)": (lambda: mb.mass_matrix(CHAIN, jnp.zeros(2), "closed_form"), r"mass_matrix: q .*\(2,\)"),
    "mass_matrix under jit": (lambda: jax.jit(mb.mass_matrix)(CHAIN, jnp.zeros(4)), "mass_matrix: q " + BAD_SHAPE),
    "mass_matrix unknown method": (lambda: mb.mass_matrix(CHAIN, Z3, "crba"), r"unknown method 'crba'"),
    "bias_forces qd (2,)": (lambda: mb.bias_forces(CHAIN, Z3, jnp.zeros(2)), "bias_forces: qd " + BAD_SHAPE + r"\(2,\)"),
    "gravity_forces q (5,)": (lambda: mb.gravity_forces(CHAIN, jnp.zeros(5)), "gravity_forces: q " + BAD_SHAPE),
    "forward_dynamics qd (4,)": (lambda: mb.forward_dynamics(CHAIN, Z3, jnp.zeros(4)), "forward_dynamics: qd " + BAD_SHAPE),
    "forward_dynamics tau (2,)": (lambda: mb.forward_dynamics(CHAIN, Z3, Z3, jnp.zeros(2)), "forward_dynamics: tau " + BAD_SHAPE),
    "inverse_dynamics qdd (1,)": (lambda: mb.inverse_dynamics(CHAIN, Z3, Z3, jnp.zeros(1)), "inverse_dynamics: qdd " + BAD_SHAPE),
    "inverse_dynamics q scalar": (lambda: mb.inverse_dynamics(CHAIN, 0.0, Z3, Z3), r"inverse_dynamics: q .*got shape \(\)"),
    "body_transforms q (2,)": (lambda: mb.body_transforms(CHAIN, jnp.zeros(2)), "body_transforms: q " + BAD_SHAPE),
    "joint_values q (2,)": (lambda: mb.joint_values(CHAIN, jnp.zeros(2)), r"joint_values: q must have shape \(nq,\) = \(3,\).*\(2,\)"),
    "joint_gradients q (4,)": (lambda: mb.joint_gradients(CHAIN, jnp.zeros(4)), r"joint_gradients.*\(3,\).*\(4,\)"),
    "kinetic_energy qd (2,)": (lambda: mb.kinetic_energy(CHAIN, Z3, jnp.zeros(2)), r"qd " + BAD_SHAPE),
    "batched_terms q batch-last": (lambda: mb.batched_terms(CHAIN, jnp.zeros((3, 5)), jnp.zeros((3, 5))), r"batched_terms: model 'chain3': q and qd must both have shape \(B, nq=3\) \(batch first\), got \(3, 5\)"),
    "batched_terms qd (B, 2)": (lambda: mb.batched_terms(CHAIN, jnp.zeros((5, 3)), jnp.zeros((5, 2))), r"batched_terms: .*got \(5, 3\) and \(5, 2\)"),
    "batched_forward_dynamics tau (2, B)": (lambda: mb.batched_forward_dynamics(CHAIN, jnp.zeros((3, 5)), jnp.zeros((3, 5)), jnp.zeros((2, 5))), r"batched_forward_dynamics: model 'chain3': tau must have the shape of q.*got \(2, 5\)"),
}


@pytest.mark.parametrize("case", SHAPE_CASES)
def test_wrong_shapes_are_named(case):
    fn, pattern = SHAPE_CASES[case]
    with pytest.raises(ValueError, match=pattern):
        fn()


# --------------------------------------------------------------------------------------------
# simulate: tolerances, times and the initial state, refused before anything compiles
# --------------------------------------------------------------------------------------------

SIM_CASES = {
    "rtol negative": (dict(rtol=-1e-8), r"rtol must be a positive number, got -1e-08"),
    "atol zero": (dict(atol=0.0), r"atol must be a positive number, got 0.0"),
    "rtol nan": (dict(rtol=float("nan")), r"rtol must be a positive number, got nan"),
    "dt0 negative": (dict(dt0=-0.01), r"dt0 must be a positive number, got -0.01"),
    "dtmin zero": (dict(dtmin=0.0), r"dtmin must be a positive number, got 0.0"),
    "q0 nan": (dict(q0=jnp.array([0.0, jnp.nan, 0.0])), r"q0\[1\] \(joint1\) = nan is not finite"),
    "qd0 inf": (dict(qd0=jnp.array([0.0, 0.0, jnp.inf])), r"qd0\[2\] \(joint2\) = inf is not finite"),
    "q0 wrong length": (dict(q0=jnp.zeros(2)), r"initial state must have shape \(3,\).*q0 \(2,\).*nq=3"),
    "t1 before t0": (dict(t1=-1.0), r"need finite t0 < t1, got t0=0.0, t1=-1.0"),
    "t1 nan": (dict(t1=float("nan")), r"need finite t0 < t1.*t1=nan"),
    "ts backwards": (dict(ts=jnp.array([0.5, 0.2])), r"ts must be non-decreasing within \[t0, t1\]"),
    "ts outside": (dict(ts=jnp.array([0.0, 2.0])), r"ts must be non-decreasing within \[t0, t1\] = \[0.0, 1.0\]"),
    "unknown solver": (dict(solver="euler"), r"unknown solver 'euler'"),
    "ts nan": (dict(ts=jnp.array([0.0, jnp.nan])), r"simulate: ts\[1\] = nan is not a finite time"),
    "max_steps zero": (dict(max_steps=0), r"simulate: max_steps must be a positive integer, got 0"),
    "max_steps float": (dict(max_steps=1e5), r"simulate: max_steps must be a positive integer, got 100000.0"),
}


@pytest.mark.parametrize("case", SIM_CASES)
def test_simulate_arguments_are_checked(case):
    kw, pattern = SIM_CASES[case]
    kw = dict(kw)
    q0, qd0, t1 = kw.pop("q0", Z3), kw.pop("qd0", Z3), kw.pop("t1", 1.0)
    with pytest.raises(ValueError, match=pattern):
        mb.simulate(CHAIN, q0, qd0, t1, **kw)


def test_simulate_batch_names_the_bad_member():
    qd0 = jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, jnp.inf]])
    with pytest.raises(ValueError, match=r"qd0\[1, 2\] \(joint2\) = inf"):
        mb.simulate_batch(CHAIN, jnp.zeros((2, 3)), qd0, 1.0)


def _decay(t, y):
    return -y


ERK_CASES = {
    "rtol negative": (dict(rtol=-1e-6), r"erk_solve: rtol must be a positive number, got -1e-06"),
    "atol nan": (dict(atol=float("nan")), r"erk_solve: atol must be a positive number, got nan"),
    "t1 before t0": (dict(t0=1.0, t1=0.0), r"erk_solve: need finite times t0 < t1 \(s\), got t0=1.0, t1=0.0"),
    "t1 infinite": (dict(t1=float("inf")), r"erk_solve: need finite times t0 < t1"),
    "y0 nan": (dict(y0=jnp.ones(3).at[1].set(jnp.nan)), r"erk_solve: the initial state y0\[1\] = nan"),
    "y0 2-D": (dict(y0=jnp.ones((3, 2))), r"erk_solve: y0 must be a flat state of shape \(n,\), got \(3, 2\)"),
    "max_steps zero": (dict(max_steps=0), r"erk_solve: max_steps must be a positive integer, got 0"),
    "safety above 1": (dict(safety=2.0), r"erk_solve: need 0 < safety ≤ 1 .* safety=2.0"),
    "factormax below 1": (dict(factormax=0.5), r"erk_solve: need .*factormax=0.5"),
}


@pytest.mark.parametrize("case", ERK_CASES)
def test_erk_solve_arguments_are_checked(case):
    kw = dict(ERK_CASES[case][0])
    y0, t0, t1 = kw.pop("y0", jnp.ones(3)), kw.pop("t0", 0.0), kw.pop("t1", 1.0)
    with pytest.raises(ValueError, match=ERK_CASES[case][1]):
        mb.erk_solve(_decay, y0, t0, t1, **kw)


def test_erk_solve_reports_a_nan_right_hand_side_as_not_ok():
    r = mb.erk_solve(lambda t, y: y * jnp.nan, jnp.ones(3), 0.0, 1.0, max_steps=50)
    assert not bool(r.ok) and float(r.t) < 1.0


Z34 = jnp.zeros((3, 4))
RK4_CASES = {
    "dt negative": ((Z34, Z34, -0.01, 10), r"batched_rk4: the step dt must be a positive number of seconds, got -0.01"),
    "dt nan": ((Z34, Z34, float("nan"), 10), r"batched_rk4: the step dt .* got nan"),
    "num_steps negative": ((Z34, Z34, 0.01, -3), r"batched_rk4: num_steps must be an integer ≥ 0, got -3"),
    "q0 nan": ((Z34.at[2, 1].set(jnp.nan), Z34, 0.01, 10), r"batched_rk4: the initial state q0\[2, 1\] \(joint2\) = nan"),
    "q0 wrong nq": ((jnp.zeros((4, 4)), jnp.zeros((4, 4)), 0.01, 10), r"shape \(nq=3, B\)"),
}


@pytest.mark.parametrize("case", RK4_CASES)
def test_batched_rk4_arguments_are_checked(case):
    args, pattern = RK4_CASES[case]
    with pytest.raises(ValueError, match=pattern):
        mb.batched_rk4(CHAIN, *args)


def test_checked_integrators_still_trace():
    y = jax.jit(lambda y0: mb.erk_solve(_decay, y0, 0.0, 1.0, rtol=1e-10, atol=1e-10).y1)(jnp.ones(3))
    np.testing.assert_allclose(y, np.exp(-1.0) * np.ones(3), rtol=1e-8)
    q, _ = jax.jit(lambda q0: mb.batched_rk4(CHAIN, q0, jnp.zeros_like(q0), 0.01, 2))(Z34)
    assert q.shape == (3, 4) and bool(jnp.all(jnp.isfinite(q)))


# --------------------------------------------------------------------------------------------
# muscles: physical parameters, force sharing's arguments
# --------------------------------------------------------------------------------------------

PARAM_CASES = {
    "negative force": ((-100.0, 0.1, 0.2), r"max_isometric_force = -100.0 N is not physical"),
    "nan force": ((float("nan"), 0.1, 0.2), r"max_isometric_force = nan N"),
    "zero optimal fibre length": ((100.0, 0.0, 0.2), r"optimal_fiber_length = 0.0 m"),
    "negative slack length": ((100.0, 0.1, -0.2), r"tendon_slack_length = -0.2 m"),
    "pennation 2 rad": ((100.0, 0.1, 0.2, 2.0), r"pennation_at_optimal = 2.0 rad"),
    "negative pennation": ((100.0, 0.1, 0.2, -0.1), r"pennation_at_optimal = -0.1 rad"),
    "zero v_max": ((100.0, 0.1, 0.2, 0.0, 0.0), r"max_contraction_velocity = 0.0"),
}


@pytest.mark.parametrize("case", PARAM_CASES)
def test_muscle_parameters_must_be_physical(case):
    args, pattern = PARAM_CASES[case]
    with pytest.raises(mb.ModelError, match=pattern):
        MuscleParameters(*args)


def test_muscle_parameters_still_trace():
    f = jax.vmap(lambda F: MuscleParameters(F, 0.1, 0.2).max_isometric_force)(jnp.ones(3))
    assert f.shape == (3,)


SPRING_CASES = {
    "negative stiffness": (lambda: PointToPointSpring(0, (0, 0, 0), -1, (0, 0, 0), -10.0, 0.1), r"PointToPointSpring: stiffness = -10.0 must be finite and >= 0"),
    "negative rest length": (lambda: PointToPointSpring(0, (0, 0, 0), -1, (0, 0, 0), 10.0, -0.1), r"PointToPointSpring: rest_length = -0.1"),
    "nan damping": (lambda: JointSpring(0, 10.0, 0.0, float("nan")), r"JointSpring: damping = nan"),
    "inf rest angle": (lambda: JointSpring(0, 10.0, float("inf")), r"JointSpring: rest = inf must be finite"),
}


@pytest.mark.parametrize("case", SPRING_CASES)
def test_force_elements_must_be_physical(case):
    fn, pattern = SPRING_CASES[case]
    with pytest.raises(mb.ModelError, match=pattern):
        fn()


@pytest.fixture(scope="module")
def arm():
    return load_model(TWO_LINK)


def _share(model, **kw):
    q = np.tile([0.3, 0.8], (2, 1))
    return mb.share_forces(model, kw.pop("q", q), np.zeros_like(q), kw.pop("tau", np.zeros_like(q)), **kw)


def test_share_forces_tol_must_be_positive(arm):
    with pytest.raises(ValueError, match=r"share_forces: tol must be a positive number of N·m, got -1"):
        _share(arm, tol=-1)


def test_share_forces_outer_must_be_positive(arm):
    with pytest.raises(ValueError, match=r"share_forces: outer must be positive, got 0"):
        _share(arm, outer=0)


def test_share_forces_shapes(arm):
    with pytest.raises(ValueError, match=r"share_forces: q, qd, tau must all be \(nt, 2\); got \(2, 2\), \(2, 2\), \(2, 3\)"):
        _share(arm, tau=np.zeros((2, 3)))


def test_share_forces_needs_muscles():
    q = np.zeros((1, 3))
    with pytest.raises(ValueError, match=r"share_forces: model 'chain3' has no muscles"):
        mb.share_forces(CHAIN, q, q, q)


def test_musculoskeletal_rhs_needs_muscles_and_an_excitation_function(arm):
    with pytest.raises(ValueError, match=r"musculoskeletal_rhs: model 'chain3' has no muscles"):
        musculoskeletal_rhs(CHAIN, lambda t: jnp.zeros(0))
    with pytest.raises(TypeError, match=r"excitation must be a function of time.*got ndarray"):
        musculoskeletal_rhs(arm, np.zeros(2))
    with pytest.raises(ValueError, match=r"tendon must be 'rigid' or 'elastic', got 'stiff'"):
        musculoskeletal_rhs(arm, lambda t: jnp.zeros(2), tendon="stiff")


def test_share_forces_lengths_and_arms_together(arm):
    with pytest.raises(ValueError, match=r"give both lengths and moment_arms"):
        _share(arm, lengths=np.ones((2, 2)))


# --------------------------------------------------------------------------------------------
# .mot / .sto: header against data, rows, time; file and line named
# --------------------------------------------------------------------------------------------

MOT = (
    "ik\nversion=1\nnRows=2\nnColumns=3\ninDegrees=no\nendheader\n"
    "time\ta\tb\n0\t1\t2\n0.1\t3\t4\n"
)
MOT_CASES = {
    "inDegrees bogus": (MOT.replace("inDegrees=no", "inDegrees=maybe"), r"x.mot, line 5: inDegrees='maybe'; expected yes or no"),
    "nColumns wrong": (MOT.replace("nColumns=3", "nColumns=5"), r"x.mot, line 4: header says nColumns=5 but line 7 has 3 column labels"),
    "nRows wrong": (MOT.replace("nRows=2", "nRows=3"), r"x.mot, line 3: header says nRows=3 but there are 2 data rows"),
    "nRows not a number": (MOT.replace("nRows=2", "nRows=two"), r"x.mot, line 3: nRows='two' is not a non-negative integer"),
    "duplicate label": (MOT.replace("time\ta\tb", "time\ta\ta"), r"x.mot, line 7: column label 'a' appears twice"),
    "time backwards": (MOT.replace("0.1\t3\t4", "-0.1\t3\t4"), r"x.mot, line 9: time -0.1 does not increase \(the row before has 0.0\)"),
    "time repeated": (MOT.replace("0.1\t3\t4", "0\t3\t4"), r"x.mot, line 9: time 0.0 does not increase"),
    "time nan": (MOT.replace("0.1\t3\t4", "nan\t3\t4"), r"x.mot, line 9: time nan is not a finite number"),
    "short row": (MOT.replace("0.1\t3\t4", "0.1\t3"), r"x.mot, line 9: 2 values for 3 columns"),
    "not a number": (MOT.replace("0.1\t3\t4", "0.1\t3\tx"), r"x.mot, line 9: not a number"),
    "no endheader": (MOT.replace("endheader\n", ""), r"x.mot: no 'endheader' line"),
    "no time column": (MOT.replace("time\ta", "t\ta"), r"x.mot, line 7: the first column must be 'time'"),
    "cut in a line": (MOT[:-2], r"x.mot, line 9: the file ends in the middle of this line"),
    "binary": (MOT.replace("0.1\t3", "0.1\x00\t3"), r"x.mot, line 9: a NUL byte"),
    "no labels": (MOT.split("endheader")[0] + "endheader\n", r"x.mot: no column labels after 'endheader'"),
}


@pytest.mark.parametrize("case", MOT_CASES)
def test_bad_storage_files_name_file_and_line(tmp_path, case):
    text, pattern = MOT_CASES[case]
    p = tmp_path / "x.mot"
    p.write_text(text)
    with pytest.raises(MotionFileError, match=pattern):
        read_storage(p)


def test_storage_missing_file(tmp_path):
    with pytest.raises(MotionFileError, match=r"nope.mot: cannot read"):
        read_storage(tmp_path / "nope.mot")


def test_write_storage_refuses_what_the_reader_refuses(tmp_path):
    with pytest.raises(MotionFileError, match=r"column label 'a' appears twice"):
        write_storage(tmp_path / "a.mot", Storage(np.arange(2.0), np.zeros((2, 2)), ("a", "a")))
    with pytest.raises(MotionFileError, match=r"b.mot, row 1: time 0.0 does not increase"):
        write_storage(tmp_path / "b.mot", Storage(np.array([1.0, 0.0]), np.zeros((2, 1)), ("a",)))


# --------------------------------------------------------------------------------------------
# .trc
# --------------------------------------------------------------------------------------------

TRC = (
    "PathFileType\t4\t(X/Y/Z)\twalk.trc\n"
    "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames\n"
    "60.00\t60.00\t2\t2\tmm\t60.00\t1\t2\n"
    "Frame#\tTime\tRASI\t\t\tLASI\n"
    "\t\tX1\tY1\tZ1\tX2\tY2\tZ2\n"
    "\n"
    "1\t0.000\t1.5\t2.5\t3.5\t\t\t\n"
    "2\t0.017\t1.6\t2.6\t3.6\t-4\t-5\t-6\n"
)
LAST = "2\t0.017\t1.6\t2.6\t3.6\t-4\t-5\t-6"
TRC_CASES = {
    "truncated row": (TRC.replace(LAST, "2\t0.017\t1.6\t2.6\t3.6"), r"x.trc, line 8: 5 fields, expected 8 .* truncated or malformed row"),
    "NumMarkers text": (TRC.replace("\t2\t2\tmm", "\t2\ttwo\tmm"), r"x.trc, line 3: NumMarkers='two' is not a non-negative integer"),
    "NumMarkers vs names": (TRC.replace("\t2\t2\tmm", "\t2\t3\tmm"), r"x.trc, line 4: 2 marker names but NumMarkers=3"),
    "NumFrames vs rows": (TRC.replace("60.00\t2\t2", "60.00\t3\t2"), r"x.trc, line 3: NumFrames=3 but there are 2 data rows"),
    "NumFrames text": (TRC.replace("60.00\t2\t2", "60.00\tx\t2"), r"x.trc, line 3: NumFrames='x' is not a non-negative integer"),
    "DataRate zero": (TRC.replace("60.00\t60.00\t2", "0\t60.00\t2"), r"x.trc, line 3: DataRate='0' must be a positive rate"),
    "CameraRate text": (TRC.replace("60.00\t60.00\t2", "60.00\tfast\t2"), r"x.trc, line 3: CameraRate='fast' is not a number"),
    "duplicate marker": (TRC.replace("LASI\n", "RASI\n"), r"x.trc, line 4: marker name 'RASI' appears twice"),
    "time backwards": (TRC.replace("2\t0.017", "2\t-0.017"), r"x.trc, line 8: time -0.017 does not increase"),
    "fractional frame": (TRC.replace("2\t0.017", "2.5\t0.017"), r"x.trc, line 8: not a number"),
    "not a trc": ("hello\n" * 6, r"x.trc, line 1: not a TRC file"),
    "no Frame# row": (TRC.replace("Frame#", "Frame"), r"x.trc, line 4: expected 'Frame#"),
    "cut in a line": (TRC[:-3], r"x.trc, line 8: the file ends in the middle of this line"),
    "header count": (TRC.replace("\t2\t2\tmm\t60.00", "\t2\t2\tmm"), r"x.trc, line 3: 7 values for 8 header fields"),
}


@pytest.mark.parametrize("case", TRC_CASES)
def test_bad_trc_files_name_file_and_line(tmp_path, case):
    text, pattern = TRC_CASES[case]
    p = tmp_path / "x.trc"
    p.write_text(text)
    with pytest.raises(MotionFileError, match=pattern):
        read_trc(p)


def test_write_trc_refuses_duplicate_markers(tmp_path):
    d = TRCData(np.arange(2.0), np.arange(1, 3), ("A", "A"), np.zeros((2, 2, 3)))
    with pytest.raises(MotionFileError, match=r"marker names must be unique"):
        write_trc(tmp_path / "a.trc", d)


# --------------------------------------------------------------------------------------------
# model files
# --------------------------------------------------------------------------------------------


def _two_link(mutate) -> str:
    d = json.loads(TWO_LINK.read_text())
    mutate(d)
    return json.dumps(d, indent=2)


def _set(path, value):
    def mutate(d):
        *head, last = path
        for k in head:
            d = d[k]
        d[last] = value

    return mutate


def _log_map(d):
    d.pop("muscles")
    d["joint_map"] = {"kind": "explicit", "expressions": ["log(-1.0) + shoulder", "elbow"]}


FILE_CASES = {
    "expression NaN everywhere": (_log_map, r"m.json: joint_map.expressions\[0\] \(line \d+\): expression 'log\(-1.0\) \+ shoulder' is not finite"),
    "negative muscle force": (_set(("muscles", 0, "params", "max_isometric_force"), -500.0), r"m.json: muscles\[0\].params \(line \d+\): .*max_isometric_force = -500.0 N is not physical"),
    "zero optimal fibre length": (_set(("muscles", 1, "params", "optimal_fiber_length"), 0.0), r"muscles\[1\].params .*optimal_fiber_length = 0.0 m"),
    "negative principal moment": (_set(("bodies", 1, "inertia"), [[-1.0, 0, 0], [0, 1, 0], [0, 0, 3]]), r"m.json: bodies\[1\].inertia \(line \d+\): inertia tensor has a negative principal moment"),
    "mass not a number": (_set(("bodies", 0, "mass"), "heavy"), r"m.json: bodies\[0\].mass \(line \d+\): expected a number, got the string 'heavy'"),
    "mass negative": (_set(("bodies", 0, "mass"), -2.0), r"bodies\[0\].*mass"),
    "unknown parent": (_set(("bodies", 1, "parent"), "nowhere"), r"bodies\[1\].*'nowhere'"),
}


@pytest.mark.parametrize("case", FILE_CASES)
def test_bad_model_files_name_element_and_line(case):
    mutate, pattern = FILE_CASES[case]
    with pytest.raises(ModelFileError, match=pattern):
        loads_model(_two_link(mutate), "m.json")


def test_model_file_invalid_json_names_the_line():
    with pytest.raises(ModelFileError, match=r"m.json.*line 3"):
        loads_model('{\n "format": "jaxmb-model",\n "version": 1,,\n}', "m.json")


def test_load_model_on_an_osim_file_points_to_load_osim():
    with pytest.raises(ModelFileError, match=r"double_pendulum.osim: an XML file.*jaxmb.io.load_osim"):
        load_model(DATA / "osim" / "double_pendulum.osim")


def test_a_zero_principal_moment_round_trips(tmp_path):
    """What the importer accepts (leg6dof9musc's patella: mass, inertia diag(0, 0, 9e-4)) the
    model-file writer and reader round-trip."""
    m = mb.models.chain(2)
    m = eqx.tree_at(lambda x: x.inertia, m, m.inertia.at[1].set(jnp.diag(jnp.array([0.0, 0.0, 9e-4]))))
    back = load_model(save_model(m, tmp_path / "m.json"))
    np.testing.assert_array_equal(back.inertia, m.inertia)


# --------------------------------------------------------------------------------------------
# the command line: one line, exit status 2, nothing run
# --------------------------------------------------------------------------------------------


def test_cli_out_that_is_a_file_fails_before_the_run(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("")
    assert main(["simulate", "chain", "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"jaxmb: error: --out '.*taken' is a file, not a directory", err)


def test_cli_missing_osim_file(tmp_path, capsys):
    assert main(["simulate", str(tmp_path / "nope.osim"), "--out", str(tmp_path)]) == 2
    assert "cannot read the model file" in capsys.readouterr().err


def test_cli_bad_osim_is_one_line(tmp_path, capsys):
    p = tmp_path / "bad.osim"
    p.write_text("<OpenSimDocument><Model name='x'>")
    assert main(["save", str(p), str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmb: error: ") and "bad.osim" in err and "\n" not in err


# --------------------------------------------------------------------------------------------
# NaN never becomes a number; messages survive jax.jit
# --------------------------------------------------------------------------------------------


def test_nan_pose_gives_nan_lengths_and_moment_arms(arm):
    f = jax.jit(lambda q: (mb.lengths_and_moment_arms(arm, q), mb.muscle_lengths(arm, q)))
    for q in ([jnp.nan, 0.5], [0.3, jnp.inf]):
        (L, R), L2 = f(jnp.array(q))
        assert np.all(np.isnan(np.asarray(L))) and np.all(np.isnan(np.asarray(R)))
        assert np.all(np.isnan(np.asarray(L2)))
    (L, R), L2 = f(jnp.array([0.3, 0.5]))
    assert np.all(np.isfinite(np.asarray(L))) and np.all(np.isfinite(np.asarray(R)))


def test_share_forces_reports_nan_frames(arm):
    q = np.tile([0.3, 0.8], (3, 1))
    tau = np.zeros_like(q)
    q[1, 0] = np.nan
    tau[2, 1] = np.inf
    r = mb.share_forces(arm, q, np.zeros_like(q), tau)
    assert {1, 2} <= set(r.infeasible_frames.tolist())


@pytest.mark.slow
def test_implicit_map_failure_message_survives_jax_jit():
    fb = mb.models.four_bar()
    with pytest.raises(Exception, match=r"Newton's method did not converge"):
        jax.block_until_ready(jax.jit(mb.mass_matrix)(fb, jnp.array([100.0])))


@pytest.mark.slow
def test_leg6dof9musc_saved_loads_again(tmp_path):
    m = mb.io.load_osim(DATA / "osim" / "leg6dof9musc.osim")
    back = load_model(save_model(m, tmp_path / "leg.json"))
    np.testing.assert_array_equal(back.inertia, m.inertia)
    assert back.muscle_names == m.muscle_names


def test_cli_save_onto_a_directory(tmp_path, capsys):
    d = tmp_path / "m.json"
    d.mkdir()
    assert main(["save", "chain", str(d), "--force"]) == 2
    assert re.search(r"jaxmb: error: .*m.json is a directory", capsys.readouterr().err)


def test_cli_max_steps_zero_is_one_line(tmp_path, capsys):
    assert main(["simulate", "chain", "--max-steps", "0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "max_steps must be a positive integer, got 0" in err and not (tmp_path / "o").exists()


# --------------------------------------------------------------------------------------------
# C3D (checked before ezc3d reads it) and BMClab trials
# --------------------------------------------------------------------------------------------


def _c3d_bytes(tmp_path):
    ezc3d = pytest.importorskip("ezc3d")
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [100]
    c["parameters"]["POINT"]["LABELS"]["value"] = ("A", "B")
    c["data"]["points"] = np.ones((4, 2, 6))
    c.write(str(tmp_path / "t.c3d"))
    return (tmp_path / "t.c3d").read_bytes()


C3D_CASES = {
    "shorter than the header": (lambda b: b[:300], r"x.c3d: 300 bytes, shorter than a C3D header \(512\)"),
    "not a c3d": (lambda b: b[:1] + b"\x00" + b[2:], r"x.c3d: not a C3D file \(byte 2 is 0x0, not 0x50\)"),
    "cut in the parameters": (lambda b: b[:700], r"x.c3d: truncated in the parameter section"),
    "corrupt dimensions": (lambda b: b[:806] + bytes([200]) + b[807:], r"x.c3d: corrupt parameter section at byte \d+"),
}


@pytest.mark.parametrize("case", C3D_CASES)
def test_bad_c3d_files_are_refused_before_ezc3d(tmp_path, case):
    edit, pattern = C3D_CASES[case]
    p = tmp_path / "x.c3d"
    p.write_bytes(edit(_c3d_bytes(tmp_path)))
    with pytest.raises(MotionFileError, match=pattern):
        read_c3d(p)


BMC_HEAD = "Time\tFHx\n"
BMC_CASES = {
    "header only": (BMC_HEAD, r"trial.txt: no data rows after the header line"),
    "duplicate column": ("Time\tTime\n0\t0\n", r"trial.txt, line 1: column 'Time' appears twice"),
    "short row": (BMC_HEAD + "0\t1\n0.1\n", r"trial.txt, line 3: 1 fields, header has 2"),
    "not a number": (BMC_HEAD + "0\tx\n", r"trial.txt, line 2, column 'FHx': 'x' is not a number"),
}


@pytest.mark.parametrize("case", BMC_CASES)
def test_bad_bmc3d_trials_name_the_line(tmp_path, case):
    text, pattern = BMC_CASES[case]
    p = tmp_path / "trial.txt"
    p.write_text(text)
    with pytest.raises(GaitDataError, match=pattern):
        read_bmc3d(p)


@pytest.mark.parametrize("kind", ["osim", "setup"])
def test_xml_declaring_an_unknown_encoding_is_refused_by_name(tmp_path, kind):
    """Found by fuzzing: one changed character in ``encoding="UTF-8"`` escaped as LookupError."""
    src = {
        "osim": DATA / "osim" / "double_pendulum.osim",
        "setup": PACKAGE_DATA / "opensim_pipeline" / "gait10dof18musc" / "walk_Setup_ID.xml",
    }[kind]
    text = src.read_text()
    assert 'encoding="UTF-8"' in text
    p = tmp_path / src.name
    p.write_text(text.replace('encoding="UTF-8"', 'encoding="UTF-0"', 1))
    reader, error = {"osim": (read_osim, OsimImportError),
                     "setup": (read_inverse_dynamics_setup, SetupError)}[kind]
    with pytest.raises(error, match=re.escape(str(p)) + ".*UTF-0"):
        reader(p)


# --------------------------------------------------------------------------------------------
# the analyses: filters, differentiation, segment motion, IK, SO, OpenSim's coordinate processing
# --------------------------------------------------------------------------------------------

an = mb.analyses
SIG = np.sin(np.linspace(0.0, 3.0, 50))[:, None].repeat(2, axis=1)
ROT = np.broadcast_to(np.eye(3), (20, 3, 3)).copy()
P20 = np.zeros((20, 3))
MK = np.zeros((4, 3, 3))  # 4 frames, 3 markers
W = np.ones((4, 3))
BODIES = np.array([0, 1, 2])
LO, UP, FREE = -3 * np.ones(3), 3 * np.ones(3), np.ones(3, dtype=bool)
SO_A, SO_B = np.ones((5, 2, 4)), np.ones((5, 2))
SO_LO, SO_UP = -np.ones(4), np.ones(4)
T30 = np.linspace(0.0, 1.0, 30)


def _ik(**kw):
    a = dict(bodies=BODIES, points=np.zeros((3, 3)), markers=MK, weights=W, q0=Z3, lower=LO,
             upper=UP, free=FREE)
    a.update(kw)
    return an.solve_inverse_kinematics(CHAIN, a.pop("bodies"), a.pop("points"), a.pop("markers"),
                                       a.pop("weights"), a.pop("q0"), a.pop("lower"),
                                       a.pop("upper"), a.pop("free"), **a)


def _so(**kw):
    a = dict(A=SO_A, b=SO_B, lower=SO_LO, upper=SO_UP)
    a.update(kw)
    return an.solve_static_optimization(a.pop("A"), a.pop("b"), a.pop("lower"), a.pop("upper"),
                                        **a)


ANALYSIS_CASES = {
    "lowpass negative padlen": (lambda: an.lowpass(SIG, 100.0, 6.0, padlen=-3), r"padlen must be >= 0.*-3"),
    "lowpass infinite fs": (lambda: an.lowpass(SIG, np.inf, 6.0), r"fs \(Hz\) must be a positive finite number, got inf"),
    "lowpass scalar": (lambda: an.lowpass(1.0, 100.0, 6.0), r"lowpass: x must have a time axis"),
    "butterworth passes 0": (lambda: an.butterworth_coefficients(6.0, 100.0, 0), r"passes must be a positive integer, got 0"),
    "derivative dt 0": (lambda: an.derivative(SIG, 0.0), r"derivative: dt \(s\) must be a positive finite number, got 0.0"),
    "derivative dt negative": (lambda: an.derivative(SIG, -0.01), r"derivative: dt .*got -0.01"),
    "derivative dt NaN": (lambda: an.derivative(SIG, np.nan), r"derivative: dt .*got nan"),
    "derivative scalar": (lambda: an.derivative(1.0, 0.01), r"derivative: x must have a time axis"),
    "angular_velocity R (20, 3)": (lambda: an.angular_velocity(P20, 0.01), r"angular_velocity: R must have shape \(nt, 3, 3\), got shape \(20, 3\)"),
    "angular_velocity dt 0": (lambda: an.angular_velocity(ROT, 0.0), r"angular_velocity: dt .*got 0.0"),
    "segment_motion com (19, 3)": (lambda: an.segment_motion(ROT, P20[:19], P20, 0.01), r"segment_motion: com .*\(20, 3\), got shape \(19, 3\)"),
    "segment_motion joint (20, 2)": (lambda: an.segment_motion(ROT, P20, P20[:, :2], 0.01), r"segment_motion: joint .*got shape \(20, 2\)"),
    "segment_motion dt negative": (lambda: an.segment_motion(ROT, P20, P20, -1.0), r"segment_motion: dt .*got -1.0"),
    "ik markers (nt, nm)": (lambda: _ik(markers=MK[:, :, 0]), r"markers \(m\) must have shape \(nt, nm, 3\), got shape \(4, 3\)"),
    "ik weights (4, 2)": (lambda: _ik(weights=W[:, :2]), r"weights \(nt, nm\) must have shape \(4, 3\), got shape \(4, 2\)"),
    "ik negative weight": (lambda: _ik(weights=-W), r"weights\[0, 0\] = -1.0 must be a finite number >= 0"),
    "ik NaN weight": (lambda: _ik(weights=np.where(W > 0, np.nan, 0.0)), r"weights\[0, 0\] = nan"),
    "ik q0 (4,)": (lambda: _ik(q0=np.zeros(4)), r"q0 \(nq\) must have shape \(3,\), got shape \(4,\)"),
    "ik q0 NaN": (lambda: _ik(q0=np.full(3, np.nan)), r"q0\[0\] \(joint0\) = nan is not finite"),
    "ik lower > upper": (lambda: _ik(lower=UP, upper=LO), r"bound 0 \(joint0\) has lower 3.0 > upper -3.0"),
    "ik body past the last": (lambda: _ik(bodies=np.array([0, 1, 7])), r"bodies\[2\] = 7 is not a body index in \[-1, 3\)"),
    "ik float bodies": (lambda: _ik(bodies=np.array([0.0, 1.0, 2.0])), r"bodies must be integers"),
    "ik points (2, 3)": (lambda: _ik(points=np.zeros((2, 3))), r"points \(m, one per marker\) must have shape \(3, 3\)"),
    "ik free (2,)": (lambda: _ik(free=FREE[:2]), r"free \(nq\) must have shape \(3,\)"),
    "ik iterations 0": (lambda: _ik(iterations=0), r"iterations must be a positive integer, got 0"),
    "ik xtol negative": (lambda: _ik(xtol=-1.0), r"xtol \(rad or m\) must be a positive finite number"),
    "ik coordinate weights (4, 2)": (lambda: _ik(coordinate_weights=np.ones((4, 2))), r"coordinate_weights \(nt, nq\) must have shape \(4, 3\)"),
    "so b (5, 3)": (lambda: _so(b=np.ones((5, 3))), r"b \(nt, nq\) must have shape \(5, 2\), got shape \(5, 3\)"),
    "so A (5, 2)": (lambda: _so(A=SO_A[:, :, 0]), r"A must have shape \(nt, nq, na\), got shape \(5, 2\)"),
    "so fewer b frames": (lambda: _so(b=SO_B[:4]), r"b \(nt, nq\) must have shape \(5, 2\), got shape \(4, 2\)"),
    "so lower (3,)": (lambda: _so(lower=-np.ones(3)), r"lower \(na\) must have shape \(4,\)"),
    "so lower > upper": (lambda: _so(lower=SO_UP, upper=SO_LO), r"bound 0 has lower 1.0 > upper -1.0"),
    "so exponent 1": (lambda: _so(exponent=1.0), r"exponent must be a finite number > 1, got 1.0"),
    "so exponent NaN": (lambda: _so(exponent=np.nan), r"exponent must be a finite number > 1, got nan"),
    "so tol negative": (lambda: _so(tol=-1.0), r"tol \(N·m\) must be a positive finite number, got -1.0"),
    "so iterations 0": (lambda: _so(iterations=0), r"iterations must be a positive integer"),
    "so f (5, 3)": (lambda: _so(f=np.ones((5, 3))), r"f \(nt, na\) must have shape \(5, 4\)"),
    "coordinate_operators NaN cutoff": (lambda: an.coordinate_operators(T30, np.nan), r"coordinate_operators: the cutoff frequency is NaN"),
    "coordinate_operators NaN time": (lambda: an.coordinate_operators(np.r_[T30[:-1], np.nan], 6.0), r"times\[29\] = nan is not finite"),
    "coordinate_operators range backwards": (lambda: an.coordinate_operators(T30, 6.0, (0.8, 0.2)), r"time_range \(0.8, 0.2\) must run forward"),
    "lowpass_iir dt 0": (lambda: an.lowpass_iir(0.0, 6.0, SIG), r"iir_coefficients: dt \(s\) must be a positive finite number, got 0.0"),
    "lowpass_iir negative cutoff": (lambda: an.lowpass_iir(0.01, -1.0, SIG), r"cutoff \(Hz\) must be a positive finite number, got -1.0"),
    "resample_times dt 0 (never ends)": (lambda: an.resample_times(0.0, 1.0, 0.0), r"resample_times: dt \(s\) .*got 0.0"),
    "resample_times infinite end": (lambda: an.resample_times(0.0, np.inf, 0.1), r"resample_times: \[t0, t1\]\[1\] = inf is not finite"),
    "find_index NaN time": (lambda: an.find_index(T30, np.nan), r"find_index: the time t is NaN"),
    "trial ID load on a body past the last": (lambda: an.trial_inverse_dynamics(CHAIN, np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((4, 3)), [an.ExternalLoad(5, an.Frame(5), np.zeros((4, 3)), an.GROUND, None, an.GROUND, None, "grf")]), r"load 'grf': body is body 5, not a body of model 'chain3' \(-1: ground, 0 … 2\)"),
    "trial ID force expressed in a missing body": (lambda: an.trial_inverse_dynamics(CHAIN, np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((4, 3)), [an.ExternalLoad(0, an.Frame(0), np.zeros((4, 3)), an.Frame(3), None, an.GROUND, None, "grf")]), r"load 'grf': force_frame is body 3"),
}  # fmt: skip


@pytest.mark.parametrize("case", ANALYSIS_CASES)
def test_analyses_arguments_are_checked(case):
    call, pattern = ANALYSIS_CASES[case]
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.slow
def test_ik_and_so_report_non_finite_frames_under_jit():
    """Inside jax.jit the values cannot be checked: a NaN start gives a NaN frame reported as not
    converged (it used to say converged), and a NaN SO frame is listed as infeasible."""
    q0 = jnp.zeros((4, 3)).at[1].set(jnp.nan)
    solve = jax.jit(lambda q0: _ik(q0=q0))
    r = solve(q0)
    assert np.all(np.isnan(np.asarray(r.q[1])))
    assert np.asarray(r.converged).tolist() == [True, False, True, True]
    A = np.tile(np.eye(2, 4), (5, 1, 1))
    b = np.full((5, 2), 0.5)
    b[3, 0] = np.nan
    assert _so(A=A, b=b).infeasible.tolist() == [3]
