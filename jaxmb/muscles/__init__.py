"""Musculotendon paths and what they give: path points (:mod:`.points`), wrap objects, one file per
shape (:mod:`.wrap`), musculotendon units and their validation (:mod:`.paths`), OpenSim's wrapping
of one path (:mod:`.path_kernel`), lengths and moment arms of all muscles (:mod:`.geometry`),
Hill-type muscles (:mod:`.hill`), force sharing (:mod:`.sharing`) and polynomial fits of the paths
(:mod:`.path_fit`).
"""

import importlib

from .geometry import (
    lengths_and_moment_arms,
    moment_arm_terms,
    moment_arms,
    muscle_lengths,
    muscle_velocities,
    path_geometry,
)
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
from .path_fit import FittedPaths, PathFitReport, exact_paths, fit_paths
from .path_forces import Ligament, PathActuator, PathSpring, path_length_and_moment_arm
from .paths import Muscle, MuscleParameters, MuscleSet, PathWrap, with_muscles
from .points import (
    ConditionalPathPoint,
    FunctionPathPoint,
    MovingPathPoint,
    OsimConditionalPathPoint,
    OsimMovingPathPoint,
    PathPoint,
    clamp_to_range,
)
from .wrap import AbstractWrapObject, WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus

# force sharing imports optax (about 0.3 s), which reading models and the OpenSim-setup commands
# never use: its names load on first use (``jaxmb.muscles.share_forces`` works as before)
_SHARING = ("SharingResult", "share_forces", "sharing_problem", "solve_sharing_qp")


def __getattr__(name):
    if name in _SHARING:
        return getattr(importlib.import_module(f"{__name__}.sharing"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
