"""Equations of motion ``M(q) q̈ + N(q, q̇) q̇ = G(q) + Q(q, q̇, t) + τ`` (seed 001 §4, Eq. 198).

The public face of the equations of motion. Three independent routes to M, N q̇ and G, selected
by ``method``:

``"tree"`` (default, fast)
    Composite-rigid-body algorithm and recursive Newton–Euler in the *joint variables* θ = f(q),
    projected to q by the chain rule through the joint map (:mod:`jaxmb.dynamics.tree`: one
    batch-last implementation; one state is a batch of one).

``"closed_form"``
    The seed's Kronecker calculus in tensor form, Eqs. 145, 147 and 187
    (:mod:`jaxmb.dynamics.closed_form`).

``"lagrangian"`` (slow referee)
    ``L = T − V`` differentiated by JAX (:mod:`jaxmb.dynamics.lagrangian`).

Units: SI throughout; generalized forces in N or N·m per unit of each coordinate.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..forces import applied_forces, applied_forces_from
from ..kinematics import body_transforms, tree_kinematics
from ..math.linalg import cholesky_solve_bm
from ..model import Model, check_coordinate_vectors
from .closed_form import closed_form_terms
from .lagrangian import lagrangian_bias_forces, lagrangian_gravity_forces, lagrangian_mass_matrix
from .per_state import tree_terms
from .prescribed import prescribed_solve
from .tree import batch_last_kinematics, joint_space_terms, projected_terms

__all__ = [
    "METHODS",
    "joint_space_mass_matrix",
    "mass_matrix",
    "bias_forces",
    "gravity_forces",
    "applied_forces",
    "generalized_forces",
    "try_forward_dynamics",
    "forward_dynamics",
    "inverse_dynamics",
    "kinetic_energy",
    "potential_energy",
    "total_energy",
    "christoffel_matrix",
]

METHODS = ("tree", "closed_form", "lagrangian")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


def joint_space_mass_matrix(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nj nj"]:
    """``M_θ``: the mass matrix in the joint variables θ = f(q) (CRBA), shape (nj, nj)."""
    kin = tree_kinematics(model, q)
    zero = jnp.zeros((kin.f.shape[0], 1), kin.A.dtype)
    Mt, _, _ = joint_space_terms(model, *batch_last_kinematics(kin), zero, None, want_g=False)
    return Mt[..., 0]


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
    check_coordinate_vectors(model, "mass_matrix", q=q)
    _check_method(method)
    if method == "tree":
        return tree_terms(model, q, None, ("m",))[0]
    if method == "closed_form":
        return closed_form_terms(model, q, None, True, False, False)[0]
    return lagrangian_mass_matrix(model, q)


def bias_forces(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"], method: str = "tree"
) -> Float[Array, " nq"]:
    """Coriolis and centrifugal forces ``N(q, q̇) q̇`` (left-hand side, gravity excluded), (nq,)."""
    check_coordinate_vectors(model, "bias_forces", q=q, qd=qd)
    _check_method(method)
    if method == "tree":
        return tree_terms(model, q, qd, ("n",))[0]
    if method == "closed_form":
        return closed_form_terms(model, q, qd, False, True, False)[0]
    return lagrangian_bias_forces(model, q, qd)


def gravity_forces(
    model: Model, q: Float[Array, " nq"], method: str = "tree"
) -> Float[Array, " nq"]:
    """Generalized gravity force ``G(q) = −∂V/∂q`` (right-hand side, Eq. 187), shape (nq,)."""
    check_coordinate_vectors(model, "gravity_forces", q=q)
    _check_method(method)
    if method == "tree":
        return tree_terms(model, q, None, ("g",))[0]
    if method == "closed_form":
        return closed_form_terms(model, q, None, False, False, True)[0]
    return lagrangian_gravity_forces(model, q)


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


def try_forward_dynamics(model: Model, q, qd, tau=None, t=0.0):
    """q̈ (nq,) and a flag that is False when M is not positive definite or anything is non-finite
    (no check raised: the ODE driver reports where it happened).

    One joint-map evaluation and one pose pass (:func:`jaxmb.kinematics.tree_kinematics`) serve
    the equations of motion and every force element. Prescribed coordinates
    (``model.prescribed``) take their functions' accelerations and the others solve
    ``M_FF q̈_F = rhs_F − M_FP q̈_P`` (:mod:`jaxmb.dynamics.prescribed`).
    """
    kin = tree_kinematics(model, q)
    M, h_minus_G, _ = projected_terms(model, kin, qd, fold_gravity=True)
    Q = applied_forces_from(model, kin, qd, t)
    if getattr(tau, "reads_plant_terms", False):
        # a controller bound to this plant (a computed torque, Eq. 200): its τ from this
        # right-hand side's own M and N q̇ − G, no second pose and tree pass
        tau_v = jnp.asarray(tau.from_plant_terms(t, q, qd, M, h_minus_G, Q))
    else:
        tau_v = _tau_vector(model, tau, q, qd, t)
    rhs = Q + tau_v - h_minus_G
    if model.prescribed is not None:
        solve = lambda A, b: cholesky_solve_bm(A[..., None], b[:, None])[:, 0]
        qdd = prescribed_solve(model.prescribed, M, rhs, t, solve)
        return qdd, jnp.all(jnp.isfinite(qdd))
    qdd = cholesky_solve_bm(M[..., None], rhs[:, None])[:, 0]
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
        t: time (s), passed to time-dependent force elements and prescribed coordinates.

    Returns:
        (nq,) generalized accelerations; a prescribed coordinate's is its function's second
        derivative at t, the others' follow from the state as given (q and q̇ of prescribed
        coordinates are not overwritten, as in OpenSim's ``realizeAcceleration``). Raises
        (through ``equinox.error_if``) when the result is not finite, which means M is singular
        (a coordinate that moves no mass) or the state is not finite.
    """
    check_coordinate_vectors(model, "forward_dynamics", q=q, qd=qd, tau=tau)
    qdd, ok = try_forward_dynamics(model, q, qd, tau, t)
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
    check_coordinate_vectors(model, "inverse_dynamics", q=q, qd=qd, qdd=qdd)
    kin = tree_kinematics(model, q)
    _, rnea_minus_G, _ = projected_terms(model, kin, qd, qdd, want_m=False, fold_gravity=True)
    return rnea_minus_G - applied_forces_from(model, kin, qd, t)


def kinetic_energy(
    model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"]
) -> Float[Array, ""]:
    """``T = ½ q̇ᵀ M(q) q̇`` (J), M from the tree algorithm."""
    check_coordinate_vectors(model, "kinetic_energy", q=q, qd=qd)
    return 0.5 * qd @ mass_matrix(model, q) @ qd


def potential_energy(model: Model, q: Float[Array, " nq"]) -> Float[Array, ""]:
    """Gravitational potential ``V = −Σ_i m_i gᵀ c_i`` (J), zero at the ground origin.

    Conservative applied elements (springs) are not included; see :func:`total_energy`.
    """
    A = body_transforms(model, q)
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
