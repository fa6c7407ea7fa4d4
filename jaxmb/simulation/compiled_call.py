"""The compiled call behind :func:`jaxmb.simulate` and :func:`jaxmb.simulate_batch`, and its set-up.

A model is split once into its arrays (jit arguments) and its static structure (a hashable jit
static argument), and the split is cached while the model object lives, so that a warm call neither
re-flattens nor re-hashes a model of many nested modules (``equinox.filter_jit`` does both on every
call: ~0.1 ms, a large part of a solve of a cheap right-hand side). The set-up of a call (checked,
converted times and tolerances, the splits, the route's report) is a :class:`Call`;
:func:`jaxmb.simulate` keeps it per model and plain-number arguments (:func:`keep`), so that a
repeated call converts the initial state and calls the compiled solve, nothing else (times and
tolerances are checked and converted once, with the rest of the set-up).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np

from ..xla_options import program_options
from .checks import check_run_arguments

__all__ = [
    "SOLVERS",
    "Structure",
    "split_tree",
    "split_options",
    "split_model",
    "compiled_solve",
    "SimulationError",
    "Call",
    "CALLS",
    "keep",
    "NO_TAU",
    "set_up",
    "checked_states",
    "call_solve",
    "prepare",
    "first_line",
]


class Structure:
    """The static part of a pytree (its tree structure and non-array leaves) as one ``jax.jit``
    static argument: hashed once, compared by identity first, so that a warm call does not
    re-flatten and re-hash a model of many nested modules (``equinox.filter_jit`` does both on
    every call: ~0.1 ms per call for a model, a large part of a solve of a cheap right-hand side).
    Two models of the same structure compare equal and share the compiled solve."""

    __slots__ = ("treedef", "static", "_hash")

    def __init__(self, treedef, static):
        self.treedef, self.static = treedef, static
        self._hash = hash((treedef, static))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (
            isinstance(other, Structure)
            and self._hash == other._hash
            and self.treedef == other.treedef
            and self.static == other.static
        )

    def rebuild(self, arrays):
        it = iter(arrays)
        leaves = [next(it) if x is _ARRAY else x for x in self.static]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


_ARRAY = "<array leaf>"  # marks where an array leaf goes back in a Structure


def split_tree(tree) -> tuple[list, Structure]:
    """(array leaves, static structure) of a pytree, as ``equinox.filter_jit`` splits it."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    arrays = [x for x in leaves if eqx.is_array(x)]
    static = tuple(_ARRAY if eqx.is_array(x) else x for x in leaves)
    return arrays, Structure(treedef, static)


_SPLITS: dict[int, tuple] = {}
_OPTION_SPLITS: dict = {}


def split_options(options: dict) -> tuple[list, Structure]:
    """:func:`split_tree` of a dict of solve options (solver name, max_steps, …), cached by value
    when every value is hashable (the common case: a warm call skips the flatten)."""
    try:
        key = tuple(sorted(options.items()))
        hit = _OPTION_SPLITS.get(key)
    except TypeError:  # an unhashable option (a pytree of in_axes): no cache
        return split_tree(options)
    if hit is None:
        hit = split_tree(options)
        if len(_OPTION_SPLITS) < 256:  # bounded: options are few in practice
            _OPTION_SPLITS[key] = hit
    return hit


def split_model(model, pm) -> tuple[list, Structure]:
    """:func:`split_tree` of ``(model, None)``, or ``(None, premodel)`` when a premodel is the
    right-hand side, cached while the model object lives (a pure
    function of the model: its arrays and structure do not change). Not cached when the model
    holds tracers (simulate inside jit or grad over the model)."""
    key = id(model)
    hit = _SPLITS.get(key)
    if hit is not None and hit[0]() is model and hit[1] is pm:
        return hit[2], hit[3]
    # with a premodel the solve reads nothing of the model: leaving its arrays out of the call
    # saves their dispatch (28 leaves for Andrews' squeezer)
    arrays, structure = split_tree((model if pm is None else None, pm))
    if not any(isinstance(x, jax.core.Tracer) for x in arrays):
        try:
            ref = weakref.ref(model, lambda _: _SPLITS.pop(key, None))
            _SPLITS[key] = (ref, pm, arrays, structure)
        except TypeError:  # not weak-referenceable: no cache
            pass
    return arrays, structure


def _solve(arrays, tau_arrays, kw_arrays, args, *, structure, tau_structure, solve, kw_structure):
    model, pm = structure.rebuild(arrays)
    q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin = args
    tau = tau_structure.rebuild(tau_arrays)
    kw = kw_structure.rebuild(kw_arrays)
    if pm is not None:
        kw["pm"] = pm
    return solve(model, q0, qd0, t0, t1, ts, tau, dt0, rtol, atol, dtmin, **kw)


