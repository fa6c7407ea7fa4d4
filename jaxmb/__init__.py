"""jaxmb: differentiable multibody dynamics with empirical joint maps f(q), in JAX.

The curated public API. Functions follow ``algorithm(model, ...)``; models are immutable pytrees.
Stages are imported on first use (``jaxmb.mass_matrix`` loads :mod:`jaxmb.dynamics`).
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

# name -> module of the public functions of the later pipeline stages
_PUBLIC = {
    "joint_values": "coupling",
    "joint_gradients": "coupling",
    "joint_hessians": "coupling",
    "ImplicitMap": "coupling",
    "ImplicitSolution": "coupling",
    "PremodelMap": "coupling",
    "premodel": "coupling",
    "joint_loads": "newton_euler",
    "mass_matrix": "dynamics",
    "bias_forces": "dynamics",
    "gravity_forces": "dynamics",
    "applied_forces": "dynamics",
    "forward_dynamics": "dynamics",
    "inverse_dynamics": "dynamics",
    "kinetic_energy": "dynamics",
    "potential_energy": "dynamics",
    "simulate": "simulate",
    "simulate_batch": "simulate",
    "Trajectory": "simulate",
    "muscle_lengths": "muscles",
    "muscle_velocities": "muscles",
    "moment_arms": "muscles",
}
_SUBMODULES = {
    "dynamics",
    "forces",
    "simulate",
    "muscles",
    "sharing",
    "control",
    "identify",
    "newton_euler",
    "gait",
    "io",
}


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'jaxmb' has no attribute {name!r}")
