"""The tree algorithm: composite-rigid-body (CRBA) and recursive Newton–Euler (RNEA) in the joint
variables θ = f(q), projected to q through the joint map — one implementation, for one state and
for a batch.

Every array is *batch-last* (component axes, then bodies, then the batch: a 3-vector per body is
(3, nb, B)), so every operation is elementwise over contiguous (nb, B) slabs: vmapping a per-state
code over small trailing (nb, 4, 4) axes vectorises poorly on XLA:CPU (measured 3.5× slower per
state at B = 4096 for chain(7)). A single state is the batch B = 1; the per-state functions of
:mod:`jaxmb.dynamics.equations` call the same kernel.

Algorithm (Featherstone, *Rigid Body Dynamics Algorithms*, 2008: RNEA §5.3 and CRBA §6.2, in the
ground frame): spatial vectors are (ω, v_O) about the ground origin, where

* joint axes are ``S_i = (R_λ V_θ, o_i × R_λ V_θ)`` (revolute) or ``(0, R_λ V_d)`` (prismatic)
  (:func:`jaxmb.kinematics.joint_axes` on the poses of :func:`jaxmb.kinematics.world_poses`);
* velocities ``V = Anc (S θ̇)`` and accelerations ``A = Anc (S θ̈ + V × S θ̇)`` are ancestor sums
  and the joint forces ``F = Ancᵀ (I A + V ×* I V)`` descendant sums: for a batch of trees of up
  to :data:`DENSE_SUM_BODIES` bodies, one matrix product with the static ancestor mask; above,
  O(nb) sweeps with no step per body (pointer jumping down the tree, a preorder cumulative sum up
  it: :func:`_ancestor_sum`, :func:`_descendant_sum`); for one small state, one fused
  broadcast-sum over the mask;
* the rigid-body inertia is kept as (m, h = m c, Ī = rotational inertia about the ground origin,
  its 6 distinct entries), ``I (ω, v) = (Ī ω + h × v, m v − h × ω)``, 10 numbers per body instead
  of a 6×6 matrix;
* gravity is the uniform fictitious acceleration −g, so its body forces ``(h × (−g), −m g)`` need
  no recursion, and ``G_θ = −Sᵀ Ancᵀ (h × (−g), −m g) = −Sᵀ (h_c × (−g), −m_c g)`` with the
  composite first moments h_c and masses m_c (a constant);
* composite inertias are descendant sums of (h, Ī) and ``M_ij = S_jᵀ (I^c_i S_i)`` for j ⪯ i
  (mirrored above the diagonal, zero between unrelated bodies).

A general joint map is projected by the chain rule: ``θ̇ = J q̇``, ``θ̈ = J q̈ + γ`` with
``γ_i = q̇ᵀ H_i q̇``, so ``M = Jᵀ M_θ J``, ``N q̇ = Jᵀ (M_θ γ + c_θ)``, ``G = Jᵀ G_θ``;
``identity_map=True`` skips the projection for models with one coordinate per joint (``f = q``),
the case of Pinocchio's and MuJoCo's chains. With fewer coordinates than joint variables (a rhythm,
a closed loop) one state's projection is regrouped by body (:func:`coordinate_space_terms`:
``M = Σ_i Jb_iᵀ I_i Jb_i`` with the body twist Jacobians, no nj × nj matrix).

q̈ comes from a batch-last Cholesky factorisation (unrolled, ``nq³/6`` vector operations, for
nq ≤ 12; LAPACK per state above). Everything is jit-, vmap- and grad-able; float32 inputs with a
float32 model stay float32. Checked against the closed form, the Lagrangian referee and Pinocchio
in ``tests/dynamics``; throughput in ``benchmarks/throughput.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..forces import applied_forces
from ..joint_maps import IdentityMap, LinearMap
from ..kinematics import (
    Kinematics,
    cross3,
    joint_axes,
    jump_schedule,
    materialized,
    mm3,
    mv3,
    small_einsum,
    take_bodies,
    world_poses,
)
from ..math.linalg import cholesky_solve_bm
from ..model import Model, ModelError

__all__ = [
    "CHUNK",
    "is_identity_map",
    "joint_space_terms",
    "inertia_terms",
    "coordinate_space_terms",
    "projected_terms",
    "equations_of_motion_bm",
    "batched_terms",
    "batched_forward_dynamics",
    "batch_last_kinematics",
]

# batch chunk of equations_of_motion_bm on a CPU: at B = 4096 the (nb, B) float64 intermediates of
# chain(7) (229 KB each) leave the cache; 128 states at a time measured 2.3× less CPU per state
CHUNK = 128


def batch_chunk(states_per_chunk: int) -> int | None:
    """The chunk width of the batched kernel on the default backend: ``states_per_chunk`` on a
    CPU (cache-sized slabs), ``None`` (the whole batch at once) on an accelerator, where a
    ``lax.map`` over chunks serializes the batch into launch-bound steps (H200, chain(7) at
    B = 65,536: 512 steps of 128 states, 0.43 µs per state)."""
    return states_per_chunk if jax.default_backend() == "cpu" else None


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


#: Up to this many (body, body, state) triples an ancestor or descendant sum of one state is a
#: masked broadcast-sum over the static ancestor mask (nb² per component, but one fused loop: the
#: one-state right-hand side inside a user's solver); above, the O(nb) sweeps of
#: :func:`_ancestor_sum` and :func:`_descendant_sum` (large trees; a batch: see DENSE_SUM_BODIES).
MASKED_SUMS = 1024

#: For a batch of trees of up to this many bodies an ancestor or descendant sum is one matrix
#: product with the static ancestor mask (O(nb²) multiply-adds per state, one BLAS call). The
#: O(nb) sweeps take fewer operations, but XLA:CPU fuses their steps into loops that recompute
#: the earlier steps and the sum's inputs for every entry (chain(30), 32 states per chunk: N q̇
#: 21 → 9 µs per state); the product also materializes its input once.
DENSE_SUM_BODIES = 64


def _preorder(parent) -> tuple[np.ndarray, np.ndarray]:
    """Depth-first preorder of the bodies and, per position k of that order, the position where
    the subtree of the body at k ends (its subtree occupies positions [k, end[k]))."""
    nb = len(parent)
    children = [[] for _ in range(nb)]
    roots = []
    for i, p in enumerate(parent):
        (roots if p < 0 else children[p]).append(i)
    order, end, stack = [], np.zeros(nb, int), []

    def visit(i):  # iterative: a chain of hundreds of bodies must not hit the recursion limit
        stack.append((i, False))
        while stack:
            j, done = stack.pop()
            if done:
                end[pos[j]] = len(order)
                continue
            pos[j] = len(order)
            order.append(j)
            stack.append((j, True))
            stack.extend((c, False) for c in reversed(children[j]))

    pos = {}
    for r in roots:
        visit(r)
    return np.asarray(order), end


#: From this many bodies on, a masked sum's operand is materialized first: XLA fuses the operand's
#: producer into the broadcast-sum and so recomputes it once per (body, ancestor) pair; the extra
#: dot costs ~1.5 µs (per-state forward dynamics, CPU µs, alternating in one process at load 6:
#: shoulder (14 bodies) 25.5 → 22.5 and M, N q̇, G 58 → 42; Andrews (7 bodies) 16 → 26, so small
#: trees are left unmaterialized)
MATERIALIZE_SUMS_FROM = 9


def _masked_operand(x):
    return materialized(x) if x.shape[-2] >= MATERIALIZE_SUMS_FROM else x


def _mask_product(mask, x):
    """``mask @ x[k]`` for every component k of x (k, nb, B): a product batched over k, so that
    XLA reads x and writes the result in their own layout (contracting over the middle axis of x
    as a plain einsum makes XLA transpose x, and fuse x's producers into that transpose)."""
    k = x.shape[0]
    m = jnp.broadcast_to(jnp.asarray(mask, x.dtype), (k,) + np.shape(mask))
    return jnp.einsum("kij,kjb->kib", m, x)


def _ancestor_sum(model: Model, x):
    """``Σ_{j ⪯ i} x[..., j, :]`` for x (k, nb, B): velocities and accelerations down the tree.

    By pointer jumping (:func:`jaxmb.kinematics.jump_schedule`): ⌈log₂ depth⌉ steps
    ``x_i ← x_i + x_ptr(i)``, each one vector operation over all bodies and states (a chain's
    pointer is a shift: two slices). Small problems take the masked broadcast-sum instead.
    """
    nb, B = x.shape[-2:]
    if B > 1 and nb <= DENSE_SUM_BODIES:
        return _mask_product(model.ancestors, x)
    if nb * nb * B <= MASKED_SUMS:
        anc = jnp.asarray(model.ancestors, x.dtype)
        return small_einsum("ij,kjb->kib", anc, _masked_operand(x))
    for ptr in jump_schedule(model.parent):
        x = x + take_bodies(x, ptr)
    return x


def _descendant_sum(model: Model, x):
    """``Σ_{i ⪰ j} x[..., i, :]`` for x (k, nb, B): joint forces and composite inertias up the tree.

    In depth-first preorder a subtree is a contiguous range [k, end_k), so its sum is a
    difference of one reverse cumulative sum: ``C[k] − C[end_k]`` (O(nb) per component; XLA
    evaluates the cumulative sum as a log-depth associative scan). Small problems take the
    masked broadcast-sum instead.
    """
    nb, B = x.shape[-2:]
    if B > 1 and nb <= DENSE_SUM_BODIES:
        return _mask_product(np.asarray(model.ancestors).T, x)
    if nb * nb * B <= MASKED_SUMS:
        anc = jnp.asarray(model.ancestors, x.dtype)
        return small_einsum("ij,kib->kjb", anc, _masked_operand(x))
    order, end = _preorder(model.parent)
    in_order = np.array_equal(order, np.arange(nb))
    if not in_order:
        x = take_bodies(x, order)
    C = jax.lax.cumsum(x, axis=x.ndim - 2, reverse=True)
    if np.any(end < nb):
        C = C - take_bodies(C, end)
    return C if in_order else take_bodies(C, np.argsort(order))


#: the entries of a symmetric 3×3 matrix that Ī keeps, in its order (xx, yy, zz, xy, xz, yz)
SYM6 = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))


