"""Hypothesis fuzzing of every file reader jaxmb owns (issue 22): real files, randomly truncated and
mutated. A reader either raises its documented error type (MotionFileError, ModelFileError,
GaitDataError, OsimImportError, SetupError) or returns a result that is internally consistent; a
truncated file is never read silently in part, a deleted data row is always noticed, and nothing
hangs (C3D through ezc3d runs in a child process with a time limit, since ezc3d loops forever on
some truncated files).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import DATA, PACKAGE_DATA, ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from jaxmb.analyses.gait_data import GaitDataError, read_bmc3d
from jaxmb.io import (
    MotionFileError,
    Storage,
    TRCData,
    read_storage,
    read_trc,
    write_storage,
    write_trc,
)
from jaxmb.io.model_file import ModelFileError, loads_model
from jaxmb.io.osim import OsimImportError, read_osim
from jaxmb.io.setup import (
    SetupError,
    read_external_loads,
    read_force_set,
    read_inverse_dynamics_setup,
    read_inverse_kinematics_setup,
    read_static_optimization_setup,
)

MOT = """Coordinates
version=1
nRows=4
nColumns=4
inDegrees=yes

Units are S.I. units (second, meters, Newtons, ...)
Angles are in degrees.

endheader
time\tknee_angle_r\tpelvis_tx\thip_flexion_r
0\t-10.5\t0.1\t20
0.01\t-11\t0.2\t21.5
0.02\t-11.5\t0.30000000000000004\t22.25
0.03\t-12\t0.4\t23
"""

TRC = """PathFileType\t4\t(X/Y/Z)\twalk.trc
DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames
60.00\t60.00\t3\t2\tmm\t60.00\t1\t3
Frame#\tTime\tRASI\t\t\tLASI
\t\tX1\tY1\tZ1\tX2\tY2\tZ2

1\t0.000\t1.5\t2.5\t3.5\t\t\t
2\t0.017\t1.6\t2.6\t3.6\t-4\t-5\t-6
3\t0.033\t1.7\t2.7\t3.7\t-4.1\t-5.1\t-6.1
"""

MODEL_TEXT = (PACKAGE_DATA / "models" / "two_link_arm.json").read_text()
BMC3D = PACKAGE_DATA / "gait" / "bmc3d" / "BiomecII2018_gait_d.txt"
PRINTABLE = st.characters(min_codepoint=9, max_codepoint=126)


def _written_files(tmp_path):
    """Files as jaxmb's writers make them, next to the hand-written OpenSim-style ones."""
    rng = np.random.default_rng(0)
    s = Storage(np.linspace(0, 1, 5), rng.normal(size=(5, 3)), ("a", "b", "c"), in_degrees=True)
    t = TRCData(np.arange(4) / 100.0, np.arange(1, 5), ("M1", "M2"), rng.normal(size=(4, 2, 3)))
    return (
        write_storage(tmp_path / "w.mot", s).read_text(),
        write_trc(tmp_path / "w.trc", t).read_text(),
    )


def _mutate(text: str, data) -> str:
    """One random edit: a character replaced or inserted, a line deleted, duplicated or swapped."""
    lines = text.splitlines(keepends=True)
    kind = data.draw(st.sampled_from(["char", "insert", "del_line", "dup_line", "swap"]))
    if kind in ("char", "insert"):
        i = data.draw(st.integers(0, len(text) - 1))
        c = data.draw(PRINTABLE)
        return text[:i] + c + text[i + (kind == "char") :]
    i = data.draw(st.integers(0, len(lines) - 1))
    if kind == "del_line":
        return "".join(lines[:i] + lines[i + 1 :])
    if kind == "dup_line":
        return "".join(lines[: i + 1] + lines[i:])
    j = data.draw(st.integers(0, len(lines) - 1))
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def _read(reader, tmp_path, text, name):
    p = tmp_path / name
    p.write_text(text)
    return reader(p)


def _consistent_storage(s):
    n, m = s.data.shape
    assert s.time.shape == (n,) and len(s.columns) == m and len(set(s.columns)) == m
    assert np.all(np.isfinite(s.time)) and np.all(np.diff(s.time) > 0)


def _consistent_trc(t):
    n, m, three = t.positions.shape
    assert three == 3 and t.time.shape == (n,) and t.frames.shape == (n,) and len(t.markers) == m
    assert np.all(np.isfinite(t.time)) and np.all(np.diff(t.time) > 0)


CASES = {
    "mot": (read_storage, MotionFileError, _consistent_storage, "x.mot"),
    "trc": (read_trc, MotionFileError, _consistent_trc, "x.trc"),
}


def _text(kind, which, tmp_path):
    hand = {"mot": MOT, "trc": TRC}[kind]
    return hand if which == 0 else _written_files(tmp_path)[0 if kind == "mot" else 1]


