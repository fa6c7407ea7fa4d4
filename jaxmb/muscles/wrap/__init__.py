"""Wrap objects and OpenSim's wrapping algorithms (cylinder, sphere, ellipsoid, torus).
"""

from .algorithms import (
    QUADRANTS,
    cylinder_wrap_line,
    ellipsoid_wrap_code,
    ellipsoid_wrap_line,
    sphere_wrap_line,
    torus_wrap_line,
)
