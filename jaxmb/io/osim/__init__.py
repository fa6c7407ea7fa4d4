"""The OpenSim ``.osim`` reader: :func:`read_osim` / :func:`load_osim` and the muscle builders.

Modules in the order the data flows: :mod:`.xml` (XML helpers, the specs, :class:`OsimImport`),
:mod:`.functions` (OpenSim's function elements), :mod:`.document` (an ``.osim`` file as specs),
:mod:`.reader` (specs to a jaxmb model), :mod:`.muscles` (muscle specs to jaxmb muscles).
"""

from ...joint_maps import OsimJointMap
from ...muscles import OsimMovingPathPoint
from . import functions
from .document import JointSpec, OsimDocument, TransformAxisSpec
from .functions import FUNCTION_TYPES, parse_function
from .muscles import (
    build_muscle,
    model_with_muscles,
    muscle_parameters,
    osim_muscles,
    path_point,
    path_wrap,
    wrap_object,
)
from .reader import load_osim, osim_muscle_specs, read_osim
from .xml import (
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
)

__all__ = [
    "OsimJointMap",
    "OsimMovingPathPoint",
    "functions",
    "parse_function",
    "FUNCTION_TYPES",
    "OsimDocument",
    "JointSpec",
    "TransformAxisSpec",
    "read_osim",
    "load_osim",
    "osim_muscle_specs",
    "osim_muscles",
    "model_with_muscles",
    "build_muscle",
    "muscle_parameters",
    "path_point",
    "path_wrap",
    "wrap_object",
    "SUPPORTED_JOINTS",
    "SUPPORTED_MUSCLES",
    "SUPPORTED_WRAP_METHODS",
    "SUPPORTED_WRAPS",
    "MuscleSpec",
    "OsimCoordinate",
    "OsimImport",
    "OsimImportError",
    "PathPointSpec",
    "PathWrapSpec",
    "WrapObjectSpec",
    "body_fixed_xyz",
]