def _world_inertia(model: Model, R, o, rotational: bool = True):
    """World spatial inertias about the ground origin, batch-last: m (nb, 1), h = m c_w (3, nb, B)
    and the 6 entries (:data:`SYM6`) of the symmetric Ī = R I_c Rᵀ + m (|c_w|² 1 − c_w c_wᵀ)
    (6, nb, B); ``rotational=False`` skips Ī (None), which gravity alone does not need."""
    dtype = o.dtype
    m = model.mass.astype(dtype)[:, None]
    cw = o + mv3(R, model.com.astype(dtype).T[:, :, None])
    h = m * cw
    if not rotational:
        return m, h, None
    Ic = jnp.moveaxis(model.inertia.astype(dtype), 0, 2)[:, :, :, None]  # (3, 3, nb, 1)
    # R I_c Rᵀ as broadcast products (an einsum here becomes nb·B tiny 3×3 dots on the CPU), only
    # its 6 distinct entries: the composite sums and the CRBA then carry 6 components, not 9
    RI = mm3(R, Ic)
    c2 = _dot(cw, cw)
    Ibar = jnp.stack([
        RI[a, 0] * R[b, 0] + RI[a, 1] * R[b, 1] + RI[a, 2] * R[b, 2]
        + m * ((c2 if a == b else 0.0) - cw[a] * cw[b]) for a, b in SYM6
    ])  # fmt: skip
    return m, h, Ibar


