"""Motion data: OpenSim Storage (.mot/.sto) and .trc round trips, .mot export, C3D via ezc3d."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from helpers import DATA

import jaxmb  # noqa: F401  (x64)
from jaxmb.io import (
    MotionFileError,
    Storage,
    TRCData,
    read_c3d,
    read_osim,
    read_storage,
    read_trc,
    write_mot,
    write_storage,
    write_trc,
)

MOT = """Coordinates
version=1
nRows=3
nColumns=3
inDegrees=yes

Units are S.I. units (second, meters, Newtons, ...)
Angles are in degrees.

endheader
time\tknee_angle_r\tpelvis_tx
0\t-10.5\t0.1
0.01\t-11\t0.2
0.02\t-11.5\t0.30000000000000004
"""

TRC = """PathFileType\t4\t(X/Y/Z)\twalk.trc
DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames
60.00\t60.00\t2\t2\tmm\t60.00\t1\t2
Frame#\tTime\tRASI\t\t\tLASI
\t\tX1\tY1\tZ1\tX2\tY2\tZ2

1\t0.000\t1.5\t2.5\t3.5\t\t\t
2\t0.017\t1.6\t2.6\t3.6\t-4\t-5\t-6
"""


def test_read_storage_hand_written(tmp_path):
    p = tmp_path / "ik.mot"
    p.write_text(MOT)
    s = read_storage(p)
    assert s.name == "Coordinates" and s.in_degrees
    assert s.columns == ("knee_angle_r", "pelvis_tx")
    np.testing.assert_array_equal(s.time, [0.0, 0.01, 0.02])
    np.testing.assert_array_equal(s["knee_angle_r"], [-10.5, -11.0, -11.5])
    assert s["pelvis_tx"][2] == 0.30000000000000004


def test_storage_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    s = Storage(
        time=np.linspace(0, 1, 7),
        data=rng.normal(size=(7, 3)) * 10.0 ** rng.integers(-8, 8, size=(7, 3)),
        columns=("a", "b_u", "c/force"),
        in_degrees=False,
        name="states",
        header={"DataType": "double", "OpenSimVersion": "4.6"},
    )
    for suffix in (".sto", ".mot"):
        back = read_storage(write_storage(tmp_path / f"x{suffix}", s))
        np.testing.assert_array_equal(back.time, s.time)
        np.testing.assert_array_equal(back.data, s.data)
        assert back.columns == s.columns and back.name == s.name and not back.in_degrees
        assert back.header == s.header


def test_storage_errors_name_file_and_line(tmp_path):
    p = tmp_path / "bad.mot"
    p.write_text("x\nversion=1\ntime\ta\n0\t1\n")
    with pytest.raises(MotionFileError, match="endheader"):
        read_storage(p)
    p.write_text("x\nendheader\ntime\ta\n0\t1\n0.1\t2\t3\n")
    with pytest.raises(MotionFileError, match=r"bad.mot, line 5: 3 values for 2 columns"):
        read_storage(p)
    p.write_text("x\nendheader\ntime\ta\n0\tnope\n")
    with pytest.raises(MotionFileError, match=r"line 4: not a number"):
        read_storage(p)
    with pytest.raises(MotionFileError, match="cannot read"):
        read_storage(tmp_path / "missing.mot")


def test_write_mot_degrees_for_rotational_coordinates(tmp_path):
    imp = read_osim(DATA / "osim" / "leg6dof9musc.osim")
    model = imp.model
    ts = np.linspace(0.0, 0.1, 5)
    q = np.tile(np.linspace(-0.5, 0.5, model.nq), (5, 1)) * (1 + ts[:, None])
    qd = np.ones_like(q)
    s = read_storage(write_mot(tmp_path / "sim.mot", (ts, q, qd), model, speeds=True))
    assert s.in_degrees
    assert s.columns[: model.nq] == model.coordinate_names
    rot = {c.name: c.rotational for c in imp.coordinates}
    assert not rot["pelvis_tx"] and rot["knee_angle_r"]
    for k, n in enumerate(model.coordinate_names):
        scale = 180.0 / math.pi if rot[n] else 1.0
        np.testing.assert_allclose(s[n], q[:, k] * scale, rtol=1e-15)
        np.testing.assert_allclose(s[f"{n}_u"], qd[:, k] * scale, rtol=1e-15)
    # with the import: every OpenSim coordinate, the coupled patella angle included; it follows
    # the knee one to one but turns the patella through splines, so OpenSim calls it "Coupled"
    # and writes it unscaled (radians) beside the knee's degrees
    s2 = read_storage(write_mot(tmp_path / "full.mot", (ts, q), imp))
    assert s2.columns == tuple(c.name for c in imp.coordinates)
    assert not rot["knee_angle_pat_r"]
    np.testing.assert_allclose(s2["knee_angle_pat_r"], np.deg2rad(s2["knee_angle_r"]), rtol=1e-14)


def test_trc_hand_written_and_round_trip(tmp_path):
    p = tmp_path / "walk.trc"
    p.write_text(TRC)
    t = read_trc(p)
    assert t.markers == ("RASI", "LASI") and t.units == "mm" and t.data_rate == 60.0
    np.testing.assert_array_equal(t["RASI"], [[1.5, 2.5, 3.5], [1.6, 2.6, 3.6]])
    assert np.all(np.isnan(t["LASI"][0])) and np.array_equal(t["LASI"][1], [-4, -5, -6])
    back = read_trc(write_trc(tmp_path / "again.trc", t))
    np.testing.assert_array_equal(back.positions, t.positions)
    np.testing.assert_array_equal(back.time, t.time)
    np.testing.assert_array_equal(back.frames, t.frames)
    assert back.markers == t.markers and back.units == t.units
    rng = np.random.default_rng(1)
    big = TRCData(
        time=np.arange(20) / 150.0,
        frames=np.arange(1, 21),
        markers=tuple(f"M{k}" for k in range(5)),
        positions=rng.normal(size=(20, 5, 3)),
        units="m",
        data_rate=150.0,
        camera_rate=150.0,
    )
    again = read_trc(write_trc(tmp_path / "big.trc", big))
    np.testing.assert_array_equal(again.positions, big.positions)


def test_trc_errors(tmp_path):
    p = tmp_path / "bad.trc"
    p.write_text("hello\n")
    with pytest.raises(MotionFileError, match="not a TRC file"):
        read_trc(p)
    p.write_text(TRC.replace("\t2\t2\tmm", "\t2\t3\tmm"))
    with pytest.raises(MotionFileError, match="2 marker names but NumMarkers=3"):
        read_trc(p)


def test_opensim_reads_our_files_and_we_read_its(tmp_path):
    osim = pytest.importorskip("opensim")
    rng = np.random.default_rng(2)
    s = Storage(np.linspace(0, 1, 4), rng.normal(size=(4, 2)), ("q1", "q2"), in_degrees=True)
    st = osim.Storage(str(write_storage(tmp_path / "ours.mot", s)))
    assert st.getSize() == 4 and st.isInDegrees()
    labels = st.getColumnLabels()
    assert [labels.get(i) for i in range(labels.getSize())] == ["time", "q1", "q2"]
    col = osim.ArrayDouble()
    st.getDataColumn("q2", col)
    np.testing.assert_array_equal([col.get(i) for i in range(4)], s.data[:, 1])
    # OpenSim's own writer
    table = osim.TimeSeriesTable()
    table.setColumnLabels(["a", "b"])
    for k in range(3):
        table.appendRow(0.1 * k, osim.RowVector([1.0 * k, -2.0 * k]))
    table.addTableMetaDataString("inDegrees", "no")
    osim.STOFileAdapter.write(table, str(tmp_path / "theirs.sto"))
    back = read_storage(tmp_path / "theirs.sto")
    assert back.columns == ("a", "b") and not back.in_degrees
    np.testing.assert_allclose(back.data, [[0, 0], [1, -2], [2, -4]])
    np.testing.assert_allclose(back.time, [0, 0.1, 0.2])


def test_read_c3d_needs_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ezc3d", None)
    with pytest.raises(ImportError, match=r"optional 'c3d' extra.*ezc3d"):
        read_c3d(tmp_path / "x.c3d")


def test_read_c3d_markers(tmp_path):
    ezc3d = pytest.importorskip("ezc3d")
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [100]
    c["parameters"]["POINT"]["LABELS"]["value"] = ("A", "B")
    rng = np.random.default_rng(3)
    pts = np.ones((4, 2, 6))
    pts[:3] = rng.normal(size=(3, 2, 6))
    c["data"]["points"] = pts
    p = tmp_path / "trial.c3d"
    c.write(str(p))
    out = read_c3d(p)
    m = out["markers"]
    assert m.markers == ("A", "B") and m.data_rate == 100.0
    np.testing.assert_allclose(m.positions, np.transpose(pts[:3], (2, 1, 0)), rtol=1e-6)
    np.testing.assert_allclose(m.time, np.arange(6) / 100.0)


def _c3d_int_parameter(c, group, name, values, shape):
    """ezc3d's Python writer keeps a parameter's type from its dict entry; platforms need INT."""
    import ezc3d

    c.add_parameter(group, name, np.asarray(list(values), float).reshape(shape, order="F"))
    c["parameters"][group][name]["type"] = ezc3d.ezc3d.INT
    c["parameters"][group][name]["value"] = np.asarray(list(values), int).reshape(shape, order="F")


def test_read_c3d_force_platform(tmp_path):
    """A type-2 platform (channels Fx Fy Fz Mx My Mz) written with ezc3d: analog channels come back
    as written, and the platform force is the channel force rotated into the lab frame by the plate
    whose corners run (500,0,0) → (0,0,0) → (0,600,0) → (500,600,0): axes x, −y, −z."""
    ezc3d = pytest.importorskip("ezc3d")
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [100]
    c["parameters"]["POINT"]["LABELS"]["value"] = ("A",)
    c["data"]["points"] = np.ones((4, 1, 5))
    labels = ("Fx1", "Fy1", "Fz1", "Mx1", "My1", "Mz1")
    analog = c["parameters"]["ANALOG"]
    analog["RATE"]["value"] = [200]
    analog["USED"]["value"] = [6]
    analog["LABELS"]["value"] = labels
    analog["SCALE"]["value"] = [1.0] * 6
    analog["OFFSET"]["value"] = [0] * 6
    analog["UNITS"]["value"] = ["N"] * 3 + ["Nmm"] * 3
    rng = np.random.default_rng(4)
    an = rng.normal(size=(1, 6, 10)) * np.array([5, 5, 20, 900, 900, 100])[None, :, None]
    an[0, 2] += 700.0  # someone standing on it
    c["data"]["analogs"] = an
    _c3d_int_parameter(c, "FORCE_PLATFORM", "USED", [1], [1])
    _c3d_int_parameter(c, "FORCE_PLATFORM", "TYPE", [2], [1])
    _c3d_int_parameter(c, "FORCE_PLATFORM", "ZERO", [1, 0], [2])
    _c3d_int_parameter(c, "FORCE_PLATFORM", "CHANNEL", range(1, 7), [6, 1])
    corners = np.array([[500, 0, 0], [0, 0, 0], [0, 600, 0], [500, 600, 0]], float).T
    c.add_parameter("FORCE_PLATFORM", "CORNERS", corners[:, :, None])
    c.add_parameter("FORCE_PLATFORM", "ORIGIN", np.array([[0.0], [0.0], [-40.0]]))
    c.add_parameter("FORCE_PLATFORM", "CAL_MATRIX", np.zeros((6, 6, 0)))
    p = tmp_path / "walk.c3d"
    c.write(str(p))
    out = read_c3d(p)
    assert out["analog_labels"] == labels and out["analog_rate"] == 200.0
    np.testing.assert_allclose(out["analogs"], an[0], rtol=1e-6)  # float32 on disk
    (plate,) = out["platforms"]
    assert plate["force"].shape == (10, 3) and plate["center_of_pressure"].shape == (10, 3)
    np.testing.assert_allclose(plate["force"], an[0, :3].T * [1, -1, -1], rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(plate["moment"].shape, (10, 3))
    cop = plate["center_of_pressure"]
    assert np.all((cop[:, 0] >= 0) & (cop[:, 0] <= 500) & (cop[:, 1] >= 0) & (cop[:, 1] <= 600))
    assert out["markers"].positions.shape == (5, 1, 3)


def test_read_c3d_names_a_bad_file(tmp_path):
    pytest.importorskip("ezc3d")
    p = tmp_path / "broken.c3d"
    p.write_bytes(b"not a c3d file at all" * 10)
    with pytest.raises(MotionFileError, match="broken.c3d"):
        read_c3d(p)
    with pytest.raises(MotionFileError, match="missing.c3d: file not found"):
        read_c3d(tmp_path / "missing.c3d")


@pytest.mark.slow
def test_simulation_exported_as_mot_opens_in_opensim(tmp_path):
    """A jaxmb simulation of an imported OpenSim model, written by write_mot, read back by OpenSim
    4.6's TimeSeriesTable (what the GUI's Load Motion uses): labels are the model's coordinates and
    values equal the trajectory in degrees (rotational) to the file's 1e-12 relative digits."""
    osim = pytest.importorskip("opensim")
    from jaxmb.simulation import simulate

    path = DATA / "osim" / "double_pendulum.osim"
    imp = read_osim(path)
    model = imp.model
    ts = np.linspace(0.0, 0.5, 11)
    q0 = np.full(model.nq, 0.3)
    traj = simulate(model, q0, np.zeros(model.nq), 0.5, ts=ts)
    assert np.ptp(np.asarray(traj.q)[:, 0]) > 1e-2  # it moved
    mot = write_mot(tmp_path / "sim.mot", traj, imp, speeds=True)
    table = osim.TimeSeriesTable(str(mot))
    labels = list(table.getColumnLabels())
    om = osim.Model(str(path))  # kept alive: the coordinate set belongs to it
    om.initSystem()
    coords = om.getCoordinateSet()
    names = [coords.get(i).getName() for i in range(coords.getSize())]
    assert labels == names + [f"{n}_u" for n in names]
    assert table.getTableMetaDataAsString("inDegrees") == "yes"
    np.testing.assert_allclose(list(table.getIndependentColumn()), ts, rtol=0, atol=1e-12)
    for k, n in enumerate(names):
        col = table.getDependentColumn(n).to_numpy()
        rot = coords.get(n).getMotionType() == 1  # Rotational
        scale = 180.0 / math.pi if rot else 1.0
        np.testing.assert_allclose(col, np.asarray(traj.q)[:, k] * scale, rtol=1e-12, atol=1e-12)
