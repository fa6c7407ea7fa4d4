"""Hill-type musculotendon model with the smooth curves of De Groote et al. (2016).

De Groote F, Kinney AL, Rao AV, Fregly BJ (2016) "Evaluation of direct collocation optimal control
problem formulations for solving the muscle redundancy problem", Ann Biomed Eng 44:2922–2936,
Supplementary material: normalized tendon force–length ``f_T``, active and passive fibre
force–length ``f_act``, ``f_pas``, force–velocity ``f_v`` (with its closed-form inverse) and the
smooth activation dynamics, with the constants of OpenSim 4.6's ``DeGrooteFregly2016Muscle``
(exact landmarks f_act(1) = 1, f_v(0) = 1, f_v(−1) = 0, f_T(1) = 0; passive force zero at
l̃_M = 0.2 and never negative; checked against OpenSim in ``tests/test_hill.py``).
Normalizations: fibre length l̃_M = l_M / l_opt, tendon length l̃_T = l_T / l_s, fibre velocity
ṽ = v_M / (v_max l_opt) (ṽ < 0 shortening, ṽ ∈ [−1, 1]).

Pennation keeps the fibre's height constant: ``l_M sin α = l_opt sin α_opt`` (h). Per muscle
parameters come from :class:`jaxmb.muscles.MuscleParameters` (all traced, so everything here is
differentiable with respect to them).

- Rigid tendon: l_T = l_s, ``l_M = sqrt(h² + (l_MT − l_s)²)``, ``v_M = v_MT cos α`` and
  ``F_MT = F_max (a f_act(l̃_M) f_v(ṽ) + f_pas(l̃_M)) cos α`` — affine in a (used by force sharing).
- Elastic tendon: state l̃_M; the tendon force ``F_max f_T(l̃_T)`` balances the fibre force along
  the tendon, which gives ``f_v`` and, through the closed-form inverse, the fibre velocity
  ``dl̃_M/dt``. The division by ``a f_act`` is guarded by ``min_activation`` (default 0.01).
  Where the required ``f_v`` leaves the curve's range (far from equilibrium) the velocity saturates
  smoothly (C², :func:`soft_clip`) at ``±v_max``; a hard clip there had zero derivative, which cut
  every gradient that flowed through a saturated muscle. :func:`elastic_tendon_equilibrium` gives
  the static fibre length (``f_v = 1``) to start a simulation from, differentiable by the implicit
  function theorem.

:func:`musculoskeletal_rhs` couples the muscle states to the multibody ODE
``M q̈ + N q̇ = G + Q_applied + R(q) F_MT`` (via :func:`jaxmb.dynamics.forward_dynamics`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..dynamics import forward_dynamics, prescribe_state
from ..model import Model
from .geometry import lengths_and_moment_arms
from .paths import MuscleParameters

__all__ = [
    "tendon_force_length",
    "tendon_length_from_force",
    "active_force_length",
    "passive_force_length",
    "force_velocity",
    "force_velocity_inverse",
    "activation_derivative",
    "pennation",
    "rigid_tendon_force",
    "rigid_tendon_coefficients",
    "elastic_tendon_fiber_velocity",
    "elastic_tendon_force",
    "elastic_tendon_equilibrium",
    "soft_clip",
    "musculoskeletal_rhs",
]

# De Groote et al. (2016) curves with the constants of OpenSim 4.6's DeGrooteFregly2016Muscle
# (opensim-core OpenSim/Actuators/DeGrooteFregly2016Muscle.h), which repair the supplement's rounded
# values: b11… from the authors' code with b11 set so that f_act(1) = 1; d1, d4 solved so that
# f_v(−1) = 0 and f_v(0) = 1; tendon c2 = 1, c3 = 0.2 so that f_T(1) = 0, with k_T from the strain
# at F_max (4.9 %); the passive curve shifted to be zero at l̃_M = 0.2 instead of negative below
# l̃_M = 1 (the supplement's version gives −1.8 % of F_max at l̃_M = 0.5).
_C1, _C2, _C3 = 0.200, 1.0, 0.200
_TENDON_STRAIN_AT_FMAX = 0.049
_KT = float(np.log((1.0 + _C3) / _C1) / (1.0 + _TENDON_STRAIN_AT_FMAX - _C2))
_B = np.array(  # numpy: importing starts no JAX backend
    [
        [0.8150671134243542, 1.055033428970575, 0.162384573599574, 0.063303448465465],
        [0.433004984392647, 0.716775413397760, -0.029947116970696, 0.200356847296188],
        [0.1, 1.0, 0.353553390593274, 0.0],
    ]
)
_KPE, _E0, _LM_MIN = 4.0, 0.6, 0.2
_PASSIVE_OFFSET = float(np.exp(_KPE * (_LM_MIN - 1.0) / _E0))
_D1, _D2, _D3, _D4 = -0.3211346127989808, -8.149, -0.374, 0.8825327733249912
_TAU_A, _TAU_D, _B_ACT = 0.015, 0.060, 0.1


def tendon_force_length(lt_norm):
    """``f_T(l̃_T) = c1 exp(k_T (l̃_T − c2)) − c3`` (dimensionless, × F_max).

    0 at l̃_T = 1 (slack) and 1 at l̃_T = 1.049.
    """
    return _C1 * jnp.exp(_KT * (lt_norm - _C2)) - _C3


def tendon_length_from_force(ft):
    """Inverse of :func:`tendon_force_length`: l̃_T for a normalized tendon force."""
    return jnp.log((ft + _C3) / _C1) / _KT + _C2


def active_force_length(lm_norm):
    """``f_act(l̃_M)``: sum of three Gaussian-like terms, 1 at l̃_M = 1."""
    b1, b2, b3, b4 = _B[:, 0], _B[:, 1], _B[:, 2], _B[:, 3]
    x = jnp.asarray(lm_norm)[..., None]
    return jnp.sum(b1 * jnp.exp(-0.5 * (x - b2) ** 2 / (b3 + b4 * x) ** 2), axis=-1)


def passive_force_length(lm_norm):
    """``f_pas(l̃_M) = (exp(k_PE (l̃_M − 1)/e0) − o) / (exp(k_PE) − o)``, o = exp(k_PE (0.2 − 1)/e0).

    Zero at l̃_M = 0.2 and 1 at l̃_M = 1 + e0 (e0 = 0.6, k_PE = 4), as OpenSim's
    DeGrooteFregly2016Muscle; 0.018 at l̃_M = 1.
    """
    return (jnp.exp(_KPE * (lm_norm - 1.0) / _E0) - _PASSIVE_OFFSET) / (
        jnp.exp(_KPE) - _PASSIVE_OFFSET
    )


def force_velocity(v_norm):
    """``f_v(ṽ) = d1 log(d2 ṽ + d3 + sqrt((d2 ṽ + d3)² + 1)) + d4``; 1 at ṽ = 0, 0 at ṽ = −1."""
    x = _D2 * v_norm + _D3
    return _D1 * jnp.log(x + jnp.sqrt(x * x + 1.0)) + _D4


def force_velocity_inverse(fv):
    """ṽ for a force–velocity multiplier: ``(sinh((f_v − d4)/d1) − d3) / d2``."""
    return (jnp.sinh((fv - _D4) / _D1) - _D3) / _D2


def activation_derivative(a, e):
    """Smooth activation dynamics (De Groote 2016, Eq. S1–S2): da/dt (1/s) for excitation e.

    ``f = ½ tanh(b (e − a))``,
    ``da/dt = [ (f + ½)/(τ_a (½ + 1.5a)) + (½ + 1.5a)(½ − f)/τ_d ] (e − a)``,
    with τ_a = 15 ms, τ_d = 60 ms, b = 0.1.
    """
    f = 0.5 * jnp.tanh(_B_ACT * (e - a))
    s = 0.5 + 1.5 * a
    return ((f + 0.5) / (_TAU_A * s) + s * (0.5 - f) / _TAU_D) * (e - a)


def pennation(p: MuscleParameters, lm):
    """cos α for fibre length l_M (m), constant-height pennation."""
    h = p.optimal_fiber_length * jnp.sin(p.pennation_at_optimal)
    w = jnp.sqrt(jnp.maximum(lm * lm - h * h, 1e-12 * p.optimal_fiber_length**2))
    return w / lm


def rigid_tendon_coefficients(p: MuscleParameters, lmt, vmt):
    """``(F_a, F_p)`` with ``F_MT = F_a a + F_p`` (N) for a rigid tendon; shapes follow lmt."""
    h = p.optimal_fiber_length * jnp.sin(p.pennation_at_optimal)
    w = lmt - p.tendon_slack_length
    lm = jnp.sqrt(h * h + w * w)
    cos_a = w / lm
    lm_n = lm / p.optimal_fiber_length
    v_n = vmt * cos_a / (p.max_contraction_velocity * p.optimal_fiber_length)
    Fa = p.max_isometric_force * active_force_length(lm_n) * force_velocity(v_n) * cos_a
    Fp = p.max_isometric_force * passive_force_length(lm_n) * cos_a
    return Fa, Fp


def rigid_tendon_force(p: MuscleParameters, a, lmt, vmt):
    """Musculotendon force (N) with a rigid tendon, activation a ∈ [0, 1]."""
    Fa, Fp = rigid_tendon_coefficients(p, lmt, vmt)
    return Fa * a + Fp


def elastic_tendon_force(p: MuscleParameters, lm_norm, lmt):
    """Tendon force (N) from the fibre state: tendon length ``l_MT − l_M cos α``."""
    lm = lm_norm * p.optimal_fiber_length
    lt = lmt - lm * pennation(p, lm)
    return p.max_isometric_force * tendon_force_length(lt / p.tendon_slack_length)


def soft_clip(x, lo, hi, width):
    """``x`` inside ``[lo + width, hi − width]``, saturating smoothly towards ``lo`` and ``hi``.

    Outside the band the excess ``z = excess/width`` is squashed algebraically,
    ``width · z / sqrt(1 + z²)``: value, slope and curvature match the identity at the band's
    edges (z − z³/2 + …), so the result is C², and its slope ``(1 + z²)^(−3/2)`` stays positive in
    float64 far out (about 1e-18 at z = 10⁶), where a tanh's would round to exactly 0 and, like
    :func:`jnp.clip`'s, cut every gradient through a saturated muscle.
    """
    top, bottom = hi - width, lo + width
    zu = (x - top) / width
    zd = (bottom - x) / width
    up = top + width * zu / jnp.hypot(1.0, zu)  # hypot: no overflow of z²
    down = bottom - width * zd / jnp.hypot(1.0, zd)
    return jnp.where(x > top, up, jnp.where(x < bottom, down, x))


# f_v is inverted on (0, f_v(1)); the last 5 % of the curve's range at each end bend smoothly
_FV_SOFT_WIDTH = 0.05


def elastic_tendon_fiber_velocity(p: MuscleParameters, a, lm_norm, lmt, min_activation=0.01):
    """dl̃_M/dt (1/s) of the elastic-tendon model: force equilibrium along the tendon solved for
    ``f_v`` and inverted in closed form.

    ``f_v = (f_T / cos α − f_pas) / (max(a, min_activation) f_act)``, softly limited to the curve's
    range ``(0, f_v(1))`` by :func:`soft_clip` so that the velocity stays within about ``±v_max``
    and remains differentiable (with a nonzero derivative) far from equilibrium.
    Shapes broadcast over muscles; a (–), l̃_M (–), l_MT (m).
    """
    lm = lm_norm * p.optimal_fiber_length
    cos_a = pennation(p, lm)
    ft = tendon_force_length((lmt - lm * cos_a) / p.tendon_slack_length)
    act = jnp.maximum(a, min_activation) * active_force_length(lm_norm)
    fv = (ft / cos_a - passive_force_length(lm_norm)) / act
    fv = soft_clip(fv, 0.0, force_velocity(1.0), _FV_SOFT_WIDTH)
    return p.max_contraction_velocity * force_velocity_inverse(fv)


def _static_imbalance(p: MuscleParameters, a, w, lmt):
    """f_T − (a f_act + f_pas) cos α (–) as a function of the fibre's projection w = l_M cos α."""
    h = p.optimal_fiber_length * jnp.sin(p.pennation_at_optimal)
    lm = jnp.sqrt(h * h + w * w)
    lm_n = lm / p.optimal_fiber_length
    ft = tendon_force_length((lmt - w) / p.tendon_slack_length)
    return ft - (a * active_force_length(lm_n) + passive_force_length(lm_n)) * (w / lm)


