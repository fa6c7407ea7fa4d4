"""Computed-torque tracking (seed 001 §4-4 C, Eqs. 200–201).

The controller asks for the accelerations of a critically damped PD law about a desired
trajectory (Eq. 201)::

    Q_d = q̈_des − 2K (q̇ − q̇_des) − K² (q − q_des),       K diagonal (1/s)

and finds the generalized forces τ that produce them together with q̈ (Eq. 200)::

    [ M  −I ] [ q̈ ]   [ G − N q̇ + Q_applied ]
    [ I   0 ] [ τ  ] = [ Q_d                 ]

so ``q̈ = Q_d`` and ``τ = M Q_d + N q̇ − G − Q_applied``. The tracking error e = q − q_des then obeys
``ë + 2K ė + K² e = 0`` (both poles at −K_ii): a trajectory that starts on the desired one stays on
it, and what remains is the integrator's error.

:func:`simulate_tracking` closes the loop through the model: the controller's τ (from the inverse
dynamics, or Eq. 200 literally) is applied to the plant's forward dynamics in
:func:`jaxmb.simulate`, so the closed loop exercises both directions of the equations of motion.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..dynamics import applied_forces, bias_forces, gravity_forces, inverse_dynamics, mass_matrix
from ..model import Model
from .driver import simulate

__all__ = [
    "ComputedTorque",
    "MinimumJerk",
    "TrackingResult",
    "computed_torque",
    "eq200_solve",
    "simulate_tracking",
]


class MinimumJerk(eqx.Module):
    """Minimum-jerk motion from ``q_start`` to ``q_end`` over ``duration``, then held.

    ``q_des(t) = q_start + (q_end − q_start) s(τ)``, ``s = 10τ³ − 15τ⁴ + 6τ⁵``,
    ``τ = clip(t / duration, 0, 1)``: zero velocity and acceleration at both ends (Flash & Hogan
    1985). Coordinates with ``q_start == q_end`` are held constant.

    Attributes:
        q_start, q_end: (nq,) coordinates (model units, rad here).
        duration: s.
    """

    q_start: Float[Array, " nq"]
    q_end: Float[Array, " nq"]
    duration: Float[Array, ""]

    def __init__(self, q_start, q_end, duration):
        self.q_start = jnp.asarray(q_start, dtype=float)
        self.q_end = jnp.asarray(q_end, dtype=float)
        if self.q_start.shape != self.q_end.shape or self.q_start.ndim != 1:
            raise ValueError(
                f"q_start {self.q_start.shape} and q_end {self.q_end.shape} must be equal (nq,)"
            )
        if not float(duration) > 0:
            raise ValueError(f"duration must be positive, got {duration}")
        self.duration = jnp.asarray(duration, dtype=float)

    def __call__(self, t) -> tuple[Array, Array, Array]:
        """``(q_des, q̇_des, q̈_des)`` at time t (s), each (nq,)."""
        T = self.duration
        inside = (t > 0) & (t < T)
        u = jnp.clip(t / T, 0.0, 1.0)
        s = u**3 * (10.0 - 15.0 * u + 6.0 * u**2)
        sd = jnp.where(inside, 30.0 * u**2 * (1.0 - u) ** 2 / T, 0.0)
        sdd = jnp.where(inside, 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u) / T**2, 0.0)
        dq = self.q_end - self.q_start
        return self.q_start + dq * s, dq * sd, dq * sdd


def _gains(K, nq: int) -> Float[Array, " nq"]:
    K = jnp.asarray(K, dtype=float)
    if K.ndim == 2:
        Kn = np.asarray(K)
        if Kn.shape != (nq, nq) or np.any(Kn != np.diag(np.diag(Kn))):
            raise ValueError(f"K must be diagonal ({nq}, {nq}), got shape {Kn.shape}")
        K = jnp.diag(K)
    if K.shape != (nq,):
        raise ValueError(f"K must have {nq} diagonal gains, got shape {K.shape}")
    if not np.all(np.asarray(K) > 0):
        raise ValueError(f"the gains K must be positive, got {np.asarray(K).tolist()}")
    return K


def eq200_solve(model: Model, q, qd, Qd, t=0.0) -> tuple[Array, Array]:
    """Solve Eq. 200 literally: the (2nq, 2nq) block system for ``(q̈, τ)``.

    Args:
        model: the model. q, qd: (nq,) state. Qd: (nq,) commanded accelerations (Eq. 201).
        t: time (s) for time-dependent force elements.

    Returns:
        ``(q̈, τ)``, each (nq,); τ in N·m for rotational coordinates.
    """
    n = model.nq
    M = mass_matrix(model, q)
    rhs_top = gravity_forces(model, q) - bias_forces(model, q, qd) + applied_forces(model, q, qd, t)
    eye = jnp.eye(n, dtype=M.dtype)
    A = jnp.block([[M, -eye], [eye, jnp.zeros_like(M)]])
    x = jnp.linalg.solve(A, jnp.concatenate([rhs_top, Qd]))
    return x[:n], x[n:]


class ComputedTorque(eqx.Module):
    """The computed-torque controller ``τ(t, q, q̇)`` of Eqs. 200–201 (a pytree; call it).

    Attributes:
        model: the model the torques are computed for.
        K: (nq,) diagonal derivative gains (1/s); the proportional gains are K².
        desired: callable ``t -> (q_des, q̇_des, q̈_des)`` (e.g. :class:`MinimumJerk`).
        method: ``"rnea"`` (τ by one inverse-dynamics pass) or ``"eq200"`` (the block system).
    """

    model: Model | None
    K: Float[Array, " nq"]
    desired: eqx.Module
    method: str = eqx.field(static=True, default="rnea")

    def commanded(self, t, q, qd) -> Float[Array, " nq"]:
        """Eq. 201: ``Q_d = q̈_des − 2K(q̇ − q̇_des) − K²(q − q_des)``, (nq,)."""
        q_des, qd_des, qdd_des = self.desired(t)
        return qdd_des - 2.0 * self.K * (qd - qd_des) - self.K**2 * (q - q_des)

    def __call__(self, t, q, qd) -> Float[Array, " nq"]:
        if self.model is None:
            raise ValueError(
                "this ComputedTorque is bound to its plant (model=None): it reads the plant's "
                "M and N q̇ − G inside jaxmb.simulate; call the unbound controller instead"
            )
        Qd = self.commanded(t, q, qd)
        if self.method == "eq200":
            return eq200_solve(self.model, q, qd, Qd, t)[1]
        return inverse_dynamics(self.model, q, qd, Qd, t)

    def bind_plant(self, plant: Model) -> ComputedTorque:
        """This controller reading the plant's own terms when its model *is* the plant (the
        seed's Eq. 200: controller and plant share one M and N q̇ − G); else itself unchanged.
        :func:`jaxmb.simulate` binds the ``tau`` it is given, so a right-hand side forms M and
        N q̇ − G once (one pose pass, one tree pass) instead of a second pass for the torque."""
        return dataclasses.replace(self, model=None) if self.model is plant else self

    @property
    def reads_plant_terms(self) -> bool:
        """True when bound (:meth:`bind_plant`): τ comes from :meth:`from_plant_terms`."""
        return self.model is None

    def from_plant_terms(self, t, q, qd, M, h_minus_G, Q_applied) -> Float[Array, " nq"]:
        """Eq. 200's second block row solved for τ with the plant's terms:
        ``τ = M Q_d + (N q̇ − G) − Q_applied`` (N·m), M (nq, nq), the rest (nq,)."""
        Qd = self.commanded(t, q, qd)
        return jnp.sum(M * Qd, axis=1) + h_minus_G - Q_applied


def computed_torque(model: Model, K, desired, method: str = "rnea") -> ComputedTorque:
    """The controller of Eqs. 200–201 for ``model``.

    Args:
        model: the model.
        K: (nq,) or diagonal (nq, nq) derivative gains (1/s), all positive; critically damped
            (proportional gains K²).
        desired: callable ``t -> (q_des, q̇_des, q̈_des)``, each (nq,).
        method: ``"rnea"`` or ``"eq200"`` (same τ; see :class:`ComputedTorque`).

    Returns:
        a :class:`ComputedTorque`, callable as ``tau(t, q, q̇) -> (nq,)`` and usable as the
        ``tau`` argument of :func:`jaxmb.simulate`.
    """
    if method not in ("rnea", "eq200"):
        raise ValueError(f"unknown computed-torque method {method!r}; use 'rnea' or 'eq200'")
    if not callable(desired):
        raise ValueError("desired must be callable t -> (q_des, qd_des, qdd_des)")
    return ComputedTorque(model, _gains(K, model.nq), desired, method)


class TrackingResult(eqx.Module):
    """A closed-loop tracking simulation.

    Attributes:
        ts: (nt,) s. q, qd: (nt, nq) simulated state. tau: (nt, nq) controller torques (N·m).
        q_des, qd_des: (nt, nq) desired state. error: (nt, nq) ``q − q_des`` (rad).
        stats: the integrator's statistics.
    """

    ts: Float[Array, " nt"]
    q: Float[Array, "nt nq"]
    qd: Float[Array, "nt nq"]
    tau: Float[Array, "nt nq"]
    q_des: Float[Array, "nt nq"]
    qd_des: Float[Array, "nt nq"]
    error: Float[Array, "nt nq"]
    stats: dict


def simulate_tracking(
    model: Model,
    K,
    desired,
    t1: float,
    ts=None,
    *,
    q0=None,
    qd0=None,
    solver: str = "dopri5",
    rtol: float = 1e-10,
    atol: float = 1e-10,
    method: str = "rnea",
    max_steps: int = 200_000,
) -> TrackingResult:
    """Integrate the plant ``M q̈ + N q̇ = G + Q_applied + τ`` under the computed torque τ.

    Args:
        model: the model (plant and controller).
        K: diagonal gains, see :func:`computed_torque`.
        desired: ``t -> (q_des, q̇_des, q̈_des)``.
        t1: final time (s). ts: (nt,) output times (default 201 points on [0, t1]).
        q0, qd0: initial state; default the desired state at t = 0.
        solver, rtol, atol, max_steps: passed to :func:`jaxmb.simulate` (the seed used
            Runge–Kutta–Fehlberg; ``"dopri5"`` is the same family of embedded 4(5) pairs).
        method: how the controller computes τ (``"rnea"`` or ``"eq200"``).

    Returns:
        :class:`TrackingResult` with the state, the torques and the tracking error at ``ts``.
    """
    ctrl = computed_torque(model, K, desired, method)
    ts = jnp.linspace(0.0, t1, 201) if ts is None else jnp.asarray(ts, dtype=float)
    qs0, qds0, _ = desired(jnp.asarray(0.0))
    q0 = qs0 if q0 is None else q0
    qd0 = qds0 if qd0 is None else qd0
    traj = simulate(
        model, q0, qd0, t1, ts, solver=solver, rtol=rtol, atol=atol, tau=ctrl,
        max_steps=max_steps,
    )  # fmt: skip
    tau = jax.vmap(ctrl)(traj.ts, traj.q, traj.qd)
    q_des, qd_des, _ = jax.vmap(desired)(traj.ts)
    return TrackingResult(
        ts=traj.ts,
        q=traj.q,
        qd=traj.qd,
        tau=tau,
        q_des=q_des,
        qd_des=qd_des,
        error=traj.q - q_des,
        stats=traj.stats,
    )
