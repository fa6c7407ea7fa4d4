"""Make the OpenSim 4.6 inverse-kinematics reference of tests/io/test_opensim_setups.py.

    python tests/data/opensim_pipeline/make_ik_references.py OUT_DIR

The shipped walk_Setup_IK.xml (jaxmb/data/opensim_pipeline/gait10dof18musc) pointed at the
subject's static trial instead (subject01_static.trc, 0–1 s, the unscaled model: marker RMS ~53
mm), written by :func:`static_setup`, which the test uses too; OpenSim's
OUT_DIR/_ik_marker_errors.sto is renamed static_ik_marker_errors_opensim46.sto.
"""

import sys
from pathlib import Path

GAIT = Path(__file__).resolve().parents[3] / "jaxmb" / "data" / "opensim_pipeline"
GAIT = GAIT / "gait10dof18musc"


def static_setup(directory) -> Path:
    """walk_Setup_IK.xml on the static trial, written to ``directory`` (absolute input paths)."""
    text = (GAIT / "walk_Setup_IK.xml").read_text()
    for old, new in (
        ("<model_file> subject01.osim </model_file>",
         f"<model_file>{GAIT / 'subject01.osim'}</model_file>"),
        ("<marker_file>subject01_walk.trc</marker_file>",
         f"<marker_file>{GAIT / 'subject01_static.trc'}</marker_file>"),
        ("<time_range> 0 2.5</time_range>", "<time_range> 0 1</time_range>"),
        ("<output_motion_file>subject01_walk_IK.mot</output_motion_file>",
         "<output_motion_file>static_IK.mot</output_motion_file>"),
    ):  # fmt: skip
        if old not in text:
            raise ValueError(f"walk_Setup_IK.xml: {old!r} not found")
        text = text.replace(old, new)
    path = Path(directory) / "static_Setup_IK.xml"
    path.write_text(text)
    return path


if __name__ == "__main__":
    import opensim as osim

    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tool = osim.InverseKinematicsTool(str(static_setup(out)))
    tool.setResultsDir(str(out))
    tool.setOutputMotionFileName(str(out / "static_IK.mot"))
    tool.run()
    (out / "_ik_marker_errors.sto").rename(out / "static_ik_marker_errors_opensim46.sto")
