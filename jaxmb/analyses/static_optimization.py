"""Static optimization as OpenSim 4.6 poses it, every frame in one batched, differentiable solve.

OpenSim's ``StaticOptimization`` (``StaticOptimizationTarget.cpp``) finds, per frame, the controls
x of all actuators (muscles, then the other scalar actuators of the model and its force-set files)

    minimize Σ |x_i|^p   subject to   the actuators reproduce the frame's accelerations,
                                       min_control_i ≤ x_i ≤ max_control_i,

where actuator i exerts ``x_i · f_i``: a muscle's ``f_i`` is its ideal force with physiology off
(``max_isometric_force``) or, with physiology on, ``calcInextensibleTendonActiveFiberForce(s, 1)``
(active force–length–velocity along the tendon with a rigid tendon and the pennation model: see
:mod:`.muscle_capacity`); a coordinate, point or torque actuator's is its ``optimal_force``.
Passive muscle forces are not applied (OpenSim overrides every actuator's force). The constraint
``M⁻¹(Σ Q_i x_i f_i − τ) = 0`` has the same solutions as ``Σ Q_i x_i f_i = τ`` with τ the
generalized forces that inverse dynamics with the external loads requires; that is what jaxmb
solves, so its residual is in N·m (N).

Solver (per frame, vmapped): the dual of the bound-constrained problem is concave and piecewise
smooth in the multipliers λ (nq); ``x(λ) = clip(ψ(Aᵀλ), lower, upper)`` with ψ the inverse of
``d|x|^p/dx``. A semismooth Newton iteration on ``A x(λ) = b``, started from the minimum-norm
solution without bounds, with a backtracking line search on the dual objective (on the residual
once the dual's gains fall below round-off), runs a fixed number of iterations, so the whole solve
is a differentiable function of A, b and the bounds (jit, vmap, grad). Frames whose residual
``‖A x − b‖_∞`` exceeds ``tol`` have no solution within the bounds and are reported.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .checks import check_bounds, check_positive, check_shape

__all__ = ["StaticOptimizationResult", "solve_static_optimization", "so_frame"]

_STEPS = 2.0 ** -np.arange(0, 41)  # numpy: no JAX backend start at import


def _psi(y, p):
    """Inverse of d|x|^p/dx = p sign(x)|x|^(p−1), and its derivative."""
    ay = jnp.abs(y) / p
    e = 1.0 / (p - 1.0)
    x = jnp.sign(y) * ay**e
    safe = jnp.where(ay > 0, ay, 1.0)
    dx = jnp.where(ay > 0, e / p * safe ** (e - 1.0), jnp.where(p == 2.0, 0.5, 0.0))
    return x, dx


def so_frame(A, b, lower, upper, p=2.0, iterations: int = 40):
    """One frame: ``min Σ|x|^p s.t. A x = b, lower ≤ x ≤ upper`` → ``(x, λ)``.

    A (nq, na), b (nq,), bounds (na,) (±inf allowed). Rows of A with no actuator (all zero) must
    have b = 0 (else the frame is infeasible and its residual shows it).
    """
    p = jnp.asarray(p, dtype=A.dtype)
    nq = A.shape[0]

    def x_of(lam):
        x, dx = _psi(A.T @ lam, p)
        free = (x > lower) & (x < upper)
        return jnp.clip(x, lower, upper), jnp.where(free, dx, 0.0), dx

    def dual(lam):
        x = x_of(lam)[0]
        return jnp.sum(jnp.abs(x) ** p) - lam @ (A @ x - b)

    eye = jnp.eye(nq, dtype=A.dtype)
    G = A @ A.T
    tiny = 1e-14 * (jnp.trace(G) / nq + 1e-300)
    # start from the minimum-norm solution without bounds (exact for p = 2 when no bound is hit)
    lam0 = jnp.linalg.solve(0.5 * G + tiny * eye, b)

    def step(_, lam):
        x, d, dfull = x_of(lam)
        g = b - A @ x
        H = (A * d[None, :]) @ A.T
        # where bounds clip everything in a direction, a little of the unclipped curvature keeps
        # the Newton system solvable; the line search (steps 1 … 2⁻⁴⁰) absorbs the longer step
        Hf = (A * dfull[None, :]) @ A.T
        rel = jnp.minimum(1.0, jnp.max(jnp.abs(g)) / (jnp.max(jnp.abs(b)) + 1e-300))
        delta = jnp.linalg.solve(H + 1e-9 * rel * Hf + tiny * eye, g)
        steps = jnp.asarray(_STEPS, dtype=A.dtype)
        vals = jax.vmap(lambda t: dual(lam + t * delta))(steps)
        resn = jax.vmap(lambda t: jnp.max(jnp.abs(b - A @ x_of(lam + t * delta)[0])))(steps)
        d0, r0 = dual(lam), jnp.max(jnp.abs(g))
        k = jnp.argmax(vals)
        # near the optimum the dual's gains drop below round-off: then the step that most reduces
        # the equation residual is taken
        stalled = vals[k] <= d0 + 1e-13 * jnp.abs(d0)
        kr = jnp.argmin(resn)
        t = jnp.where(
            stalled,
            jnp.where(resn[kr] < r0, steps[kr], 0.0),
            jnp.where(vals[k] > d0, steps[k], 0.0),
        )
        return lam + t * delta

    lam = jax.lax.fori_loop(0, iterations, step, lam0)
    x = x_of(lam)[0]
    return x, lam


@dataclasses.dataclass(frozen=True)
class StaticOptimizationResult:
    """Per frame (nt): ``controls`` (nt, na) activations / actuator controls, ``forces`` (nt, na)
    N (N·m for torque actuators), ``residual`` (nt, nq) ``A x − τ``, ``max_residual`` (nt,),
    ``cost`` (nt,) Σ|x|^p, ``infeasible`` indices of frames with ``max_residual > tol``."""

    controls: Float[Array, "nt na"]
    forces: Float[Array, "nt na"]
    residual: Float[Array, "nt nq"]
    max_residual: Float[Array, " nt"]
    cost: Float[Array, " nt"]
    infeasible: np.ndarray
    tol: float


def solve_static_optimization(
    A: Float[Array, "nt nq na"],
    b: Float[Array, "nt nq"],
    lower: Float[Array, " na"],
    upper: Float[Array, " na"],
    f: Float[Array, "nt na"] | None = None,
    *,
    exponent: float = 2.0,
    iterations: int = 40,
    tol: float = 1e-6,
) -> StaticOptimizationResult:
    """Every frame's static optimization at once (``A[t] x = b[t]``); ``f`` (nt, na) the force per
    unit control, to report forces (default: ones). A frame with a non-finite ``A`` or ``b`` has a
    NaN residual and is reported among the infeasible frames.

    Raises:
        ValueError: an array of the wrong shape (named with its dimensions), a bound with
            lower > upper, ``exponent`` not a finite number > 1 (the cost Σ|x|^p must be strictly
            convex), ``iterations`` not a positive integer, ``tol`` not positive.
    """
    where = "solve_static_optimization"
    nt, nq, na = check_shape(A, ("nt", "nq", "na"), where, "A")
    check_shape(b, (nt, nq), where, "b (nt, nq)")
    for name, x in (("lower", lower), ("upper", upper)):
        check_shape(x, (na,), where, f"{name} (na)")
    if f is not None:
        check_shape(f, (nt, na), where, "f (nt, na)")
    check_bounds(lower, upper, where)
    if not isinstance(exponent, jax.core.Tracer) and not (np.isfinite(exponent) and exponent > 1):
        raise ValueError(f"{where}: exponent must be a finite number > 1, got {exponent!r}")
    check_positive(iterations, where, "iterations", integer=True)
    check_positive(tol, where, "tol", "N·m")
    A, b = jnp.asarray(A, dtype=float), jnp.asarray(b, dtype=float)
    lower, upper = jnp.asarray(lower, dtype=float), jnp.asarray(upper, dtype=float)
    x, _ = jax.vmap(lambda A1, b1: so_frame(A1, b1, lower, upper, exponent, iterations))(A, b)
    res = jnp.einsum("tqa,ta->tq", A, x) - b
    mx = jnp.max(jnp.abs(res), axis=1)
    cost = jnp.sum(jnp.abs(x) ** exponent, axis=1)
    forces = x if f is None else x * f
    bad = np.flatnonzero(~(np.asarray(mx) <= tol))
    return StaticOptimizationResult(x, forces, res, mx, cost, bad, float(tol))
