"""The Lagrangian referee: the equations of motion from kinetic and potential energy, by autodiff.

``"lagrangian"`` (slow referee)
    ``L = T − V`` with T from the body velocities (``½ m |v_c|² + ½ ωᵀ I ω``) and V from the
    centre-of-mass heights, differentiated by JAX: ``M = ∂²T/∂q̇²``,
    ``N q̇ = (∂²T/∂q̇∂q) q̇ − ∂T/∂q``, ``G = −∂V/∂q``.

Slow on purpose (poses composed body by body in a Python loop, Eq. 40 literally): an independent
check of the tree algorithm and the closed form, for small models and tests.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import local_transforms
from ..math import matcalc
from ..model import Model

__all__ = [
    "referee_poses",
    "lagrangian_kinetic_energy",
    "lagrangian_potential_energy",
    "lagrangian_mass_matrix",
    "lagrangian_bias_forces",
    "lagrangian_gravity_forces",
]


def referee_poses(model: Model, q) -> Float[Array, "nb 4 4"]:
    """``⁰ᵢA₄`` (nb, 4, 4) by Eq. 40 body by body (a Python loop: for small models and tests)."""
    local = local_transforms(model, model.joint_map(q))
    A = []
    for i, p in enumerate(model.parent):
        A.append(local[i] if p < 0 else A[p] @ local[i])
    return jnp.stack(A)


def lagrangian_kinetic_energy(model: Model, q, qd) -> Float[Array, ""]:
    """``T = ½ Σ_i (m_i |v_c|² + ω_iᵀ I_i ω_i)`` (J) from the body-by-body poses and their JVP."""
    A, Ad = jax.jvp(lambda x: referee_poses(model, x), (q,), (qd,))
    R, Rd = A[:, :3, :3], Ad[:, :3, :3]
    om_body = matcalc.unskew(jnp.swapaxes(R, 1, 2) @ Rd)
    vc = jnp.einsum("iab,ib->ia", Rd, model.com) + Ad[:, :3, 3]
    return 0.5 * jnp.sum(model.mass * jnp.sum(vc * vc, axis=1)) + 0.5 * jnp.einsum(
        "ia,iab,ib->", om_body, model.inertia, om_body
    )


def lagrangian_potential_energy(model: Model, q) -> Float[Array, ""]:
    """``V = −Σ_i m_i gᵀ c_i`` (J) from the body-by-body poses."""
    A = referee_poses(model, q)
    c = A[:, :3, 3] + jnp.einsum("iab,ib->ia", A[:, :3, :3], model.com)
    return -jnp.sum(model.mass * (c @ model.gravity))


def lagrangian_mass_matrix(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nq nq"]:
    """``M = ∂²T/∂q̇²`` (nq, nq)."""
    # T is quadratic in q̇, so ∂T/∂q̇ at q̇ = e_k is column k of M
    dT = jax.grad(lagrangian_kinetic_energy, argnums=2)
    return jax.vmap(lambda e: dT(model, q, e), out_axes=1)(jnp.eye(q.shape[0], dtype=q.dtype))


def lagrangian_bias_forces(model: Model, q, qd) -> Float[Array, " nq"]:
    """``N q̇ = (∂²T/∂q̇∂q) q̇ − ∂T/∂q`` (nq,)."""
    dT_dqd = lambda x: jax.grad(lagrangian_kinetic_energy, argnums=2)(model, x, qd)
    mixed = jax.jvp(dT_dqd, (q,), (qd,))[1]  # (∂²T/∂q̇∂q) q̇
    return mixed - jax.grad(lagrangian_kinetic_energy, argnums=1)(model, q, qd)


def lagrangian_gravity_forces(model: Model, q: Float[Array, " nq"]) -> Float[Array, " nq"]:
    """``G = −∂V/∂q`` (nq,)."""
    return -jax.grad(lagrangian_potential_energy, argnums=1)(model, q)
