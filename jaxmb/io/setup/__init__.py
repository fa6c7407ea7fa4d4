"""OpenSim setup files and the workflows they describe: InverseKinematicsTool,
InverseDynamicsTool and AnalyzeTool (StaticOptimization) setups, ExternalLoads, actuator
force-set files, and the runs that read them, compute with :mod:`jaxmb.analyses` and write
OpenSim's output files."""

from .coordinates import TrialCoordinates, raw_coordinates, trial_coordinates
from .external_loads import (
    ExternalForceSpec,
    ExternalLoadsSpec,
    read_external_loads,
    sample_external_loads,
)
from .inverse_dynamics import InverseDynamicsRun, generalized_force_labels, run_inverse_dynamics
from .tools import (
    IKTask,
    InverseDynamicsSetup,
    InverseKinematicsSetup,
    StaticOptimizationSetup,
    check_exists,
    read_inverse_dynamics_setup,
    read_inverse_kinematics_setup,
    read_static_optimization_setup,
)
from .xml import SetupError, SetupXml
