"""Physical checks of Hill-type muscle parameters, raised where the parameters are built.

:class:`jaxmb.muscles.MuscleParameters` runs :func:`check_muscle_parameters` when constructed with
concrete values (traced values, inside ``jax.jit``/``vmap``, are left to the caller); the model-file
reader and :func:`jaxmb.muscles.with_muscles` name the muscle in the message.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from ..model import ModelError

__all__ = ["check_muscle_parameters"]

# (attribute, lower bound, bound included, unit, what it is)
_RULES = (
    ("max_isometric_force", 0.0, True, "N", "a muscle pulls: F_max >= 0"),
    ("optimal_fiber_length", 0.0, False, "m", "l_opt > 0"),
    ("tendon_slack_length", 0.0, True, "m", "l_s >= 0"),
    ("pennation_at_optimal", 0.0, True, "rad", "0 <= alpha_opt < pi/2"),
    ("max_contraction_velocity", 0.0, False, "l_opt/s", "v_max > 0"),
)


def check_muscle_parameters(params, where: str = "MuscleParameters") -> None:
    """Raise :class:`jaxmb.ModelError` naming the parameter and its value when one is not finite
    or not physical (negative force or length, non-positive optimal fibre length or maximum
    contraction velocity, pennation outside [0, π/2)). Traced values are not checked."""
    for attr, low, closed, unit, rule in _RULES:
        x = getattr(params, attr)
        if isinstance(x, jax.core.Tracer):
            continue
        v = np.asarray(x, dtype=float)
        bad = ~np.isfinite(v) | ((v < low) if closed else (v <= low))
        if attr == "pennation_at_optimal":
            bad |= v >= math.pi / 2
        if np.any(bad):
            val = float(v[bad].reshape(-1)[0])
            raise ModelError(f"{where}: {attr} = {val!r} {unit} is not physical ({rule})")