@pytest.mark.parametrize("kind", CASES)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_truncated_motion_files_fail_or_read_whole(tmp_path_factory, kind, data):
    reader, error, _, name = CASES[kind]
    tmp_path = tmp_path_factory.mktemp(kind)
    text = _text(kind, data.draw(st.integers(0, 1)), tmp_path)
    full = _read(reader, tmp_path, text, name)
    cut = data.draw(st.integers(0, len(text) - 1))
    try:
        part = _read(reader, tmp_path, text[:cut], name)
    except error:
        return
    # accepted: only trailing blank lines were cut, and the data are the whole file's
    assert not text[cut:].strip(), f"a truncated file was read: cut at {cut} of {len(text)}"
    np.testing.assert_array_equal(part.time, full.time)


@pytest.mark.parametrize("kind", CASES)
@settings(max_examples=examples(80))
@given(data=st.data())
def test_mutated_motion_files_fail_cleanly_or_read_consistently(tmp_path_factory, kind, data):
    reader, error, consistent, name = CASES[kind]
    tmp_path = tmp_path_factory.mktemp(kind)
    text = _mutate(_text(kind, data.draw(st.integers(0, 1)), tmp_path), data)
    try:
        out = _read(reader, tmp_path, text, name)
    except error:
        return
    consistent(out)


@pytest.mark.parametrize("kind", CASES)
def test_every_deleted_data_row_is_noticed(tmp_path, kind):
    reader, error, _, name = CASES[kind]
    for which in (0, 1):
        lines = _text(kind, which, tmp_path).splitlines(keepends=True)
        n = len(_read(reader, tmp_path, "".join(lines), name).time)
        for i in range(len(lines) - n, len(lines)):
            with pytest.raises(error):
                _read(reader, tmp_path, "".join(lines[:i] + lines[i + 1 :]), name)


@settings(max_examples=examples(60))
@given(data=st.data())
def test_model_files_truncated_or_mutated(data):
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(MODEL_TEXT) - 1))
        text = MODEL_TEXT[:cut]
        if not MODEL_TEXT[cut:].strip():
            return
        with pytest.raises(ModelFileError):
            loads_model(text, "m.json")
        return
    text = _mutate(MODEL_TEXT, data)
    try:
        model = loads_model(text, "m.json")
    except ModelFileError:
        return
    d = json.loads(text)  # accepted: the file is valid JSON and says what the model holds
    assert model.nb == len(d["bodies"]) and len(model.muscle_names) == len(d.get("muscles", []))


@settings(max_examples=examples(20))
@given(data=st.data())
def test_bmc3d_trials_truncated_or_mutated(tmp_path_factory, data):
    text = BMC3D.read_text()
    tmp_path = tmp_path_factory.mktemp("bmc")
    if data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(text) - 1))
        if not text[cut:].strip():
            return
        text = text[:cut]
        truncated = True
    else:
        text, truncated = _mutate(text, data), False
    try:
        trial = _read(read_bmc3d, tmp_path, text, "trial.txt")
    except GaitDataError:
        return
    assert np.all(np.isfinite(trial.time)) and np.all(np.diff(trial.time) > 0)
    if truncated:
        # BMClab's format counts no rows and its files end without a newline: a cut at a line end,
        # or inside the last row's last field (the free moment My), cannot be seen. What is read
        # is then the file's first rows, unchanged but for that one field.
        full = read_bmc3d(BMC3D)
        n = len(trial.time)
        np.testing.assert_array_equal(trial.time, full.time[:n])
        np.testing.assert_array_equal(trial.grf, full.grf[:n])
        for m, xyz in trial.markers.items():
            np.testing.assert_array_equal(xyz, full.markers[m][:n])


_C3D_CHILD = textwrap.dedent(
    """
    import random, sys
    import numpy as np
    import ezc3d
    sys.path.insert(0, sys.argv[1])
    from jaxmb.io.motion import MotionFileError, read_c3d
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [100]
    c["parameters"]["POINT"]["LABELS"]["value"] = ("A", "B")
    pts = np.ones((4, 2, 6))
    pts[:3] = np.random.default_rng(3).normal(size=(3, 2, 6))
    c["data"]["points"] = pts
    c.write(sys.argv[2] + "/t.c3d")
    raw = open(sys.argv[2] + "/t.c3d", "rb").read()
    full = read_c3d(sys.argv[2] + "/t.c3d")["markers"].positions
    rng = random.Random(int(sys.argv[3]))
    for i in range(int(sys.argv[4])):
        b = bytearray(raw)
        if i % 2:
            b = b[: rng.randrange(len(b))]
        else:
            for _ in range(rng.randrange(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        p = sys.argv[2] + f"/m{i}.c3d"
        open(p, "wb").write(b)
        try:
            out = read_c3d(p)
        except MotionFileError:
            continue
        m = out["markers"]
        if i % 2:  # truncated, yet read: only the last block's padding was cut, the data are whole
            np.testing.assert_array_equal(m.positions, full, err_msg=f"case {i}: partial read")
        assert m.positions.shape[1:] == (len(m.markers), 3), i
    print("done")
    """
)


