"""Equations of motion M q̈ + N q̇ = G + τ: the tree algorithm, the seed's closed form, the
Lagrangian referee, pre-modelled dynamics.
"""

from .batched import (
    CHUNK,
    UNROLL_POSES,
    batched_forward_dynamics,
    batched_rk4,
    batched_terms,
    equations_of_motion_bm,
)
from .terms import (
    METHODS,
    PremodelDynamics,
    applied_forces,
    bias_forces,
    christoffel_matrix,
    forward_dynamics,
    generalized_forces,
    gravity_forces,
    inverse_dynamics,
    joint_space_mass_matrix,
    kinetic_energy,
    mass_matrix,
    potential_energy,
    premodel_dynamics,
    pseudo_inertia,
    total_energy,
)
