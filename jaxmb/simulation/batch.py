"""Batched, parameter-varied and device-sharded evaluation of any jaxmb function.

Every array in a :class:`~jaxmb.model.Model` is a traced pytree leaf, so one compiled function
serves every parameter value of a model *structure* (topology, joint types, names and the static
fields of the joint map and force elements). This module builds batches and spreads them:

* :func:`stack_models` / :func:`vary` give a *batched model*: the same structure with a leading
  batch axis on every array leaf, ready for ``eqx.filter_vmap`` (its default ``in_axes`` maps every
  array over axis 0).
* :func:`batch_mesh` / :func:`shard_batch` evaluate ``vmap(fn)`` with the batch axis split over a
  one-axis :class:`jax.sharding.Mesh` of all devices (``NamedSharding(mesh, P("batch"))``); on a
  CPU host, ``XLA_FLAGS=--xla_force_host_platform_device_count=k`` turns one process into k devices
  and so uses k cores, which plain ``vmap`` does not.
* :func:`simulate_sharded` integrates many systems in one compiled call, split over the devices
  (:func:`jaxmb.simulation.simulate_batch`, the one batched driver, on one device).

Compile once per structure: the batched callables are cached on ``(fn, in_axes)`` and everything
that is an array (parameters, states, ``t1``, ``ts``) is traced, so new values never retrace.
Plain functions passed to :func:`shard_batch` are cached by identity; an ``eqx.Module`` callable is
passed as a pytree (its arrays traced), so a fresh module per call does not recompile either.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..model import Model, ModelError
from .driver import simulate_batch

__all__ = [
    "BATCH_AXIS",
    "batch_mesh",
    "batch_size",
    "stack_models",
    "unstack_model",
    "vary",
    "resolve_where",
    "shard_batch",
    "simulate_sharded",
]

BATCH_AXIS = "batch"


# ----------------------------------------------------------------------------------------------
# batched models


def _is_array(x) -> bool:
    return eqx.is_array(x)


def stack_models(models: Sequence[Model]) -> Model:
    """Stack models of one structure into a batched model (leading axis B on every array leaf).

    Args:
        models: B models that differ only in the values of their array leaves.

    Returns:
        A model whose array leaves have shape ``(B, *leaf.shape)``; map over it with
        ``eqx.filter_vmap(fn)(batched_model, ...)``.

    Raises:
        ModelError: when the models differ in structure (naming the first model that does).
    """
    models = list(models)
    if not models:
        raise ModelError("stack_models: need at least one model")
    arrays0, static0 = eqx.partition(models[0], _is_array)
    tdef0 = jax.tree_util.tree_structure(arrays0)
    parts = [arrays0]
    for k, m in enumerate(models[1:], start=1):
        a, s = eqx.partition(m, _is_array)
        if jax.tree_util.tree_structure(a) != tdef0 or not _static_equal(s, static0):
            raise ModelError(
                f"stack_models: model {k} ({getattr(m, 'name', '?')!r}) has a different structure "
                f"from model 0 ({getattr(models[0], 'name', '?')!r}); only parameter values may "
                "differ"
            )
        for x, y in zip(
            jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(arrays0), strict=True
        ):
            if jnp.shape(x) != jnp.shape(y):
                raise ModelError(
                    f"stack_models: model {k} has a leaf of shape {jnp.shape(x)} where model 0 has "
                    f"{jnp.shape(y)}"
                )
        parts.append(a)
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *parts)
    return eqx.combine(stacked, static0)


def _static_equal(a, b) -> bool:
    la, ta = jax.tree_util.tree_flatten(a, is_leaf=lambda x: x is None)
    lb, tb = jax.tree_util.tree_flatten(b, is_leaf=lambda x: x is None)
    if ta != tb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=True):
        try:
            if x is not y and x != y:
                return False
        except Exception:  # an un-comparable static leaf: fall back to identity
            if x is not y:
                return False
    return True


def resolve_where(where) -> Callable[[Any], Any]:
    """A model -> leaf (or tuple of leaves) getter from a callable or a dotted attribute path such
    as ``"mass"`` or ``"forces.0.stiffness"`` (shared by :func:`vary` and identification)."""
    if callable(where):
        return where
    if isinstance(where, str):
        names = where.split(".")

        def get(m):
            for n in names:
                m = m[int(n)] if n.isdigit() else getattr(m, n)
            return m

        return get
    raise TypeError(
        f"where must be a callable model -> leaf(s) or a dotted attribute path, got {where!r}"
    )


def vary(model: Model, where, values, *, broadcast: bool = True) -> Model:
    """A batched model: ``model`` with the leaf (or leaves) at ``where`` replaced by ``values``.

    Args:
        model: an unbatched model.
        where: ``lambda m: m.mass`` (one leaf) or ``lambda m: (m.mass, m.d)`` (several), or a dotted
            path such as ``"mass"`` or ``"forces.0.stiffness"``.
        values: for one leaf an array of shape ``(B, *leaf.shape)``; for several, a matching tuple.
            Python floats in the model become arrays here, so they are traced from now on.
        broadcast: also give every other array leaf the batch axis (default), so that the result
            maps with ``eqx.filter_vmap``'s default ``in_axes``. With ``False`` only the varied
            leaves carry the batch axis (cheaper for huge batches; map with explicit ``in_axes``).

    Returns:
        The batched model (same structure, leading axis B).
    """
    get = resolve_where(where)
    target = get(model)
    several = isinstance(target, tuple)
    targets = target if several else (target,)
    vals = tuple(values) if several else (values,)
    if len(vals) != len(targets):
        raise ModelError(f"vary: {len(targets)} leaves selected but {len(vals)} value arrays given")
    vals = tuple(jnp.asarray(v) for v in vals)
    sizes = {int(v.shape[0]) if v.ndim else -1 for v in vals}
    if len(sizes) != 1 or -1 in sizes:
        raise ModelError(
            f"vary: every value array needs the same leading batch axis, got shapes "
            f"{[tuple(v.shape) for v in vals]}"
        )
    B = sizes.pop()
    for k, (t, v) in enumerate(zip(targets, vals, strict=True)):
        if v.shape[1:] != jnp.shape(t):
            raise ModelError(
                f"vary: values[{k}] has shape {tuple(v.shape)}, expected (B, *{jnp.shape(t)}) "
                f"for the selected leaf"
            )
    if broadcast:
        model = jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x, (B, *x.shape)) if _is_array(x) else x, model
        )
    new = tuple(v.astype(jnp.result_type(t, float)) for t, v in zip(targets, vals, strict=True))
    return eqx.tree_at(get, model, new if several else new[0], is_leaf=lambda x: x is None)


def batch_size(batched: Any) -> int:
    """Leading-axis length of a batched pytree (the first array leaf's)."""
    for x in jax.tree_util.tree_leaves(batched):
        if _is_array(x) and x.ndim:
            return int(x.shape[0])
    raise ValueError("batch_size: the pytree has no array leaf with a batch axis")


def unstack_model(batched: Model, i: int) -> Model:
    """Element ``i`` of a batched model (every array leaf indexed on its leading axis)."""
    return jax.tree_util.tree_map(lambda x: x[i] if _is_array(x) and x.ndim else x, batched)


# ----------------------------------------------------------------------------------------------
# vmap + sharding


def batch_mesh(devices=None) -> Mesh:
    """A one-axis mesh named ``"batch"`` over ``devices`` (default: every device, all processes)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (BATCH_AXIS,))


def _normalize_axes(in_axes, nargs: int) -> tuple:
    if in_axes is None or isinstance(in_axes, int):
        axes = (0 if in_axes is None else in_axes,) * nargs
    else:
        axes = tuple(in_axes)
    if len(axes) != nargs:
        raise ValueError(f"in_axes has {len(axes)} entries for {nargs} arguments")
    for a in axes:
        if a not in (0, None):
            raise ValueError(f"in_axes entries must be 0 (batched) or None (shared), got {a!r}")
    return axes


@functools.lru_cache(maxsize=256)
def _vmapped(fn, axes: tuple):
    in_axes = tuple(eqx.if_array(0) if a == 0 else None for a in axes)
    return eqx.filter_jit(eqx.filter_vmap(fn, in_axes=in_axes))


def _batched_jit(fn, axes: tuple):
    """jit(vmap(fn)) cached per (fn, axes); an unhashable fn (an eqx.Module) is passed as an arg."""
    try:
        hash(fn)
    except TypeError:
        return functools.partial(_vmapped(_call_module, (None, *axes)), fn)
    return _vmapped(fn, axes)


def _call_module(fn, *args):
    return fn(*args)


def shard_batch(fn: Callable, *batched_args, mesh: Mesh | None = None, in_axes=0):
    """Compiled ``vmap(fn)(*batched_args)`` with the batch axis split over the devices of ``mesh``.

    Args:
        fn: a function of unbatched arguments returning a pytree. Plain functions are cached by
            identity (define them once, not as a fresh lambda per call); an ``eqx.Module`` callable
            is passed through as a pytree, so its array fields are traced.
        *batched_args: pytrees; the array leaves of every batched argument carry the batch axis 0.
        mesh: a one-axis mesh (default :func:`batch_mesh`, all devices). Its axis name is used.
        in_axes: 0 (every argument batched) or a tuple with 0 (batched) / None (shared, replicated
            on every device) per argument.

    Returns:
        ``fn``'s output pytree with a leading batch axis, sharded over the mesh. A batch that does
        not divide by the device count is padded with copies of its last element and trimmed.

    In a multi-process run (``jax.distributed``), each process passes its *local* slice of the batch
    (the same size on every process, a multiple of its local device count) and gets back the
    global sharded arrays; gather them with ``jax.experimental.multihost_utils.process_allgather``.
    """
    mesh = batch_mesh() if mesh is None else mesh
    name = mesh.axis_names[0]
    axes = _normalize_axes(in_axes, len(batched_args))
    sizes = {batch_size(a) for a, ax in zip(batched_args, axes, strict=True) if ax == 0}
    if len(sizes) != 1:
        raise ValueError(
            f"shard_batch: batched arguments disagree on the batch size: {sorted(sizes)}"
        )
    B = sizes.pop()
    row = NamedSharding(mesh, P(name))
    rep = NamedSharding(mesh, P())
    if jax.process_count() > 1:
        put = lambda x: jax.make_array_from_process_local_data(row, np.asarray(x))
        pad = 0
    else:
        ndev = mesh.devices.size
        pad = (-B) % ndev
        put = lambda x: jax.device_put(_pad(x, pad), row)
    args = []
    for a, ax in zip(batched_args, axes, strict=True):
        if ax == 0:
            a = jax.tree_util.tree_map(lambda x: put(x) if _is_array(x) else x, a)
        else:
            a = jax.tree_util.tree_map(lambda x: jax.device_put(x, rep) if _is_array(x) else x, a)
        args.append(a)
    out = _batched_jit(fn, axes)(*args)
    if pad:
        out = jax.tree_util.tree_map(lambda x: x[:B] if _is_array(x) and x.ndim else x, out)
    return out


def _pad(x, pad: int):
    if pad == 0:
        return x
    x = jnp.asarray(x)
    return jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)], axis=0)


# ----------------------------------------------------------------------------------------------
# batched simulation


def simulate_sharded(
    model: Model,
    q0,
    qd0,
    t1,
    ts=None,
    *,
    batched_model: bool = False,
    mesh: Mesh | None = None,
    **options,
):
    """:func:`simulate_batch` with the batch axis split over the devices of ``mesh``.

    The initial states (and a batched model) are placed with ``NamedSharding(mesh, P("batch"))``
    and a shared model is replicated; the compiled solve then runs partitioned, each device
    integrating its own slice. A batch that does not divide by the device count is padded with
    copies of its last member and trimmed. Results equal the single-device run.

    Under ``jax.distributed`` (several processes), every process passes its own rows (the same
    count on each, a multiple of its local device count) and gets the global sharded
    ``Trajectory``; ``throw`` defaults to False there (check ``traj.successful``).
    """
    mesh = batch_mesh() if mesh is None else mesh
    row = NamedSharding(mesh, P(mesh.axis_names[0]))
    rep = NamedSharding(mesh, P())
    q0, qd0 = jnp.asarray(q0, dtype=float), jnp.asarray(qd0, dtype=float)
    B = q0.shape[0]
    if jax.process_count() > 1:
        # each process holds its own rows; failures are reported through traj.result instead of
        # an exception, since no process can read the other processes' rows
        pad = 0
        put_row = lambda x: (
            jax.make_array_from_process_local_data(row, np.asarray(x)) if _is_array(x) else x
        )
        options.setdefault("throw", False)
    else:
        pad = (-B) % mesh.devices.size
        put_row = lambda x: jax.device_put(_pad(x, pad), row) if _is_array(x) else x
    put_rep = lambda x: jax.device_put(x, rep) if _is_array(x) else x
    model = jax.tree_util.tree_map(put_row if batched_model else put_rep, model)
    traj = simulate_batch(
        model, put_row(q0), put_row(qd0), t1, ts, batched_model=batched_model, **options
    )
    if pad:
        traj = jax.tree_util.tree_map(lambda x: x[:B] if _is_array(x) and x.ndim else x, traj)
    return traj
