"""Applied force elements a model carries; forward dynamics and simulation apply them.

``base``: :class:`AbstractForce`, the extension point, and the sums over a model's elements;
``loads``: constant forces and torques; ``springs``: spring-dampers; ``coordinate``: limits,
generalized springs and actuators on (OpenSim) coordinates; ``bushing``: a linear bushing between
two frames; ``contact``: Hunt–Crossley contact of spheres and half-spaces.
"""

from .base import AbstractForce, applied_forces, applied_forces_from, as_float, point_jacobian
from .actuators import PointActuator, TorqueActuator
from .bushing import BushingForce, body_fixed_xyz_angles
from .contact import HuntCrossleyForce, SmoothSphereHalfSpaceForce
from .coordinate import (
    CoordinateActuator,
    CoordinateLimitForce,
    ExpressionCoordinateForce,
    SpringGeneralizedForce,
    coordinate_value_rate_gradient,
    smooth_step,
)
from .loads import BodyTorque, CoordinateForce, JointTorque, PointForce
from .springs import JointSpring, PointToPointSpring
