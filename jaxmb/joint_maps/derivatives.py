"""f(q), ∇f and H of a model's joint map by four selectable routes: ``"autodiff"``,
``"projection"`` (the analytical projection method, Eqs. 101–120), ``"molecule"`` (central
differences on the computational molecule of Fig. 2) and ``"premodel"``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .base import AbstractJointMap
from .implicit import ImplicitMap
from .premodel import PremodelMap

METHODS = ("autodiff", "projection", "molecule", "premodel")


def _joint_map(model_or_map) -> AbstractJointMap:
    jm = getattr(model_or_map, "joint_map", model_or_map)
    if not isinstance(jm, AbstractJointMap):
        raise TypeError(f"expected a jaxmb Model or joint map, got {type(model_or_map).__name__}")
    return jm


def joint_values(model, q: Float[Array, " nq"]) -> Float[Array, " nj"]:
    """f(q), shape (nj,) (rad / m); ``model`` is a :class:`~jaxmb.model.Model` or a joint map."""
    jm = _joint_map(model)
    check_q(jm, q, "joint_values")
    return jm(jnp.asarray(q))


def check_q(jm: AbstractJointMap, q, function: str) -> None:
    """Raise ``ValueError`` naming ``function``, nq and the shape given unless q is (nq,)."""
    if jnp.shape(q) != (jm.nq,):
        raise ValueError(
            f"{function}: q must have shape (nq,) = ({jm.nq},) for this joint map, got shape"
            f" {jnp.shape(q)}"
        )


def projection_solve(gbar: Float[Array, "m m"], rhs: Float[Array, "m k"]) -> Float[Array, "m k"]:
    """Solve ``Σ_j ḡ_j ⊗ x_j = vec-stacked rhs`` by the projection elimination of Eqs. 105–119.

    ``gbar[:, j] = ḡ_j`` (Eq. 104) and ``rhs`` is the (m·k) right-hand side reshaped to (m, k)
    (row a holds the k entries multiplying row a of the ḡ's): for ∇f, ``rhs = −∂G/∂q`` (k = nq);
    for H, ``rhs = Γ`` (k = nq²). The projectors ``γ_{m+1} = I``,
    ``γ_i = γ_{i+1} σ_i = γ_{i+1} − u_i u_iᵀ/‖u_i‖²`` with ``u_i = γ_{i+1} ḡ_i`` (Eqs. 116–117;
    ``γ_{i+1}`` is symmetric and idempotent, which gives this form) annihilate ḡ_i, …, ḡ_m, and
    Eq. 118 gives ``x_i = u_iᵀ (rhs − η^{(i−1)}) / ‖u_i‖²`` with ``η^{(i)} = η^{(i−1)} + ḡ_i x_iᵀ``
    (Eq. 119), where ``(ḡᵀγ ⊗ I_k)`` acting on an (m·k) vector is ``ḡᵀγ`` acting on its (m, k)
    reshape. A vanishing ‖u_i‖ (ḡ_i in the span of ḡ_{i+1..m}: singular ∂G/∂f) raises.
    """
    m = gbar.shape[0]
    eye = jnp.eye(m, dtype=gbar.dtype)
    gammas = [None] * (m + 2)
    gammas[m + 1] = eye
    us, norms = [None] * (m + 1), [None] * (m + 1)
    bad = jnp.zeros((), dtype=bool)
    for i in range(m, 0, -1):
        g_i = gbar[:, i - 1]
        u = gammas[i + 1] @ g_i
        nu = u @ u
        bad = bad | ~(nu > 1e-24 * jnp.maximum(g_i @ g_i, jnp.finfo(gbar.dtype).tiny))
        us[i], norms[i] = u, nu
        gammas[i] = gammas[i + 1] - jnp.outer(u, u) / nu
    eta = jnp.zeros_like(rhs)
    xs = []
    for i in range(1, m + 1):
        x_i = us[i] @ (rhs - eta) / norms[i]
        eta = eta + jnp.outer(gbar[:, i - 1], x_i)
        xs.append(x_i)
    return eqx.error_if(
        jnp.stack(xs),
        bad,
        "projection method: ∂G/∂f is singular (a column ḡ_i lies in the span of the later "
        "ones); the configuration is singular",
    )


def projection_derivatives(joint_map: AbstractJointMap, q: Float[Array, " nq"]):
    """``(f, J, H)`` by the analytical projection method (seed Eqs. 101–120).

    For an :class:`ImplicitMap` with dependent variables x = f_dep and G(x, q) = g (m,):

    * Eq. 102: ``Σ_j ḡ_j ⊗ ∇f_j = −∂G/∂q``, ḡ_j = ∂G/∂x_j (partials with the independent joints
      substituted, so ∂G/∂q includes their chain rule) — solved by :func:`projection_solve`.
    * Eq. 120, derived here. Differentiate Eq. 102 once more with respect to q (Theorem 3: the
      derivative of ``ḡ_j ⊗ ∇f_j`` is ``(∂ḡ_j/∂q) ⊗ ∇f_j`` rearranged plus ``ḡ_j ⊗ vec(H_j)``;
      ``∂∇f_j/∂q = vec(H_j)`` because H_j is symmetric). The total derivative of ḡ_j is
      ``dḡ_j/dq_l = Σ_s ∂²G/∂x_j∂x_s ∇f_s[l] + ∂²G/∂x_j∂q_l``, and that of ∂G/∂q_k is
      ``Σ_j ∂²G/∂q_k∂x_j ∇f_j[l] + ∂²G/∂q_k∂q_l``. Collecting everything that does not contain H,

          Σ_j ḡ_j ⊗ vec(H_j) = Γ,
          Γ[a, k, l] = −( Σ_{j,s} G_a,x_j x_s ∇f_j[k] ∇f_s[l] + Σ_j G_a,x_j q_l ∇f_j[k]
                         + Σ_j G_a,q_k x_j ∇f_j[l] + G_a,q_k q_l ),

      flattened row-major over (k, l) into the (m·nq²) vector of Definition 1; in Kronecker form
      ``Γ = −[Σ_j Σ_s ∂²G/∂x_j∂x_s ⊗ ∇f_j ⊗ ∇f_s + Σ_j (∂ḡ_j/∂q ⊗ ∇f_j + U(∂ḡ_j/∂q ⊗ ∇f_j))
      + ∂²G/∂q²]`` with U the commutation of the two q slots. It has the same structure as
      Eq. 102, so :func:`projection_solve` gives vec(H_j) with Γ as the right-hand side.

    The second partials of G are exact (autodiff of the constraint function, not of the solve).
    For an explicit map the "constraints" ``f − φ(q) = 0`` have ḡ_j = e_j, and the method reduces to
    differentiating φ.
    """
    q = jnp.asarray(q)
    if not isinstance(joint_map, ImplicitMap):
        return joint_map(q), jax.jacfwd(joint_map)(q), jax.hessian(joint_map)(q)
    mp = joint_map
    x = mp._solve_dependent(q)
    G = mp.residual
    gbar = jax.jacfwd(G, argnums=0)(x, q)  # (m, m), column j = ḡ_j
    Gq = jax.jacfwd(G, argnums=1)(x, q)  # (m, nq) = ∂G/∂q reshaped
    Jd = projection_solve(gbar, -Gq)
    Gxx = jax.jacfwd(jax.jacfwd(G, argnums=0), argnums=0)(x, q)  # (m, m, m)
    Gxq = jax.jacfwd(jax.jacfwd(G, argnums=0), argnums=1)(x, q)  # (m, m, nq)
    Gqq = jax.jacfwd(jax.jacfwd(G, argnums=1), argnums=1)(x, q)  # (m, nq, nq)
    Gamma = -(
        jnp.einsum("ajs,jk,sl->akl", Gxx, Jd, Jd)
        + jnp.einsum("ajl,jk->akl", Gxq, Jd)
        + jnp.einsum("ajk,jl->akl", Gxq, Jd)
        + Gqq
    )
    Hd = projection_solve(gbar, Gamma.reshape(mp.m, -1)).reshape(mp.m, mp.nq, mp.nq)
    dep = np.asarray(mp.dependent)
    f = mp.assemble(x, q)
    J = jnp.zeros((mp.nj, mp.nq), f.dtype).at[dep].set(Jd)
    H = jnp.zeros((mp.nj, mp.nq, mp.nq), f.dtype).at[dep].set(Hd)
    ind = mp.independent_joints
    if ind:
        ind = np.asarray(ind)
        J = J.at[ind].set(jax.jacfwd(mp._independent_values)(q))
        H = H.at[ind].set(jax.hessian(mp._independent_values)(q))
    return f, J, H


def molecule_derivatives(joint_map: AbstractJointMap, q: Float[Array, " nq"], h: float = 1e-4):
    """``(f, J, H)`` by central differences on the computational molecule of Fig. 2.

    The map (for an :class:`ImplicitMap`: the constraints, re-solved from the warm start) is
    evaluated at the 3^nq points ``q + h·s``, s ∈ {−1, 0, 1}^nq (the 3×3 molecule of Fig. 2 for two
    coordinates), and

        ∇f[k] = (f(q + h e_k) − f(q − h e_k)) / 2h,
        H[k,k] = (f(q + h e_k) − 2 f(q) + f(q − h e_k)) / h²,
        H[k,l] = (f(q+he_k+he_l) − f(q+he_k−he_l) − f(q−he_k+he_l) + f(q−he_k−he_l)) / 4h².

    Truncation error O(h²); round-off ~ ε·|f|/h in ∇f and ~ ε·|f|/h² in H, so the best h is near
    ε^{1/3} for ∇f and ε^{1/4} for H (float64: 1e-5 and 1e-4). ``h`` in the units of q.
    """
    q = jnp.asarray(q)
    nq = q.shape[0]
    offsets = np.array(np.meshgrid(*([[-1, 0, 1]] * nq), indexing="ij")).reshape(nq, -1).T
    F = jax.vmap(joint_map)(q + h * jnp.asarray(offsets, q.dtype))
    F = F.reshape((3,) * nq + (-1,))

    def at(**idx):
        sel = [1] * nq
        for k, v in idx.items():
            sel[int(k[1:])] = v
        return F[tuple(sel)]

    f0 = F[(1,) * nq]
    J = jnp.stack([(at(**{f"k{k}": 2}) - at(**{f"k{k}": 0})) / (2 * h) for k in range(nq)], 1)
    rows = []
    for k in range(nq):
        row = []
        for l in range(nq):
            if k == l:
                row.append((at(**{f"k{k}": 2}) - 2 * f0 + at(**{f"k{k}": 0})) / h**2)
            else:
                pp = at(**{f"k{k}": 2, f"k{l}": 2})
                pm = at(**{f"k{k}": 2, f"k{l}": 0})
                mp = at(**{f"k{k}": 0, f"k{l}": 2})
                mm = at(**{f"k{k}": 0, f"k{l}": 0})
                row.append((pp - pm - mp + mm) / (4 * h**2))
        rows.append(jnp.stack(row, -1))
    return f0, J, jnp.stack(rows, -2)


def _derivatives(model, q, method: str, h: float, premodel_map: PremodelMap | None):
    jm = _joint_map(model)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if method == "premodel" and premodel_map is None and not isinstance(jm, PremodelMap):
        raise ValueError(
            'method="premodel" needs premodel_map=premodel(model.joint_map, ranges, n) '
            "(building the fit is a one-off sweep, not part of each evaluation)"
        )
    check_q(jm, q, "joint_gradients/joint_hessians")
    h = jnp.asarray(h, dtype=jnp.result_type(float)) if method == "molecule" else None
    return _derivatives_impl(jm, jnp.asarray(q), method, h, premodel_map)


@eqx.filter_jit
def _derivatives_impl(jm, q, method, h, premodel_map):
    if method == "autodiff":
        return jm(q), jax.jacfwd(jm)(q), jax.jacfwd(jax.jacfwd(jm))(q)
    if method == "projection":
        return projection_derivatives(jm, q)
    if method == "molecule":
        return molecule_derivatives(jm, q, h)
    return (jm if premodel_map is None else premodel_map).derivatives(q)


def joint_gradients(
    model,
    q: Float[Array, " nq"],
    method: str = "autodiff",
    *,
    h: float = 1e-5,
    premodel_map: PremodelMap | None = None,
) -> Float[Array, "nj nq"]:
    """``J[i, k] = ∂f_i/∂q_k`` (rows ∇f_iᵀ), shape (nj, nq), by the chosen route.

    Args:
        model: a :class:`~jaxmb.model.Model` or a joint map.
        q: (nq,) generalized coordinates.
        method: ``"autodiff"`` (jacfwd of f; for an ImplicitMap the implicit-function JVP),
            ``"projection"`` (:func:`projection_derivatives`), ``"molecule"``
            (:func:`molecule_derivatives` with step ``h``), or ``"premodel"`` (derivative of the fit
            ``premodel_map``, or of the model's own map if it is a :class:`PremodelMap`).
    """
    return _derivatives(model, q, method, h, premodel_map)[1]


def joint_hessians(
    model,
    q: Float[Array, " nq"],
    method: str = "autodiff",
    *,
    h: float = 1e-4,
    premodel_map: PremodelMap | None = None,
) -> Float[Array, "nj nq nq"]:
    """``H[i, k, l] = ∂²f_i/∂q_k∂q_l``, shape (nj, nq, nq); methods as :func:`joint_gradients`."""
    return _derivatives(model, q, method, h, premodel_map)[2]
