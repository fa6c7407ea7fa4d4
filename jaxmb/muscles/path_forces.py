"""Force elements along a path (OpenSim's ``PathActuator`` and ``PathSpring``).

A path is a :class:`~jaxmb.muscles.Muscle` whose Hill parameters are not used: its length ``L(q)``
and moment arms ``R = −∂L/∂q`` come from the same path geometry as the muscles'
(:func:`~jaxmb.muscles.lengths_and_moment_arms`), and a tension ``T`` along it is the generalized
force ``Q = R T``. The elements live here, in the muscles stage, because they need the paths;
forward dynamics applies them as any other :class:`~jaxmb.forces.AbstractForce`.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..forces import AbstractForce, as_float
from .geometry import lengths_and_moment_arms
from .paths import MuscleSet

__all__ = ["PathActuator", "PathSpring", "Ligament", "path_length_and_moment_arm"]


def path_length_and_moment_arm(model, paths: MuscleSet, q):
    """``(L, R)``: the length (m) and moment arms (nq,) of the single path of ``paths``."""
    m = eqx.tree_at(lambda x: x.muscles, model, paths, is_leaf=lambda x: x is None)
    L, R = lengths_and_moment_arms(m, q)
    return L[0], R[:, 0]


class PathActuator(AbstractForce):
    """OpenSim's ``PathActuator``: tension ``optimal_force · control`` along a path (N).

    Attributes:
        name: the actuator's name (static). paths: a :class:`MuscleSet` of its one path.
        optimal_force: N per unit control. control: the input (0 without a controller).
    """

    name: str = eqx.field(static=True)
    paths: MuscleSet
    optimal_force: Float[Array, ""]
    control: Float[Array, ""]

    def __init__(self, name, paths, optimal_force, control=0.0):
        self.name = name
        self.paths = paths
        self.optimal_force = as_float(optimal_force)
        self.control = as_float(control)

    def generalized_force(self, model, q, qd, t):
        _, R = path_length_and_moment_arm(model, self.paths, q)
        return R * (self.optimal_force * self.control)


class PathSpring(AbstractForce):
    """OpenSim's ``PathSpring``: tension ``k · max(L − L₀, 0) · (1 + d · L̇)`` along a path (N).

    Attributes:
        paths: a :class:`MuscleSet` of its one path. stiffness: N/m. resting_length: m.
        dissipation: s/m.
    """

    paths: MuscleSet
    stiffness: Float[Array, ""]
    resting_length: Float[Array, ""]
    dissipation: Float[Array, ""]

    def __init__(self, paths, stiffness, resting_length, dissipation):
        self.paths = paths
        self.stiffness = as_float(stiffness)
        self.resting_length = as_float(resting_length)
        self.dissipation = as_float(dissipation)

    def generalized_force(self, model, q, qd, t):
        L, R = path_length_and_moment_arm(model, self.paths, q)
        stretch = jnp.maximum(L - self.resting_length, 0.0)
        tension = self.stiffness * stretch * (1 + self.dissipation * (-jnp.sum(R * qd)))
        return R * tension


class Ligament(AbstractForce):
    """OpenSim's ``Ligament``: tension ``pcsa_force · g(L / L₀)`` along a path while ``L > L₀``,
    0 otherwise; ``g`` the force-length curve (an OpenSim function, :mod:`jaxmb.math.functions`).

    Attributes:
        paths: a :class:`MuscleSet` of its one path. resting_length: L₀ (m). pcsa_force: N.
        force_length_curve: the normalized curve (a traced module).
    """

    paths: MuscleSet
    resting_length: Float[Array, ""]
    pcsa_force: Float[Array, ""]
    force_length_curve: eqx.Module

    def __init__(self, paths, resting_length, pcsa_force, force_length_curve):
        self.paths = paths
        self.resting_length = as_float(resting_length)
        self.pcsa_force = as_float(pcsa_force)
        self.force_length_curve = force_length_curve

    def generalized_force(self, model, q, qd, t):
        L, R = path_length_and_moment_arm(model, self.paths, q)
        x = L / self.resting_length
        tension = jnp.where(L > self.resting_length, self.force_length_curve(x), 0.0)
        return R * (tension * self.pcsa_force)
