"""Make the OpenSim 4.6 inverse-dynamics reference of a model with a coupled coordinate
(tests/io/test_opensim_setups.py).

    python tests/data/opensim_pipeline/make_id_references.py

leg6dof9musc (tests/data/osim/leg6dof9musc.osim, from the opensim-models collection): its patella
coordinate knee_angle_pat_r follows knee_angle_r through a CoordinateCouplerConstraint and drives
the patella through splines (OpenSim's motion type "Coupled"). Writes, beside this script:
- leg6dof9musc_coordinates.mot: 101 frames (0–1 s) of every free coordinate moving as
  default + amplitude · sin(2π · 1.3 t + phase) within its range (seeded), each pose assembled by
  OpenSim (so the patella's column satisfies its constraint), rotational ones in degrees;
- leg6dof9musc_id_opensim46.sto: OpenSim's InverseDynamicsTool on it (0.1–0.9 s, low-pass 6 Hz,
  muscles excluded), the setup of :func:`setup`;
- leg6dof9musc_markers.trc: the model's 12 markers in ground at those poses (OpenSim's
  ``getLocationInGround``, mm, no noise), for the inverse-kinematics setup of :func:`ik_setup`;
- leg6dof9musc_ik_opensim46.mot: OpenSim's InverseKinematicsTool on those markers (its default
  accuracy 1e-5).
"""

import math
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE.parent / "osim" / "leg6dof9musc.osim"
COORDINATES = HERE / "leg6dof9musc_coordinates.mot"
REFERENCE = HERE / "leg6dof9musc_id_opensim46.sto"
MARKERS = HERE / "leg6dof9musc_markers.trc"
IK_REFERENCE = HERE / "leg6dof9musc_ik_opensim46.mot"


def _setup_file(directory, filename: str, tool: str, elements: list[str]) -> Path:
    """``<tool name="leg6dof9musc">`` holding ``elements`` (XML strings), as an OpenSim document
    ``directory/filename``."""
    body = "".join(f"\t\t{e}\n" for e in elements)
    path = Path(directory) / filename
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8" ?>\n<OpenSimDocument Version="40000">\n'
        f'\t<{tool} name="leg6dof9musc">\n{body}\t</{tool}>\n</OpenSimDocument>\n'
    )
    return path


def setup(directory) -> Path:
    """An InverseDynamicsTool setup for the trial above, written to ``directory``."""
    return _setup_file(directory, "leg6dof9musc_Setup_ID.xml", "InverseDynamicsTool", [
        "<results_directory>results</results_directory>",
        f"<model_file>{MODEL}</model_file>",
        "<time_range> 0.1 0.9</time_range>",
        "<forces_to_exclude> Muscles</forces_to_exclude>",
        "<external_loads_file></external_loads_file>",
        f"<coordinates_file>{COORDINATES}</coordinates_file>",
        "<lowpass_cutoff_frequency_for_coordinates>6</lowpass_cutoff_frequency_for_coordinates>",
        "<output_gen_force_file>leg6dof9musc_ID.sto</output_gen_force_file>",
    ])  # fmt: skip


def ik_setup(directory) -> Path:
    """An InverseKinematicsTool setup fitting the markers above (every marker, weight 1)."""
    import re

    names = re.findall(r'<Marker name="([^"]+)"', MODEL.read_text())
    tasks = "".join(
        f'<IKMarkerTask name="{n}"><apply>true</apply><weight>1</weight></IKMarkerTask>'
        for n in names
    )
    return _setup_file(directory, "leg6dof9musc_Setup_IK.xml", "InverseKinematicsTool", [
        "<results_directory>results</results_directory>",
        f"<model_file>{MODEL}</model_file>",
        "<constraint_weight>Inf</constraint_weight>",
        "<accuracy>1e-05</accuracy>",
        f'<IKTaskSet name="tasks"><objects>{tasks}</objects><groups /></IKTaskSet>',
        f"<marker_file>{MARKERS}</marker_file>",
        "<time_range> 0 1</time_range>",
        "<report_errors>true</report_errors>",
        "<output_motion_file>leg6dof9musc_IK.mot</output_motion_file>",
    ])  # fmt: skip


