"""The per-state tree terms with a batching rule: ``jax.vmap`` of :func:`jaxmb.mass_matrix`,
:func:`jaxmb.bias_forces` and :func:`jaxmb.gravity_forces` runs the batch-last kernel.

``vmap`` of the per-state code would batch every (…, nb, 1) intermediate of the one-state kernel
with a *leading* batch axis, so each elementwise step works on tiny trailing axes and each
ancestor sum becomes B small matrix products — measured 7× slower than Pinocchio's per-state loop
at chain(30), B = 4096 (issue 21). Here the per-state function is a
``jax.custom_batching.custom_vmap`` whose batching rule calls
:func:`jaxmb.dynamics.tree.equations_of_motion_bm` on the whole batch stored batch-last (the
same algorithm, the same numbers to round-off): one kinematics pass, one CRBA and one RNEA as
vector operations over (nb, B) slabs, in chunks of states that stay in cache, the results
written batch first. Each of the three computes only its own part (M: CRBA; N q̇: RNEA; G: the
composite first moments) in its own chunk loop, after a loop of kinematics and world inertias
(R I_c Rᵀ, the first moments) that depends on q alone: in one jit the three such loops are the same
program, and XLA's common-subexpression pass keeps one (the pass and the inertias are shared).
When the model itself is batched (``vmap`` over a stack of models), the rule falls back to
``vmap`` of the one-state code. Derivatives (forward and reverse) are the one-state code's (a
``custom_jvp`` around the ``custom_vmap``).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..kinematics import tree_kinematics
from ..model import Model
from .tree import batch_chunk, equations_of_motion_bm, is_identity_map, projected_terms

__all__ = ["tree_terms"]

_WANT = ("m", "n", "g")

#: body-states per chunk of the batched kernel (see the batching rule)
CHUNK_BODY_STATES = 1024


def _one_state(model: Model, q, qd, want: tuple[str, ...], identity: bool):
    M, h, G = projected_terms(model, tree_kinematics(model, q), qd, want_m="m" in want,
                              want_g="g" in want, want_n="n" in want, identity_map=identity)  # fmt: skip
    return tuple({"m": M, "n": h, "g": G}[w] for w in want)


def _vmappable(static, want: tuple[str, ...], identity: bool):
    @jax.custom_batching.custom_vmap
    def terms(dyn, q, qd):
        return _one_state(eqx.combine(dyn, static), q, qd, want, identity)

    @terms.def_vmap
    def rule(axis_size, in_batched, dyn, q, qd):
        dyn_b, q_b, qd_b = in_batched
        if any(jax.tree_util.tree_leaves(dyn_b)):  # a batch of models: the one-state code
            axes = (jax.tree_util.tree_map(lambda b: 0 if b else None, dyn_b),
                    0 if q_b else None, 0 if qd_b else None)  # fmt: skip
            one = lambda d, a, b: _one_state(eqx.combine(d, static), a, b, want, identity)
            out = jax.vmap(one, in_axes=axes)(dyn, q, qd)
            return out, tuple(True for _ in out)
        model = eqx.combine(dyn, static)
        bcast = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + x.shape)
        q, qd = bcast(q, q_b), bcast(qd, qd_b)
        # on a CPU, chunks of ~1024 body-states keep the (nb, chunk) slabs in cache (chain(30),
        # B = 4096: 116 µs per state unchunked, 29 µs in chunks of 32); on an accelerator the whole
        # batch at once (H200, chain(30), B = 65,536: 2.08 µs per state in chunks, 84.5 ns
        # unchunked); each term computes only itself
        # (XLA does not merge the three chunk loops of one jit, only their kinematics loops)
        chunk = batch_chunk(max(8, 1 << int(np.log2(max(CHUNK_BODY_STATES // model.nb, 1)))))
        M, N, G = equations_of_motion_bm(model, q.T, qd.T, "m" in want, identity, chunk,
                                         want_n="n" in want, want_g="g" in want,
                                         batch_first_out=True)  # fmt: skip
        full = {"m": M, "n": N, "g": G}
        out = tuple(full[w] for w in want)
        return out, tuple(True for _ in out)

    # derivatives by the one-state code (custom_vmap alone has no reverse mode): the value comes
    # from `terms` (its batching rule under vmap), the tangents from a JVP of the same algorithm
    plain = lambda dyn, q, qd: _one_state(eqx.combine(dyn, static), q, qd, want, identity)

    @jax.custom_jvp
    def differentiable(dyn, q, qd):
        return terms(dyn, q, qd)

    @differentiable.defjvp
    def _(primals, tangents):
        return terms(*primals), jax.jvp(plain, primals, tangents)[1]

    return differentiable


def tree_terms(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"], want: tuple[str, ...]
) -> tuple[Array, ...]:
    """The wanted tree terms of one state, in the order asked: ``"m"`` M (nq, nq), ``"n"`` N q̇
    (nq,), ``"g"`` G (nq,); under ``jax.vmap`` the batch-last kernel computes them."""
    if not want or any(w not in _WANT for w in want):
        raise ValueError(f"tree_terms: want must be a non-empty subset of {_WANT}, got {want}")
    # f = q decided here, where a model closed over by the caller's jit is still concrete (inside
    # the batching rule its arrays are traced): the projection through ∇f and H is then skipped
    identity = bool(is_identity_map(model))
    dyn, static = eqx.partition(model, eqx.is_array)
    dtype = jnp.result_type(q, float)
    q = jnp.asarray(q, dtype)
    qd = jnp.zeros_like(q) if qd is None else jnp.asarray(qd, dtype)
    return _vmappable(static, tuple(want), identity)(dyn, q, qd)
