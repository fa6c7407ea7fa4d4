"""Make the OpenSim 4.6 inverse-kinematics references of tests/io/test_opensim_setups.py.

    python tests/data/opensim_pipeline/make_ik_references.py OUT_DIR

Two variants of the shipped walk_Setup_IK.xml (jaxmb/data/opensim_pipeline/gait10dof18musc), both
written by the functions here, which the tests use too:
- :func:`static_setup`: the subject's static trial instead (subject01_static.trc, 0–1 s, the
  unscaled model: marker RMS ~53 mm); OpenSim's OUT_DIR/_ik_marker_errors.sto is renamed
  static_ik_marker_errors_opensim46.sto;
- :func:`coordinate_task_setup`: the walk from 0.4 to 1.2 s with two coordinate tasks (pelvis_tilt
  at a manual −0.05 rad, weight 50; knee_angle_r at its default value, weight 5); OpenSim's
  motion is renamed coordinate_tasks_ik_opensim46.mot.
"""

import sys
from pathlib import Path

GAIT = Path(__file__).resolve().parents[3] / "jaxmb" / "data" / "opensim_pipeline"
GAIT = GAIT / "gait10dof18musc"


def _variant(directory, name: str, changes) -> Path:
    """walk_Setup_IK.xml with ``changes`` ((old, new) text pairs) and absolute model and marker
    paths, written to ``directory`` as ``name``."""
    text = (GAIT / "walk_Setup_IK.xml").read_text()
    changes = (
        ("<model_file> subject01.osim </model_file>",
         f"<model_file>{GAIT / 'subject01.osim'}</model_file>"),
        ("<marker_file>subject01_walk.trc</marker_file>",
         f"<marker_file>{GAIT / 'subject01_walk.trc'}</marker_file>"),
        *changes,
    )  # fmt: skip
    for old, new in changes:
        if old not in text:
            raise ValueError(f"walk_Setup_IK.xml: {old!r} not found")
        text = text.replace(old, new, 1)
    path = Path(directory) / name
    path.write_text(text)
    return path


def static_setup(directory) -> Path:
    """walk_Setup_IK.xml on the static trial, written to ``directory``."""
    return _variant(directory, "static_Setup_IK.xml", (
        (f"{GAIT / 'subject01_walk.trc'}", f"{GAIT / 'subject01_static.trc'}"),
        ("<time_range> 0 2.5</time_range>", "<time_range> 0 1</time_range>"),
        ("<output_motion_file>subject01_walk_IK.mot</output_motion_file>",
         "<output_motion_file>static_IK.mot</output_motion_file>"),
    ))  # fmt: skip


def coordinate_task_setup(directory) -> Path:
    """walk_Setup_IK.xml from 0.4 to 1.2 s with two coordinate tasks, written to ``directory``."""
    tasks = (
        '<IKCoordinateTask name="pelvis_tilt"><apply>true</apply><weight>50</weight>'
        "<value_type>manual_value</value_type><value>-0.05</value></IKCoordinateTask>"
        '<IKCoordinateTask name="knee_angle_r"><apply>true</apply><weight>5</weight>'
        "<value_type>default_value</value_type></IKCoordinateTask>"
    )
    return _variant(directory, "coordinates_Setup_IK.xml", (
        ('<IKMarkerTask name="Sternum">', tasks + '<IKMarkerTask name="Sternum">'),
        ("<time_range> 0 2.5</time_range>", "<time_range> 0.4 1.2</time_range>"),
        ("<output_motion_file>subject01_walk_IK.mot</output_motion_file>",
         "<output_motion_file>coordinates_IK.mot</output_motion_file>"),
    ))  # fmt: skip


if __name__ == "__main__":
    import opensim as osim

    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for make, motion in (
        (static_setup, "static_IK.mot"),
        (coordinate_task_setup, "coordinates_IK.mot"),
    ):
        tool = osim.InverseKinematicsTool(str(make(out)))
        tool.setResultsDir(str(out))
        tool.setOutputMotionFileName(str(out / motion))
        tool.run()
        if make is static_setup:
            (out / "_ik_marker_errors.sto").rename(out / "static_ik_marker_errors_opensim46.sto")
    (out / "coordinates_IK.mot").rename(out / "coordinate_tasks_ik_opensim46.mot")
