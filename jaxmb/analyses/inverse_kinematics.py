"""Inverse kinematics of every frame at once: weighted marker (and coordinate-task) least squares.

Per frame, as OpenSim's InverseKinematicsSolver poses it (``MarkersReference`` weights,
``CoordinateReference`` tasks):

    minimize  Σ_i w_i ‖p_i(q) − m_i‖²  +  Σ_j c_j (q_j − q̂_j)²   subject to  lo ≤ q ≤ hi,

``p_i(q)`` the model marker in ground, ``m_i`` the measured one (missing markers have weight 0), the
bounds those of clamped coordinates (others ±∞), locked coordinates held at their value. Solver:
projected Levenberg–Marquardt (Gauss–Newton steps on the free coordinates, damping adapted per
frame, steps clipped to the bounds), a fixed number of iterations, vmapped over frames — so the
whole trial is one compiled call, differentiable in the data and the model's parameters.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..kinematics import tree_kinematics
from ..model import Model

__all__ = [
    "InverseKinematicsResult",
    "bounds_of",
    "marker_positions",
    "solve_inverse_kinematics",
]


def marker_positions(model: Model, q, bodies, points) -> Float[Array, "nm 3"]:
    """Ground positions (nm, 3) of markers fixed at ``points`` (nm, 3) in jaxmb bodies
    ``bodies`` (nm,) (-1: ground) at q."""
    A = tree_kinematics(model, q).A
    b = jnp.asarray(bodies)
    R = A[jnp.maximum(b, 0), :3, :3]
    o = A[jnp.maximum(b, 0), :3, 3]
    p = jnp.einsum("mij,mj->mi", R, points) + o
    return jnp.where((b >= 0)[:, None], p, points)


class InverseKinematicsResult(eqx.Module):
    """``q`` (nt, nq); per frame the weighted squared error ``Σ w ‖p − m‖²`` (m²), the RMS and max
    marker error (m) over markers with weight > 0, and per-marker errors (nt, nm)."""

    q: Float[Array, "nt nq"]
    total_squared_error: Float[Array, " nt"]
    rms_error: Float[Array, " nt"]
    max_error: Float[Array, " nt"]
    marker_errors: Float[Array, "nt nm"]


def _frame_cost(model, bodies, points, m, w, cw, cval, q):
    r = (marker_positions(model, q, bodies, points) - m) * jnp.sqrt(w)[:, None]
    rc = (q - cval) * jnp.sqrt(cw)
    return jnp.concatenate([r.reshape(-1), rc])


def solve_inverse_kinematics(
    model: Model,
    bodies,
    points,
    markers: Float[Array, "nt nm 3"],
    weights: Float[Array, "nt nm"],
    q0: Float[Array, " nq"],
    lower,
    upper,
    free,
    coordinate_weights=None,
    coordinate_values=None,
    *,
    iterations: int = 30,
) -> InverseKinematicsResult:
    """Every frame's IK in one call. ``bodies`` (nm,) and ``points`` (nm, 3) the model markers;
    ``markers`` measured (nt, nm, 3) m (NaN where missing: weight 0); ``weights`` (nt, nm);
    ``q0`` the start ((nq,) for every frame, or (nt, nq)), ``lower``/``upper`` (nq,) bounds,
    ``free`` (nq,) bool (False for locked coordinates); ``coordinate_weights``/``_values``
    (nt, nq) coordinate tasks."""
    markers = jnp.asarray(markers, dtype=float)
    nt, nm = markers.shape[:2]
    w = jnp.where(jnp.any(jnp.isnan(markers), axis=2), 0.0, jnp.asarray(weights, dtype=float))
    mk = jnp.nan_to_num(markers)
    points = jnp.asarray(points, dtype=float)
    nq = model.nq
    cw = jnp.zeros((nt, nq)) if coordinate_weights is None else jnp.asarray(coordinate_weights)
    cv = jnp.zeros((nt, nq)) if coordinate_values is None else jnp.asarray(coordinate_values)
    lower, upper = jnp.asarray(lower, dtype=float), jnp.asarray(upper, dtype=float)
    fm = jnp.asarray(free, dtype=float)
    q0 = jnp.broadcast_to(jnp.asarray(q0, dtype=float), (nt, nq))

    def frame(m, w1, cw1, cv1, q0):
        res = lambda q: _frame_cost(model, bodies, points, m, w1, cw1, cv1, q)  # noqa: E731

        def step(_, carry):
            q, mu = carry
            r = res(q)
            J = jax.jacfwd(res)(q) * fm[None, :]
            g = J.T @ r
            H = J.T @ J
            dq = -jnp.linalg.solve(H + mu * (jnp.diag(jnp.diag(H)) + 1e-12) + jnp.diag(1.0 - fm), g)
            qn = jnp.clip(q + dq, lower, upper)
            ok = jnp.sum(res(qn) ** 2) < jnp.sum(r**2)
            return jnp.where(ok, qn, q), jnp.where(ok, mu * 0.3, mu * 10.0)

        q, _ = jax.lax.fori_loop(0, iterations, step, (jnp.clip(q0, lower, upper), 1e-3))
        e = jnp.linalg.norm(marker_positions(model, q, bodies, points) - m, axis=1)
        on = w1 > 0
        tot = jnp.sum(w1 * e**2)
        rms = jnp.sqrt(jnp.sum(jnp.where(on, e**2, 0.0)) / jnp.maximum(jnp.sum(on), 1))
        return q, tot, rms, jnp.max(jnp.where(on, e, 0.0)), jnp.where(on, e, jnp.nan)

    q, tot, rms, mx, errs = jax.vmap(frame)(mk, w, cw, cv, q0)
    del nm
    return InverseKinematicsResult(q, tot, rms, mx, errs)


def bounds_of(rotational, ranges, clamped) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the clamped coordinates' ranges, ±inf for the others."""
    lo = np.array([r[0] if c else -np.inf for r, c in zip(ranges, clamped, strict=True)])
    hi = np.array([r[1] if c else np.inf for r, c in zip(ranges, clamped, strict=True)])
    del rotational
    return lo, hi
