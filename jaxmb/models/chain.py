"""The reference open chain of DESIGN.md, used for benchmarks and peer comparisons."""

from __future__ import annotations

import numpy as np

from ..model import Body, Model, build_model

_AXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def chain(n: int = 7) -> Model:
    """``n`` revolute joints; joint i rotates about the parent frame's x, y, z, x, ... (i mod 3).

    Joint 0 at the origin, every later joint 0.3 m along its parent's z axis; body i has mass
    1 + 0.1·i kg, centre of mass 0.15 m along its own z axis and inertia diag(0.02, 0.02, 0.005)
    kg·m² about it; gravity −9.81 m/s² along z; one coordinate per joint (f = q).
    Pinocchio's twin: JointModelRX/RY/RZ, SE3 placements (0, 0, 0.3), Inertia(m, (0, 0, 0.15), I).
    """
    if int(n) < 1:
        raise ValueError(f"chain(n): n must be a positive integer, got {n}")
    bodies = [
        Body(
            name=f"link{i}",
            parent=i - 1,
            joint="revolute",
            axis=_AXES[i % 3],
            position=(0.0, 0.0, 0.0 if i == 0 else 0.3),
            mass=1.0 + 0.1 * i,
            com=(0.0, 0.0, 0.15),
            inertia=np.diag([0.02, 0.02, 0.005]),
        )
        for i in range(int(n))
    ]
    return build_model(
        bodies,
        gravity=(0.0, 0.0, -9.81),
        coordinate_names=[f"joint{i}" for i in range(int(n))],
        name=f"chain{n}",
    )
