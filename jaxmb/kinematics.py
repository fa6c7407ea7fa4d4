"""Closed-form kinematics: ⁰ᵢA₄, D_i = ∂B_i/∂q, D'_i = ∂²B_i/∂q² and point motion (seed 001 §3-2).

Notation. ``A[i] = ⁰ᵢA₄`` is the 4×4 pose of body i in the ground frame; ``B_i = A[i]ᵀ``. The joint
matrix ``Â_j`` (Eqs. 70–71) is the derivative of the joint transform with respect to its own
variable, expressed in frame j: ``∂ᵖʳ⁽ʲ⁾ⱼA₄/∂f_j = ᵖʳ⁽ʲ⁾ⱼA₄ Â_j``, with
``Â_j = [[Ṽ_θ, 0], [0, 0]]`` for a revolute and ``Â_j = [[0, ʲₚᵣA V_d], [0, 0]]`` for a prismatic
joint.
(The extracted Eq. 70 prints ``Â_jᵀ`` on the left; autodiff says the matrix above is ``Â_j``.)

The closed form of Eq. 75, ``∂B_i/∂q = Σ_{j ∈ Anc(i)∪{i}} W_jiᵀ ⊗ ∇f_j`` with
``W_ji = ⁰ⱼA₄ Â_j ʲᵢA₄`` (Eq. 76), is evaluated here as ``W_ji = S_j A[i]`` with the joint's
ground-frame twist matrix ``S_j = A[j] Â_j A[j]⁻¹``, so that in tensor form

    ∂A[i]/∂q_l = Z_i[l] A[i],   Z_i[l] = Σ_{j ∈ Anc(i)∪{i}} ∇f_j[l] S_j.

Differentiating once more (``∂S_j/∂f_k = [S_k, S_j]`` for k an ancestor of j) gives the closed form
of Eq. 99 as

    ∂²A[i]/∂q_l∂q_m = ( Σ_j H_j[l,m] S_j + Σ_j ∇f_j[l] [Z_j[m], S_j] + Z_i[l] Z_i[m] ) A[i],

sums over j ∈ Anc(i)∪{i}. Every product has the ancestor's twist on the left, so the result is
symmetric in (l, m). These are einsum contractions over a static ancestor mask: no Python loop over
bodies, no materialized Kronecker or commutation matrices. :func:`kron_derivatives_recursive`
evaluates the seed's recursive Kronecker formulas (Eqs. 77 and 89) literally, with
:mod:`jaxmb.matcalc`, as an independent check.

Arrays are in tensor form ``dA[i, a, b, l] = ∂A[i]_ab/∂q_l`` and
``ddA[i, a, b, l, m] = ∂²A[i]_ab/∂q_l∂q_m``; :func:`kron_derivatives` returns the seed's
Definition-1 arrangement ``D_i`` of shape (4·nq, 4) and ``D'_i`` of shape (4·nq², 4).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .joint_maps.coordinate_functions import coupling_argument
from .math import matcalc
from .model import Model, ModelError, check_coordinate_vectors

__all__ = [
    "rotation",
    "local_transforms",
    "compose_transforms",
    "body_transforms",
    "joint_matrices",
    "joint_twists",
    "transform_derivatives",
    "kron_derivatives",
    "kron_derivatives_recursive",
    "jump_schedule",
    "take_bodies",
    "materialized",
    "world_poses",
    "joint_axes",
    "Kinematics",
    "kinematics",
    "tree_kinematics",
    "point_jacobian_from",
    "point_position",
    "point_velocity",
    "point_acceleration",
    "body_angular_velocity",
    "body_angular_acceleration",
    "FrameConstraints",
]


#: Above this many multiply-adds a contraction goes to ``jnp.einsum`` (a BLAS/Eigen dot); below,
#: it is a broadcast product and a sum that XLA fuses with its neighbours. On CPU each dot is a
#: separate call costing ~1.5 µs, more than the arithmetic of a whole small-tree right-hand side.
SMALL_CONTRACTION = 4096


def small_einsum(spec: str, *operands) -> Array:
    """``jnp.einsum(spec, *operands)`` (explicit ``->`` form, no repeated index within an operand),
    evaluated as one fused broadcast-multiply-sum when the index space is small."""
    ins, out = spec.replace(" ", "").split("->")
    ins = ins.split(",")
    sizes = {}
    for sub, x in zip(ins, operands, strict=True):
        sizes.update(zip(sub, x.shape, strict=True))
    if int(np.prod(list(sizes.values()))) > SMALL_CONTRACTION:
        return jnp.einsum(spec, *operands)
    letters = list(dict.fromkeys("".join(ins)))
    prod = None
    for sub, x in zip(ins, operands, strict=True):
        present = sorted(sub, key=letters.index)
        x = jnp.transpose(jnp.asarray(x), [sub.index(c) for c in present])
        x = x.reshape([sizes[c] if c in sub else 1 for c in letters])
        prod = x if prod is None else prod * x
    r = jnp.sum(prod, axis=tuple(i for i, c in enumerate(letters) if c not in out))
    kept = [c for c in letters if c in out]
    return jnp.transpose(r, [kept.index(c) for c in out])


def _bmm(a, b):
    """Batched small matrix product ``a @ b`` as a fused broadcast-sum (see SMALL_CONTRACTION)."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def rotation(
    axis: Float[Array, "*batch 3"], angle: Float[Array, " *batch"]
) -> Float[Array, "*batch 3 3"]:
    """Eq. 39: ``I + Ṽ sin θ + 2 Ṽ² sin²(θ/2)`` (Rodrigues), batched over leading axes."""
    K = matcalc.skew(axis)
    s = jnp.sin(angle)[..., None, None]
    h = jnp.sin(0.5 * angle)[..., None, None]
    return jnp.eye(3, dtype=K.dtype) + s * K + 2.0 * h * h * _bmm(K, K)