def elastic_tendon_equilibrium(p: MuscleParameters, a, lmt, iterations: int = 80):
    """Static fibre length l̃_M (–) where the tendon force balances the isometric fibre force.

    Solves ``f_T(l̃_T) = (a f_act(l̃_M) + f_pas(l̃_M)) cos α`` (``f_v = 1``) for each muscle by
    bisection on the fibre's projection along the tendon, ``w ∈ (10⁻⁶ l_opt, l_MT − l_s/2)``
    (a slack tendon pulls with f_T ≈ −0.25 < fibre force, a long one with a large f_T), then one
    Newton step whose iterate is ``stop_gradient``-ed: its derivative is the implicit-function
    one, ``dw/dθ = −(∂g/∂θ)/(∂g/∂w)``, so ``jax.grad``/``jax.jvp`` work in both modes.
    a (nm,) or scalar, l_MT (nm,) m. Returns (nm,). At ``a ≈ 0`` with a descending fibre curve the
    imbalance can have several roots; bisection returns one of them.
    """
    a = jnp.asarray(a, dtype=float)
    lmt = jnp.asarray(lmt, dtype=float)
    shape = jnp.broadcast_shapes(a.shape, lmt.shape, p.max_isometric_force.shape)
    sg = jax.lax.stop_gradient
    ps, asg, lsg = jax.tree_util.tree_map(sg, p), sg(a), sg(lmt)
    lo = jnp.broadcast_to(1e-6 * ps.optimal_fiber_length, shape)
    hi = jnp.broadcast_to(
        jnp.maximum(lsg - 0.5 * ps.tendon_slack_length, 2e-6 * ps.optimal_fiber_length), shape
    )

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        positive = _static_imbalance(ps, asg, mid, lsg) > 0  # tendon still too long
        return jnp.where(positive, mid, lo), jnp.where(positive, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iterations, bisect, (lo, hi))
    w0 = sg(0.5 * (lo + hi))
    g, dg = jax.jvp(lambda w: _static_imbalance(p, a, w, lmt), (w0,), (jnp.ones_like(w0),))
    w = w0 - g / sg(dg)
    h = p.optimal_fiber_length * jnp.sin(p.pennation_at_optimal)
    return jnp.sqrt(h * h + w * w) / p.optimal_fiber_length


