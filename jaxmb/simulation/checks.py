"""Checks of a simulation's arguments, made before anything is compiled (:func:`jaxmb.simulate`,
:func:`jaxmb.simulate_batch`, :func:`jaxmb.erk_solve`, :func:`jaxmb.batched_rk4`): tolerances,
steps and step sizes positive, the time span finite and forward, the initial state finite.

A NaN initial state would otherwise integrate into a "maximum number of steps reached" report, and
a negative ``rtol``/``atol`` into a "successful" trajectory far from the solution.
"""

from __future__ import annotations

import math

import jax
import numpy as np

__all__ = ["check_run_arguments", "check_max_steps", "check_time_span"]


def check_max_steps(max_steps, where: str = "simulate", name: str = "max_steps") -> None:
    """Raise ``ValueError`` unless ``max_steps`` is a positive integer."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"{where}: {name} must be a positive integer, got {max_steps!r}")


def check_time_span(t0, t1, where: str) -> None:
    """Raise ``ValueError`` unless ``t0 < t1`` are finite times (s); traced values pass."""
    if isinstance(t0, jax.core.Tracer) or isinstance(t1, jax.core.Tracer):
        return
    a, b = float(np.asarray(t0)), float(np.asarray(t1))
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise ValueError(f"{where}: need finite times t0 < t1 (s), got t0={a}, t1={b}")


def check_run_arguments(
    q0,
    qd0,
    rtol,
    atol,
    dt0,
    dtmin,
    coordinate_names=(),
    ts=None,
    where: str = "simulate",
    coordinate_axis: int = -1,
    names: tuple[str, str] = ("q0", "qd0"),
) -> None:
    """Raise ``ValueError`` naming the argument and its value: ``rtol``/``atol`` not positive and
    finite, ``dt0``/``dtmin`` given and not positive, a non-finite entry of ``q0``/``qd0`` (named by
    coordinate, found on ``coordinate_axis``: 0 for batch-last states) or of ``ts``. Traced values
    (inside ``jax.jit``) and arguments given as None are not checked."""
    if ts is not None and not isinstance(ts, jax.core.Tracer):
        t = np.asarray(ts, dtype=float).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(t))
        if bad.size:
            raise ValueError(f"{where}: ts[{bad[0]}] = {t[bad[0]]} is not a finite time")
    for name, v in (("rtol", rtol), ("atol", atol), ("dt0", dt0), ("dtmin", dtmin)):
        if v is None or isinstance(v, jax.core.Tracer):
            continue
        if isinstance(v, float | int | np.floating) and not isinstance(v, bool):
            if math.isfinite(v) and v > 0:  # a plain number: no array round trip (µs per call)
                continue
        a = np.asarray(v, dtype=float)
        if not np.all(np.isfinite(a) & (a > 0)):
            raise ValueError(f"{where}: {name} must be a positive number, got {v!r}")
    for name, x in zip(names, (q0, qd0), strict=True):
        if x is None or isinstance(x, jax.core.Tracer):
            continue
        a = np.asarray(x, dtype=float)
        if np.isfinite(a).all():
            continue
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            idx = tuple(int(i) for i in bad[0])
            k = idx[coordinate_axis]
            coord = f" ({coordinate_names[k]})" if k < len(coordinate_names) else ""
            raise ValueError(
                f"{where}: the initial state {name}{list(idx)}{coord} = {a[idx]} is not finite"
            )
