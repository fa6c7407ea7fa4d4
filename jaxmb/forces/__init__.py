"""Applied force elements a model carries; forward dynamics and simulation apply them.
"""

from .elements import (
    AbstractForce,
    BodyTorque,
    CoordinateForce,
    JointSpring,
    JointTorque,
    PointForce,
    PointToPointSpring,
    point_jacobian,
)