def _inertia_apply(Ib, h, m, w, v):
    """``I (ω, v) = (Ī ω + h × v, m v − h × ω)`` for motion vectors (3, ..., nb, B), Ī as its 6
    entries (:data:`SYM6`)."""
    Iw = jnp.stack([
        Ib[0] * w[0] + Ib[3] * w[1] + Ib[4] * w[2],
        Ib[3] * w[0] + Ib[1] * w[1] + Ib[5] * w[2],
        Ib[4] * w[0] + Ib[5] * w[1] + Ib[2] * w[2],
    ])  # fmt: skip
    return Iw + cross3(h, v), m * v - cross3(h, w)


def _body_wrenches(model: Model, Sw, Sv, V, thd, thdd, m, h, Ibar, fold_gravity: bool):
    """Each body's own Newton–Euler wrench ``I a + V ×* I V`` (6, nb, B) about the ground origin,
    from its twist V (6, nb, B) and the joint rates thd and accelerations thdd (nj, B; None: 0):
    ``a = Anc (S θ̈ + V × S θ̇)``; ``fold_gravity`` adds the ground's fictitious acceleration −g."""
    Vw, Vv = V[:3], V[3:]
    sw, sv = Sw * thd, Sv * thd
    xw = cross3(Vw, sw)
    xv = cross3(Vw, sv) + cross3(Vv, sw)
    if thdd is not None:
        xw, xv = xw + Sw * thdd, xv + Sv * thdd
    Acc = _ancestor_sum(model, jnp.concatenate([xw, xv]))
    Aw, Av = Acc[:3], Acc[3:]
    if fold_gravity:  # the ground accelerates at −g: every body sees the same (0, −g)
        Av = Av - model.gravity.astype(V.dtype)[:, None, None]
    n1, f1 = _inertia_apply(Ibar, h, m, Aw, Av)
    hn, hf = _inertia_apply(Ibar, h, m, Vw, Vv)
    return jnp.concatenate([n1 + cross3(Vw, hn) + cross3(Vv, hf), f1 + cross3(Vw, hf)])


def _gravity_wrenches(model: Model, m, h):
    """The wrenches (6, nb, B) that balance gravity, ``(h × (−g), −m g)``: every body sees the same
    fictitious acceleration −g, so there is no recursion."""
    g = model.gravity.astype(h.dtype)[:, None, None]
    gn = cross3(h, -g)
    return jnp.concatenate([gn, jnp.broadcast_to(-m * g, gn.shape)])


