"""Checks of the analyses' arguments, made before anything is compiled: array shapes named with
their dimensions, sample intervals and tolerances positive, bounds ordered, data finite where NaN
cannot mean anything.

Only concrete values are checked: inside ``jax.jit`` the values are tracers and pass (shapes are
static and are always checked). Without these checks a negative ``dt`` silently flips a
derivative's sign, ``lower > upper`` is "solved" by clipping, a body index past the last body reads
the last body (JAX clamps indices), and a non-positive resampling step never ends.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

__all__ = [
    "check_bounds",
    "check_finite",
    "check_indices",
    "check_nonnegative",
    "check_positive",
    "check_shape",
]


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_positive(
    value, where: str, name: str, unit: str = "", *, integer: bool = False, error=ValueError
) -> None:
    """Raise ``error`` (``ValueError`` or a subclass) unless ``value`` is a positive finite number
    (a positive ``int`` when ``integer``), naming ``name``, its unit and the value given."""
    if integer:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise error(f"{where}: {name} must be a positive integer, got {value!r}")
        return
    if value is None or not _concrete(value):
        return
    a = np.asarray(value, dtype=float)
    if a.ndim or not (np.isfinite(a) and a > 0):
        u = f" ({unit})" if unit else ""
        raise error(f"{where}: {name}{u} must be a positive finite number, got {value!r}")


def check_shape(
    x, shape: Sequence[int | str], where: str, name: str, error=ValueError
) -> tuple[int, ...]:
    """Raise ``ValueError`` unless ``x`` has ``shape``: entries are sizes, or a dimension's name
    (``"nt"``) that takes the size given and must agree wherever the same name recurs. Returns the
    shape given."""
    got = tuple(np.shape(x))
    sizes: dict[str, int] = {}
    ok = len(got) == len(shape)
    if ok:
        for g, s in zip(got, shape, strict=True):
            if isinstance(s, str):
                if sizes.setdefault(s, g) != g:
                    ok = False
            elif g != s:
                ok = False
    if not ok:
        want = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise error(f"{where}: {name} must have shape {want}, got shape {got}")
    return got


def _refuse_first_bad(x, good, where: str, name: str, labels: Sequence[str], want: str) -> None:
    """Raise ``ValueError`` naming the first entry of a concrete ``x`` where ``good`` (an
    elementwise predicate on the float array) fails, with its label along the last axis."""
    if x is None or not _concrete(x):
        return
    a = np.asarray(x, dtype=float)
    bad = np.argwhere(~good(a))
    if bad.size:
        idx = tuple(int(i) for i in bad[0])
        label = f" ({labels[idx[-1]]})" if idx and idx[-1] < len(labels) else ""
        raise ValueError(f"{where}: {name}{list(idx)}{label} = {a[idx]} {want}")


def check_finite(x, where: str, name: str, labels: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` naming the first non-finite entry of a concrete ``x`` (and its label
    along the last axis, when ``labels`` are given)."""
    _refuse_first_bad(x, np.isfinite, where, name, labels, "is not finite")


def check_nonnegative(x, where: str, name: str, labels: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` naming the first entry of a concrete ``x`` that is negative or NaN
    (weights: +inf is refused too, since it makes every other term irrelevant)."""
    nonnegative = lambda a: np.isfinite(a) & (a >= 0)  # noqa: E731
    _refuse_first_bad(x, nonnegative, where, name, labels, "must be a finite number >= 0")


def check_bounds(lower, upper, where: str, labels: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` naming the first entry where ``lower > upper`` or either is NaN
    (±inf bounds are allowed)."""
    if not (_concrete(lower) and _concrete(upper)):
        return
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    bad = np.flatnonzero(~(lo <= hi))
    if bad.size:
        i = int(bad[0])
        label = f" ({labels[i]})" if i < len(labels) else ""
        raise ValueError(f"{where}: bound {i}{label} has lower {lo[i]} > upper {hi[i]} (or NaN)")


def check_indices(index, size: int, where: str, name: str, *, allow_ground: bool = True) -> None:
    """Raise ``ValueError`` unless every entry of a concrete integer ``index`` lies in
    ``[-1, size)`` (``-1``: ground, when ``allow_ground``) — JAX would clamp an index past the
    end to the last element."""
    if not _concrete(index):
        return
    a = np.asarray(index)
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{where}: {name} must be integers, got dtype {a.dtype}")
    low = -1 if allow_ground else 0
    bad = np.flatnonzero((a < low) | (a >= size))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{where}: {name}[{i}] = {int(a.reshape(-1)[i])} is not a body index in [{low}, {size})"
        )
