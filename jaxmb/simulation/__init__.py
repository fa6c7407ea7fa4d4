"""Forward simulation: the diffrax driver, batching and sharding, computed-torque control,
parameter identification through simulations.
"""

from .batch import (
    BATCH_AXIS,
    batch_mesh,
    batch_size,
    resolve_where,
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
    ClassicalRK4,
    ERKResult,
    SimulationError,
    Trajectory,
    batched_rk4,
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
