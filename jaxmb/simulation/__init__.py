"""Forward simulation: the diffrax driver, batching and sharding, computed-torque control,
parameter identification through simulations.
"""

from .batch import (
    BATCH_AXIS,
    batch_mesh,
    batch_size,
    shard_batch,
    simulate_sharded,
    stack_models,
    unstack_model,
    vary,
)
from .control import (
    ComputedTorque,
    MinimumJerk,
    TrackingResult,
    computed_torque,
    eq200_solve,
    simulate_tracking,
)
from .driver import (
    SOLVERS,
    ERKResult,
    SimulationError,
    Trajectory,
    erk_solve,
    ode_rhs,
    simulate,
    simulate_batch,
)
from .identify import (
    IdentificationResult,
    Observations,
    identify,
    predict,
)
