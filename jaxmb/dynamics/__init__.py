"""Equations of motion M q̈ + N q̇ = G + τ: the tree algorithm (``tree``, per state and batched),
the seed's closed form (``closed_form``), the Lagrangian referee (``lagrangian``), premodelled
dynamics (``premodel``), and the public M / N q̇ / G / forward / inverse functions (``terms``).
"""

from .closed_form import closed_form_terms, pseudo_inertia
from .lagrangian import (
    lagrangian_bias_forces,
    lagrangian_gravity_forces,
    lagrangian_mass_matrix,
    referee_poses,
)
from .premodel import PremodelDynamics, premodel_dynamics
from .prescribed import PrescribedCoordinates, prescribe_state
from .terms import (
    METHODS,
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
    total_energy,
    try_forward_dynamics,
)
from .tree import (
    CHUNK,
    batched_forward_dynamics,
    batched_terms,
    equations_of_motion_bm,
    joint_space_terms,
    projected_terms,
)
