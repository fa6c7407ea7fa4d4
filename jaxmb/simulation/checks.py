"""Checks of a simulation's arguments, made before anything is compiled (:func:`jaxmb.simulate`,
:func:`jaxmb.simulate_batch`): tolerances and steps positive, the initial state finite.

A NaN initial state would otherwise integrate into a "maximum number of steps reached" report, and
a negative ``rtol``/``atol`` into a "successful" trajectory far from the solution.
"""

from __future__ import annotations

import jax
import numpy as np

__all__ = ["check_run_arguments", "check_max_steps"]


def check_max_steps(max_steps) -> None:
    """Raise ``ValueError`` unless ``max_steps`` is a positive integer."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"simulate: max_steps must be a positive integer, got {max_steps!r}")


def check_run_arguments(q0, qd0, rtol, atol, dt0, dtmin, coordinate_names=(), ts=None) -> None:
    """Raise ``ValueError`` naming the argument and its value: ``rtol``/``atol`` not positive and
    finite, ``dt0``/``dtmin`` given and not positive, a non-finite entry of ``q0``/``qd0`` (named by
    coordinate) or of ``ts``. Traced values (inside ``jax.jit``) are not checked."""
    if ts is not None and not isinstance(ts, jax.core.Tracer):
        t = np.asarray(ts, dtype=float).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise ValueError(f"simulate: ts[{bad[0]}] = {t[bad[0]]} is not a finite time")
    for name, v in (("rtol", rtol), ("atol", atol), ("dt0", dt0), ("dtmin", dtmin)):
        if v is None or isinstance(v, jax.core.Tracer):
            continue
        a = np.asarray(v, dtype=float)
        if not np.all(np.isfinite(a) & (a > 0)):
            raise ValueError(f"simulate: {name} must be a positive number, got {v!r}")
    for name, x in (("q0", q0), ("qd0", qd0)):
        if isinstance(x, jax.core.Tracer):
            continue
        a = np.asarray(x, dtype=float)
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            idx = tuple(int(i) for i in bad[0])
            k = idx[-1]
            coord = f" ({coordinate_names[k]})" if k < len(coordinate_names) else ""
            raise ValueError(
                f"simulate: the initial state {name}{list(idx)}{coord} = {a[idx]} is not finite"
            )