_STATIC = ("structure", "tau_structure", "solve", "kw_structure")
_PLAIN_SOLVE = jax.jit(_solve, static_argnames=_STATIC)


@functools.cache
def _own_solve():
    """_solve jitted with jaxmb's compiler options (made on first use: checking them compiles)."""
    options = program_options()
    return (
        jax.jit(_solve, static_argnames=_STATIC, compiler_options=options)
        if options
        else _PLAIN_SOLVE
    )


def compiled_solve(*args, **kwargs):
    """The solve ``solve(model, *args, tau, ..., **kw)`` compiled once per model structure (the
    model's arrays are arguments, not constants). Called as the top-level program, it is compiled
    with jaxmb's compiler options (:func:`jaxmb.xla_options.program_options`: diffrax's step loop
    then compiles into one function); inside a user's trace (which JAX compiles with its own
    options) as a plain jit."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(args)):
        return _PLAIN_SOLVE(*args, **kwargs)
    return _own_solve()(*args, **kwargs)


SOLVERS = ("tsit5", "dopri5", "dopri8", "kvaerno5", "kencarp4")


class SimulationError(RuntimeError):
    """An integration that did not reach t1, with the cause, time and state in the message."""


NO_TAU = split_tree(None)  # the split of tau=None, made once


def as_float(x, ft):
    """x as a float array (of the default float type ``ft``) for the compiled solve: a JAX array
    (or tracer) kept as it is when it already has that type, anything else through NumPy
    (``jnp.asarray`` of a Python scalar costs ~0.1 ms of dispatch, a large part of a solve of a
    cheap right-hand side)."""
    if isinstance(x, jax.Array):
        return x if x.dtype == ft else x.astype(ft)
    return np.asarray(x, dtype=ft)


def checked_states(model, q0, qd0, ft, want: tuple, batch_dims: int = 0):
    """(q0, q̇0) as float arrays of type ``ft``, their shapes checked: (batch…, *want)."""
    q0, qd0 = as_float(q0, ft), as_float(qd0, ft)
    if q0.shape[batch_dims:] != want or qd0.shape[batch_dims:] != want:
        raise ValueError(
            f"initial state must have shape {(('batch',) * batch_dims) + want}: got q0 {q0.shape}, "
            f"qd0 {qd0.shape} for model {model.name!r} with nq={model.nq}"
        )
    return q0, qd0


def prepare(model, q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin, solver, batch_dims=0):
    """Checked (q0, q̇0, t0, t1, ts, dt0, rtol, atol, dtmin), converted for the compiled solve."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose one of {SOLVERS}")
    ft = np.dtype(np.float64 if jax.config.jax_enable_x64 else np.float32)  # jnp.result_type(float)
    q0, qd0 = checked_states(model, q0, qd0, ft, (model.nq,), batch_dims)
    times = prepare_times(t0, t1, ts, dt0, rtol, atol, dtmin, ft)
    check_run_arguments(q0, qd0, None, None, None, None, model.coordinate_names)
    return q0, qd0, *times


def prepare_times(t0, t1, ts, dt0, rtol, atol, dtmin, ft):
    """Checked (t0, t1, ts, dt0, rtol, atol, dtmin) as float arrays of type ``ft`` (ts None or
    (nt,); dt0 None when not given; dtmin defaulting to 1e-14·(t1 − t0))."""
    if not (np.isfinite(float(t0)) and np.isfinite(float(t1))) or float(t1) <= float(t0):
        raise ValueError(f"need finite t0 < t1, got t0={t0}, t1={t1}")
    if ts is not None:
        ts = as_float(ts, ft)
        tsn = np.asarray(ts)
        if tsn.ndim != 1 or tsn.size == 0:
            raise ValueError(f"ts must be a non-empty 1-D array of times, got shape {tsn.shape}")
        if np.any(np.diff(tsn) < 0) or tsn[0] < float(t0) or tsn[-1] > float(t1):
            raise ValueError(f"ts must be non-decreasing within [t0, t1] = [{t0}, {t1}]")
    check_run_arguments(None, None, rtol, atol, dt0, dtmin, ts=ts)
    if dtmin is None:
        dtmin = 1e-14 * (float(t1) - float(t0))
    f = lambda x: None if x is None else as_float(x, ft)
    return f(t0), f(t1), ts, f(dt0), f(rtol), f(atol), f(dtmin)


