"""Equations of motion ``M(q) q̈ + N(q, q̇) q̇ = G(q) + Q(q, q̇, t) + τ`` (seed 001 §4, Eq. 198).

Three independent routes to M, N q̇ and G, selected by ``method``:

``"tree"`` (default, fast)
    Composite-rigid-body algorithm and recursive Newton–Euler in the *joint variables* θ = f(q)
    (one per body), projected to q by the chain rule through the joint map:
    ``θ̇ = J q̇``, ``θ̈ = J q̈ + γ`` with ``γ_i = q̇ᵀ H_i q̇``, so ``M = Jᵀ M_θ J`` and
    ``N q̇ = Jᵀ (M_θ γ + c_θ(θ, θ̇))``. Spatial vectors are expressed in the ground frame (twist
    ``(ω, v_O)`` about the ground origin), where every joint axis ``S_j`` is a plain 6-vector, the
    velocity recursion ``V_i = V_pr(i) + S_i θ̇_i`` is the ancestor sum ``V = Anc · (S θ̇)``, and the
    force recursion ``F_pr(i) += F_i`` is the descendant sum ``F = Ancᵀ f``. Both are one matrix
    product with the static ancestor mask, so nothing unrolls per body and a batch vectorizes. The
    body poses come from pointer jumping (⌈log₂ depth⌉ batched 4×4 products).

``"closed_form"`` (the seed's Kronecker calculus, in tensor form)
    With the body pseudo-inertia ``J_i = ∫ [r;1][r;1]ᵀ dm`` (Eq. 131, body frame) and the
    closed-form derivatives ``dA_i[k] = ∂⁰ᵢA₄/∂q_k``, ``ddA_i[l,m] = ∂²⁰ᵢA₄/∂q_l∂q_m`` of
    :func:`jaxmb.kinematics.kinematics` (Eqs. 75, 99), Eqs. 145, 147 and 187 read

        M_kl   = Σ_i tr( dA_i[k] J_i dA_i[l]ᵀ )                              (Eq. 145)
        (Nq̇)_k = Σ_i tr( dA_i[k] J_i (Σ_lm ddA_i[l,m] q̇_l q̇_m)ᵀ )           (Eq. 147, corrected)
        G_k    = Σ_i m_i gᵀ (dA_i[k] [c_i; 1])₁:₃                           (Eq. 187)

    The printed Eq. 147 repeats Eq. 145 (``D_i D_iᵀ``); the second part of Eq. 126 instead gives
    ``δqᵀ N_i q̇ = tr( D'_iᵀ (J_i ⊗ q̇^[2] δqᵀ) D_i )``, i.e. with ``C_2 = vec(I₄) ⊗ I_{nq²}``

        N_i q̇ = C_1ᵀ (J_i ⊗ U_{nq,4}ᵀ)(D_i D'_iᵀ ⊗ I₄)(I₄ ⊗ U_{nq²,4}) C_2 (q̇ ⊗ q̇),

    whose index form is the trace above (the tests check both against each other). Derivation:
    the point acceleration is ``a_p = Σ_k dA[k] r̄ q̈_k + Σ_lm ddA[l,m] r̄ q̇_l q̇_m`` (Eq. 57) and
    ``δr_p = Σ_k dA[k] r̄ δq_k``; integrating ``a_p · δr_p`` over the body with ``∫ r̄ r̄ᵀ dm = J_i``
    gives ``δqᵀ(M q̈ + N q̇)`` with the traces above. The same follows from Lagrange's equations with
    ``T = ½ Σ_i tr(Ȧ_i J_i Ȧ_iᵀ)``: the ``ddA``-terms of ``d/dt ∂T/∂q̇`` and ``∂T/∂q`` cancel by the
    symmetry of ``ddA`` in (l, m), leaving the quadratic-velocity acceleration term alone.

``"lagrangian"`` (slow referee)
    ``L = T − V`` with T from the body velocities (``½ m |v_c|² + ½ ωᵀ I ω``) and V from the
    centre-of-mass heights, differentiated by JAX: ``M = ∂²T/∂q̇²``,
    ``N q̇ = (∂²T/∂q̇∂q) q̇ − ∂T/∂q``, ``G = −∂V/∂q``.

Units: SI throughout; generalized forces in N or N·m per unit of each coordinate.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Float

from ..kinematics import (
    TreeKinematics,
    compose_transforms,
    kinematics,
    local_transforms,
    small_einsum,
    spatial_twists,
    tree_kinematics,
)
from ..math import matcalc
from ..model import Model

__all__ = [
    "METHODS",
    "pseudo_inertia",
    "joint_space_mass_matrix",
    "mass_matrix",
    "bias_forces",
    "gravity_forces",
    "applied_forces",
    "generalized_forces",
    "forward_dynamics",
    "inverse_dynamics",
    "kinetic_energy",
    "potential_energy",
    "total_energy",
    "christoffel_matrix",
    "PremodelDynamics",
    "premodel_dynamics",
]

METHODS = ("tree", "closed_form", "lagrangian")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


# ----------------------------------------------------------------------------------------------
# Inertial parameters
# ----------------------------------------------------------------------------------------------


def pseudo_inertia(model: Model) -> Float[Array, "nb 4 4"]:
    """Eq. 131: ``J_i = ∫ [r;1][r;1]ᵀ dm`` in body i's frame (kg·m², kg·m, kg), shape (nb, 4, 4).

    ``∫ r rᵀ dm = m c cᵀ + ½ tr(I_c) 1 − I_c`` with I_c the inertia tensor about the centre of mass.
    """
    m, c, Ic = model.mass, model.com, model.inertia
    second = (
        m[:, None, None] * c[:, :, None] * c[:, None, :]
        + 0.5 * jnp.trace(Ic, axis1=1, axis2=2)[:, None, None] * jnp.eye(3, dtype=Ic.dtype)
        - Ic
    )
    mc = m[:, None] * c
    top = jnp.concatenate([second, mc[:, :, None]], axis=2)
    bottom = jnp.concatenate([mc[:, None, :], m[:, None, None]], axis=2)
    return jnp.concatenate([top, bottom], axis=1)


# ----------------------------------------------------------------------------------------------
# Tree path: ground-frame spatial algebra over the static ancestor mask
# ----------------------------------------------------------------------------------------------


def _world_poses(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nb 4 4"]:
    """``⁰ᵢA₄`` by pointer jumping (:func:`jaxmb.kinematics.compose_transforms`)."""
    return compose_transforms(model.parent, local_transforms(model, f))


class _TreeState(eqx.Module):
    """Ground-frame spatial quantities at one configuration (internal)."""

    S: Array  # (nb, 6) joint axes (ω, v_O)
    m: Array  # (nb,)
    c: Array  # (nb, 3) centres of mass, ground frame
    Ic: Array  # (nb, 3, 3) inertia about the com, ground axes
    anc: Array  # (nb, nb) ancestor mask, anc[i, j] = j ⪯ i


def _tree_state(model: Model, f: Float[Array, " nj"], A=None) -> _TreeState:
    if A is None:
        A = _world_poses(model, f)
    return _state_from_poses(model, A, spatial_twists(model, A))


def _state_from_poses(model: Model, A, S) -> _TreeState:
    R, p = A[:, :3, :3], A[:, :3, 3]
    c = p + small_einsum("iab,ib->ia", R, model.com)
    Ic = small_einsum("iab,ibc,idc->iad", R, model.inertia, R)
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    return _TreeState(S=S, m=model.mass, c=c, Ic=Ic, anc=anc)


def _inertia_apply(ts: _TreeState, xi: Float[Array, "nb 6"]) -> Float[Array, "nb 6"]:
    """Momentum ``I_i ξ_i`` (about the ground origin) of every body for twists ξ (nb, 6)."""
    om, v = xi[:, :3], xi[:, 3:]
    lin = ts.m[:, None] * (v + jnp.cross(om, ts.c))
    ang = small_einsum("iab,ib->ia", ts.Ic, om) + jnp.cross(ts.c, lin)
    return jnp.concatenate([ang, lin], axis=1)


def _cross_motion(a, b):
    """Spatial motion cross product ``a × b`` for (…, 6) twists."""
    return jnp.concatenate(
        [
            jnp.cross(a[..., :3], b[..., :3]),
            jnp.cross(a[..., :3], b[..., 3:]) + jnp.cross(a[..., 3:], b[..., :3]),
        ],
        axis=-1,
    )


def _cross_force(a, h):
    """Spatial force cross product ``a ×* h`` for twists a and wrenches/momenta h (…, 6)."""
    return jnp.concatenate(
        [
            jnp.cross(a[..., :3], h[..., :3]) + jnp.cross(a[..., 3:], h[..., 3:]),
            jnp.cross(a[..., :3], h[..., 3:]),
        ],
        axis=-1,
    )


def _rnea_theta(ts: _TreeState, thd, thdd, gravity) -> Float[Array, " nj"]:
    """Recursive Newton–Euler in joint space: joint forces for θ̇, θ̈ and gravity (None = off)."""
    St = ts.S * thd[:, None]
    V = ts.anc @ St
    acc_j = ts.S * thdd[:, None] + _cross_motion(V, St)  # Ṡ_j θ̇_j = V_j × S_j θ̇_j
    Acc = ts.anc @ acc_j
    if gravity is not None:
        Acc = Acc + jnp.concatenate([jnp.zeros(3, Acc.dtype), -gravity])[None, :]
    f = _inertia_apply(ts, Acc) + _cross_force(V, _inertia_apply(ts, V))
    F = ts.anc.T @ f
    return jnp.sum(ts.S * F, axis=1)


def _crba_theta(ts: _TreeState) -> Float[Array, "nj nj"]:
    """Composite-rigid-body algorithm: ``M_θ[j, k] = S_jᵀ Ic_k S_k`` for j ⪯ k (Ic: composite)."""
    # 6×6 ground-frame spatial inertias about the origin, summed over descendants
    cx = matcalc.skew(ts.c)
    m = ts.m[:, None, None]
    eye = jnp.eye(3, dtype=cx.dtype)[None]
    top = jnp.concatenate([ts.Ic - m * cx @ cx, m * cx], axis=2)
    bot = jnp.concatenate([-m * cx, m * eye], axis=2)
    I6 = jnp.concatenate([top, bot], axis=1)
    Icomp = jnp.einsum("ik,iab->kab", ts.anc, I6)
    F = jnp.einsum("kab,kb->ka", Icomp, ts.S)
    up = ts.anc.T * (ts.S @ F.T)  # [j, k] = S_j·Ic_k S_k where j ⪯ k
    return up + up.T - jnp.diag(jnp.diag(up))


def joint_space_mass_matrix(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nj nj"]:
    """``M_θ``: the mass matrix in the joint variables θ = f(q) (CRBA), shape (nj, nj)."""
    return _crba_theta(_tree_state(model, model.joint_map(q)))


# ----------------------------------------------------------------------------------------------
# Closed form (seed §4) and the Lagrangian referee
# ----------------------------------------------------------------------------------------------


def _closed_form_terms(model: Model, q, qd, want_m=True, want_n=True, want_g=True):
    k = kinematics(model, q, second_order=want_n)
    Jp = pseudo_inertia(model)
    out = []
    if want_m:
        out.append(jnp.einsum("iabk,ibc,iacl->kl", k.dA, Jp, k.dA, optimize=True))
    if want_n:
        Avv = jnp.einsum("iablm,l,m->iab", k.ddA, qd, qd)
        out.append(jnp.einsum("iabk,ibc,iac->k", k.dA, Jp, Avv, optimize=True))
    if want_g:
        cbar = jnp.concatenate([model.com, jnp.ones_like(model.com[:, :1])], axis=1)
        out.append(
            jnp.einsum(
                "i,a,iabk,ib->k", model.mass, model.gravity, k.dA[:, :3], cbar, optimize=True
            )
        )
    return out


def _referee_poses(model: Model, q):
    """Eq. 40 body by body (a Python loop: the referee is for small models and tests only)."""
    local = local_transforms(model, model.joint_map(q))
    A = []
    for i, p in enumerate(model.parent):
        A.append(local[i] if p < 0 else A[p] @ local[i])
    return jnp.stack(A)


def _lagrangian_kinetic(model: Model, q, qd):
    A, Ad = jax.jvp(lambda x: _referee_poses(model, x), (q,), (qd,))
    R, Rd = A[:, :3, :3], Ad[:, :3, :3]
    om_body = matcalc.unskew(jnp.swapaxes(R, 1, 2) @ Rd)
    vc = jnp.einsum("iab,ib->ia", Rd, model.com) + Ad[:, :3, 3]
    return 0.5 * jnp.sum(model.mass * jnp.sum(vc * vc, axis=1)) + 0.5 * jnp.einsum(
        "ia,iab,ib->", om_body, model.inertia, om_body
    )


def _lagrangian_potential(model: Model, q):
    A = _referee_poses(model, q)
    c = A[:, :3, 3] + jnp.einsum("iab,ib->ia", A[:, :3, :3], model.com)
    return -jnp.sum(model.mass * (c @ model.gravity))


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------


def mass_matrix(
    model: Model, q: Float[Array, " nq"], method: str = "tree"
) -> Float[Array, "nq nq"]:
    """Generalized mass matrix M(q) (kg, kg·m, kg·m² by coordinate units), shape (nq, nq).

    Args:
        model: the multibody model.
        q: (nq,) generalized coordinates.
        method: ``"tree"`` (CRBA projected through ∇f), ``"closed_form"`` (Eq. 145) or
            ``"lagrangian"`` (∂²T/∂q̇², autodiff referee).
    """
    _check_method(method)
    if method == "tree":
        f, J, _ = model.joint_map.derivatives(q)
        return J.T @ _crba_theta(_tree_state(model, f)) @ J
    if method == "closed_form":
        return _closed_form_terms(model, q, None, True, False, False)[0]
    # T is quadratic in q̇, so ∂T/∂q̇ at q̇ = e_k is column k of M
    dT = jax.grad(_lagrangian_kinetic, argnums=2)
    return jax.vmap(lambda e: dT(model, q, e), out_axes=1)(jnp.eye(q.shape[0], dtype=q.dtype))


def bias_forces(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"], method: str = "tree"
) -> Float[Array, " nq"]:
    """Coriolis and centrifugal forces ``N(q, q̇) q̇`` (left-hand side, gravity excluded), (nq,)."""
    _check_method(method)
    if method == "tree":
        f, J, H = model.joint_map.derivatives(q)
        gamma = jnp.einsum("jlm,l,m->j", H, qd, qd)
        return J.T @ _rnea_theta(_tree_state(model, f), J @ qd, gamma, None)
    if method == "closed_form":
        return _closed_form_terms(model, q, qd, False, True, False)[0]
    dT_dqd = lambda x: jax.grad(_lagrangian_kinetic, argnums=2)(model, x, qd)
    mixed = jax.jvp(dT_dqd, (q,), (qd,))[1]  # (∂²T/∂q̇∂q) q̇
    return mixed - jax.grad(_lagrangian_kinetic, argnums=1)(model, q, qd)


def gravity_forces(
    model: Model, q: Float[Array, " nq"], method: str = "tree"
) -> Float[Array, " nq"]:
    """Generalized gravity force ``G(q) = −∂V/∂q`` (right-hand side, Eq. 187), shape (nq,)."""
    _check_method(method)
    if method == "tree":
        f, J, _ = model.joint_map.derivatives(q)
        zero = jnp.zeros_like(f)
        return -(J.T @ _rnea_theta(_tree_state(model, f), zero, zero, model.gravity))
    if method == "closed_form":
        return _closed_form_terms(model, q, None, False, False, True)[0]
    return -jax.grad(_lagrangian_potential, argnums=1)(model, q)


def applied_forces(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"], t=0.0
) -> Float[Array, " nq"]:
    """Sum of the generalized forces of ``model.forces`` (springs, motors, ...), shape (nq,)."""
    total = jnp.zeros(model.nq, dtype=jnp.result_type(q, float))
    for element in model.forces:
        total = total + element.generalized_force(model, q, qd, t)
    return total


def generalized_forces(model: Model, q, qd, t=0.0) -> Float[Array, " nq"]:
    """Everything on the right-hand side except τ: ``G(q) + Q_applied(q, q̇, t)``, shape (nq,)."""
    return gravity_forces(model, q) + applied_forces(model, q, qd, t)


def _tau_vector(model: Model, tau, q, qd, t):
    if tau is None:
        return jnp.zeros(model.nq, dtype=jnp.result_type(q, float))
    if callable(tau):
        tau = tau(t, q, qd)
    tau = jnp.asarray(tau)
    if tau.shape != (model.nq,):
        raise ValueError(f"tau must have shape ({model.nq},) (one per coordinate), got {tau.shape}")
    return tau


def _inertia_apply_columns(ts: _TreeState, X: Float[Array, "nb n 6"]) -> Float[Array, "nb n 6"]:
    """:func:`_inertia_apply` for n twists per body at once (the columns of a twist Jacobian)."""
    om, v = X[..., :3], X[..., 3:]
    lin = ts.m[:, None, None] * (v + jnp.cross(om, ts.c[:, None, :]))
    ang = small_einsum("iab,inb->ina", ts.Ic, om) + jnp.cross(ts.c[:, None, :], lin)
    return jnp.concatenate([ang, lin], axis=-1)


def _equations_of_motion(model: Model, kin: TreeKinematics, qd):
    """``M`` (nq, nq) and ``N q̇ − G`` (nq,) directly in q-space from the body twist Jacobians.

    ``M = Σ_i Jb_iᵀ I_i Jb_i`` and ``N q̇ − G = Σ_i Jb_iᵀ f_i`` with f_i body i's own Newton–Euler
    wrench: the projection ``Σ_j ∇f_jᵀ S_jᵀ Σ_{i ⪰ j} f_i`` of the tree route regrouped by body, so
    neither the nj×nj joint-space mass matrix nor the descendant sum is formed (nq ≤ nj).
    """
    ts = _state_from_poses(model, kin.A, kin.S)
    gamma = small_einsum("jlm,l,m->j", kin.H, qd, qd)
    V = small_einsum("ial,l->ia", kin.Jb, qd)
    thd = small_einsum("jl,l->j", kin.J, qd)
    acc_j = ts.S * gamma[:, None] + _cross_motion(V, ts.S * thd[:, None])
    g6 = jnp.concatenate([jnp.zeros(3, V.dtype), -model.gravity])
    Acc = small_einsum("ij,ja->ia", ts.anc, acc_j) + g6[None, :]
    f = _inertia_apply(ts, Acc) + _cross_force(V, _inertia_apply(ts, V))
    h = small_einsum("ial,ia->l", kin.Jb, f)
    JbT = jnp.swapaxes(kin.Jb, 1, 2)
    M = small_einsum("ila,ima->lm", JbT, _inertia_apply_columns(ts, JbT))
    return M, h


def _applied_forces_from(model: Model, kin: TreeKinematics, qd, t):
    total = jnp.zeros(model.nq, dtype=jnp.result_type(kin.q, float))
    for element in model.forces:
        total = total + element.from_kinematics(model, kin, qd, t)
    return total


def _spd_solve(M, rhs):
    """``M⁻¹ rhs`` for symmetric positive definite M; NaN where M is not positive definite."""
    if M.shape[0] == 1:
        # a 1×1 Cholesky is a division; the LAPACK call would cost more than the whole RHS
        m = M[0, 0]
        ok = m > 0
        return jnp.where(ok, rhs / jnp.where(ok, m, 1.0), jnp.nan)
    return jsl.cho_solve(jsl.cho_factor(M, lower=True), rhs)


def _forward_dynamics(model: Model, q, qd, tau, t):
    """q̈ and a flag that is False when M is not positive definite or anything is non-finite.

    One joint-map evaluation and one pose pass (:func:`jaxmb.kinematics.tree_kinematics`) serve
    the equations of motion and every force element.
    """
    kin = tree_kinematics(model, q)
    M, h = _equations_of_motion(model, kin, qd)
    rhs = _applied_forces_from(model, kin, qd, t) + _tau_vector(model, tau, q, qd, t) - h
    qdd = _spd_solve(M, rhs)
    return qdd, jnp.all(jnp.isfinite(qdd))


def forward_dynamics(
    model: Model,
    q: Float[Array, " nq"],
    qd: Float[Array, " nq"],
    tau=None,
    t=0.0,
) -> Float[Array, " nq"]:
    """q̈ solving ``M q̈ + N q̇ = G + Q_applied + τ`` by a Cholesky factorization of M.

    Args:
        model: the model; its own ``forces`` are always applied.
        q, qd: (nq,) state.
        tau: extra generalized force, (nq,) array, ``None`` (zero) or a callable ``tau(t, q, q̇)``.
        t: time (s), passed to time-dependent force elements.

    Returns:
        (nq,) generalized accelerations. Raises (through ``equinox.error_if``) when the result is
        not finite, which means M is singular (a coordinate that moves no mass) or the state is not
        finite.
    """
    qdd, ok = _forward_dynamics(model, q, qd, tau, t)
    return eqx.error_if(
        qdd,
        jnp.logical_not(ok),
        "forward_dynamics: non-finite q̈ — the mass matrix is not positive definite (a coordinate "
        "that moves no mass, or a singular joint map) or the state/joint map is not finite",
    )


def inverse_dynamics(
    model: Model,
    q: Float[Array, " nq"],
    qd: Float[Array, " nq"],
    qdd: Float[Array, " nq"],
    t=0.0,
) -> Float[Array, " nq"]:
    """τ (nq,) with ``M q̈ + N q̇ = G + Q_applied + τ``, by one Newton–Euler pass (no M formed)."""
    f, J, H = model.joint_map.derivatives(q)
    thdd = J @ qdd + jnp.einsum("jlm,l,m->j", H, qd, qd)
    lhs = J.T @ _rnea_theta(_tree_state(model, f), J @ qd, thdd, model.gravity)
    return lhs - applied_forces(model, q, qd, t)


def kinetic_energy(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"]
) -> Float[Array, ""]:
    """``T = ½ Σ_i V_iᵀ I_i V_i`` (J) from the ground-frame body twists."""
    f, J, _ = model.joint_map.derivatives(q)
    ts = _tree_state(model, f)
    V = ts.anc @ (ts.S * (J @ qd)[:, None])
    return 0.5 * jnp.sum(V * _inertia_apply(ts, V))


def potential_energy(model: Model, q: Float[Array, " nq"]) -> Float[Array, ""]:
    """Gravitational potential ``V = −Σ_i m_i gᵀ c_i`` (J), zero at the ground origin.

    Conservative applied elements (springs) are not included; see :func:`total_energy`.
    """
    A = _world_poses(model, model.joint_map(q))
    c = A[:, :3, 3] + jnp.einsum("iab,ib->ia", A[:, :3, :3], model.com)
    return -jnp.sum(model.mass * (c @ model.gravity))


def total_energy(model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"]) -> Float[Array, ""]:
    """``T + V + Σ`` potential energies of the force elements that define one (J)."""
    e = kinetic_energy(model, q, qd) + potential_energy(model, q)
    for element in model.forces:
        pe = getattr(element, "potential_energy", None)
        if pe is not None:
            e = e + pe(model, q)
    return e


def christoffel_matrix(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"]
) -> Float[Array, "nq nq"]:
    """Coriolis matrix C(q, q̇) from the Christoffel symbols of M (autodiff), with ``C q̇ = N q̇``.

    ``C_kj = Σ_l ½ (∂M_kj/∂q_l + ∂M_kl/∂q_j − ∂M_lj/∂q_k) q̇_l``; then ``Ṁ − 2C`` is skew-symmetric.
    """
    dM = jax.jacfwd(lambda x: mass_matrix(model, x))(q)  # dM[k, j, l] = ∂M_kj/∂q_l
    return 0.5 * (
        jnp.einsum("kjl,l->kj", dM, qd)
        + jnp.einsum("klj,l->kj", dM, qd)
        - jnp.einsum("ljk,l->kj", dM, qd)
    )


# ---------------------------------------------------------------- premodel of the reduced dynamics


class PremodelDynamics(eqx.Module):
    """Spectral premodel of a one-coordinate model's forward dynamics, ``q̈ = a(q) + b(q) q̇²``.

    With nq = 1 the equations of motion ``M(q) q̈ + Γ(q) q̇² = G(q) + Q(q) + τ`` reduce to two
    scalar functions of q, ``a = (G + Q)/M`` and ``b = −Γ/M`` (Γ the one Christoffel symbol of the
    first kind), whenever the force elements depend on q alone. This is the seed's empirically-based
    idea (fit smooth functions of q once, then integrate a tiny ODE) carried from the joint
    variables to the whole right-hand side: the fit is spectral (Fourier in a periodic coordinate,
    Chebyshev on an interval), so for the analytic a, b of a mechanism away from its singular
    configurations the coefficients decay geometrically and a few dozen reach float64 round-off
    (``fit_error`` records the measured error at points between the fitting nodes).

    Evaluation is ``2K + 1`` cosines/sines and two dot products: a handful of fused operations
    instead of the joint map, pose pass and tree recursions, which is what makes small ODEs cheap
    on XLA:CPU, where every fused kernel costs a fixed dispatch overhead.

    Attributes:
        coef: (2, 2K+1) rows a, b; columns ``[c₀, c₁..c_K, s₁..s_K]`` (Fourier: ``c_k cos kθ +
            s_k sin kθ`` with ``θ = 2π q / period``; Chebyshev: ``c_k T_k(x)``, s unused).
        kind: ``"fourier"`` or ``"chebyshev"`` (static).
        lower, upper: the coordinate's interval (Chebyshev) or ``(0, period)`` (Fourier).
        fit_error: max |a_fit − a| / max|a| and the same for b, at the off-node check points.
    """

    coef: Float[Array, "2 n"]
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    fit_error: tuple[float, float] = eqx.field(static=True)

    def terms(self, q: Float[Array, " 1"]) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """``(a(q), b(q))``: q̈ at rest (1/s², per unit of q) and the q̇² coefficient.

        Fourier: Horner in ``z = e^{iθ}`` on ``Σ (c_k − i s_k) zᵏ`` (real part); Chebyshev:
        Clenshaw's recurrence. One sine and one cosine (or none) and a chain of multiply-adds
        instead of 2K transcendental functions: the recurrences are stable for |z| = 1 and
        |x| ≤ 1 (error ~ K ε).
        """
        K = (self.coef.shape[1] - 1) // 2
        C, S = self.coef[:, : K + 1], self.coef[:, K + 1 :]
        if self.kind == "fourier":
            th = (2.0 * jnp.pi / (self.upper - self.lower)) * (q[0] - self.lower)
            zr, zi = jnp.cos(th), jnp.sin(th)
            pr, pi = C[:, K], -S[:, K - 1]
            for k in range(K - 1, 0, -1):
                pr, pi = pr * zr - pi * zi + C[:, k], pr * zi + pi * zr - S[:, k - 1]
            ab = pr * zr - pi * zi + C[:, 0]
        else:
            x = (2.0 * q[0] - (self.lower + self.upper)) / (self.upper - self.lower)
            x = eqx.error_if(
                x,
                jnp.abs(x) > 1.0,
                f"PremodelDynamics: q outside the fitted interval [{self.lower}, {self.upper}]",
            )
            b1, b2 = jnp.zeros_like(C[:, 0]), jnp.zeros_like(C[:, 0])
            for k in range(K, 0, -1):
                b1, b2 = C[:, k] + 2.0 * x * b1 - b2, b1
            ab = C[:, 0] + x * b1 - b2
        return ab[0], ab[1]

    def __call__(self, q: Float[Array, " 1"], qd: Float[Array, " 1"]) -> Float[Array, " 1"]:
        """q̈ (1,) at state (q, q̇) (each shape (1,))."""
        a, b = self.terms(q)
        return jnp.reshape(a + b * qd[0] * qd[0], (1,))


@eqx.filter_jit
def _qdd_map(model: Model, q, qd):
    """q̈ at each (q_i, q̇_i) of a one-coordinate model; lax.map, since one point's graph compiles
    faster than a vmapped one and the run time is nothing. Keyed on the model's structure."""
    return jax.lax.map(
        lambda x: _forward_dynamics(model, x[0][None], x[1][None], None, 0.0)[0][0], (q, qd)
    )


