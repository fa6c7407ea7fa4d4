"""jaxmb: differentiable multibody dynamics with empirical joint maps f(q), in JAX.

The curated public API. Functions follow ``algorithm(model, ...)``; models are immutable pytrees.
"""

import importlib

import jax as _jax

_jax.config.update("jax_enable_x64", True)

from . import coupling, kinematics, matcalc, models  # noqa: E402
from .coupling import AbstractJointMap, ExplicitMap, LinearMap, identity_map  # noqa: E402
from .kinematics import (  # noqa: E402
    body_angular_acceleration,
    body_angular_velocity,
    body_transforms,
    kron_derivatives,
    point_acceleration,
    point_position,
    point_velocity,
    transform_derivatives,
)
from .model import Body, Model, ModelError, build_model  # noqa: E402

__version__ = "0.1.0"

from .batch import shard_batch, simulate_sharded, stack_models, vary  # noqa: E402
from .coupling import (  # noqa: E402
    ImplicitMap,
    ImplicitSolution,
    PremodelMap,
    joint_gradients,
    joint_hessians,
    joint_values,
    premodel,
)
from .dynamics import (  # noqa: E402
    PremodelDynamics,
    applied_forces,
    bias_forces,
    forward_dynamics,
    gravity_forces,
    inverse_dynamics,
    kinetic_energy,
    mass_matrix,
    potential_energy,
    premodel_dynamics,
)
from .muscles import (  # noqa: E402
    lengths_and_moment_arms,
    moment_arms,
    muscle_lengths,
    muscle_velocities,
    with_muscles,
)
from .newton_euler import joint_loads  # noqa: E402
from .sharing import share_forces  # noqa: E402
from .simulate import ERKResult, SimulationError, Trajectory, erk_solve, simulate, simulate_batch  # noqa: E402

# Submodules that are loaded on first use (their names are not shadowed by functions).
_SUBMODULES = {
    "forces",
    "sharing",
    "hill",
    "control",
    "identify",
    "batch",
    "gait",
    "io",
    "cli",
    "batched",
    "expressions",
}

# Public names whose modules are imported on first use, to keep `import jaxmb` light.
_LAZY_NAMES = {
    "load_model": "jaxmb.io.model_file",
    "save_model": "jaxmb.io.model_file",
    "ModelFileError": "jaxmb.io.model_file",
    "load_osim": "jaxmb.io.osim",
    "batched_terms": "jaxmb.batched",
    "batched_forward_dynamics": "jaxmb.batched",
    "batched_rk4": "jaxmb.batched",
}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    raise AttributeError(f"module 'jaxmb' has no attribute {name!r}")