def coordinates() -> None:
    import numpy as np
    import opensim as osim

    model = osim.Model(str(MODEL))
    state = model.initSystem()
    cs = model.getCoordinateSet()
    n = cs.getSize()
    free = [
        i for i in range(n) if not (cs.get(i).getLocked(state) or cs.get(i).isConstrained(state))
    ]
    rng = np.random.default_rng(3)
    amplitude, phase = {}, {}
    for i in free:
        c = cs.get(i)
        rot = c.getMotionType() == osim.Coordinate.Rotational
        amplitude[i] = min(0.3 if rot else 0.05, 0.3 * (c.getRangeMax() - c.getRangeMin()))
        phase[i] = rng.uniform(0, 2 * np.pi)
    times = np.arange(101) / 100.0
    rows, markers = [], []
    ms = model.getMarkerSet()
    for t in times:
        for i in free:
            c = cs.get(i)
            v = c.getDefaultValue() + amplitude[i] * math.sin(2 * math.pi * 1.3 * t + phase[i])
            c.setValue(state, min(max(v, c.getRangeMin()), c.getRangeMax()), False)
        model.assemble(state)
        model.realizePosition(state)
        markers.append([
            1000.0 * ms.get(k).getLocationInGround(state).get(j)
            for k in range(ms.getSize())
            for j in range(3)
        ])  # fmt: skip
        rows.append([
            math.degrees(cs.get(i).getValue(state))
            if cs.get(i).getMotionType() == osim.Coordinate.Rotational
            else cs.get(i).getValue(state)
            for i in range(n)
        ])  # fmt: skip
    labels = "\t".join(cs.get(i).getName() for i in range(n))
    with open(COORDINATES, "w") as f:
        f.write(f"leg6dof9musc synthetic\nversion=1\nnRows={len(times)}\nnColumns={n + 1}\n")
        f.write(f"inDegrees=yes\nendheader\ntime\t{labels}\n")
        for t, r in zip(times, rows, strict=True):
            f.write(f"{t:.6f}\t" + "\t".join(f"{v:.10f}" for v in r) + "\n")
    names = [ms.get(k).getName() for k in range(ms.getSize())]
    with open(MARKERS, "w") as f:
        f.write(f"PathFileType\t4\t(X/Y/Z)\t{MARKERS.name}\n")
        f.write("DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\t")
        f.write("OrigDataStartFrame\tOrigNumFrames\n")
        f.write(f"100.00\t100.00\t{len(times)}\t{len(names)}\tmm\t100.00\t1\t{len(times)}\n")
        f.write("Frame#\tTime\t" + "\t\t\t".join(names) + "\t\t\n")
        f.write("\t\t" + "\t".join(f"X{i + 1}\tY{i + 1}\tZ{i + 1}" for i in range(len(names))))
        f.write("\n\n")
        for k, (t, r) in enumerate(zip(times, markers, strict=True)):
            f.write(f"{k + 1}\t{t:.5f}\t" + "\t".join(f"{v:.8f}" for v in r) + "\n")


def main() -> int:
    import opensim as osim

    coordinates()
    with tempfile.TemporaryDirectory() as d:
        tool = osim.InverseDynamicsTool(str(setup(d)))
        tool.setResultsDir(d)
        tool.run()
        shutil.copy(Path(d) / "leg6dof9musc_ID.sto", REFERENCE)
    with tempfile.TemporaryDirectory() as d:
        tool = osim.InverseKinematicsTool(str(ik_setup(d)))
        tool.setResultsDir(d)
        tool.setOutputMotionFileName(str(Path(d) / "leg6dof9musc_IK.mot"))
        tool.run()
        shutil.copy(Path(d) / "leg6dof9musc_IK.mot", IK_REFERENCE)
    print(f"wrote {COORDINATES.name}, {REFERENCE.name}, {MARKERS.name}, {IK_REFERENCE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
