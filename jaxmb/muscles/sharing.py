"""Muscle force sharing: activations that produce required generalized forces, all frames at once.

For each frame t with pose q, velocity q̇ and required generalized force τ (e.g. from inverse
dynamics) solve

    min_a Σ a²   subject to   R(q) F_MT(a, q, q̇) = τ,   0 ≤ a ≤ 1,

with the rigid-tendon Hill model (:mod:`jaxmb.hill`), for which ``F_MT = F_a a + F_p`` is affine in
a; the problem is a strictly convex QP per frame. Solver (vmapped over frames, jit-compiled):

1. an augmented Lagrangian on the equality (rows scaled to unit norm), whose inner box-constrained
   problems are solved by projected accelerated gradient steps with optax (``optax.sgd`` with
   Nesterov momentum and step 1/L, followed by ``optax.projections.projection_box``), warm-started;
2. an active-set polish: with the bounds the AL iterate has found active held fixed, the free
   activations are the exact minimum-norm solution of the equality; the polished point is kept when
   it stays in [0, 1] (otherwise the AL iterate is kept).

Frames whose torque residual ‖R F − τ‖_∞ exceeds ``tol`` after the solve are infeasible (the
muscles cannot produce τ within their bounds) and are reported by index, never hidden.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from ..model import Model
from .geometry import lengths_and_moment_arms
from .hill import rigid_tendon_coefficients

__all__ = ["SharingResult", "share_forces", "sharing_problem", "solve_sharing_qp"]


@dataclasses.dataclass(frozen=True)
class SharingResult:
    """Force-sharing solution for nt frames.

    Attributes:
        activations: (nt, nm) in [0, 1]. forces: (nt, nm) musculotendon forces (N).
        residual: (nt, nq) R F − τ (N·m or N). max_residual: (nt,) ‖residual‖_∞.
        infeasible_frames: indices of frames with ``max_residual > tol`` or anything non-finite
            (a NaN pose, velocity or torque, a NaN solution): every frame not solved.
        tol: the residual tolerance used (N·m).
    """

    activations: Float[Array, "nt nm"]
    forces: Float[Array, "nt nm"]
    residual: Float[Array, "nt nq"]
    max_residual: Float[Array, " nt"]
    infeasible_frames: np.ndarray
    tol: float


def sharing_problem(model: Model, q, qd, tau, lengths=None, arms=None):
    """The per-frame QP data ``(M, b, F_a, F_p, R)``: constraint ``M a = b`` with
    ``M = R diag(F_a)`` (nq, nm) and ``b = τ − R F_p`` (nq,). ``lengths`` (nm,) m and ``arms``
    (nq, nm) are the frame's path lengths and moment arms when already known (else computed)."""
    p = model.muscles.params
    if lengths is None or arms is None:
        L, R = lengths_and_moment_arms(model, q)
        lengths = L if lengths is None else lengths
        arms = R if arms is None else arms
    Fa, Fp = rigid_tendon_coefficients(p, lengths, -arms.T @ qd)
    return arms * Fa[None, :], tau - arms @ Fp, Fa, Fp, arms


def solve_sharing_qp(M, b, *, rho=1e3, outer=60, inner=150, polish=True):
    """min ‖a‖² s.t. M a = b, 0 ≤ a ≤ 1 for one frame (vmap it); returns a (nm,)."""
    scale = 1.0 / jnp.maximum(jnp.linalg.norm(M, axis=1), 1e-12)
    Ms, bs = M * scale[:, None], b * scale
    L = 2.0 + rho * jnp.sum(Ms * Ms)  # ≥ the largest eigenvalue of the inner Hessian
    opt = optax.sgd(learning_rate=1.0 / L, momentum=0.9, nesterov=True)

    def inner_solve(a, lam):
        def grad(x):
            r = Ms @ x - bs
            return 2.0 * x + Ms.T @ (lam + rho * r)

        def step(_, carry):
            x, st = carry
            upd, st = opt.update(grad(x), st, x)
            x = optax.projections.projection_box(optax.apply_updates(x, upd), 0.0, 1.0)
            return x, st

        a, _ = jax.lax.fori_loop(0, inner, step, (a, opt.init(a)))
        return a

    def outer_step(_, carry):
        a, lam = carry
        a = inner_solve(a, lam)
        return a, lam + rho * (Ms @ a - bs)

    nm = M.shape[1]
    a0 = jnp.full((nm,), 0.5, dtype=M.dtype)
    lam0 = jnp.zeros(M.shape[0], dtype=M.dtype)
    a, _ = jax.lax.fori_loop(0, outer, outer_step, (a0, lam0))
    if not polish:
        return a
    # active-set polish: exact minimum-norm solution on the free activations
    eps = 1e-7
    lower, upper = a <= eps, a >= 1.0 - eps
    fixed = lower | upper
    a_fix = jnp.where(upper, 1.0, 0.0)
    Mf = Ms * (~fixed)[None, :]
    rhs = bs - Ms @ a_fix
    G = Mf @ Mf.T
    y = jnp.linalg.solve(G + 1e-300 * jnp.eye(G.shape[0], dtype=G.dtype), rhs)
    a_pol = jnp.where(fixed, a_fix, Mf.T @ y)
    ok = (
        jnp.all(jnp.isfinite(a_pol))
        & jnp.all(a_pol >= -1e-12)
        & jnp.all(a_pol <= 1.0 + 1e-12)
        & (jnp.max(jnp.abs(Ms @ a_pol - bs)) <= jnp.max(jnp.abs(Ms @ a - bs)))
    )
    return jnp.where(ok, jnp.clip(a_pol, 0.0, 1.0), a)


