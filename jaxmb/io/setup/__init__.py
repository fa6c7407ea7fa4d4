"""OpenSim setup files and the workflows they describe: InverseKinematicsTool,
InverseDynamicsTool and AnalyzeTool (StaticOptimization) setups, ExternalLoads, actuator
force-set files, and the runs that read them, compute with :mod:`jaxmb.analyses` and write
OpenSim's output files."""

from .actuators import (
    ActuatorSpec,
    actuator_loads,
    model_actuators,
    muscle_capacity,
    read_force_set,
)
from .coordinates import TrialCoordinates, raw_coordinates, trial_coordinates
from .external_loads import (
    ExternalForceSpec,
    ExternalLoadsSpec,
    read_external_loads,
    sample_external_loads,
)
from .inverse_dynamics import InverseDynamicsRun, generalized_force_labels, run_inverse_dynamics
from .inverse_kinematics import InverseKinematicsRun, ik_problem, run_inverse_kinematics
from .static_optimization import (
    SOProblem,
    StaticOptimizationRun,
    run_static_optimization,
    so_problem,
    so_problem_solve,
    trial_paths,
)
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
