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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .math import matcalc
from .model import Model, ModelError

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
    "KinematicsCache",
    "kinematics",
    "TreeKinematics",
    "tree_kinematics",
    "spatial_twists",
    "point_jacobian_from",
    "point_position",
    "point_velocity",
    "point_acceleration",
    "body_angular_velocity",
    "body_angular_acceleration",
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


def _jump_schedule(parent) -> list[np.ndarray]:
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
    for ptr in _jump_schedule(parent):
        T = _bmm(jnp.concatenate([T, eye], axis=0)[ptr], T)
    return T


def body_transforms(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nb 4 4"]:
    """``⁰ᵢA₄`` of every body (Eqs. 38–41), shape (nb, 4, 4); q in the model's units."""
    return compose_transforms(model.parent, local_transforms(model, model.joint_map(q)))


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


class KinematicsCache:
    """Everything position-level kinematics computes at one q (a plain container, not a pytree API).

    Attributes:
        f, J, H: joint values (nj,), gradients (nj, nq), Hessians (nj, nq, nq).
        A: (nb, 4, 4) body poses. S: (nb, 4, 4) joint twists. Z: (nb, 4, 4, nq) with
        ``dA[i] = Z[i] A[i]``. dA: (nb, 4, 4, nq). ddA: (nb, 4, 4, nq, nq) or None.
    """

    def __init__(self, f, J, H, A, S, Z, dA, ddA):
        self.f, self.J, self.H, self.A, self.S, self.Z, self.dA, self.ddA = (
            f,
            J,
            H,
            A,
            S,
            Z,
            dA,
            ddA,
        )


def kinematics(model: Model, q: Float[Array, " nq"], second_order: bool = True) -> KinematicsCache:
    """Poses and their first (and second) derivatives with respect to q, in closed form."""
    f, J, H = model.joint_map.derivatives(q)
    A = compose_transforms(model.parent, local_transforms(model, f))
    S = joint_twists(model, A)
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    Z = jnp.einsum("ij,jab,jl->iabl", anc, S, J)
    dA = jnp.einsum("iabl,ibc->iacl", Z, A)
    ddA = None
    if second_order:
        # Σ_j H_j S_j + Σ_j ∇f_j[l] [Z_j[m], S_j] + Z_i[l] Z_i[m], all over j ∈ Anc(i) ∪ {i}
        comm = jnp.einsum("jabm,jbc->jacm", Z, S) - jnp.einsum("jab,jbcm->jacm", S, Z)
        T = (
            jnp.einsum("ij,jlm,jab->iablm", anc, H, S)
            + jnp.einsum("ij,jl,jabm->iablm", anc, J, comm)
            + jnp.einsum("iabl,ibcm->iaclm", Z, Z)
        )
        ddA = jnp.einsum("iablm,ibc->iaclm", T, A)
    return KinematicsCache(f, J, H, A, S, Z, dA, ddA)


class TreeKinematics(eqx.Module):
    """First-order kinematics at one q in ground-frame spatial form, shared by forward dynamics
    and every force element of one right-hand side (computed once: one joint-map evaluation, one
    pose pass, no second derivatives).

    Attributes:
        q: (nq,) the configuration. f, J, H: joint values (nj,), gradients (nj, nq), Hessians
        (nj, nq, nq). A: (nb, 4, 4) body poses. S: (nb, 6) joint twists ``(ω, v_O)`` about the
        ground origin per unit joint rate. Jb: (nb, 6, nq) body twist Jacobians,
        ``V_i = Jb[i] q̇ = Σ_{j ⪯ i} S_j ∇f_j q̇``.
    """

    q: Array
    f: Array
    J: Array
    H: Array
    A: Array
    S: Array
    Jb: Array


def spatial_twists(model: Model, A: Float[Array, "nb 4 4"]) -> Float[Array, "nb 6"]:
    """Joint twists ``S_j = (ω, v_O)`` (ground frame, about the origin) per unit joint rate.

    The 6-vector form of :func:`joint_twists`: a revolute joint turns about ``R_j V_θ`` through the
    body origin p_j (``v_O = p_j × ω``); a prismatic joint slides along V_d of the parent frame,
    ``R_j Rθᵀ V_d``.
    """
    R, p = A[:, :3, :3], A[:, :3, 3]
    rev = jnp.asarray(model.is_revolute)[:, None]
    w = small_einsum("iab,ib->ia", R, model.axis_theta)
    u = small_einsum("iba,ib->ia", rotation(model.axis_theta, model.theta), model.axis_d)
    slide = small_einsum("iab,ib->ia", R, u)
    zero = jnp.zeros_like(w)
    return jnp.where(
        rev,
        jnp.concatenate([w, jnp.cross(p, w)], axis=1),
        jnp.concatenate([zero, slide], axis=1),
    )


def tree_kinematics(model: Model, q: Float[Array, " nq"]) -> TreeKinematics:
    """:class:`TreeKinematics` at q: f, J, H once, poses by pointer jumping, twists and Jb."""
    f, J, H = model.joint_map.derivatives(q)
    A = compose_transforms(model.parent, local_transforms(model, f))
    S = spatial_twists(model, A)
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    Jb = small_einsum("ij,ja,jl->ial", anc, S, J)
    return TreeKinematics(q=q, f=f, J=J, H=H, A=A, S=S, Jb=Jb)


def point_jacobian_from(
    kin: TreeKinematics, body: int, point: Float[Array, " 3"]
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
    k = kinematics(model, q, second_order=False)
    omega = matcalc.unskew(jnp.einsum("iabl,l->iab", k.Z[:, :3, :3], qd))
    if frame == "body":
        omega = jnp.einsum("iba,ib->ia", k.A[:, :3, :3], omega)
    return omega


def body_angular_acceleration(model: Model, q, qd, qdd, frame: str = "ground"):
    """Angular acceleration (rad/s²) of every body, by differentiating ω(q, q̇) along (q̇, q̈)."""
    w = lambda q_, qd_: body_angular_velocity(model, q_, qd_, frame)
    return jax.jvp(w, (q, qd), (qd, qdd))[1]