def musculoskeletal_rhs(
    model: Model,
    excitation: Callable[[Array], Float[Array, " nm"]],
    tendon: str = "rigid",
) -> Callable:
    """Right-hand side ``y' = f(t, y)`` of the multibody ODE coupled to the muscle states.

    State ``y = (q, q̇, a)`` for a rigid tendon, ``(q, q̇, a, l̃_M)`` for an elastic tendon;
    ``excitation(t)`` returns the neural excitations (nm,) in [0, 1]. The generalized muscle force
    is ``R(q) F_MT`` (closed-form moment arms), added to the model's own forces by
    :func:`jaxmb.dynamics.forward_dynamics`. Returns ``f(t, y, args=None)`` (diffrax signature).
    """
    if tendon not in ("rigid", "elastic"):
        raise ValueError(
            f"musculoskeletal_rhs: tendon must be 'rigid' or 'elastic', got {tendon!r}"
        )
    if model.muscles is None or not model.muscle_names:
        raise ValueError(f"musculoskeletal_rhs: model {model.name!r} has no muscles")
    if not callable(excitation):
        raise TypeError(
            "musculoskeletal_rhs: excitation must be a function of time returning (nm,)"
            f" excitations in [0, 1], got {type(excitation).__name__}"
        )
    p = model.muscles.params
    nq = model.nq
    nm = len(model.muscle_names)

    def rhs(t, y, args=None):
        q, qd, a = y[:nq], y[nq : 2 * nq], y[2 * nq : 2 * nq + nm]
        q, qd = prescribe_state(model, q, qd, t)  # prescribed coordinates on their functions
        lmt, R = lengths_and_moment_arms(model, q)  # one evaluation of the paths
        if tendon == "rigid":
            F = rigid_tendon_force(p, a, lmt, -R.T @ qd)
            dlm = None
        else:
            lm_n = y[2 * nq + nm :]
            F = elastic_tendon_force(p, lm_n, lmt)
            dlm = elastic_tendon_fiber_velocity(p, a, lm_n, lmt)
        qdd = forward_dynamics(model, q, qd, R @ F, t)
        da = activation_derivative(a, excitation(t))
        parts = [qd, qdd, da] + ([] if dlm is None else [dlm])
        return jnp.concatenate(parts)

    return rhs
