"""Trial-level analyses: the Newton-Euler matrix formalism for gait inverse dynamics and the gait
data it runs on (readers in :mod:`.gait_data`, processing and pipelines in :mod:`.gait`).

The names below are imported from their modules on first use (``from jaxmb.analyses import X``
imports X's module only): the setup commands need a few of these modules, not the gait
pipelines (Winter's tables, Newton–Euler) nor inverse kinematics."""

import importlib

# ``millard_curves`` names a module and its function: imported here, before any other import of
# the module could leave the package attribute on the module instead of the function
from .millard_curves import MillardCurves, millard_curves

# public name → the module of this package that defines it
_NAMES = {
    "BMC3D_MARKERS": "gait",
    "DATA_DIR": "gait",
    "WINTER_INERTIA": "gait",
    "WINTER_MASS": "gait",
    "Bmc3dTrial": "gait",
    "GaitDataError": "gait",
    "SegmentParameters": "gait",
    "WinterData": "gait",
    "angular_acceleration": "gait",
    "angular_velocity": "gait",
    "bmc3d_inputs": "gait",
    "butterworth_coefficients": "gait",
    "derivative": "gait",
    "frame_from_markers": "gait",
    "lowpass": "gait",
    "read_bmc3d": "gait",
    "read_bsp_table": "gait",
    "read_winter": "gait",
    "rigid_fit": "gait",
    "segment_motion": "gait",
    "segment_parameters": "gait",
    "winter_chain": "gait",
    "winter_inputs": "gait",
    "winter_reference": "gait",
    "InverseKinematicsResult": "inverse_kinematics",
    "bounds_of": "inverse_kinematics",
    "marker_jacobian": "inverse_kinematics",
    "marker_positions": "inverse_kinematics",
    "solve_inverse_kinematics": "inverse_kinematics",
    "MuscleCapacity": "muscle_capacity",
    "active_force_along_tendon": "muscle_capacity",
    "thelen_force_velocity": "muscle_capacity",
    "GRAVITY_Y_UP": "newton_euler",
    "ChainMotion": "newton_euler",
    "GroundLoad": "newton_euler",
    "JointLoads": "newton_euler",
    "NewtonEulerError": "newton_euler",
    "NewtonEulerSystem": "newton_euler",
    "SegmentChain": "newton_euler",
    "SegmentMotion": "newton_euler",
    "chain_motion": "newton_euler",
    "ground_load": "newton_euler",
    "joint_loads": "newton_euler",
    "joint_loads_frame": "newton_euler",
    "newton_euler_system": "newton_euler",
    "residual": "newton_euler",
    "segment_chain": "newton_euler",
    "CoordinateOperators": "signals",
    "coordinate_operators": "signals",
    "find_index": "signals",
    "iir_coefficients": "signals",
    "lowpass_iir": "signals",
    "lowpass_iir_matrix": "signals",
    "natural_spline_matrix": "signals",
    "opensim_pad": "signals",
    "resample_times": "signals",
    "StaticOptimizationResult": "static_optimization",
    "so_frame": "static_optimization",
    "solve_static_optimization": "static_optimization",
    "GROUND": "trial",
    "ExternalLoad": "trial",
    "Frame": "trial",
    "external_generalized_forces": "trial",
    "trial_inverse_dynamics": "trial",
}

__all__ = ["MillardCurves", "millard_curves", *_NAMES]


# the modules themselves (``jaxmb.analyses.gait``), as after the eager imports this replaced
_MODULES = {
    "checks", "gait", "gait_data", "inverse_kinematics", "millard_curves", "muscle_capacity",
    "newton_euler", "signals", "static_optimization", "trial",
}  # fmt: skip


def __getattr__(name):
    if name in _NAMES:
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_NAMES) | _MODULES)