def test_c3d_files_truncated_or_mutated(tmp_path):
    """Truncated C3D files are refused before ezc3d sees them (it loops forever on some) unless
    only the padding of the last 512-byte block was cut; mutated ones are refused or read
    consistently. In a child process with a time limit."""
    pytest.importorskip("ezc3d")
    n = examples(60)
    r = subprocess.run(
        [sys.executable, "-c", _C3D_CHILD, str(ROOT), str(tmp_path), "0", str(n)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-2000:]


OSIM_FILES = {p: (DATA / "osim" / p).read_text() for p in ("double_pendulum.osim", "arm26.osim")}


def _cut_or_mutate(text: str, data) -> tuple[str, bool]:
    if data.draw(st.booleans()):
        return text[: data.draw(st.integers(0, len(text) - 1))], True
    return _mutate(text, data), False


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_osim_files_truncated_or_mutated(tmp_path_factory, data):
    """A truncated ``.osim`` is refused (it is no longer an XML document); a mutated one is refused
    with OsimImportError or read into a model whose numbers are finite and whose masses are
    positive (a mutation may well leave a valid, different model)."""
    name = data.draw(st.sampled_from(sorted(OSIM_FILES)))
    text, truncated = _cut_or_mutate(OSIM_FILES[name], data)
    if truncated and not OSIM_FILES[name][len(text) :].strip():
        return
    try:
        imp = _read(read_osim, tmp_path_factory.mktemp("osim"), text, name)
    except OsimImportError:
        return
    assert not truncated, "a truncated .osim was read"
    m = imp.model
    for leaf in (m.mass, m.com, m.inertia, m.gravity, m.axis_d, m.axis_theta, m.d, m.theta):
        assert np.all(np.isfinite(np.asarray(leaf))), leaf
    assert np.all(np.asarray(m.mass) >= 0), m.mass


PIPELINE = PACKAGE_DATA / "opensim_pipeline" / "gait10dof18musc"
SETUP_READERS = {
    "walk_Setup_IK.xml": read_inverse_kinematics_setup,
    "walk_Setup_ID.xml": read_inverse_dynamics_setup,
    "walk_Setup_SO.xml": read_static_optimization_setup,
    "subject01_walk_grf.xml": read_external_loads,
    "gait10dof_Reserve_Actuators.xml": read_force_set,
}


def _consistent_setup(out):
    """What a setup reader returns is usable as read: times in order, non-negative finite weights,
    a positive exponent, tolerance and iteration count. (A file name may be mutated into one that
    does not exist: a valid setup, refused by the run before any work, not by the reader.)"""
    if isinstance(out, tuple):  # a force set: actuators with finite, positive optimal forces
        for a in out:
            assert np.isfinite(a.optimal_force) and a.optimal_force > 0, a
        return
    for field in ("time_range",):
        if hasattr(out, field):
            t0, t1 = getattr(out, field)
            assert t0 <= t1, out  # OpenSim's default when absent is (-inf, inf): the whole file
    for task in getattr(out, "tasks", ()):
        assert np.isfinite(task.weight) and task.weight >= 0, task
    if hasattr(out, "activation_exponent"):
        assert np.isfinite(out.activation_exponent) and out.activation_exponent > 0, out
        assert out.convergence_criterion > 0 and out.max_iterations > 0, out
        assert out.initial_time <= out.final_time and out.step_interval >= 1, out


@pytest.fixture(scope="module")
def pipeline_copy(tmp_path_factory):
    """The walking trial's files, copied so mutated setups resolve their relative paths."""
    import shutil

    d = tmp_path_factory.mktemp("pipeline") / "trial"
    shutil.copytree(PIPELINE, d)
    return d


@pytest.mark.parametrize("name", SETUP_READERS)
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_setup_files_truncated_or_mutated(pipeline_copy, name, data):
    """OpenSim setup, ExternalLoads and force-set files: refused with SetupError or read into a
    consistent setup; a truncated one is never read."""
    src = (PIPELINE / name).read_text()
    text, truncated = _cut_or_mutate(src, data)
    if truncated and not src[len(text) :].strip():
        return
    p = pipeline_copy / f"fuzzed_{name}"
    p.write_text(text)
    try:
        out = SETUP_READERS[name](p)
    except SetupError:
        return
    assert not truncated, "a truncated setup file was read"
    _consistent_setup(out)
