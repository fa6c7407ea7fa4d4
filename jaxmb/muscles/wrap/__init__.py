"""Wrap objects and OpenSim's wrapping algorithms, one file per shape (cylinder, sphere, ellipsoid,
torus) behind :class:`~.base.AbstractWrapObject`; :mod:`.base` says how to add a shape.

Each ``*_wrap_line`` function wraps one straight path segment p1 → p2, given in the wrap object's
own frame, and returns ``(code, r1, r2, wrap_length)``: OpenSim's ``WrapObject::WrapAction`` code
(:data:`NO_WRAP`, :data:`INSIDE_RADIUS`, :data:`WRAPPED`, :data:`MANDATORY_WRAP`), the tangent
points r1 (near p1) and r2 (near p2) in the wrap frame, and the length of the path on the surface
between them (m). The discrete choices OpenSim makes with ``if`` are made with ``jnp.where``, so
the result is differentiable wherever OpenSim's own path is smooth.
"""

from .base import AbstractWrapObject
from .common import INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP, QUADRANTS, WRAPPED
from .cylinder import WrapCylinder, cylinder_wrap_line
from .ellipsoid import WrapEllipsoid, ellipsoid_wrap_code, ellipsoid_wrap_line
from .sphere import WrapSphere, sphere_wrap_line
from .torus import WrapTorus, torus_wrap_line

__all__ = [
    "AbstractWrapObject",
    "WrapCylinder",
    "WrapSphere",
    "WrapEllipsoid",
    "WrapTorus",
    "NO_WRAP",
    "INSIDE_RADIUS",
    "WRAPPED",
    "MANDATORY_WRAP",
    "QUADRANTS",
    "cylinder_wrap_line",
    "sphere_wrap_line",
    "torus_wrap_line",
    "ellipsoid_wrap_line",
    "ellipsoid_wrap_code",
]
