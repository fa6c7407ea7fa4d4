"""The compiled call behind :func:`jaxmb.simulate` and :func:`jaxmb.simulate_batch`: a model is
split once into its arrays (jit arguments) and its static structure (a hashable jit static
argument), and the split is cached while the model object lives, so that a warm call neither
re-flattens nor re-hashes a model of many nested modules (``equinox.filter_jit`` does both on every
call: ~0.1 ms, a large part of a solve of a cheap right-hand side)."""

from __future__ import annotations

import functools
import weakref

import equinox as eqx
import jax

__all__ = ["Structure", "split_tree", "split_options", "split_model", "compiled_solve"]


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


@functools.partial(jax.jit, static_argnames=("structure", "tau_structure", "solve", "kw_structure"))
def compiled_solve(
    arrays, tau_arrays, kw_arrays, args, *, structure, tau_structure, solve, kw_structure
):
    """The solve ``solve(model, *args, tau, ..., **kw)`` compiled once per model structure (the
    model's arrays are arguments, not constants)."""
    model, pm = structure.rebuild(arrays)
    q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin = args
    tau = tau_structure.rebuild(tau_arrays)
    kw = kw_structure.rebuild(kw_arrays)
    if pm is not None:
        kw["pm"] = pm
    return solve(model, q0, qd0, t0, t1, ts, tau, dt0, rtol, atol, dtmin, **kw)