def _homogeneous(R, p):
    top = jnp.concatenate([R, p[..., :, None]], axis=-1)
    bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0], dtype=R.dtype), R.shape[:-2] + (1, 4))
    return jnp.concatenate([top, bottom], axis=-2)


def _joint_params(model: Model, f):
    rev = jnp.asarray(model.is_revolute)
    theta = jnp.where(rev, f, model.theta)
    d = jnp.where(rev, model.d, f)
    return theta, d


def local_transforms(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nb 4 4"]:
    """Eq. 38: ``ᵖʳ⁽ⁱ⁾ᵢA₄`` of every body from the joint variables f."""
    theta, d = _joint_params(model, f)
    R = rotation(model.axis_theta, theta)
    return _homogeneous(R, d[:, None] * model.axis_d)


def jump_schedule(parent) -> list[np.ndarray]:
    """Static pointer-jumping schedule: before step s, ptr[i] is the 2^s-th ancestor (or ground)."""
    nb = len(parent)
    ptr = np.where(np.asarray(parent) < 0, nb, np.asarray(parent))
    steps = []
    while np.any(ptr < nb):
        steps.append(ptr.copy())
        ptr = np.append(ptr, nb)[ptr]
    return steps


def compose_transforms(parent, local: Float[Array, "nb 4 4"]) -> Float[Array, "nb 4 4"]:
    """Eq. 40: ``⁰ᵢA₄ = ⁰ₚᵣ₍ᵢ₎A₄ ᵖʳ⁽ⁱ⁾ᵢA₄`` along the tree.

    Pointer jumping: ⌈log₂ depth⌉ batched 4×4 products (the ground is an identity slot at index
    nb). A sequential scan over bodies costs one dependent step per body; this is several times
    cheaper for the small trees of biomechanics and compiles to as few operations.
    """
    T = local
    eye = jnp.eye(4, dtype=T.dtype)[None]
    for ptr in jump_schedule(parent):
        T = _bmm(jnp.concatenate([T, eye], axis=0)[ptr], T)
    return T


def body_transforms(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nb 4 4"]:
    """``⁰ᵢA₄`` of every body (Eqs. 38–41), shape (nb, 4, 4); q in the model's units."""
    check_coordinate_vectors(model, "body_transforms", q=q)
    return _poses_from_joints(model, model.joint_map(q))


def joint_matrices(model: Model) -> Float[Array, "nb 4 4"]:
    """The joint matrices ``Â_i`` (Eqs. 70–71), constant in q, shape (nb, 4, 4)."""
    rev = jnp.asarray(model.is_revolute)[:, None, None]
    K = matcalc.skew(model.axis_theta)
    R = rotation(model.axis_theta, model.theta)
    v = jnp.einsum("nba,nb->na", R, model.axis_d)  # ⁱₚᵣA V_d = Rᵀ V_d
    Ahat_r = _homogeneous(K, jnp.zeros_like(v))
    Ahat_p = _homogeneous(jnp.zeros_like(K), v)
    Ahat_p = Ahat_p.at[:, 3, 3].set(0.0)
    Ahat_r = Ahat_r.at[:, 3, 3].set(0.0)
    return jnp.where(rev, Ahat_r, Ahat_p)


def _inv_homogeneous(A):
    R = A[..., :3, :3]
    p = A[..., :3, 3]
    Rt = jnp.swapaxes(R, -1, -2)
    return _homogeneous(Rt, -jnp.einsum("...ab,...b->...a", Rt, p))


def joint_twists(model: Model, A: Float[Array, "nb 4 4"]) -> Float[Array, "nb 4 4"]:
    """Ground-frame twist matrices ``S_j = A[j] Â_j A[j]⁻¹``: ``∂A[i]/∂f_j = S_j A[i]``, j ⪯ i."""
    return A @ joint_matrices(model) @ _inv_homogeneous(A)


# ------------------------------------------------------------------------------------------------
# The one world-pose pass, batch-last: component axes first, then bodies, then the batch (a 3-vector
# per body is (3, nb, B), a rotation (3, 3, nb, B)), so that every operation is elementwise over
# contiguous (nb, B) slabs. A single state is the batch B = 1; the tree dynamics
# (:mod:`jaxmb.dynamics.tree`) runs on these arrays directly.

def materialized(x: Array) -> Array:
    """x computed once: XLA:CPU does not fuse a product with the identity into its consumers, and
    otherwise recomputes an expensive producer (sin, a closed-loop solution) in each (9 outputs of
    one sin, chain(30), B = 4096: 4.0 → 1.2 µs per state; ``optimization_barrier`` did not help)."""
    k = x.shape[0]
    return (jnp.eye(k, dtype=x.dtype) @ x.reshape(k, -1)).reshape(x.shape)


def mv3(R, v):
    """R v for R (3, 3, ..., B), v (3, ..., B), elementwise over the trailing slabs (an einsum is
    nb·B tiny CPU dots). One state: a broadcast product and a sum, which XLA fuses into few loops
    (1.7× faster per state); a batch: no reduction over a leading axis, which XLA:CPU does not
    vectorise over B (pose pass 3-10× slower)."""
    if R.shape[-1] == 1 and v.shape[-1] == 1:
        return jnp.sum(R * v[None], axis=1)
    # rows stacked: unstacked, a chunked batch rounds differently from the whole (test_batched)
    return jnp.stack([R[r, 0] * v[0] + R[r, 1] * v[1] + R[r, 2] * v[2] for r in range(3)])


def mm3(A, B):
    """A B for (3, 3, ..., B): as :func:`mv3`; a batch adds 3 products (a 9-entry stack is slow)."""
    if A.shape[-1] == 1 and B.shape[-1] == 1:
        return jnp.sum(A[:, :, None] * B[None], axis=1)
    return A[:, 0, None] * B[None, 0] + A[:, 1, None] * B[None, 1] + A[:, 2, None] * B[None, 2]


def cross3(a, b):
    """a × b for (3, ...) vectors."""
    return jnp.stack(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    )


def _rotation_sc(axis, s, c):
    """R(axis, θ) = cos θ 1 + sin θ Ṽ + (1 − cos θ) V Vᵀ (Eq. 39) from sin θ, cos θ; (3, 3, ...)."""
    x, y, z = axis[0], axis[1], axis[2]
    k = 1.0 - c
    rows = (
        (c + k * x * x, k * x * y - s * z, k * x * z + s * y),
        (k * y * x + s * z, c + k * y * y, k * y * z - s * x),
        (k * z * x - s * y, k * z * y + s * x, c + k * z * z),
    )
    return jnp.stack([jnp.stack(r) for r in rows])


def take_bodies(x, idx, ground=None):
    """``x[..., idx, :]`` along the bodies axis (−2) of a batch-last array, for a static index array
    ``idx``; index nb picks ``ground`` (broadcast to one body's slab; zero when None).

    Runs of consecutive indices become slices, runs of one index broadcasts: a chain's shifted
    index (a pointer-jumping step) is two slices, not an XLA gather."""
    idx = np.asarray(idx)
    nb = x.shape[-2]
    slot = jnp.zeros_like(x[..., :1, :]) if ground is None else jnp.broadcast_to(
        ground, x[..., :1, :].shape).astype(x.dtype)
    full = jnp.concatenate([x, slot], axis=-2)
    runs, k = [], 0
    while k < len(idx):
        e = k + 1
        if idx[k] == nb or (e < len(idx) and idx[e] == idx[k]):
            while e < len(idx) and idx[e] == idx[k]:
                e += 1
            piece = full[..., idx[k] : idx[k] + 1, :]
            runs.append(jnp.broadcast_to(piece, piece.shape[:-2] + (e - k, piece.shape[-1])))
        else:
            while e < len(idx) and idx[e] == idx[e - 1] + 1 and idx[e] < nb:
                e += 1
            runs.append(full[..., idx[k] : idx[k] + e - k, :])
        k = e
    if len(runs) > 8:  # an irregular tree: one gather
        return jnp.take(full, jnp.asarray(idx), axis=-2)
    return runs[0] if len(runs) == 1 else jnp.concatenate(runs, axis=-2)


def world_poses(model: Model, f: Float[Array, "nj B"]):
    """Eq. 40 for B joint-variable vectors at once: rotations R_i (3, 3, nb, B), origins o_i
    (3, nb, B) (m) and parent rotations R_λ(i) (3, 3, nb, B), all in the ground frame.

    ``R_i = R_λ R(V_θ, θ_i)``, ``o_i = o_λ + R_λ p_i``, by pointer jumping
    (:func:`jump_schedule`): ⌈log₂ depth⌉ steps ``T_i ← T_ptr(i) T_i``, each one vector operation
    over all bodies and states; neither the trace nor the run has a step per body. For a batch
    (B > 1) each step's result is materialized: XLA would otherwise fuse the steps into one loop
    that recomputes the earlier steps for every entry. A ``lax.scan`` over the depth levels of
    the tree does O(nb) work instead of O(nb log nb), but its steps cost more than
    their arithmetic on a cache-sized chunk of states (chain(30), 32 states: 30 steps against 5;
    M 14.6 → 11.3 µs per state), and over a whole batch of 4096 its (D, 3, 3, W, B) stacks and
    the transposes into and out of the level layout are memory-bound (more than the chunked loop).
    """
    nb, B = f.shape
    dtype = f.dtype
    rev = jnp.asarray(model.is_revolute)
    ang = jnp.where(rev[:, None], f, model.theta.astype(dtype)[:, None])  # (nb, B)
    dist = jnp.where(rev[:, None], model.d.astype(dtype)[:, None], f)
    a = model.axis_theta.astype(dtype).T[:, :, None]  # (3, nb, 1)
    keep = jax.lax.optimization_barrier if B == 1 else materialized
    # XLA would recompute sin and cos in each of the 9 entries: for a batch (chain(30): 3.4×
    # slower), and for one state in each entry of the (3, 4, nb) pose that the first jump step
    # writes (per right-hand side in a compiled loop, µs: the shoulder's forward dynamics under
    # its computed torque 9.4–9.6 → 8.3–8.4, Andrews 7.4 → 6.9–7.2, chain(30) 19.7–19.9 → 17.6)
    sc = keep(jnp.stack([jnp.sin(ang), jnp.cos(ang)]))
    R = _rotation_sc(a, sc[0], sc[1])  # (3, 3, nb, B), local
    o = model.axis_d.astype(dtype).T[:, :, None] * dist[None]  # (3, nb, B), local
    eye = jnp.eye(3, dtype=dtype)[:, :, None, None]
    par = np.where(np.asarray(model.parent) < 0, nb, np.asarray(model.parent))
    if B == 1:
        # one state: each step composes the 3×4 [R | o] with the parent's as one product with
        # the 4×4 homogeneous form, so a step is one take and one fused multiply-sum; as R and o
        # apart it is two of each (XLA:CPU kernels cost more than their arithmetic here: the
        # shoulder's 14 bodies, 4 steps, 16 → 8 kernels)
        T = jnp.concatenate([R, o[:, None]], axis=1)  # (3, 4, nb, 1)
        ground = jnp.eye(3, 4, dtype=dtype)[:, :, None, None]
        bottom = np.zeros((1, 4, nb, 1))
        bottom[0, 3] = 1.0  # the homogeneous row (0, 0, 0, 1) of every body
        bottom = jnp.asarray(bottom, dtype=dtype)
        for ptr in jump_schedule(model.parent):
            Tp = take_bodies(T, ptr, ground)  # parent-side transforms, ground = [1 | 0]
            T = jnp.sum(Tp[:, :, None] * jnp.concatenate([T, bottom])[None], axis=1)
        R, o = T[:, :3], T[:, 3]
        return R, o, take_bodies(R, par, eye)
    for ptr in jump_schedule(model.parent):
        Rp, op = take_bodies(R, ptr, eye), take_bodies(o, ptr)
        R, o = keep(mm3(Rp, R)), keep(op + mv3(Rp, o))
    return R, o, take_bodies(R, par, eye)


def joint_axes(model: Model, o, Rpar):
    """Joint twists per unit joint rate, ``S = (ω, v_O)`` about the ground origin, batch-last:
    angular part (3, nb, B) and linear part (3, nb, B) from :func:`world_poses`'s o and R_λ.

    A revolute joint turns about ``R_λ V_θ`` (= R_i V_θ) through the body origin o_i
    (``v_O = o_i × ω``); a prismatic joint slides along ``R_λ V_d``.
    """
    dtype = o.dtype
    rev = jnp.asarray(model.is_revolute)[:, None]
    w = mv3(Rpar, model.axis_theta.astype(dtype).T[:, :, None])
    Sw = jnp.where(rev, w, 0.0)
    Sv = jnp.where(rev, cross3(o, w), mv3(Rpar, model.axis_d.astype(dtype).T[:, :, None]))
    return Sw, Sv


def _poses_from_joints(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nb 4 4"]:
    R, o, _ = world_poses(model, f[:, None])
    return _homogeneous(jnp.moveaxis(R[..., 0], 2, 0), o[..., 0].T)


class Kinematics(eqx.Module):
    """Position-level kinematics at one q: the one state container that dynamics, force elements
    and muscle paths read (computed once per configuration; a pytree, so it vmaps batch-first).

    Attributes:
        q: (nq,) the configuration. f, J, H: joint values (nj,), gradients (nj, nq), Hessians
            (nj, nq, nq).
        A: (nb, 4, 4) body poses ⁰ᵢA₄ (m for the translations).
        S: (nb, 6) joint twists ``(ω, v_O)`` about the ground origin per unit joint rate.
        Jb: (nb, 6, nq) body twist Jacobians, ``V_i = Jb[i] q̇ = Σ_{j ⪯ i} S_j ∇f_j q̇``; the
            twist matrix of ``Jb[i, :, l]`` is ``Z_i[l] = ∂A[i]/∂q_l A[i]⁻¹``.
        dA: (nb, 4, 4, nq) ``∂A/∂q`` (Eq. 75), ddA: (nb, 4, 4, nq, nq) ``∂²A/∂q²`` (Eq. 99): only
            from :func:`kinematics` (the closed form), ``None`` from :func:`tree_kinematics`.
    """

    q: Array
    f: Array
    J: Array
    H: Array
    A: Array
    S: Array
    Jb: Array
    dA: Array | None = None
    ddA: Array | None = None


def tree_kinematics(model: Model, q: Float[Array, " nq"]) -> Kinematics:
    """:class:`Kinematics` at q without the closed-form derivatives: f, J, H once, the poses of
    :func:`world_poses`, twists and Jb."""
    check_coordinate_vectors(model, "kinematics", q=q)
    f, J, H = model.joint_map.derivatives(q)
    R, o, Rpar = world_poses(model, f[:, None].astype(jnp.result_type(f, model.mass)))
    Sw, Sv = joint_axes(model, o, Rpar)
    A = _homogeneous(jnp.moveaxis(R[..., 0], 2, 0), o[..., 0].T)
    S = jnp.concatenate([Sw[..., 0].T, Sv[..., 0].T], axis=1)
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    Jb = small_einsum("ij,ja,jl->ial", anc, S, J)
    return Kinematics(q=q, f=f, J=J, H=H, A=A, S=S, Jb=Jb)


def kinematics(model: Model, q: Float[Array, " nq"], second_order: bool = True) -> Kinematics:
    """:class:`Kinematics` at q with ∂A/∂q and (``second_order``) ∂²A/∂q² in closed form."""
    k = tree_kinematics(model, q)
    A = k.A
    S = joint_twists(model, A)  # (nb, 4, 4) twist matrices
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    Z = jnp.einsum("ij,jab,jl->iabl", anc, S, k.J)
    dA = jnp.einsum("iabl,ibc->iacl", Z, A)
    ddA = None
    if second_order:
        # Σ_j H_j S_j + Σ_j ∇f_j[l] [Z_j[m], S_j] + Z_i[l] Z_i[m], all over j ∈ Anc(i) ∪ {i}
        comm = jnp.einsum("jabm,jbc->jacm", Z, S) - jnp.einsum("jab,jbcm->jacm", S, Z)
        T = (
            jnp.einsum("ij,jlm,jab->iablm", anc, k.H, S)
            + jnp.einsum("ij,jl,jabm->iablm", anc, k.J, comm)
            + jnp.einsum("iabl,ibcm->iaclm", Z, Z)
        )
        ddA = jnp.einsum("iablm,ibc->iaclm", T, A)
    return eqx.tree_at(lambda x: (x.dA, x.ddA), k, (dA, ddA), is_leaf=lambda x: x is None)


def point_jacobian_from(
    kin: Kinematics, body: int, point: Float[Array, " 3"]
) -> tuple[Float[Array, " 3"], Float[Array, "3 nq"]]:
    """Ground position r (m) of a point fixed in body ``body`` (index; -1 = ground, the point then
    in ground coordinates) and ``∂r/∂q`` (3, nq) from the cached twists: column l is
    ``ω_l × r + v_l`` with ``(ω_l, v_l) = Jb[body, :, l]``."""
    point = jnp.asarray(point)
    if body < 0:
        return point, jnp.zeros((3, kin.J.shape[1]), dtype=jnp.result_type(point, kin.J))
    A = kin.A[body]
    r = jnp.sum(A[:3, :3] * point, axis=1) + A[:3, 3]
    w, v = kin.Jb[body, :3], kin.Jb[body, 3:]
    return r, jnp.cross(w.T, r).T + v


def transform_derivatives(model: Model, q: Float[Array, " nq"]):
    """Closed form ``(A, dA, ddA)``: poses (nb,4,4), ∂A/∂q (nb,4,4,nq), ∂²A/∂q² (nb,4,4,nq,nq)."""
    k = kinematics(model, q)
    return k.A, k.dA, k.ddA


def kron_derivatives(model: Model, q: Float[Array, " nq"]):
    """The seed's ``D_i = ∂B_i/∂q`` (nb, 4·nq, 4) and ``D'_i = ∂²B_i/∂q²`` (nb, 4·nq², 4).

    Definition 1 arrangement with ``B_i = ⁰ᵢA₄ᵀ``: ``D_i[a*nq + l, b] = ∂B_i[a, b]/∂q_l`` and
    ``D'_i[(a*nq + l)*nq + m, b] = ∂²B_i[a, b]/∂q_l∂q_m``.
    """
    _, dA, ddA = transform_derivatives(model, q)
    nb, nq = dA.shape[0], dA.shape[-1]
    dB = jnp.swapaxes(dA, 1, 2)  # (nb, a, b, l) of B = Aᵀ
    D = jnp.reshape(jnp.transpose(dB, (0, 1, 3, 2)), (nb, 4 * nq, 4))
    ddB = jnp.swapaxes(ddA, 1, 2)  # (nb, a, b, l, m)
    Dp = jnp.reshape(jnp.transpose(ddB, (0, 1, 3, 4, 2)), (nb, 4 * nq * nq, 4))
    return D, Dp


def kron_derivatives_recursive(model: Model, q: Float[Array, " nq"]):
    """``D_i`` and ``D'_i`` by the seed's recursive Kronecker formulas (Eqs. 77 and 89), literally.

    A Python loop over bodies with materialized Kronecker and commutation matrices: the reference
    implementation of the seed's calculus, for tests and small models, not for speed.
    """
    f, J, H = model.joint_map.derivatives(q)
    nq = J.shape[1]
    local = local_transforms(model, f)
    Ahat = joint_matrices(model)
    I_nq = jnp.eye(nq, dtype=local.dtype)
    U = matcalc.commutation_matrix(nq, nq, local.dtype)
    A = [None] * model.nb
    Ds, Dps = [], []
    for i in range(model.nb):
        p = model.parent[i]
        Ai = local[i] if p < 0 else A[p] @ local[i]
        A[i] = Ai
        Wii_T = (Ai @ Ahat[i]).T  # W_ii = ⁰ᵢA₄ Â_i
        gi = J[i][:, None]
        Di = jnp.kron(Wii_T, gi)  # Eq. 77, first term
        # Eq. 89, first two terms: (Â_iᵀ ⊗ U)(D_i ⊗ ∇f_i) + W_iiᵀ ⊗ vec(H_i); the first term is
        # completed once D_i is known.
        Dpi = jnp.kron(Wii_T, matcalc.vec(H[i])[:, None])
        if p >= 0:
            LT = local[i].T
            Di = Di + jnp.kron(LT, I_nq) @ Ds[p]
            Dpi = (
                Dpi
                # Eq. 88 prints W_iiᵀ here; the derivative of ᵖʳ⁽ⁱ⁾ᵢA₄ᵀ ⊗ I is
                # (Â_iᵀ ᵖʳ⁽ⁱ⁾ᵢA₄ᵀ) ⊗ I ⊗ ∇f_i
                + jnp.kron(jnp.kron(Ahat[i].T @ LT, I_nq), gi) @ Ds[p]
                + jnp.kron(LT, jnp.eye(nq * nq, dtype=LT.dtype)) @ Dps[p]
            )
        Dpi = Dpi + jnp.kron(Ahat[i].T, U) @ jnp.kron(Di, gi)
        Ds.append(Di)
        Dps.append(Dpi)
    return jnp.stack(Ds), jnp.stack(Dps)


def _homog_point(point):
    point = jnp.asarray(point)
    return jnp.concatenate([point, jnp.ones(point.shape[:-1] + (1,), dtype=point.dtype)], -1)


def _resolve(model: Model, body, point):
    if point is None:
        if isinstance(body, str) and body in model.points:
            b, r = model.points[body]
            return b, r
        raise ModelError(
            f"{body!r} is not a named point of the model (named points: {sorted(model.points)});"
            " give a body and a point in its frame"
        )
    b = model.body_index(body)
    r = jnp.asarray(point)
    if r.shape != (3,):
        raise ModelError(f"point on body {body!r} must be a 3-vector, got shape {r.shape}")
    return b, r


def point_position(model: Model, body, point, q) -> Float[Array, " 3"]:
    """Eq. 41: ground-frame position (m) of ``point`` (3,), given in body ``body``'s frame.

    ``body`` is an index or a name; a named model point may be given as ``body`` with
    ``point=None``.
    """
    b, r = _resolve(model, body, point)
    if b < 0:
        return r
    A = body_transforms(model, q)[b]
    return A[:3, :3] @ r + A[:3, 3]


def point_velocity(model: Model, body, point, q, qd) -> Float[Array, " 3"]:
    """Eq. 44: ``v = D_iᵀ ([r; 1] ⊗ q̇)``, ground-frame velocity (m/s) of a body-fixed point."""
    b, r = _resolve(model, body, point)
    if b < 0:
        return jnp.zeros(3, dtype=jnp.result_type(r, qd))
    k = kinematics(model, q, second_order=False)
    return jnp.einsum("abl,b,l->a", k.dA[b, :3], _homog_point(r), qd)


def point_acceleration(model: Model, body, point, q, qd, qdd) -> Float[Array, " 3"]:
    """Eq. 57: ``a = D'_iᵀ([r;1] ⊗ q̇ ⊗ q̇) + D_iᵀ([r;1] ⊗ q̈)``, ground frame (m/s²)."""
    b, r = _resolve(model, body, point)
    if b < 0:
        return jnp.zeros(3, dtype=jnp.result_type(r, qd))
    k = kinematics(model, q)
    rh = _homog_point(r)
    return jnp.einsum("ablm,b,l,m->a", k.ddA[b, :3], rh, qd, qd) + jnp.einsum(
        "abl,b,l->a", k.dA[b, :3], rh, qdd
    )


def body_angular_velocity(model: Model, q, qd, frame: str = "ground") -> Float[Array, "nb 3"]:
    """Angular velocity (rad/s) of every body, in the ground frame or (``frame="body"``) body axes.

    From ``Ȧ = (Σ_l Z[l] q̇_l) A``: the rotational block of the twist is ``ω̃``.
    """
    if frame not in ("ground", "body"):
        raise ValueError(f"frame must be 'ground' or 'body', got {frame!r}")
    k = tree_kinematics(model, q)
    omega = small_einsum("ial,l->ia", k.Jb[:, :3], qd)  # the rotational part of the twist
    if frame == "body":
        omega = jnp.einsum("iba,ib->ia", k.A[:, :3, :3], omega)
    return omega


def body_angular_acceleration(model: Model, q, qd, qdd, frame: str = "ground"):
    """Angular acceleration (rad/s²) of every body, by differentiating ω(q, q̇) along (q̇, q̈)."""
    w = lambda q_, qd_: body_angular_velocity(model, q_, qd_, frame)
    return jax.jvp(w, (q, qd), (qd, qdd))[1]


# -------------------------------------------------------------------------------------------------
# Holonomic constraints between body frames (closed loops of imported models)
# -------------------------------------------------------------------------------------------------

#: Constraint kinds of :class:`FrameConstraints` and their number of equations.
FRAME_CONSTRAINT_ROWS = {"weld": 6, "point": 3, "point_on_line": 2, "distance": 1}


@dataclasses.dataclass(frozen=True)
class FrameConstraints:
    """Residual ``g(Q, q, params)`` of holonomic constraints between body frames and couplings of
    coordinates, for an :class:`~jaxmb.joint_maps.ImplicitMap` whose joint vector is a model's full
    coordinate vector ``Q`` (e.g. every OpenSim coordinate): the body poses come from
    ``params["tree"]`` (a :class:`Model` whose joint map has ``joint_values(Q)``) by Eqs. 38–40.

    Constraint k joins frame 1, ``X1[k]`` (4, 4) on body ``bodies[k][0]`` (-1: the ground), and
    frame 2, ``X2[k]`` on body ``bodies[k][1]``; with ``A1 = ⁰A_b1 X1``, ``A2 = ⁰A_b2 X2``:

    - ``"weld"`` (6 rows): ``p2 − p1`` and ``vee(R1ᵀR2 − R2ᵀR1)/2`` (zero when the frames coincide);
    - ``"point"`` (3): ``p2 − p1`` (the frames' origins coincide);
    - ``"point_on_line"`` (2): frame 1's origin and x axis are the line, frame 2's origin the
      follower point: ``(p2 − p1)·y1`` and ``(p2 − p1)·z1``;
    - ``"distance"`` (1): ``|p2 − p1| − value[k]``.

    Coupling c (``"couplings"`` of params: functions of one coordinate, ``"scales"``):
    ``Q[coupled[c]] − scale_c · g_c(Q[coupling_sources[c]])``. Units: m, rad (weld rotation rows:
    sine of the angle error), or the coupled coordinate's unit.

    Attributes (all static):
        kinds: per constraint, one of :data:`FRAME_CONSTRAINT_ROWS`.
        bodies: per constraint, (body of frame 1, body of frame 2), jaxmb indices.
        coupled, coupling_sources: per coupling, the indices in Q of the coupled coordinate and of
            the one it follows.
    """

    kinds: tuple[str, ...]
    bodies: tuple[tuple[int, int], ...]
    coupled: tuple[int, ...] = ()
    coupling_sources: tuple[int, ...] = ()

    def __post_init__(self):
        for k in self.kinds:
            if k not in FRAME_CONSTRAINT_ROWS:
                raise ModelError(
                    f"FrameConstraints: unknown constraint kind {k!r} "
                    f"(known: {sorted(FRAME_CONSTRAINT_ROWS)})"
                )

    @property
    def rows(self) -> int:
        """Number of equations."""
        return sum(FRAME_CONSTRAINT_ROWS[k] for k in self.kinds) + len(self.coupled)

    def frames(self, Q: Float[Array, " nQ"], params) -> tuple[Array, Array]:
        """Ground poses (nc, 4, 4) of frames 1 and 2 at the full coordinates Q."""
        tree = params["tree"]
        f = tree.joint_map.joint_values(Q)
        A = compose_transforms(tree.parent, local_transforms(tree, f))
        Ag = jnp.concatenate([A, jnp.eye(4, dtype=A.dtype)[None]], axis=0)  # ground at nb
        nb = A.shape[0]
        i1 = np.asarray([b if b >= 0 else nb for b, _ in self.bodies], dtype=int)
        i2 = np.asarray([b if b >= 0 else nb for _, b in self.bodies], dtype=int)
        X1, X2 = params["X1"].astype(A.dtype), params["X2"].astype(A.dtype)
        return _bmm(Ag[i1], X1), _bmm(Ag[i2], X2)

    def __call__(self, Q: Float[Array, " nQ"], q, params) -> Float[Array, " m"]:
        rows = []
        if self.kinds:
            A1, A2 = self.frames(Q, params)
            for k, kind in enumerate(self.kinds):
                R1, R2 = A1[k, :3, :3], A2[k, :3, :3]
                dp = A2[k, :3, 3] - A1[k, :3, 3]
                if kind in ("weld", "point"):
                    rows.append(dp)
                if kind == "weld":
                    S = R1.T @ R2
                    vee = jnp.stack([S[2, 1] - S[1, 2], S[0, 2] - S[2, 0], S[1, 0] - S[0, 1]])
                    rows.append(0.5 * vee)
                elif kind == "point_on_line":
                    rows.append(jnp.stack([dp @ R1[:, 1], dp @ R1[:, 2]]))
                elif kind == "distance":
                    rows.append(jnp.sqrt(dp @ dp)[None] - params["value"][k])
        for c, (d, s) in enumerate(zip(self.coupled, self.coupling_sources, strict=True)):
            g = params["couplings"][c]
            rows.append((Q[d] - params["scales"][c] * g(coupling_argument(Q, s)))[None])
        return jnp.concatenate(rows)
