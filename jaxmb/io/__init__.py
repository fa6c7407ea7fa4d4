"""Reading and writing the files people in this field use: OpenSim models and motion data.

- :func:`load_osim` / :func:`read_osim`: OpenSim ``.osim`` (4.x, 3.0) to a jaxmb model.
- :mod:`jaxmb.io.motion`: ``.trc`` markers, ``.mot``/``.sto`` storage files, C3D (optional ezc3d).
- :func:`load_model` / :func:`save_model`: jaxmb's own versioned JSON model files.
- :mod:`jaxmb.io.setup`: OpenSim tool setups (InverseKinematicsTool, InverseDynamicsTool,
  AnalyzeTool + StaticOptimization), ExternalLoads, force-set files, and the ID / SO runs.
- :mod:`jaxmb.io.osim.functions` (also ``jaxmb.io.functions``): OpenSim's function elements read
  into the JAX-traceable modules of :mod:`jaxmb.math.functions`.
"""

from . import (
    model_file,
    motion,
    setup,  # noqa: E402  (reads OpenSim setups with the readers above)
)
from .model_file import ModelFileError, load_model, save_model
from .motion import (
    MotionFileError,
    Storage,
    TRCData,
    read_c3d,
    read_storage,
    read_trc,
    write_mot,
    write_storage,
    write_trc,
)
from .osim import (
    OsimImport,
    OsimImportError,
    OsimMovingPathPoint,
    functions,
    load_osim,
    model_with_muscles,
    osim_muscle_specs,
    osim_muscles,
    read_osim,
)

__all__ = [
    "functions",
    "setup",
    "motion",
    "osim",
    "model_file",
    "ModelFileError",
    "load_model",
    "save_model",
    "load_osim",
    "read_osim",
    "osim_muscle_specs",
    "osim_muscles",
    "model_with_muscles",
    "OsimMovingPathPoint",
    "OsimImport",
    "OsimImportError",
    "MotionFileError",
    "Storage",
    "TRCData",
    "read_storage",
    "write_storage",
    "write_mot",
    "read_trc",
    "write_trc",
    "read_c3d",
]