def first_line(e: Exception) -> str:
    """The message of an equinox runtime error without its stack-trace boilerplate (also when it
    arrives wrapped in XLA's runtime error, as from a plain ``jax.jit``)."""
    for ln in str(e).splitlines():
        _, sep, msg = ln.partition("EquinoxRuntimeError: ")
        if sep and msg.strip():
            return msg.strip()
    for ln in str(e).splitlines():
        _, sep, msg = ln.partition("RuntimeError: ")
        if sep and msg.strip() and "stack" not in msg:
            return msg.strip()
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


class Call(NamedTuple):
    """A call of the compiled solve, set up: all that depends on the model and the arguments but
    not on the initial state. :func:`simulate` keeps it per (model, plain-number arguments) in
    ``CALLS``: around a cheap solve (Andrews' premodel: ~0.2 ms) the set-up took as long as the
    solve, and each of its lines 10–20× longer when other work had evicted it from the CPU's
    caches."""

    model: Any  # the model (a weak reference to it once kept)
    caller: str
    solver: str
    ft: Any  # the state's float dtype
    want: tuple  # the state's shape (without batch axes)
    args: tuple  # (t0, t1, ts, dt0, rtol, atol, dtmin), checked and converted
    arrays: list
    structure: Any
    tau_arrays: list
    tau_structure: Any
    kw_arrays: list
    kw_structure: Any
    solve: Callable
    max_steps: int
    traced: bool  # an argument is traced (inside the user's jit): never kept
    info: dict  # what the call adds to Trajectory.stats


CALLS: dict[tuple, Call] = {}


def keep(key: tuple, call: Call, model) -> None:
    """Keep a concrete call's set-up under ``key`` while the model lives (at most 256 entries),
    its times and tolerances moved to the device once (not transferred on every call)."""
    if call.traced or len(CALLS) >= 256:
        return
    ref = weakref.ref(model, lambda _: CALLS.pop(key, None))
    CALLS[key] = call._replace(model=ref, args=jax.device_put(call.args))


def set_up(
    caller, solve, model, q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin, tau, solver, *,
    batch_dims, **static,
):  # fmt: skip
    """What :func:`simulate` and :func:`simulate_batch` share before the solve: checked,
    converted inputs and the split of model, tau and options; returns ``(call, q0, q̇0)``."""
    args = prepare(model, q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin, solver, batch_dims)
    q0, qd0, *times = args
    if batch_dims and q0.shape[0] != qd0.shape[0]:
        raise ValueError(
            f"q0s and qd0s have different batch sizes: {q0.shape[0]} vs {qd0.shape[0]}"
        )
    pm = static.pop("pm", None)
    arrays, structure = split_model(model, pm)
    tau_arrays, tau_structure = NO_TAU if tau is None else split_tree(tau)
    kw_arrays, kw_structure = split_options(dict(static, solver=solver))  # model_axes: a pytree
    leaves = (*jax.tree_util.tree_leaves((args, tau_arrays)), *arrays)
    traced = any(isinstance(x, jax.core.Tracer) for x in leaves)
    call = Call(
        model, caller, solver, q0.dtype, q0.shape[batch_dims:], tuple(times), arrays, structure,
        tau_arrays, tau_structure, kw_arrays, kw_structure, solve, static["max_steps"], traced, {},
    )  # fmt: skip
    return call, q0, qd0


def call_solve(call: Call, model, q0, qd0):
    """The compiled solve of a set-up call; a check inside the right-hand side that fired (an
    implicit joint map that did not converge, a singular mass matrix) becomes a
    :class:`SimulationError` naming the caller, model and solver."""
    try:
        traj = compiled_solve(
            call.arrays, call.tau_arrays, call.kw_arrays, (q0, qd0, *call.args),
            structure=call.structure, tau_structure=call.tau_structure, solve=call.solve,
            kw_structure=call.kw_structure,
        )  # fmt: skip
    except Exception as e:  # XLA reports a check that fired as a runtime or value error
        if not isinstance(e, eqx.EquinoxRuntimeError) and "EquinoxRuntimeError" not in str(e):
            raise
        if not call.traced:  # the state check inside the solve fired: name the entry
            check_run_arguments(q0, qd0, None, None, None, None, model.coordinate_names)
        raise SimulationError(
            f"{call.caller}({model.name!r}, solver={call.solver!r}): the right-hand side raised "
            f"during integration: {first_line(e)}"
        ) from e
    traj.stats["max_steps"] = call.max_steps  # a Python int, as the caller gave it
    return traj
