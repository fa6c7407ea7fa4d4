"""Inverse kinematics of every frame at once: weighted marker (and coordinate-task) least squares.

Per frame, as OpenSim's InverseKinematicsSolver poses it (``MarkersReference`` weights,
``CoordinateReference`` tasks):

    minimize  Σ_i w_i ‖p_i(q) − m_i‖² / (2 Σ_i w_i)  +  Σ_j c_j (q_j − q̂_j)²
    subject to  lo ≤ q ≤ hi,

``p_i(q)`` the model marker in ground, ``m_i`` the measured one (missing markers have weight 0), the
bounds those of clamped coordinates (others ±∞), locked coordinates held at their value. The
markers' term is Simbody's ``Markers`` assembly goal (the weighted mean square over 2), added with
weight 1 to the coordinate tasks' ``QValue`` goals (weight c_j each): a coordinate task's weight is
thus relative to the markers' mean, not to their sum. Solver:
projected Levenberg–Marquardt (Gauss–Newton steps on the free coordinates, damping adapted per
frame, steps clipped to the bounds), all frames iterated together until each has converged — so the
whole trial is one compiled call, differentiable in the data and the model's parameters.
"""

from __future__ import annotations

import equinox as eqx
import equinox.internal  # noqa: F401  (eqx.internal.while_loop)
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ..kinematics import tree_kinematics
from ..model import Model
from .checks import (
    check_bounds,
    check_finite,
    check_indices,
    check_nonnegative,
    check_positive,
    check_shape,
)

__all__ = [
    "InverseKinematicsResult",
    "bounds_of",
    "marker_jacobian",
    "marker_positions",
    "solve_inverse_kinematics",
]


def marker_positions(model: Model, q, bodies, points) -> Float[Array, "nm 3"]:
    """Ground positions (nm, 3) of markers fixed at ``points`` (nm, 3) in jaxmb bodies
    ``bodies`` (nm,) (-1: ground) at q."""
    return _markers_and_jacobian(tree_kinematics(model, q), bodies, points)[0]


def marker_jacobian(model: Model, q, bodies, points):
    """Ground positions (nm, 3) m and their Jacobian ``∂p/∂q`` (nm, 3, nq) at q, from one
    kinematics pass: column l of a marker on body i is ``ω_l × p + v_l`` with ``(ω_l, v_l)`` the
    body's twist per unit q̇_l about the ground origin (``Kinematics.Jb``); zero for ground."""
    return _markers_and_jacobian(tree_kinematics(model, q), bodies, points)


def _markers_and_jacobian(kin, bodies, points):
    b = jnp.asarray(bodies)
    on = (b >= 0)[:, None]
    bi = jnp.maximum(b, 0)
    A = kin.A[bi]
    p = jnp.where(on, jnp.sum(A[:, :3, :3] * points[:, None, :], axis=2) + A[:, :3, 3], points)
    Jb = kin.Jb[bi]  # (nm, 6, nq)
    w, v = Jb[:, :3], Jb[:, 3:]
    # ω × p per column, written out (tiny cross products batch badly as library calls)
    px, py, pz = p[:, 0, None], p[:, 1, None], p[:, 2, None]
    wxp = jnp.stack(
        [w[:, 1] * pz - w[:, 2] * py, w[:, 2] * px - w[:, 0] * pz, w[:, 0] * py - w[:, 1] * px],
        axis=1,
    )
    return p, jnp.where(on[:, :, None], wxp + v, 0.0)