def joint_space_terms(
    model: Model,
    R,
    o,
    Sw,
    Sv,
    thd: Float[Array, "nj B"],
    thdd: Float[Array, "nj B"] | None,
    want_m: bool = True,
    want_g: bool = True,
    want_c: bool = True,
    fold_gravity: bool = False,
    batch_first_m: bool = False,
):
    """M_θ (nj, nj, B), c_θ = RNEA(θ, θ̇, θ̈) without gravity (nj, B) and G_θ (nj, B).

    Args:
        R, o: body rotations (3, 3, nb, B) and origins (3, nb, B) from
            :func:`jaxmb.kinematics.world_poses`. Sw, Sv: joint axes (3, nb, B) from
            :func:`jaxmb.kinematics.joint_axes`.
        thd, thdd: joint rates and accelerations (nj, B); ``thdd=None`` means θ̈ = 0.
        want_m, want_g, want_c: compute M_θ (CRBA), G_θ and c_θ (RNEA); ``None`` in their
            place otherwise.
        fold_gravity: with ``want_c``, return ``c_θ − G_θ`` in c's place and None for G: gravity
            enters the RNEA as the ground's acceleration −g (one descendant sum of 6 components
            instead of 12; what forward and inverse dynamics need).
        batch_first_m: return M_θ as (B, nj, nj) (what a batch-first caller stores, without a
            transpose of the whole batch afterwards).
    """
    m, h, Ibar = _world_inertia(model, R, o, rotational=want_m or want_c)
    return inertia_terms(model, Sw, Sv, m, h, Ibar, thd, thdd, want_m, want_g, want_c,
                         fold_gravity, batch_first_m)  # fmt: skip


def inertia_terms(
    model: Model,
    Sw,
    Sv,
    m,
    h,
    Ibar,
    thd: Float[Array, "nj B"],
    thdd: Float[Array, "nj B"] | None,
    want_m: bool = True,
    want_g: bool = True,
    want_c: bool = True,
    fold_gravity: bool = False,
    batch_first_m: bool = False,
):
    """:func:`joint_space_terms` from the world inertias of :func:`_world_inertia` (m (nb, 1),
    h (3, nb, B), Ī's 6 entries (6, nb, B); Ī is read only for M_θ and c_θ) instead of the
    poses: a batch computes them once in its kinematics pass and shares them between the CRBA
    and the RNEA."""
    if fold_gravity and not want_c:
        raise ValueError("joint_space_terms: fold_gravity needs want_c")
    want_g = want_g and not fold_gravity
    dtype = h.dtype
    nb, B = thd.shape
    anc = jnp.asarray(model.ancestors, dtype)  # anc[i, j]: j ⪯ i
    c = G = None
    if want_c:  # velocities V = Anc (S θ̇); accelerations a = Anc (S θ̈ + V × S θ̇)
        V = _ancestor_sum(model, jnp.concatenate([Sw * thd, Sv * thd]))
        F = _descendant_sum(
            model, _body_wrenches(model, Sw, Sv, V, thd, thdd, m, h, Ibar, fold_gravity)
        )
        c = _dot(Sw, F[0:3]) + _dot(Sv, F[3:6])
    if not (want_m or want_g):
        return None, c, G
    # composite inertias are descendant sums of (m, h, Ī); the composite mass is a constant
    mc = _descendant_sum(model, m[None])[0]  # (nb, 1)
    comp = _descendant_sum(model, jnp.concatenate([h, Ibar]) if want_m else h)
    hc = comp[0:3]
    if want_g:
        # the gravity wrenches (h × (−g), −m g) summed over a subtree are (h_c × (−g), −m_c g)
        W = _gravity_wrenches(model, mc, hc)
        G = -(_dot(Sw, W[0:3]) + _dot(Sv, W[3:6]))
    if not want_m:
        return None, c, G
    # CRBA: P[i, j] = S_j · (I^c_i S_i)
    Fn, Ff = _inertia_apply(comp[3:], hc, mc, Sw, Sv)
    if B == 1 or not batch_first_m:
        P = sum(Fn[k][:, None] * Sw[k][None, :] + Ff[k][:, None] * Sv[k][None, :] for k in range(3))
        # M[i, j] = P[i, j] for j ⪯ i and its mirror P[j, i] for i ⪯ j; zero for unrelated bodies
        mask = anc[:, :, None]
        M = mask * P + jnp.swapaxes(mask * P, 0, 1) - jnp.eye(nb, dtype=dtype)[:, :, None] * P
        return (jnp.moveaxis(M, -1, 0) if batch_first_m else M), c, G
    # a batch stored batch first: P[b] = F[b]ᵀ S[b] as one batched matrix product, written in
    # that order. As a broadcast product transposed into (B, nb, nb), XLA fuses P into M's output
    # and recomputes I^c S and the composite sums for every one of the nb² entries (chain(30):
    # 16 ns per entry of M); batch last (above) it measured no slower than the product
    P = jnp.einsum("kib,kjb->bij", jnp.concatenate([Fn, Ff]), jnp.concatenate([Sw, Sv]))
    # M[i, j] = P[i, j] for j ⪯ i and its mirror P[j, i] for i ⪯ j; zero for unrelated bodies
    M = jnp.where(anc > 0, P, jnp.where(anc.T > 0, jnp.swapaxes(P, 1, 2), 0.0))
    return (M if batch_first_m else jnp.moveaxis(M, 0, -1)), c, G