def _exact_terms(model: Model, qs):
    """a(q), b(q) (each (n,)) from the tree route, one compiled call: ``a = q̈(q, 0)`` and
    ``b = (q̈(q, v) − a) / v²`` with v so large that ``b v²`` dominates a (no cancellation)."""
    qs = np.asarray(qs, dtype=float)
    n, v = qs.shape[0], 1e4
    pad = -(2 * n) % 64  # shapes in buckets of 64: fits of different n share one compilation
    q = np.concatenate([qs, qs, np.full(pad, qs[0])])
    qd = np.concatenate([np.zeros(n), np.full(n, v), np.zeros(pad)])
    qdd = np.asarray(_qdd_map(model, jnp.asarray(q), jnp.asarray(qd)))
    a = qdd[:n]
    return a, (qdd[n : 2 * n] - a) / v**2


def _check_position_only_forces(model: Model, qs) -> None:
    """Raise naming the first force element whose generalized force depends on q̇ or t."""
    qs = jnp.asarray(qs, dtype=float)
    probes = jnp.asarray([[0.0, 0.0], [1.0, 0.0], [-3.0, 0.0], [0.0, 1.7]])  # (q̇, t)
    Q = jnp.repeat(qs, len(probes))
    P = jnp.tile(probes, (qs.shape[0], 1))
    for element in model.forces:
        gf = lambda q, p, element=element: element.generalized_force(model, q[None], p[:1], p[1])[0]
        vals = np.asarray(jax.jit(jax.vmap(gf))(Q, P)).reshape(qs.shape[0], len(probes))
        d = float(np.max(np.abs(vals[:, 1:] - vals[:, :1])))
        if not d <= 1e-12 * max(float(np.max(np.abs(vals))), 1e-300):  # round-off allowed
            raise ValueError(
                f"premodel_dynamics: force element {type(element).__name__} depends on q̇ or t "
                f"(its generalized force changes by {d:.3g}); only position-dependent forces "
                "can be premodelled"
            )