class InverseKinematicsResult(eqx.Module):
    """``q`` (nt, nq) and per frame, over the markers with weight > 0 and a measurement:
    ``total_squared_error`` ``Σ ‖p − m‖²`` (m², unweighted: OpenSim's ``total_squared_error``, the
    first column of its ``_ik_marker_errors.sto``), the RMS marker error ``√(total / n)`` with n
    every marker of weight > 0 (a missing one counts zero error: OpenSim's), the max marker
    error (m), per-marker errors (nt, nm; NaN where missing or of weight 0), whether the frame's
    iteration converged (a step below ``xtol``, or no descent step left),
    ``weighted_squared_error`` ``Σ w ‖p − m‖²`` (m²), and ``cost``, the minimized objective
    (see the module docstring; m² and rad²)."""

    q: Float[Array, "nt nq"]
    total_squared_error: Float[Array, " nt"]
    rms_error: Float[Array, " nt"]
    max_error: Float[Array, " nt"]
    marker_errors: Float[Array, "nt nm"]
    converged: Bool[Array, " nt"]
    weighted_squared_error: Float[Array, " nt"]
    cost: Float[Array, " nt"]


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
    iterations: int = 50,
    xtol: float = 1e-6,
) -> InverseKinematicsResult:
    """Every frame's IK in one call. ``bodies`` (nm,) and ``points`` (nm, 3) the model markers;
    ``markers`` measured (nt, nm, 3) m (NaN where missing: weight 0); ``weights`` (nt, nm);
    ``q0`` the start ((nq,) for every frame, or (nt, nq)), ``lower``/``upper`` (nq,) bounds,
    ``free`` (nq,) bool (False for locked coordinates); ``coordinate_weights``/``_values``
    (nt, nq) coordinate tasks.

    Each iteration is one kinematics pass per frame (positions and their Jacobian together, see
    :func:`marker_jacobian`) and one (nq, nq) solve: the residual and Jacobian of the accepted
    point are carried, the candidate's are computed once and kept if it lowers the cost. One loop
    over all frames at once (at most ``iterations``, reverse-mode differentiable: equinox's
    checkpointed while loop), each frame frozen by its mask ``converged`` once converged, the loop
    ending when every frame has; from the model's default pose the Gait10dof walk needs ≤ 10
    (weighted error within 1e-16 m² of 100 iterations'). A frame whose solution is not finite is
    reported as not converged.

    Raises:
        ValueError: an array of the wrong shape (named with its dimensions), a body index outside
            the model, a negative or non-finite weight, a bound with lower > upper, a non-finite
            start, ``iterations`` not a positive integer or ``xtol`` not positive.
    """
    _check_arguments(
        model, bodies, points, markers, weights, q0, lower, upper, free,
        coordinate_weights, coordinate_values, iterations, xtol,
    )  # fmt: skip
    markers = jnp.asarray(markers, dtype=float)
    nt = markers.shape[0]
    w = jnp.where(jnp.any(jnp.isnan(markers), axis=2), 0.0, jnp.asarray(weights, dtype=float))
    mk = jnp.nan_to_num(markers)
    points = jnp.asarray(points, dtype=float)
    nq = model.nq
    cw = jnp.zeros((nt, nq)) if coordinate_weights is None else jnp.asarray(coordinate_weights)
    cv = jnp.zeros((nt, nq)) if coordinate_values is None else jnp.asarray(coordinate_values)
    lower, upper = jnp.asarray(lower, dtype=float), jnp.asarray(upper, dtype=float)
    fm = jnp.asarray(free, dtype=float)
    q0 = jnp.broadcast_to(jnp.asarray(q0, dtype=float), (nt, nq))

    # the residuals of 2 Σw times the objective (the same minimizer): markers' in m, unscaled
    wsum = jnp.sum(w, axis=1)
    scale = jnp.where(wsum > 0, 2.0 * wsum, 1.0)
    sw, sc = jnp.sqrt(w)[:, :, None], jnp.sqrt(cw * scale[:, None])

    def linearize(q, m, sw1, sc1, cv1):
        p, Jp = marker_jacobian(model, q, bodies, points)
        r = jnp.concatenate([((p - m) * sw1).reshape(-1), (q - cv1) * sc1])
        J = jnp.concatenate([(Jp * sw1[:, :, None]).reshape(-1, nq), jnp.diag(sc1)])
        return r, J * fm[None, :]

    def step(q, mu, r, J, done, m, sw1, sc1, cv1):
        g = J.T @ r
        H = J.T @ J
        dq = -jnp.linalg.solve(H + mu * (jnp.diag(jnp.diag(H)) + 1e-12) + jnp.diag(1.0 - fm), g)
        qn = jnp.clip(q + dq, lower, upper)
        rn, Jn = linearize(qn, m, sw1, sc1, cv1)
        ok = (jnp.sum(rn**2) < jnp.sum(r**2)) & ~done
        # converged: a step below xtol (taken or not: round-off then decides), or damping so large
        # that no step is left
        done = done | (jnp.max(jnp.abs(qn - q)) <= xtol) | (mu > 1e12)
        return (
            jnp.where(ok, qn, q),
            jnp.where(done, mu, jnp.where(ok, mu * 0.3, mu * 10.0)),
            jnp.where(ok, rn, r),
            jnp.where(ok, Jn, J),
            done,
        )

    data = (mk, sw, sc, cv)
    qs = jnp.clip(q0, lower, upper)
    r0, J0 = jax.vmap(linearize)(qs, *data)
    init = (qs, jnp.full((nt,), 1e-3), r0, J0, jnp.zeros((nt,), dtype=bool))
    # one loop over all frames, stopped when every frame has converged (at most ``iterations``)
    q, _, r, _, done = eqx.internal.while_loop(
        lambda c: ~jnp.all(c[4]),
        lambda c: jax.vmap(step)(*c, *data),
        init,
        max_steps=iterations,
        kind="checkpointed",
    )

    def errors(q, m, w1, applied1):
        e = jnp.linalg.norm(marker_positions(model, q, bodies, points) - m, axis=1)
        on = w1 > 0
        tot = jnp.sum(jnp.where(on, e**2, 0.0))
        # OpenSim's RMS divides by every applied marker, a missing one counting zero error
        rms = jnp.sqrt(tot / jnp.maximum(jnp.sum(applied1), 1))
        mx = jnp.max(jnp.where(on, e, 0.0))
        return tot, rms, mx, jnp.where(on, e, jnp.nan), jnp.sum(w1 * e**2)

    applied = jnp.asarray(weights, dtype=float) > 0
    tot, rms, mx, errs, weighted = jax.vmap(errors)(q, mk, w, applied)
    cost = jnp.sum(r**2, axis=1) / scale  # the carried residuals are those of the final q
    done = done & jnp.all(jnp.isfinite(q), axis=1)
    return InverseKinematicsResult(q, tot, rms, mx, errs, done, weighted, cost)