def coordinate_space_terms(
    model: Model,
    R,
    o,
    Sw,
    Sv,
    Jb: Float[Array, "6 nq nb B"],
    qd: Float[Array, "nq B"] | None,
    thd: Float[Array, "nj B"] | None,
    thdd: Float[Array, "nj B"] | None,
    want_m: bool = True,
    want_g: bool = True,
    want_c: bool = True,
    fold_gravity: bool = False,
):
    """M (nq, nq, B), ``Jᵀ c_θ`` (nq, B) and G (nq, B) directly in q: the projection of
    :func:`joint_space_terms` regrouped by body, for joint maps with fewer coordinates than joint
    variables (a rhythm, a closed loop).

    ``Jᵀ Anc`` is carried to the bodies instead of ``Anc`` to the joints: body i's twist per unit
    q̇_l is ``Jb_il = Σ_{j ⪯ i} S_j J_jl`` (one ancestor sum of 6 nq components), so
    ``M = Σ_i Jb_iᵀ I_i Jb_i``, ``Jᵀ c_θ = Σ_i Jb_iᵀ f_i`` with f_i body i's own Newton–Euler
    wrench and ``G = −Σ_i Jb_iᵀ (h_i × (−g), −m_i g)``: no nj × nj matrix and no descendant sum,
    O(nb nq²) instead of O(nb² + nj² nq). The same numbers as :func:`joint_space_terms` followed
    by ``Jᵀ · J`` (tests/dynamics: to round-off).

    Args: as :func:`joint_space_terms`, with ``Jb`` the body twist Jacobians
    (:attr:`jaxmb.kinematics.Kinematics.Jb`, batch-last), ``qd`` (nq, B), ``thd`` = ``J q̇`` and
    ``thdd`` = ``J q̈ + q̇ᵀ H q̇`` (nj, B; ``None``: zero); qd and thd are read only with ``want_c``.
    """
    if fold_gravity and not want_c:
        raise ValueError("coordinate_space_terms: fold_gravity needs want_c")
    want_g = want_g and not fold_gravity
    m, h, Ibar = _world_inertia(model, R, o, rotational=want_m or want_c)

    def project(wrench):  # Σ_i Jb_iᵀ w_i for wrenches (6, nb, B) -> (nq, B)
        return jnp.sum(_dot(Jb[:3], wrench[:3, None]) + _dot(Jb[3:], wrench[3:, None]), axis=1)

    c = G = None
    if want_c:
        V = jnp.sum(Jb * qd[None, :, None, :], axis=1)  # (6, nb, B)
        c = project(_body_wrenches(model, Sw, Sv, V, thd, thdd, m, h, Ibar, fold_gravity))
    if want_g:
        G = -project(_gravity_wrenches(model, m, h))
    if not want_m:
        return None, c, G
    # I_i Jb_il for every column l: (3, nq, nb, B) each
    In, If = _inertia_apply(Ibar[:, None], h[:, None], m, Jb[:3], Jb[3:])
    M = jnp.sum(
        _dot(Jb[:3, :, None], In[:, None]) + _dot(Jb[3:, :, None], If[:, None]), axis=2
    )  # (nq, nq, B)
    return 0.5 * (M + jnp.swapaxes(M, 0, 1)), c, G


def _is_identity(joint_map) -> bool | None:
    """True/False when the map's values are concrete, None under a trace (an
    :class:`~jaxmb.joint_maps.IdentityMap` is the identity by its type, traced or not)."""
    if isinstance(joint_map, IdentityMap):
        return True
    if not isinstance(joint_map, LinearMap):
        return False
    try:
        A, b = np.asarray(joint_map.A), np.asarray(joint_map.b)
    except Exception:  # tracers
        return None
    return A.shape[0] == A.shape[1] and np.array_equal(A, np.eye(A.shape[0])) and not b.any()


