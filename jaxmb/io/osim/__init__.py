"""The OpenSim ``.osim`` reader.
"""

from ...joint_maps import OsimJointMap
from ...muscles import OsimMovingPathPoint
from .reader import (
    SUPPORTED_JOINTS,
    SUPPORTED_MUSCLES,
    SUPPORTED_WRAP_METHODS,
    SUPPORTED_WRAPS,
    MuscleSpec,
    OsimCoordinate,
    OsimImport,
    OsimImportError,
    PathPointSpec,
    PathWrapSpec,
    WrapObjectSpec,
    body_fixed_xyz,
    load_osim,
    model_with_muscles,
    osim_muscle_specs,
    osim_muscles,
    read_osim,
)
