"""jaxmb: differentiable multibody dynamics with empirical joint maps f(q), in JAX.

The curated public API; submodules are the implementation and nothing else re-exports.
"""

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