def is_identity_map(model: Model) -> bool | None:
    """True/False when ``model.joint_map`` is (is not) ``f(q) = q``: an
    :class:`~jaxmb.joint_maps.IdentityMap` always, a :class:`~jaxmb.joint_maps.LinearMap` with
    concrete values; None for a LinearMap whose values are traced (undecidable)."""
    return _is_identity(model.joint_map)


def _resolve_identity(model: Model, identity_map):
    concrete = _is_identity(model.joint_map)
    if identity_map is None:
        return bool(concrete)
    if identity_map and concrete is False:
        raise ModelError(
            f"identity_map=True but model {model.name!r} has a joint map "
            f"{type(model.joint_map).__name__} that is not f(q) = q"
        )
    return bool(identity_map)


def batch_last_kinematics(kin: Kinematics):
    """A per-state :class:`~jaxmb.kinematics.Kinematics` as the batch-last (R, o, Sw, Sv) of one
    state (B = 1) that :func:`joint_space_terms` reads: views of the same pose pass."""
    R = jnp.moveaxis(kin.A[:, :3, :3], 0, 2)[..., None]
    o = kin.A[:, :3, 3].T[..., None]
    return R, o, kin.S[:, :3].T[..., None], kin.S[:, 3:].T[..., None]


def projected_terms(
    model: Model,
    kin: Kinematics,
    qd: Float[Array, " nq"],
    qdd: Float[Array, " nq"] | None = None,
    want_m: bool = True,
    want_g: bool = True,
    want_n: bool = True,
    identity_map: bool | None = None,
    fold_gravity: bool = False,
):
    """One state's ``(M (nq, nq), RNEA(q, q̇, q̈) (nq,), G (nq,))`` in q from its kinematics.

    The middle term is ``Jᵀ c_θ(θ̇, θ̈)`` with ``θ̈ = J q̈ + γ`` (``qdd=None``: q̈ = 0, so it is
    N q̇, the Coriolis and centrifugal forces); gravity is not in it. Entries not wanted
    (``want_m``, ``want_n``, ``want_g``) are None and not computed. ``identity_map``: as in
    :func:`equations_of_motion_bm` (``f = q`` skips the projection through J and H).
    ``fold_gravity``: the middle term is ``RNEA − G`` and G is None (see :func:`joint_space_terms`).

    This is the batch-last kernel at B = 1: the same code as the batched path, with every small
    contraction a fused broadcast-sum (:func:`jaxmb.kinematics.small_einsum`).
    """
    R, o, Sw, Sv = batch_last_kinematics(kin)
    dtype = o.dtype
    identity = _resolve_identity(model, identity_map)
    thd = thdd = None
    if want_n:
        qd = jnp.asarray(qd, dtype)
        if identity:
            thd, thdd = qd, None if qdd is None else jnp.asarray(qdd, dtype)
        else:
            thd = small_einsum("jl,l->j", kin.J, qd)
            thdd = small_einsum("jlm,l,m->j", kin.H, qd, qd)
            if qdd is not None:
                thdd = thdd + small_einsum("jl,l->j", kin.J, jnp.asarray(qdd, dtype))
            thdd = materialized(thdd)
        thd = thd[:, None]
        thdd = None if thdd is None else thdd[:, None]
    else:
        thd = jnp.zeros((kin.f.shape[0], 1), dtype)
    if not identity and kin.J.shape[1] < kin.J.shape[0]:  # fewer coordinates than joints
        Jb = jnp.transpose(kin.Jb, (1, 2, 0))[..., None].astype(dtype)
        return tuple(None if x is None else x[..., 0] for x in coordinate_space_terms(
            model, R, o, Sw, Sv, Jb, qd[:, None] if want_n else None, thd, thdd, want_m=want_m,
            want_g=want_g, want_c=want_n, fold_gravity=fold_gravity))  # fmt: skip
    Mt, ct, Gt = joint_space_terms(
        model, R, o, Sw, Sv, thd, thdd, want_m=want_m, want_g=want_g, want_c=want_n,
        fold_gravity=fold_gravity,
    )
    if identity:
        return (None if Mt is None else Mt[..., 0], None if ct is None else ct[:, 0],
                None if Gt is None else Gt[:, 0])  # fmt: skip
    J = kin.J.astype(dtype)
    M = None
    if Mt is not None:
        M = small_einsum("jk,jl,lm->km", J, materialized(Mt[..., 0]), J)
        M = 0.5 * (M + M.T)  # exactly symmetric, as the Cholesky solve assumes
    project = lambda x: None if x is None else small_einsum("jk,j->k", J, x[:, 0])
    return M, project(ct), project(Gt)


def _poses_and_axes(model: Model, f):
    """(R, o, Sw, Sv) of :func:`joint_space_terms` from joint values f (nj, B)."""
    R, o, Rpar = world_poses(model, f)
    return (R, o) + tuple(joint_axes(model, o, Rpar))


