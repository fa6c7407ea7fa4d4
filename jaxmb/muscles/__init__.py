"""Musculotendon paths (points, conditional and moving points, wrap objects), lengths and
moment arms, Hill-type muscles and force sharing.
"""

from .hill import (
    activation_derivative,
    active_force_length,
    elastic_tendon_equilibrium,
    elastic_tendon_fiber_velocity,
    elastic_tendon_force,
    force_velocity,
    force_velocity_inverse,
    musculoskeletal_rhs,
    passive_force_length,
    pennation,
    rigid_tendon_coefficients,
    rigid_tendon_force,
    soft_clip,
    tendon_force_length,
    tendon_length_from_force,
)
from .paths import (
    ConditionalPathPoint,
    FunctionPathPoint,
    MovingPathPoint,
    Muscle,
    MuscleParameters,
    MuscleSet,
    OsimMovingPathPoint,
    PathPoint,
    PathWrap,
    WrapCylinder,
    WrapEllipsoid,
    WrapSphere,
    WrapTorus,
    clamp_to_range,
    lengths_and_moment_arms,
    moment_arm_terms,
    moment_arms,
    muscle_lengths,
    muscle_velocities,
    path_geometry,
    with_muscles,
)
from .sharing import (
    SharingResult,
    share_forces,
    sharing_problem,
    solve_sharing_qp,
)
