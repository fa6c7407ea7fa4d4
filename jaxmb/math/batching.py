"""A per-item function whose ``jax.vmap`` runs the batch in cache-sized chunks.

``vmap`` of a per-pose computation batches every intermediate over the whole batch: at 4096 poses
the muscle-path intermediates of a 92-muscle model took 2 GB and left the cache on every step.
:func:`chunked_vmap` gives the function a batching rule (``jax.custom_batching.custom_vmap``)
that runs ``lax.map`` over chunks of the batch, each chunk a plain ``vmap`` (the same per-item
program, so the same numbers to round-off), on a CPU; an accelerator takes the whole batch at once
(a loop over chunks would serialize it). Derivatives, forward and reverse, are the per-item
function's (a ``custom_jvp`` around the ``custom_vmap``, whose rule is linear in the tangents).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

__all__ = ["chunked_vmap"]


def _cpu() -> bool:
    return jax.default_backend() == "cpu"


def chunked_vmap(fn: Callable, chunk: int) -> Callable:
    """``fn(*args)`` (pytrees of arrays) unchanged for one item; under ``jax.vmap`` over a batch
    larger than ``chunk`` on a CPU, ``lax.map`` over chunks of ``chunk`` items, each a ``vmap`` of
    ``fn`` (the last chunk padded with copies of the last item, which are dropped). Unbatched
    arguments are shared by every chunk. Nested ``vmap`` (a batch of batches) and accelerators get
    a plain ``vmap``."""
    if chunk < 1:
        raise ValueError(f"chunked_vmap: chunk must be >= 1, got {chunk}")

    def call(*args):
        # trace fn once; the custom rules replay its jaxpr (re-running a large Python function
        # for the primal, the batching rule and the JVP would trace it three times: Hamner
        # 2010's 92 muscle paths took 1.5 s a trace)
        flat, tree = jax.tree_util.tree_flatten(args)
        closed, shapes = jax.make_jaxpr(
            lambda *leaves: fn(*jax.tree_util.tree_unflatten(tree, leaves)), return_shape=True
        )(*flat)
        out_tree = jax.tree_util.tree_structure(shapes)

        def replay(*leaves):
            out = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
            return jax.tree_util.tree_unflatten(out_tree, out)

        return _chunked(replay, chunk)(*flat)

    return call


def _chunked(fn: Callable, chunk: int) -> Callable:
    @jax.custom_batching.custom_vmap
    def one(*args):
        return fn(*args)

    @one.def_vmap
    def rule(axis_size, in_batched, *args):
        axes = jax.tree_util.tree_map(lambda b: 0 if b else None, in_batched)
        if not any(jax.tree_util.tree_leaves(in_batched)):  # (a vmap over tangents only)
            out = fn(*args)
            return out, jax.tree_util.tree_map(lambda _: False, out)
        if axis_size <= chunk or not _cpu():
            out = jax.vmap(fn, in_axes=tuple(axes))(*args)
            return out, jax.tree_util.tree_map(lambda _: True, out)
        n = -(-axis_size // chunk)
        pad = n * chunk - axis_size

        def split(x, b):
            if not b:
                return x
            if pad:
                x = jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)])
            return x.reshape((n, chunk) + x.shape[1:])

        flat_args, tree = jax.tree_util.tree_flatten(args)
        flat_b = jax.tree_util.tree_leaves(in_batched)
        batched = [split(x, b) for x, b in zip(flat_args, flat_b, strict=True) if b]
        shared = [x for x, b in zip(flat_args, flat_b, strict=True) if not b]

        def one_chunk(xs):
            it_b, it_s = iter(xs), iter(shared)
            leaves = [next(it_b) if b else next(it_s) for b in flat_b]
            return jax.vmap(fn, in_axes=tuple(axes))(*jax.tree_util.tree_unflatten(tree, leaves))

        out = jax.lax.map(one_chunk, batched)
        out = jax.tree_util.tree_map(
            lambda y: y.reshape((n * chunk,) + y.shape[2:])[:axis_size], out
        )
        return out, jax.tree_util.tree_map(lambda _: True, out)

    @jax.custom_jvp
    def differentiable(*args):
        return one(*args)

    differentiable.defjvp(_jvp_of(fn, one), symbolic_zeros=True)
    return differentiable


def _jvp_of(fn, one):
    """The JVP rule: the value from ``one`` (its batching rule under vmap), the tangents from a
    JVP of ``fn`` in the arguments whose tangents are not symbolic zeros only."""

    def rule(primals, tangents):
        flat_p, tree = jax.tree_util.tree_flatten(primals)
        flat_t = jax.tree_util.tree_leaves(tangents, is_leaf=lambda t: isinstance(t, SymbolicZero))
        live = [i for i, t in enumerate(flat_t) if not isinstance(t, SymbolicZero)]
        out = one(*primals)
        if not live:
            return out, jax.tree_util.tree_map(jnp.zeros_like, out)

        def of_live(*values):
            leaves = list(flat_p)
            for i, v in zip(live, values, strict=True):
                leaves[i] = v
            return fn(*jax.tree_util.tree_unflatten(tree, leaves))

        _, tan = jax.jvp(of_live, [flat_p[i] for i in live], [flat_t[i] for i in live])
        return out, tan

    return rule