def _kinematics_and_inertia(model: Model, f):
    """The joint axes S = (Sw, Sv) (6, nb, B) and the world inertias (h, Ī) (9, nb, B) of
    :func:`inertia_terms` from joint values f (nj, B): two arrays, so that whoever reads a part
    reads the whole (see :func:`equations_of_motion_bm`), and the CRBA's composite sum and P
    read them without a concatenation."""
    R, o, Sw, Sv = _poses_and_axes(model, f)
    _, h, Ibar = _world_inertia(model, R, o)
    return jnp.concatenate([Sw, Sv]), jnp.concatenate([h, Ibar])


def equations_of_motion_bm(
    model: Model,
    q: Float[Array, "nq B"],
    qd: Float[Array, "nq B"],
    want_m: bool = True,
    identity_map: bool | None = None,
    chunk: int | None | str = "auto",
    want_n: bool = True,
    want_g: bool = True,
    batch_first_out: bool = False,
):
    """M, N q̇ and G for B states stored batch-last: ``q``, ``qd`` of shape (nq, B).

    Args:
        model: the model (shared by all states; its arrays are not batched).
        q, qd: (nq, B) coordinates and rates (SI units per coordinate).
        want_m: also compute M (CRBA); ``False`` returns ``None`` in its place.
        identity_map: ``True`` treats the joint map as ``f = q`` (skips the projection through ∇f);
            ``None`` decides from the map's values when they are concrete, else projects.
        chunk: when B is a larger multiple of it, the batch is processed ``chunk`` states at a time
            (``lax.map``) so that the (nb, chunk) intermediates stay in cache; ``None`` = at once;
            ``"auto"``: :data:`CHUNK` on a CPU, at once on an accelerator (:func:`batch_chunk`).
        want_n, want_g: compute N q̇ (RNEA) and G; ``None`` in their place otherwise.
        batch_first_out: return the terms batch first, (B, nq, nq), (B, nq), (B, nq).

    Returns:
        ``(M (nq, nq, B), Nq̇ (nq, B), G (nq, B))``: mass matrix (kg·m² etc.), Coriolis/centrifugal
        forces (left-hand side) and gravity forces (right-hand side), in N·m or N per coordinate.
    """
    q = jnp.asarray(q)
    qd = jnp.asarray(qd)
    if q.ndim != 2 or q.shape[0] != model.nq or qd.shape != q.shape:
        raise ValueError(
            f"model {model.name!r}: q and qd must both have shape (nq={model.nq}, B), got "
            f"{q.shape} and {qd.shape}"
        )
    # full-precision products on accelerators too: TF32 (a GPU's default for float32 dot products)
    # gave 1e-3 relative errors in M on an H200; the ancestor sums are products with a 0/1 mask
    with jax.default_matmul_precision("highest"):
        return _equations_of_motion_bm(model, q, qd, want_m, identity_map, chunk, want_n, want_g,
                                       batch_first_out)  # fmt: skip


