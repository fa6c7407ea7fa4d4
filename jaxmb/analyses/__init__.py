"""Trial-level analyses: the Newton-Euler matrix formalism for gait inverse dynamics and the gait
data it runs on (readers in :mod:`.gait_data`, processing and pipelines in :mod:`.gait`).
"""

from .gait import (
    BMC3D_MARKERS,
    DATA_DIR,
    WINTER_INERTIA,
    WINTER_MASS,
    Bmc3dTrial,
    GaitDataError,
    SegmentParameters,
    WinterData,
    angular_acceleration,
    angular_velocity,
    bmc3d_inputs,
    butterworth_coefficients,
    derivative,
    frame_from_markers,
    lowpass,
    read_bmc3d,
    read_bsp_table,
    read_winter,
    rigid_fit,
    segment_motion,
    segment_parameters,
    winter_chain,
    winter_inputs,
    winter_reference,
)
from .inverse_kinematics import (
    InverseKinematicsResult,
    bounds_of,
    marker_jacobian,
    marker_positions,
    solve_inverse_kinematics,
)
from .millard_curves import MillardCurves, millard_curves
from .muscle_capacity import MuscleCapacity, active_force_along_tendon, thelen_force_velocity
from .newton_euler import (
    GRAVITY_Y_UP,
    ChainMotion,
    GroundLoad,
    JointLoads,
    NewtonEulerError,
    NewtonEulerSystem,
    SegmentChain,
    SegmentMotion,
    chain_motion,
    ground_load,
    joint_loads,
    joint_loads_frame,
    newton_euler_system,
    residual,
    segment_chain,
)
from .signals import (
    CoordinateOperators,
    coordinate_operators,
    find_index,
    iir_coefficients,
    lowpass_iir,
    lowpass_iir_matrix,
    natural_spline_matrix,
    opensim_pad,
    resample_times,
)
from .static_optimization import StaticOptimizationResult, so_frame, solve_static_optimization
from .trial import GROUND, ExternalLoad, Frame, external_generalized_forces, trial_inverse_dynamics
