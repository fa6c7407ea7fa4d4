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

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import matcalc
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
    "point_position",
    "point_velocity",
    "point_acceleration",
    "body_angular_velocity",
    "body_angular_acceleration",
]


def rotation(
    axis: Float[Array, "*batch 3"], angle: Float[Array, " *batch"]
) -> Float[Array, "*batch 3 3"]:
    """Eq. 39: ``I + Ṽ sin θ + 2 Ṽ² sin²(θ/2)`` (Rodrigues), batched over leading axes."""
    K = matcalc.skew(axis)
    s = jnp.sin(angle)[..., None, None]
    h = jnp.sin(0.5 * angle)[..., None, None]
    return jnp.eye(3, dtype=K.dtype) + s * K + 2.0 * h * h * (K @ K)


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


def compose_transforms(parent, local: Float[Array, "nb 4 4"]) -> Float[Array, "nb 4 4"]:
    """Eq. 40: ``⁰ᵢA₄ = ⁰ₚᵣ₍ᵢ₎A₄ ᵖʳ⁽ⁱ⁾ᵢA₄`` along the tree.

    A ``lax.scan`` over bodies in Featherstone order (constant compile time in the tree size); the
    ground is an identity slot at index nb.
    """
    nb = local.shape[0]
    par = jnp.asarray(np.where(np.asarray(parent) < 0, nb, parent), dtype=jnp.int32)
    init = jnp.concatenate([jnp.zeros_like(local), jnp.eye(4, dtype=local.dtype)[None]], axis=0)

    def step(A, inp):
        i, p, L = inp
        return A.at[i].set(A[p] @ L), None

    A, _ = jax.lax.scan(step, init, (jnp.arange(nb), par, local))
    return A[:nb]


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
