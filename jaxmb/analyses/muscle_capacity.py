"""A muscle's force per unit activation as OpenSim's static optimization sees it.

``Muscle::calcInextensibleTendonActiveFiberForce(s, 1)`` (Thelen2003Muscle.cpp,
Millard2012EquilibriumMuscle.cpp, MuscleFixedWidthPennationModel.cpp of opensim-core 4.6): with a
rigid tendon the fiber length along the tendon is ``l_MT − l_s``; the fixed-width pennation model
gives the fiber length ``l = sqrt(h² + (l_MT − l_s)²)`` (``h = l_opt sin α_opt``; the minimum
fiber length when the along-tendon length is below its minimum), ``sin φ = h / l``, the fiber
velocity ``v = v_MT cos φ``; the force is ``F_max · f_L(l/l_opt) · f_V(v/(l_opt v_max)) · cos φ``,
zero at or below the minimum fiber length. The minimum fiber length is ``h / sin(φ_max)`` for
``φ_max`` > 0 (both models default to ``acos(0.1)``), else ``0.01 l_opt``.

Curves: Thelen2003 ``f_L = exp(−(l̃−1)²/KshapeActive)`` and its force–velocity relation inverted in
closed form at a = 1 (OpenSim inverts it by Newton to 1e-6; piecewise hyperbolic with linear
extrapolation beyond ``fv_linear_extrap_threshold``); Millard2012 from its quintic Bézier curves
(:mod:`.millard_curves`).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .millard_curves import MillardCurves

__all__ = ["MuscleCapacity", "thelen_force_velocity", "active_force_along_tendon"]

THELEN, MILLARD = 0, 1


class MuscleCapacity(eqx.Module):
    """Per-muscle parameters (arrays of shape (nm,)) of the active fiber force along the tendon.

    ``model`` (static tuple) is 0 for Thelen2003 curves, 1 for Millard2012 curves per muscle.
    """

    max_isometric_force: Float[Array, " nm"]
    optimal_fiber_length: Float[Array, " nm"]
    tendon_slack_length: Float[Array, " nm"]
    pennation_at_optimal: Float[Array, " nm"]
    max_contraction_velocity: Float[Array, " nm"]
    max_pennation: Float[Array, " nm"]
    kshape_active: Float[Array, " nm"]
    af: Float[Array, " nm"]
    flen: Float[Array, " nm"]
    fv_threshold: Float[Array, " nm"]
    millard: MillardCurves | None
    model: tuple[int, ...] = eqx.field(static=True)


def thelen_force_velocity(v, af, flen, threshold):
    """Thelen2003's force–velocity multiplier at activation 1 for normalized fiber velocity v
    (lengthening positive): the inverse of ``Thelen2003Muscle::calcdlceN``."""
    c = 1.0  # 0.25 + 0.75 a at a = 1
    k2 = (2.0 + 2.0 / af) / (flen - 1.0)
    # concentric hyperbola, 0 < F ≤ 1  ⇔  -c < v ≤ 0
    f_con = (c + v) / (c - v / af)
    # eccentric hyperbola, 1 < F < threshold·flen
    k = v * k2
    f_ecc = (k * flen + c) / (c + k)
    # linear extrapolations (slopes of dlceN in F at the joins)
    b0 = 1.0  # afl + F0/af at F0 = 0
    slope_c = c / b0 - (c * (0.0 - 1.0) / (b0 * b0)) * (1.0 / af)
    f_lin_c = 0.0 + (v - (-c)) / slope_c
    F0 = threshold * flen
    bE = k2 * (flen - F0)
    dbE = -k2
    vE = c * (F0 - 1.0) / bE
    slope_e = c / bE - (c * (F0 - 1.0) / (bE * bE)) * dbE
    f_lin_e = F0 + (v - vE) / slope_e
    f = jnp.where(v <= -c, f_lin_c, jnp.where(v <= 0.0, f_con, jnp.where(v < vE, f_ecc, f_lin_e)))
    return jnp.maximum(f, 0.0)


def active_force_along_tendon(
    cap: MuscleCapacity, lmt: Float[Array, " nm"], vmt: Float[Array, " nm"]
) -> Float[Array, " nm"]:
    """``calcInextensibleTendonActiveFiberForce(s, 1)`` per muscle (N) at path lengths ``lmt`` (m)
    and lengthening speeds ``vmt`` (m/s)."""
    lopt = cap.optimal_fiber_length
    h = lopt * jnp.sin(cap.pennation_at_optimal)
    smax = jnp.sin(cap.max_pennation)
    lmin = jnp.where(cap.max_pennation > 1e-14, h / jnp.where(smax > 0, smax, 1.0), 0.01 * lopt)
    lmin_at = lmin * jnp.cos(cap.max_pennation)
    l_at = lmt - cap.tendon_slack_length
    ok = l_at >= lmin_at
    lce = jnp.where(ok, jnp.sqrt(h * h + jnp.where(ok, l_at, lmin_at) ** 2), lmin)
    cosphi = jnp.sqrt(jnp.clip(1.0 - (h / lce) ** 2, 0.0, 1.0))
    vce = vmt * cosphi
    ln = jnp.maximum(lce, lmin) / lopt
    vn = vce / (lopt * cap.max_contraction_velocity)
    fl_t = jnp.exp(-((ln - 1.0) ** 2) / cap.kshape_active)
    fv_t = thelen_force_velocity(vn, cap.af, cap.flen, cap.fv_threshold)
    mask = jnp.asarray(np.asarray(cap.model) == MILLARD)
    cos_out = cosphi
    if cap.millard is not None:
        fl_m, fv_m = cap.millard.active_force_length(ln), cap.millard.force_velocity(vn)
        fl = jnp.where(mask, fl_m, fl_t)
        fv = jnp.where(mask, fv_m, fv_t)
        # Millard2012EquilibriumMuscle::calcActiveFiberForceAlongTendon passes the *normalized*
        # fiber length to calcPennationAngle (opensim-core 4.6); reproduced as OpenSim computes it
        ln_as_len = lce / lopt
        pennated = cap.pennation_at_optimal > np.finfo(float).eps
        s_b = h / jnp.where(ln_as_len > 0, ln_as_len, 1.0)
        phi_b = jnp.where(
            ln_as_len > lmin,
            jnp.where(s_b < smax, jnp.arcsin(jnp.minimum(s_b, 1.0)), cap.max_pennation),
            cap.max_pennation,
        )
        cos_b = jnp.where(pennated, jnp.cos(phi_b), 1.0)
        cos_out = jnp.where(mask, cos_b, cosphi)
    else:
        fl, fv = fl_t, fv_t
    F = cap.max_isometric_force * fl * fv * cos_out
    return jnp.where(lce > lmin, F, 0.0)
