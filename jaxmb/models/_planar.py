"""Shared pieces of the planar built-in linkages: steel flat-bar links in the x–y plane."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..model import Body

#: Steel flat bar: density (kg/m³), width in the plane (m), thickness along z (m).
STEEL_DENSITY = 7850.0
BAR_WIDTH = 0.025
BAR_THICKNESS = 0.010


def bar_inertia(mass: float, length: float) -> np.ndarray:
    """Inertia (kg·m²) about the centre of mass of a rectangular bar along its body x axis."""
    w, t = BAR_WIDTH, BAR_THICKNESS
    return np.diag(
        [mass * (w**2 + t**2) / 12, mass * (length**2 + t**2) / 12, mass * (length**2 + w**2) / 12]
    )


def bar_body(name: str, parent, joint_at: float, length: float) -> Body:
    """A revolute link about z, its joint ``joint_at`` m along the parent's x axis, x along the bar.

    A uniform steel flat bar of :data:`BAR_WIDTH` × :data:`BAR_THICKNESS` (1.9625 kg/m); centre of
    mass in the middle of the bar.
    """
    mass = STEEL_DENSITY * BAR_WIDTH * BAR_THICKNESS * length
    c = 0.5 * length
    return Body(
        name=name,
        parent=parent,
        joint="revolute",
        axis=(0.0, 0.0, 1.0),
        position=(joint_at, 0.0, 0.0),
        mass=mass,
        com=(c, 0.0, 0.0),
        inertia=bar_inertia(mass, length),
    )


def wrap_near(angle, reference):
    """The representative of ``angle`` (mod 2π) nearest to ``reference``."""
    return reference + jnp.mod(angle - reference + jnp.pi, 2 * jnp.pi) - jnp.pi