def premodel_dynamics(
    model: Model,
    *,
    period: float | None = None,
    interval: tuple[float, float] | None = None,
    n: int = 64,
    tol: float = 1e-10,
) -> PremodelDynamics:
    """Fit :class:`PremodelDynamics` to a one-coordinate model's exact (tree-route) dynamics.

    Args:
        model: a model with ``nq == 1`` whose force elements depend on q only (checked).
        period: the coordinate's period (e.g. 2π for a crank angle that turns round): a Fourier
            fit over one period from n equispaced samples (K = n // 2 − 1 harmonics).
        interval: ``(lower, upper)`` of a non-periodic coordinate: a Chebyshev fit of degree n − 1
            at the n Chebyshev points; evaluation outside the interval raises.
        n: number of samples (≥ 4).
        tol: largest accepted relative fit error; a worse fit raises (more samples, a shorter
            interval, or a coordinate that is not periodic in ``period``).

    Returns:
        The premodel; ``fit_error`` holds the measured relative error of a and b at n points
        between the nodes (compare it with the accuracy you need before integrating).
    """
    if model.nq != 1:
        raise ValueError(f"premodel_dynamics: needs a one-coordinate model, got nq = {model.nq}")
    if (period is None) == (interval is None):
        raise ValueError("premodel_dynamics: give exactly one of period= or interval=")
    if n < 4:
        raise ValueError(f"premodel_dynamics: n must be at least 4, got {n}")
    if period is not None:
        if not period > 0:
            raise ValueError(f"premodel_dynamics: period must be positive, got {period}")
        lo, hi, kind = 0.0, float(period), "fourier"
        K = n // 2 - 1
        nodes = np.arange(n) * (hi / n)
        checks = nodes + 0.5 * hi / n
    else:
        lo, hi = (float(v) for v in interval)
        if not hi > lo:
            raise ValueError(f"premodel_dynamics: interval must have lower < upper, got {interval}")
        kind, K = "chebyshev", n - 1
        x = np.cos(np.pi * (np.arange(n) + 0.5) / n)
        nodes = 0.5 * (lo + hi) + 0.5 * (hi - lo) * x
        xc = np.cos(np.pi * np.arange(n + 1) / n)  # extrema: between the nodes, ends included
        checks = 0.5 * (lo + hi) + 0.5 * (hi - lo) * xc
    _check_position_only_forces(model, nodes)
    everything = np.stack(_exact_terms(model, np.concatenate([nodes, checks])))
    vals, exact = everything[:, : len(nodes)], everything[:, len(nodes) :]  # (2, n), (2, n_check)
    if not np.all(np.isfinite(vals)):
        bad = nodes[~np.all(np.isfinite(vals), axis=0)][0]
        raise ValueError(f"premodel_dynamics: the exact dynamics is not finite at q = {bad:.6g}")
    coef = np.zeros((2, 2 * K + 1))
    if kind == "fourier":
        C = np.fft.rfft(vals, axis=1) / n
        coef[:, 0] = C[:, 0].real
        coef[:, 1 : K + 1] = 2.0 * C[:, 1 : K + 1].real
        coef[:, K + 1 :] = -2.0 * C[:, 1 : K + 1].imag
    else:
        k = np.arange(n)
        T = np.cos(np.outer(k, np.pi * (np.arange(n) + 0.5) / n))  # T_k at node j
        coef[:, :n] = (2.0 / n) * vals @ T.T
        coef[:, 0] *= 0.5
    fit = PremodelDynamics(jnp.asarray(coef), lo, hi, kind, (0.0, 0.0))
    approx = np.asarray(jax.jit(jax.vmap(lambda q: jnp.stack(fit.terms(q[None]))))(checks)).T
    err = np.max(np.abs(approx - exact), axis=1) / np.maximum(np.max(np.abs(exact), axis=1), 1e-300)
    if not np.max(err) <= tol:
        raise ValueError(
            f"premodel_dynamics: {kind} fit with n = {n} misses the exact dynamics by "
            f"{np.max(err):.3g} (relative, > tol = {tol:g}) between the nodes: increase n, shorten "
            "the interval, or check that the dynamics really has the given period"
        )
    return PremodelDynamics(jnp.asarray(coef), lo, hi, kind, (float(err[0]), float(err[1])))
