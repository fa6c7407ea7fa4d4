"""Applied force elements a model carries; forward dynamics and simulation apply them.

``base``: :class:`AbstractForce`, the extension point, and the sums over a model's elements;
``loads``: constant forces and torques; ``springs``: spring-dampers.
"""

from .base import AbstractForce, applied_forces, applied_forces_from, point_jacobian
from .loads import BodyTorque, CoordinateForce, JointTorque, PointForce
from .springs import JointSpring, PointToPointSpring