def _equations_of_motion_bm(model, q, qd, want_m, identity_map, chunk, want_n, want_g,
                            batch_first_out):  # fmt: skip
    B = q.shape[1]
    identity = _resolve_identity(model, identity_map)
    if chunk == "auto":
        chunk = batch_chunk(CHUNK)
    chunked = chunk is not None and B > chunk and B % chunk == 0
    if identity and B > 1 and not chunked:
        chunk, chunked = B, True  # one chunk: the same program as chunks, bit for bit
    if chunked:
        split = lambda x: jnp.moveaxis(x.reshape(x.shape[0], B // chunk, chunk), 1, 0)
        if identity:
            # the kinematics and world inertias in a loop of their own, a function of q alone:
            # when one jit asks for M, N q̇ and G by three calls, the three loops are the same
            # program and XLA's common-subexpression pass keeps one (the pass is shared, and
            # R I_c Rᵀ is formed once for the CRBA and the RNEA). Each call reads both of its
            # outputs (G reads h, not Ī, but h and Ī are one array); a call that left an output
            # unread would get a pruned copy of the loop that XLA no longer merges
            kin = jax.lax.map(lambda f: _kinematics_and_inertia(model, f), split(q))
            m = model.mass.astype(q.dtype)[:, None]

            def one(x):
                (S, hI), thd = x
                thd = thd if want_n else jnp.zeros((model.nb, chunk), q.dtype)
                M, c, G = inertia_terms(model, S[:3], S[3:], m, hI[:3], hI[3:], thd, None, want_m,
                                        want_g, want_n, batch_first_m=batch_first_out)  # fmt: skip
                T = lambda y: y.T if batch_first_out and y is not None else y
                return M, T(c), T(G)

            out = jax.lax.map(one, (kin, split(qd)))
        else:
            one = lambda x: _equations_of_motion_bm(
                model, x[0], x[1], want_m, identity, None, want_n, want_g, batch_first_out
            )
            out = jax.lax.map(one, (split(q), split(qd)))
        if batch_first_out:
            return tuple(None if y is None else y.reshape((B,) + y.shape[2:]) for y in out)
        join = lambda y: None if y is None else jnp.moveaxis(y, 0, -2).reshape(y.shape[1:-1] + (B,))
        return tuple(join(y) for y in out)
    T = lambda x: x.T if batch_first_out and x is not None else x
    if identity:
        M, c, G = joint_space_terms(model, *_poses_and_axes(model, q), qd, None, want_m, want_g,
                                    want_n, batch_first_m=batch_first_out)  # fmt: skip
        return M, T(c), T(G)
    f, J, H = jax.vmap(model.joint_map.derivatives, in_axes=1)(q)  # (B, nj), (B, nj, nq), ...
    qdb = qd.T
    thd = jnp.einsum("bjl,bl->jb", J, qdb)
    gamma = jnp.einsum("bjlm,bl,bm->jb", H, qdb, qdb)
    R, o, Sw, Sv = _poses_and_axes(model, f.T.astype(q.dtype))
    Mt, ct, Gt = joint_space_terms(model, R, o, Sw, Sv, thd, gamma, want_m, want_g, want_n,
                                   batch_first_m=True)  # fmt: skip
    Nqd = None if ct is None else jnp.einsum("bjk,jb->kb", J, ct)
    G = None if Gt is None else jnp.einsum("bjk,jb->kb", J, Gt)
    M = None
    if Mt is not None:
        M = jnp.einsum("bjk,bjl,bln->bkn", J, Mt, J)
        M = 0.5 * (M + jnp.swapaxes(M, 1, 2))  # exactly symmetric, as the Cholesky solve assumes
        M = M if batch_first_out else jnp.moveaxis(M, 0, -1)
    return M, T(Nqd), T(G)


def batched_terms(
    model: Model,
    q: Float[Array, "B nq"],
    qd: Float[Array, "B nq"],
    identity_map: bool | None = None,
    chunk: int | None | str = "auto",
):
    """``(M (B, nq, nq), N q̇ (B, nq), G (B, nq))`` for B states given batch-first.

    The same numbers as ``vmap`` of :func:`jaxmb.dynamics.mass_matrix`, ``bias_forces`` and
    ``gravity_forces``; computed batch-last (:func:`equations_of_motion_bm`) and transposed back.
    """
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    if q.ndim != 2 or q.shape[1] != model.nq or qd.shape != q.shape:
        raise ValueError(
            f"batched_terms: model {model.name!r}: q and qd must both have shape (B, nq={model.nq})"
            f" (batch first), got {q.shape} and {qd.shape}"
        )
    return equations_of_motion_bm(model, q.T, qd.T, True, identity_map, chunk,
                                  batch_first_out=True)  # fmt: skip


def batched_forward_dynamics(
    model: Model,
    q: Float[Array, "nq B"],
    qd: Float[Array, "nq B"],
    tau: Float[Array, "nq B"] | None = None,
    t=0.0,
    identity_map: bool | None = None,
) -> Float[Array, "nq B"]:
    """q̈ (nq, B) solving ``M q̈ + N q̇ = G + Q_applied + τ`` for B states stored batch-last.

    ``model.forces`` are applied (each element evaluated by ``vmap`` over the states); muscles are
    not (use :func:`jaxmb.dynamics.forward_dynamics` for them). A state whose M is not positive
    definite gives NaN (no per-state error check, which would serialise the batch).
    """
    if model.muscles is not None and len(getattr(model.muscles, "names", ())) > 0:
        raise ModelError(
            f"batched_forward_dynamics: model {model.name!r} has muscles; use "
            "jaxmb.dynamics.forward_dynamics with vmap"
        )
    if model.prescribed is not None:
        raise ModelError(
            f"batched_forward_dynamics: model {model.name!r} has prescribed coordinates; use "
            "jaxmb.dynamics.forward_dynamics with vmap"
        )
    M, N, G = equations_of_motion_bm(model, q, qd, True, identity_map)
    rhs = G - N
    if model.forces:
        rhs = rhs + jax.vmap(lambda a, b: applied_forces(model, a, b, t), in_axes=1, out_axes=1)(
            q, qd
        )
    if tau is not None:
        if jnp.shape(tau) != q.shape:
            raise ValueError(
                f"batched_forward_dynamics: model {model.name!r}: tau must have the shape of q, "
                f"(nq={model.nq}, B) = {q.shape}, got {jnp.shape(tau)}"
            )
        rhs = rhs + tau
    return cholesky_solve_bm(M, rhs)
