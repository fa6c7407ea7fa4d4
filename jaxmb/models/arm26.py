"""OpenSim's arm26: two hinge joints (shoulder elevation, elbow flexion) and six muscles.

Read from ``jaxmb/data/arm26.osim`` (a copy of ``Arm26/arm26.osim`` from opensim-org/opensim-models,
Apache-2.0) by the OpenSim reader, :func:`jaxmb.io.load_osim`, with every muscle (``muscles="all"``:
a muscle the reader cannot build raises rather than being left out).

What the reader makes of it: the ``base`` body, welded to the ground, is one body held at a
constant angle by the joint map; each ``CustomJoint`` has one rotation driven linearly by its
coordinate about a fixed axis, the other transform axes constant zero, so it is one revolute joint
at the parent offset. Each ``PathWrap`` keeps OpenSim's point range and the order of the
PathWrapSet, so that jaxmb picks the wrapped segment per pose and iterates over several wrap objects
as OpenSim's ``applyWrapObjects`` does.
"""

from __future__ import annotations

from pathlib import Path

from ..io import load_osim
from ..io.osim import body_fixed_xyz
from ..model import Model

__all__ = ["arm26", "body_fixed_xyz"]

ARM26 = Path(__file__).resolve().parent.parent / "data" / "arm26.osim"


def arm26(path=None) -> Model:
    """The arm26 model with its six muscles (``model.muscles``), coordinates
    ``("r_shoulder_elev", "r_elbow_flex")``; gravity −9.8066 m/s² along y.

    Args:
        path: another copy of ``arm26.osim`` (default: the one shipped with jaxmb).
    """
    return load_osim(ARM26 if path is None else path, muscles="all")