def share_forces(
    model: Model,
    q: Float[Array, "nt nq"],
    qd: Float[Array, "nt nq"],
    tau: Float[Array, "nt nq"],
    *,
    tol: float = 1e-6,
    rho: float = 1e3,
    outer: int = 60,
    inner: int = 150,
    lengths: Float[Array, "nt nm"] | None = None,
    moment_arms: Float[Array, "nt nq nm"] | None = None,
) -> SharingResult:
    """Minimum-Σa² activations for every frame (rigid tendon), all frames at once.

    Args:
        model: a model with muscles carrying Hill parameters.
        q, qd, tau: (nt, nq) poses, velocities and required generalized forces.
        tol: residual tolerance (N·m) that declares a frame infeasible.
        rho, outer, inner: augmented-Lagrangian penalty and iteration counts.
        lengths, moment_arms: the frames' path lengths (nt, nm) m and moment-arm matrices
            (nt, nq, nm), when already computed (e.g. by a sweep that compiled the paths once, or
            taken from OpenSim); both or neither. Otherwise they are computed from q.
    """
    q, qd, tau = (jnp.atleast_2d(jnp.asarray(x, dtype=float)) for x in (q, qd, tau))
    if not (np.isfinite(float(tol)) and float(tol) > 0):
        raise ValueError(f"share_forces: tol must be a positive number of N·m, got {tol!r}")
    for name, v in (("rho", rho), ("outer", outer), ("inner", inner)):
        if not (np.isfinite(float(v)) and float(v) > 0):
            raise ValueError(f"share_forces: {name} must be positive, got {v!r}")
    if model.muscles is None or not model.muscle_names:
        raise ValueError(f"share_forces: model {model.name!r} has no muscles")
    if not (q.shape == qd.shape == tau.shape) or q.shape[1] != model.nq:
        raise ValueError(
            f"share_forces: q, qd, tau must all be (nt, {model.nq}); got {q.shape}, {qd.shape}, "
            f"{tau.shape}"
        )
    nt, nm = q.shape[0], len(model.muscle_names)
    if (lengths is None) != (moment_arms is None):
        raise ValueError("share_forces: give both lengths and moment_arms, or neither")
    if lengths is not None:
        lengths = jnp.asarray(lengths, dtype=float)
        moment_arms = jnp.asarray(moment_arms, dtype=float)
        if lengths.shape != (nt, nm) or moment_arms.shape != (nt, model.nq, nm):
            raise ValueError(
                f"share_forces: lengths must be ({nt}, {nm}) and moment_arms ({nt}, {model.nq}, "
                f"{nm}); got {lengths.shape} and {moment_arms.shape}"
            )

    @jax.jit
    def solve(q, qd, tau, lengths, arms):
        if lengths is None:
            # vectorized over frames (wrapped paths run frame by frame inside, see
            # muscles.geometry), and so are the QPs
            M, b, Fa, Fp, R = jax.vmap(lambda *x: sharing_problem(model, *x))(q, qd, tau)
        else:
            M, b, Fa, Fp, R = jax.vmap(
                lambda q1, qd1, tau1, L1, R1: sharing_problem(model, q1, qd1, tau1, L1, R1)
            )(q, qd, tau, lengths, arms)

        def frame(M1, b1, Fa1, Fp1, R1, tau1):
            a = solve_sharing_qp(M1, b1, rho=rho, outer=outer, inner=inner)
            F = Fa1 * a + Fp1
            return a, F, R1 @ F - tau1

        return jax.vmap(frame)(M, b, Fa, Fp, R, tau)

    a, F, res = solve(q, qd, tau, lengths, moment_arms)
    mx = jnp.max(jnp.abs(res), axis=1)
    # a frame with a non-finite pose, velocity, torque or result is infeasible too: NaN > tol is
    # False, so test "not within tol"
    finite = np.all(np.isfinite(np.asarray(a)), axis=1) & np.all(
        np.isfinite(np.asarray(jnp.concatenate([q, qd, tau], axis=1))), axis=1
    )
    bad = np.flatnonzero(~(np.asarray(mx) <= tol) | ~finite)
    return SharingResult(a, F, res, mx, bad, float(tol))