def _check_arguments(
    model, bodies, points, markers, weights, q0, lower, upper, free, cw, cv, iterations, xtol
) -> None:
    where = "solve_inverse_kinematics"
    names = model.coordinate_names
    nt, nm, _ = check_shape(markers, ("nt", "nm", 3), where, "markers (m)")
    check_shape(weights, (nt, nm), where, "weights (nt, nm)")
    check_shape(bodies, (nm,), where, "bodies (one per marker)")
    check_shape(points, (nm, 3), where, "points (m, one per marker)")
    check_indices(bodies, model.nb, where, "bodies")
    nq = model.nq
    if np.ndim(q0) == 2:
        check_shape(q0, (nt, nq), where, "q0 (nt, nq)")
    else:
        check_shape(q0, (nq,), where, "q0 (nq)")
    for name, x in (("lower", lower), ("upper", upper), ("free", free)):
        check_shape(x, (nq,), where, f"{name} (nq)")
    for name, x in (("coordinate_weights", cw), ("coordinate_values", cv)):
        if x is not None:
            check_shape(x, (nt, nq), where, f"{name} (nt, nq)")
    check_nonnegative(weights, where, "weights")
    check_nonnegative(cw, where, "coordinate_weights", names)
    check_finite(q0, where, "q0", names)
    check_bounds(lower, upper, where, names)
    check_positive(iterations, where, "iterations", integer=True)
    check_positive(xtol, where, "xtol", "rad or m")


def bounds_of(rotational, ranges, clamped) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the clamped coordinates' ranges, ±inf for the others."""
    lo = np.array([r[0] if c else -np.inf for r, c in zip(ranges, clamped, strict=True)])
    hi = np.array([r[1] if c else np.inf for r, c in zip(ranges, clamped, strict=True)])
    del rotational
    return lo, hi
