"""The seed's closed form of the equations of motion (Kronecker calculus, in tensor form).

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
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import kinematics
from ..model import Model

__all__ = ["pseudo_inertia", "closed_form_terms"]


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


def closed_form_terms(model: Model, q, qd, want_m=True, want_n=True, want_g=True) -> list:
    """The wanted ones of M (nq, nq) (Eq. 145), N q̇ (nq,) (Eq. 147) and G (nq,) (Eq. 187), in
    that order, from the closed-form ∂A/∂q and ∂²A/∂q² of :func:`jaxmb.kinematics.kinematics`."""
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
