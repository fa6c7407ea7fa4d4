"""One pose of a group of wrapped muscle paths: OpenSim's kernel mapped over the muscles, how it
batches over poses (:data:`WRAPPED_BATCHING`), and its derivative rules.

A wrapped path is OpenSim's branchy algorithm: the segment choice, the multi-object passes and
the wrap shapes' early-exit iterations. For one pose these are real branches and loops (a
``lax.map`` over the muscles, each muscle's shapes a ``lax.switch``). Under ``jax.vmap`` over
poses every branch would run for every pose and every loop until its slowest pose converges
(arm26: 147 ms per pose at batch 64, compile 195 s, against 5.8 ms and 88 s pose by pose); so a
batch of poses runs them pose by pose on a CPU (``jax.custom_batching.sequential_vmap``; an
accelerator prefers the vectorized form, see :data:`WRAPPED_BATCHING`), and their derivatives are
supplied by custom JVP rules that contract the kernel's own gradient and Hessian with the input
tangents (linear in the tangents, so reverse mode passes, which it cannot through
``sequential_vmap`` itself).

Three kernels: the lengths (:func:`wrapped_lengths`); the lengths and their gradients with
respect to the points and wrap frames, the GMLAV's pulls, from a reverse pass
(:func:`wrapped_pulls`); the lengths and their derivatives along given tangents, from a forward
pass (:func:`wrapped_pushforward`, the moment arms of a model with few coordinates).
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .path_kernel import path_kernel
from .wrap.common import forward_only

__all__ = [
    "WRAPPED_BATCHING",
    "path_length",
    "wrapped_lengths",
    "wrapped_pulls",
    "wrapped_pushforward",
]


def path_length(types, X, active, slots, R=None, p=None, size=None):
    """One muscle's path length (m) at one pose; ``R``, ``p``, ``size`` replace the slots' wrap
    frames and sizes (the arguments the derivatives are taken with respect to)."""
    if R is not None:
        slots = eqx.tree_at(lambda s: (s.R, s.p, s.size), slots, (R, p, size))
    return path_kernel(X, active, slots, types)[0]


def _per_muscle_lengths(types, X, active, slots):
    # evaluated forward only: its derivatives come from wrapped_lengths's rule
    with forward_only():
        return jax.lax.map(lambda a: path_length(types, *a), (X, active, slots))


def _per_muscle_pulls(types, X, active, slots):
    """(L (G,), (∂L/∂X (G, N, 3), ∂L/∂R (G, W, 3, 3), ∂L/∂p (G, W, 3), ∂L/∂size (G, W, 3)))."""

    def one(a):
        X, active, s = a
        f = lambda X, R, p, size: path_length(types, X, active, s, R, p, size)  # noqa: E731
        return jax.value_and_grad(f, argnums=(0, 1, 2, 3))(X, s.R, s.p, s.size)

    return jax.lax.map(one, (X, active, slots))


def _flat_inputs(X, R, p, size, lead: int = 1):
    """The differentiable kernel inputs of each muscle, points X (…, N, 3), wrap axes R
    (…, W, 3, 3), origins p (…, W, 3) and sizes (…, W, 3), as one vector (…, 3N + 15W) after the
    ``lead`` leading axes."""
    return jnp.concatenate([a.reshape(a.shape[:lead] + (-1,)) for a in (X, R, p, size)], axis=-1)


def _unflatten(z, X, slots):
    G, N, W = X.shape[0], X.shape[1], slots.R.shape[1]
    i = np.cumsum([0, 3 * N, 9 * W, 3 * W, 3 * W])
    return (
        z[:, i[0] : i[1]].reshape(G, N, 3),
        z[:, i[1] : i[2]].reshape(G, W, 3, 3),
        z[:, i[2] : i[3]].reshape(G, W, 3),
        z[:, i[3] : i[4]].reshape(G, W, 3),
    )


def _per_muscle_hessians(types, X, active, slots):
    """(L (G,), ∇L (G, n), ∇²L (G, n, n)) over the flat inputs of :func:`_flat_inputs`."""
    z = _flat_inputs(X, slots.R, slots.p, slots.size)

    def one(a):
        z, X, active, s = a

        def f(z):
            x, R, p, size = (v[0] for v in _unflatten(z[None], X[None], _lead(s)))
            return path_length(types, x, active, s, R, p, size)

        def grad_and_value(z):
            L, g = jax.value_and_grad(f)(z)
            return g, (L, g)

        # the Hessian as the forward-mode Jacobian of the gradient; value and gradient come from
        # its primal pass (not a second reverse pass)
        H, (L, g) = jax.jacfwd(grad_and_value, has_aux=True)(z)
        return L, g, H

    return jax.lax.map(one, (z, X, active, slots))


def _lead(slots):
    return jax.tree_util.tree_map(lambda x: x[None], slots)


def _contract(grads, tangents):
    """Σ ∂L/∂x · dx per muscle, (G,)."""
    return sum(
        jnp.sum((g * t).reshape(g.shape[0], -1), axis=1)
        for g, t in zip(grads, tangents, strict=True)
    )


#: How wrapped muscle groups batch under ``jax.vmap`` over poses, read when a function is traced:
#: ``"pose_by_pose"`` (a sequential loop inside the batched program), ``"vectorized"`` (every
#: pose's branches and loops run across the batch), or ``"auto"`` (default): pose by pose when
#: JAX's default backend is the CPU, vectorized on an accelerator. Measured on arm26
#: (``benchmarks/gpu.py``, ``benchmarks/moment_arms.py``): on 2 CPU cores pose by pose 5.8 ms per
#: pose against 147 ms vectorized (batch 64); on an H200 vectorized 3.1 ms per pose (batch
#: 65,536) against 38 ms pose by pose (batch 4096).
WRAPPED_BATCHING = "auto"


def _per_pose(kernel, types):
    """``kernel(types, X, active, slots)`` of one pose, batched as
    :data:`WRAPPED_BATCHING` says under vmap."""
    how = WRAPPED_BATCHING
    if how == "auto":
        how = "pose_by_pose" if jax.default_backend() == "cpu" else "vectorized"
    if how == "vectorized":
        return partial(kernel, types)
    if how != "pose_by_pose":
        raise ValueError(
            f"WRAPPED_BATCHING must be 'auto', 'pose_by_pose' or 'vectorized', got {how!r}"
        )
    return jax.custom_batching.sequential_vmap(_traced_once(kernel, types))


_KERNELS: dict = {}
_TRACED_PER_KERNEL = 4  # argument shapes kept per kernel (a FIFO)


def _traced_once(kernel, types):
    """``kernel`` for ``(types,)``, traced into a jaxpr once per argument structure and
    shapes; every call replays that jaxpr (``jax.core.eval_jaxpr``). A batch of poses runs the
    pose-by-pose kernel twice while tracing: for the program's primal, then inside
    ``sequential_vmap``'s loop when the batch is replayed. Replaying binds the kernel's primitives
    without running its Python (the jnp wrappers, the wrap algorithms' code) again: arm26's
    ``jax.jit(jax.vmap(lengths_and_moment_arms))`` at 121 poses lowers in 14 s instead of 22 s,
    the same program. (jit's own cache misses there: the two traces run in different
    abstract-mesh contexts.)"""
    key = (kernel, types)
    if key in _KERNELS:
        return _KERNELS[key]
    fn = partial(kernel, types)
    traced: dict = {}

    def once(*args):
        flat, tree = jax.tree_util.tree_flatten(args)
        sig = (tree, tuple(jax.typeof(x) for x in flat))
        if sig not in traced:
            closed, shapes = jax.make_jaxpr(
                lambda *leaves: fn(*jax.tree_util.tree_unflatten(tree, leaves)), return_shape=True
            )(*flat)
            if len(traced) >= _TRACED_PER_KERNEL:  # the oldest goes: a process that builds many
                traced.pop(next(iter(traced)), None)  # models keeps only the latest jaxprs
            traced[sig] = (closed, jax.tree_util.tree_structure(shapes))
        closed, out_tree = traced[sig]
        return jax.tree_util.tree_unflatten(
            out_tree, jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *flat)
        )

    _KERNELS[key] = once
    return once


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def wrapped_lengths(types, X, active, slots):
    """Lengths (G,) of a wrapped group at one pose (batched as :data:`WRAPPED_BATCHING` says)."""
    return _per_pose(_per_muscle_lengths, types)(X, active, slots)


@wrapped_lengths.defjvp
def _wrapped_lengths_jvp(types, primals, tangents):
    X, active, slots = primals
    dX, _, ds = tangents
    L, grads = _per_pose(_per_muscle_pulls, types)(X, active, slots)
    return L, _contract(grads, (dX, ds.R, ds.p, ds.size))


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def wrapped_pulls(types, X, active, slots):
    """(L, (∂L/∂X, ∂L/∂R, ∂L/∂p, ∂L/∂size)) of a wrapped group at one pose (see
    :func:`_per_muscle_pulls`; batched as :data:`WRAPPED_BATCHING` says)."""
    return _per_pose(_per_muscle_pulls, types)(X, active, slots)


@wrapped_pulls.defjvp
def _wrapped_pulls_jvp(types, primals, tangents):
    # second derivatives of the path length (moment arms differentiated): the Hessian, formed
    # from the primals and contracted with the tangents
    X, active, slots = primals
    dX, _, ds = tangents
    L, g, H = _per_pose(_per_muscle_hessians, types)(X, active, slots)
    dz = _flat_inputs(dX, ds.R, ds.p, ds.size)
    dgrads = _unflatten(jnp.einsum("gij,gj->gi", H, dz), X, slots)
    return (L, _unflatten(g, X, slots)), (jnp.sum(g * dz, axis=1), dgrads)


def _per_muscle_pushforwards(types, X, active, slots, TX, TR, Tp):
    """(L (G,), D (G, k)): each muscle's path length and its derivatives along k tangents of its
    points TX (G, k, N, 3) and wrap frames TR (G, k, W, 3, 3), Tp (G, k, W, 3) (sizes held), by
    forward mode: one pass carries the k tangent lanes beside the primal."""

    def one(a):
        X, active, s, tX, tR, tp = a
        f = lambda X, R, p: path_length(types, X, active, s, R, p, s.size)  # noqa: E731
        push = lambda *t: jax.jvp(f, (X, s.R, s.p), t)  # noqa: E731
        return jax.vmap(push, out_axes=(None, 0))(tX, tR, tp)

    # evaluated forward only: its derivatives come from wrapped_pushforward's rule
    with forward_only():
        return jax.lax.map(one, (X, active, slots, TX, TR, Tp))


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def wrapped_pushforward(types, X, active, slots, TX, TR, Tp):
    """(L (G,), D (G, k)) of :func:`_per_muscle_pushforwards` at one pose (batched as
    :data:`WRAPPED_BATCHING` says)."""
    return _per_pose(_per_muscle_pushforwards, types)(X, active, slots, TX, TR, Tp)


@wrapped_pushforward.defjvp
def _wrapped_pushforward_jvp(types, primals, tangents):
    # D_j = ∇L · T_j, so dD_j = ∇L · dT_j + T_jᵀ ∇²L dz: the Hessian, formed from the primals and
    # contracted with the tangents (linear in them, so reverse mode passes)
    X, active, slots, TX, TR, Tp = primals
    dX, _, ds, dTX, dTR, dTp = tangents
    L, g, H = _per_pose(_per_muscle_hessians, types)(X, active, slots)
    # the tangent lanes as flat kernel inputs (G, k, n), the sizes held (zero tangents)
    T = _flat_inputs(TX, TR, Tp, jnp.zeros_like(Tp), lead=2)
    dT = _flat_inputs(dTX, dTR, dTp, jnp.zeros_like(dTp), lead=2)
    dz = _flat_inputs(dX, ds.R, ds.p, ds.size)
    D = jnp.einsum("gn,gkn->gk", g, T)
    dD = jnp.einsum("gn,gkn->gk", g, dT) + jnp.einsum("gkn,gnm,gm->gk", T, H, dz)
    return (L, D), (jnp.sum(g * dz, axis=1), dD)
