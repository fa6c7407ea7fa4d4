"""Forward simulation: the equations of motion as a first-order ODE, integrated by diffrax.

The state is ``y = (q, q̇)`` and ``ẏ = (q̇, q̈(q, q̇, t))`` with q̈ from
:func:`jaxmb.dynamics.forward_dynamics` (a Cholesky solve of ``M q̈ = G + Q + τ − N q̇``).
Explicit solvers (``"tsit5"``, ``"dopri5"``, ``"dopri8"``) and stiff ones (``"kvaerno5"``, ESDIRK;
``"kencarp4"``, IMEX with the whole right-hand side in the implicit part) take adaptive steps
under a PID controller. The model is an argument of the compiled solve, not a constant baked
into it, so a second model with the same structure (same topology, parameter shapes, force
elements) reuses the compiled code; :func:`simulate_batch` vmaps over initial states and,
optionally, over models.

Failures are reported, not hidden: a solve that stops early raises :class:`SimulationError` naming
the cause (maximum steps reached, step-size collapse below ``dtmin``, a non-finite right-hand side —
singular mass matrix or joint map that failed to converge — with the time and state where it
happened), or, with ``throw=False``, returns a :class:`Trajectory` whose ``result`` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

from ..dynamics.terms import _forward_dynamics
from ..model import Model

__all__ = [
    "SOLVERS",
    "SimulationError",
    "Trajectory",
    "simulate",
    "simulate_batch",
    "ode_rhs",
    "ERKResult",
    "erk_solve",
]

SOLVERS = ("tsit5", "dopri5", "dopri8", "kvaerno5", "kencarp4")
_IMEX = ("kencarp4",)


class SimulationError(RuntimeError):
    """An integration that did not reach t1, with the cause, time and state in the message."""


class Trajectory(eqx.Module):
    """The result of :func:`simulate`.

    Attributes:
        ts: (nt,) output times (s). After an early stop (``throw=False``) the requested times not
            reached are ``inf``; with the default ``ts`` the last entry is the time reached.
        q: (nt, nq) coordinates. qd: (nt, nq) velocities.
        stats: dict of solver statistics: ``num_steps``, ``num_accepted_steps``,
            ``num_rejected_steps``, ``max_steps``.
        result: the diffrax result (``diffrax.RESULTS.successful`` when t1 was reached).
        t_final: time (s) the solver reached (= t1 on success). q_final, qd_final: state there.
    """

    ts: Float[Array, " nt"]
    q: Float[Array, "nt nq"]
    qd: Float[Array, "nt nq"]
    stats: dict
    result: Any
    t_final: Float[Array, ""]
    q_final: Float[Array, " nq"]
    qd_final: Float[Array, " nq"]

    @property
    def successful(self):
        """Boolean (array under a batch): the solve reached t1."""
        return self.result == dfx.RESULTS.successful


def ode_rhs(model: Model, tau=None) -> Callable:
    """The ODE right-hand side ``(t, (q, q̇), args) -> (q̇, q̈)`` for use with diffrax directly."""

    def rhs(t, y, args):
        q, qd = y
        qdd, _ = _forward_dynamics(model, q, qd, tau, t)
        return qd, qdd

    return rhs


def _solver(name: str, rtol, atol):
    explicit = {"tsit5": dfx.Tsit5, "dopri5": dfx.Dopri5, "dopri8": dfx.Dopri8}
    implicit = {"kvaerno5": dfx.Kvaerno5, "kencarp4": dfx.KenCarp4}
    if name in explicit:
        return explicit[name]()
    if name in implicit:
        # diffrax's default chord iteration rejects most steps at tight tolerances (2310 steps
        # against 165 with full Newton on chain(3) at 1e-10): re-linearize every iteration
        return implicit[name](root_finder=optx.Newton(rtol=rtol, atol=atol))
    raise ValueError(f"unknown solver {name!r}; choose one of {SOLVERS}")


def _solve(model, q0, qd0, t0, t1, ts, tau, dt0, rtol, atol, dtmin, *, solver, max_steps, progress):
    """One diffrax solve (traced); returns a Trajectory."""
    rhs = ode_rhs(model, tau)
    if solver in _IMEX:
        zero = lambda t, y, args: jax.tree_util.tree_map(jnp.zeros_like, y)
        terms = dfx.MultiTerm(dfx.ODETerm(zero), dfx.ODETerm(rhs))
    else:
        terms = dfx.ODETerm(rhs)
    controller = dfx.PIDController(rtol=rtol, atol=atol, dtmin=dtmin, force_dtmin=False)
    subs = [
        dfx.SubSaveAt(t0=True, t1=True) if ts is None else dfx.SubSaveAt(ts=ts),
        dfx.SubSaveAt(t1=True),
    ]
    meter = dfx.TqdmProgressMeter() if progress else dfx.NoProgressMeter()
    sol = dfx.diffeqsolve(
        terms,
        _solver(solver, rtol, atol),
        t0,
        t1,
        dt0,
        (q0, qd0),
        stepsize_controller=controller,
        saveat=dfx.SaveAt(subs=subs),
        max_steps=max_steps,
        throw=False,
        progress_meter=meter,
    )
    (ts_out, t_end), ((q, qd), (q_end, qd_end)) = sol.ts, sol.ys
    stats = {
        k: jnp.asarray(sol.stats[k])
        for k in ("num_steps", "num_accepted_steps", "num_rejected_steps")
    }
    stats["max_steps"] = max_steps
    return Trajectory(
        ts=ts_out,
        q=q,
        qd=qd,
        stats=stats,
        result=sol.result,
        t_final=t_end[0],
        q_final=q_end[0],
        qd_final=qd_end[0],
    )


_solve_jit = eqx.filter_jit(_solve)


def _prepare(model, q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin, solver, batch_dims=0):
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose one of {SOLVERS}")
    q0 = jnp.asarray(q0, dtype=float)
    qd0 = jnp.asarray(qd0, dtype=float)
    want = (model.nq,)
    if q0.shape[batch_dims:] != want or qd0.shape[batch_dims:] != want:
        raise ValueError(
            f"initial state must have shape {(('batch',) * batch_dims) + want}: got q0 {q0.shape}, "
            f"qd0 {qd0.shape} for model {model.name!r} with nq={model.nq}"
        )
    if not (np.isfinite(float(t0)) and np.isfinite(float(t1))) or float(t1) <= float(t0):
        raise ValueError(f"need finite t0 < t1, got t0={t0}, t1={t1}")
    if ts is not None:
        ts = jnp.asarray(ts, dtype=float)
        tsn = np.asarray(ts)
        if tsn.ndim != 1 or tsn.size == 0:
            raise ValueError(f"ts must be a non-empty 1-D array of times, got shape {tsn.shape}")
        if np.any(np.diff(tsn) < 0) or tsn[0] < float(t0) or tsn[-1] > float(t1):
            raise ValueError(f"ts must be non-decreasing within [t0, t1] = [{t0}, {t1}]")
    if dtmin is None:
        dtmin = 1e-14 * (float(t1) - float(t0))
    f = lambda x: None if x is None else jnp.asarray(x, dtype=float)
    return q0, qd0, f(t0), f(t1), ts, f(dt0), f(rtol), f(atol), f(dtmin)


@eqx.filter_jit
def _probe_states(model, tau, t, q, qd):
    """Joint map and right-hand side at the stop state and at Euler predictions a little ahead."""
    h = jnp.concatenate([jnp.zeros(1), jnp.logspace(-14, -1, 27)]) * jnp.maximum(1.0, jnp.abs(t))
    qdd0, _ = _forward_dynamics(model, q, qd, tau, t)

    def at(hk):
        qk, qdk = q + hk * qd, qd + hk * jnp.where(jnp.isfinite(qdd0), qdd0, 0.0)
        f_ok = jnp.all(jnp.isfinite(model.joint_map(qk)))
        _, rhs_ok = _forward_dynamics(model, qk, qdk, tau, t + hk)
        return qk, f_ok, rhs_ok

    return jax.vmap(at)(h)


def _probe(model, tau, t, q, qd) -> str:
    """Words for the first non-finite joint map / right-hand side at or just past the stop."""
    qs, f_ok, rhs_ok = (np.asarray(x) for x in _probe_states(model, tau, t, q, qd))
    bad_f = np.flatnonzero(~f_ok)
    bad_rhs = np.flatnonzero(~rhs_ok)
    if bad_f.size:
        k = bad_f[0]
        return (
            " The joint map did not converge / has no solution (non-finite joint variables) at"
            f" q = {qs[k].tolist()}, {'the stop state' if k == 0 else 'just past the stop state'}."
        )
    if bad_rhs.size:
        k = bad_rhs[0]
        return (
            " The right-hand side is not finite (NaN/inf q̈: a singular mass matrix or a non-finite"
            f" applied force) at q = {qs[k].tolist()},"
            f" {'the stop state' if k == 0 else 'just past the stop state'}."
        )
    return ""


def _first_line(e: Exception) -> str:
    """The message of an equinox runtime error without its stack-trace boilerplate."""
    for ln in str(e).splitlines():
        _, sep, msg = ln.partition("RuntimeError: ")
        if sep and msg.strip() and "stack" not in msg:
            return msg.strip()
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _diagnose(model, traj: Trajectory, tau, index=None) -> str:
    """Why a solve stopped early, in words (evaluated eagerly at the state where it stopped)."""
    pick = (lambda x: x) if index is None else (lambda x: x[index])
    res = int(np.asarray(traj.result._value if index is None else traj.result._value[index]))
    t_end, q, qd = pick(traj.t_final), pick(traj.q_final), pick(traj.qd_final)
    where = (
        f"at t = {float(t_end):.9g} s, q = {np.asarray(q).tolist()}, qd = {np.asarray(qd).tolist()}"
    )
    R = dfx.RESULTS
    if res == R.max_steps_reached._value:
        cause = (
            f"maximum number of steps (max_steps={traj.stats['max_steps']}) reached before t1"
            " — raise max_steps, loosen rtol/atol, or use a stiff solver ('kvaerno5')"
        )
    elif res == R.dt_min_reached._value:
        cause = "step-size collapse: the adaptive step fell below dtmin"
    else:
        cause = f"diffrax stopped with result code {int(res)}"
    try:
        detail = _probe(model, tau, t_end, q, qd)
    except Exception as e:  # diagnosis must not hide the original failure
        detail = f" (Diagnosis of the right-hand side failed: {e})"
    return f"{cause} {where}.{detail}"


def simulate(
    model: Model,
    q0: Float[Array, " nq"],
    qd0: Float[Array, " nq"],
    t1: float,
    ts: Float[Array, " nt"] | None = None,
    *,
    t0: float = 0.0,
    solver: str = "tsit5",
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0: float | None = None,
    dtmin: float | None = None,
    max_steps: int = 100_000,
    tau=None,
    progress: bool = False,
    throw: bool = True,
) -> Trajectory:
    """Integrate ``M q̈ + N q̇ = G + Q_applied + τ`` from ``(q0, q̇0)`` at t0 to t1.

    Args:
        model: the model (its own force elements are applied).
        q0, qd0: (nq,) initial state.
        t1: final time (s).
        ts: (nt,) output times in [t0, t1]; default ``(t0, t1)``.
        t0: initial time (s).
        solver: ``"tsit5"``, ``"dopri5"``, ``"dopri8"`` (explicit) or ``"kvaerno5"``,
            ``"kencarp4"`` (stiff).
        rtol, atol: tolerances of the PID step-size controller.
        dt0: first step (s); ``None`` lets diffrax choose.
        dtmin: smallest step (s) before the solve is declared a step-size collapse;
            default ``1e-14·(t1 − t0)``.
        max_steps: step budget (static: changing it recompiles).
        tau: extra generalized force: ``None``, an (nq,) array, or a callable ``tau(t, q, q̇)``.
        progress: show a tqdm progress bar (``diffrax.TqdmProgressMeter``).
        throw: raise :class:`SimulationError` if t1 is not reached; else return the partial
            :class:`Trajectory` with its ``result``.

    Returns:
        :class:`Trajectory` with ts (nt,), q and qd (nt, nq), stats and result.
    """
    args = _prepare(model, q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin, solver)
    q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin = args
    try:
        traj = _solve_jit(
            model,
            q0,
            qd0,
            t0,
            t1,
            ts,
            tau,
            dt0,
            rtol,
            atol,
            dtmin,
            solver=solver,
            max_steps=int(max_steps),
            progress=bool(progress),
        )
    except eqx.EquinoxRuntimeError as e:
        # a check inside the right-hand side fired (an implicit joint map that did not
        # converge, a singular mass matrix): say where it came from
        raise SimulationError(
            f"simulate({model.name!r}, solver={solver!r}): the right-hand side raised during "
            f"integration: {_first_line(e)}"
        ) from e
    if throw and not bool(traj.successful):
        raise SimulationError(
            f"simulate({model.name!r}, solver={solver!r}): " + _diagnose(model, traj, tau)
        )
    return traj


def _batch_solve(
    model, q0s, qd0s, t0, t1, ts, tau, dt0, rtol, atol, dtmin, *, model_axes, solver, max_steps
):
    one = lambda m, q, qd: _solve(
        m,
        q,
        qd,
        t0,
        t1,
        ts,
        tau,
        dt0,
        rtol,
        atol,
        dtmin,
        solver=solver,
        max_steps=max_steps,
        progress=False,
    )
    return eqx.filter_vmap(one, in_axes=(model_axes, 0, 0))(model, q0s, qd0s)


_batch_solve_jit = eqx.filter_jit(_batch_solve)


def simulate_batch(
    model: Model,
    q0s: Float[Array, "batch nq"],
    qd0s: Float[Array, "batch nq"],
    t1: float,
    ts: Float[Array, " nt"] | None = None,
    *,
    model_axes=None,
    t0: float = 0.0,
    solver: str = "tsit5",
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0: float | None = None,
    dtmin: float | None = None,
    max_steps: int = 100_000,
    tau=None,
    throw: bool = True,
) -> Trajectory:
    """:func:`simulate` for a batch of initial states, compiled once per model structure.

    Args:
        q0s, qd0s: (batch, nq) initial states.
        model_axes: ``None`` (one model for the whole batch) or an ``in_axes`` prefix for
            ``equinox.filter_vmap`` over the model: ``eqx.if_array(0)`` when every array leaf
            carries a leading batch axis (models stacked with ``jax.tree_util.tree_map``), or a
            model-shaped tree of ``None``/``0`` built with ``eqx.tree_at`` to batch a few leaves.
        Other arguments as in :func:`simulate`.

    Returns:
        :class:`Trajectory` whose fields carry a leading batch axis. With ``throw=True`` a
        :class:`SimulationError` names the first failing batch members and why they failed.
    """
    args = _prepare(model, q0s, qd0s, t0, t1, ts, dt0, rtol, atol, dtmin, solver, batch_dims=1)
    q0s, qd0s, t0, t1, ts, dt0, rtol, atol, dtmin = args
    if q0s.shape[0] != qd0s.shape[0]:
        raise ValueError(
            f"q0s and qd0s have different batch sizes: {q0s.shape[0]} vs {qd0s.shape[0]}"
        )
    try:
        traj = _batch_solve_jit(
            model,
            q0s,
            qd0s,
            t0,
            t1,
            ts,
            tau,
            dt0,
            rtol,
            atol,
            dtmin,
            model_axes=model_axes,
            solver=solver,
            max_steps=int(max_steps),
        )
    except eqx.EquinoxRuntimeError as e:
        # a check inside the right-hand side fired (an implicit joint map that did not
        # converge, a singular mass matrix): say where it came from
        raise SimulationError(
            f"simulate_batch({model.name!r}, solver={solver!r}): the right-hand side raised during "
            f"integration: {_first_line(e)}"
        ) from e
    if throw:
        ok = np.asarray(traj.successful)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            msgs = []
            for i in bad[:3]:
                mdl = model if model_axes is None else _select(model, model_axes, int(i))
                sub = jax.tree_util.tree_map(
                    lambda x: x[i] if eqx.is_array(x) and x.ndim > 0 else x, traj
                )
                msgs.append(f"  [{i}] " + _diagnose(mdl, sub, tau))
            raise SimulationError(
                f"simulate_batch({model.name!r}, solver={solver!r}): {bad.size} of {ok.size} "
                f"solves failed (indices {bad[:10].tolist()}{'...' if bad.size > 10 else ''}):\n"
                + "\n".join(msgs)
            )
    return traj


def _select(model, model_axes, i):
    """Batch member i of a model vmapped with ``model_axes`` (for diagnostics only)."""
    full = eqx.filter_vmap(lambda m: m, in_axes=(model_axes,))(model)
    return jax.tree_util.tree_map(lambda x: x[i] if eqx.is_array(x) else x, full)


# ------------------------------------------------------------------------ lean explicit RK solver


class ERKResult(NamedTuple):
    """Result of :func:`erk_solve`: state at t1, time reached, step counts, success flag."""

    y1: Float[Array, " n"]
    t: Float[Array, ""]
    num_steps: Array
    num_accepted_steps: Array
    ok: Array


def _tableau(method: str):
    """Static (a (s, s), b (s,), e (s,), c (s,), order, fsal) from diffrax's Butcher tableaus."""
    classes = {"tsit5": dfx.Tsit5, "dopri5": dfx.Dopri5, "dopri8": dfx.Dopri8}
    if method not in classes:
        raise ValueError(f"erk_solve: unknown method {method!r}; choose one of {tuple(classes)}")
    tab = classes[method].tableau
    s = len(tab.b_sol)
    a = np.zeros((s, s))
    for i, row in enumerate(tab.a_lower):
        a[i + 1, : len(row)] = row
    c = np.concatenate([[0.0], np.asarray(tab.c)])
    b, e = np.asarray(tab.b_sol, float), np.asarray(tab.b_error, float)
    fsal = bool(c[-1] == 1.0 and b[-1] == 0.0 and np.allclose(a[-1, :-1], b[:-1], rtol=0, atol=0))
    return a, b, e, c, classes[method]().order(None), fsal


@eqx.filter_jit
def erk_solve(
    rhs: Callable,
    y0: Float[Array, " n"],
    t0: float,
    t1: float,
    *,
    method: str = "tsit5",
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
    safety: float = 0.9,
    factormin: float = 0.2,
    factormax: float = 10.0,
    unroll: bool = True,
) -> ERKResult:
    """Adaptive embedded Runge–Kutta for a small flat state ``ẏ = rhs(t, y)``, end state only.

    The same Butcher tableaus as diffrax's ``Tsit5`` / ``Dopri5`` / ``Dopri8`` and the same kind of
    control (RMS norm of ``err / (atol + rtol max(|y|, |y_new|))``, integral controller with
    exponent 1/order, safety, factor clip, Hairer's initial step), in one ``lax.while_loop`` over
    flat arrays: no saving, events, progress meter or pytree bookkeeping. On XLA:CPU every fused
    kernel costs a fixed dispatch overhead, so for right-hand sides of a microsecond or two
    diffrax's per-step machinery (≈ 10 µs) would dominate; this loop costs about one RHS per step.
    Forward-mode and vmap work; it is not meant for reverse-mode differentiation (use
    :func:`simulate`).

    Args:
        rhs: ``(t, y) -> ẏ``, y of shape (n,). y0: (n,) initial state. t0 < t1: times (s).
        method: ``"tsit5"``, ``"dopri5"`` or ``"dopri8"``. rtol, atol: tolerances.
        max_steps: step budget; ``ok`` is False if it runs out or the state turns non-finite.
        unroll: unroll the stages (fastest; the RHS is compiled once per stage) or loop over them
            with ``lax.fori_loop`` (the RHS compiled once: for large right-hand sides).

    Returns:
        :class:`ERKResult` (y1 (n,), t reached, num_steps, num_accepted_steps, ok).
    """
    a, b, e, c, order, fsal = _tableau(method)
    y0 = jnp.asarray(y0, dtype=float)
    dtype = y0.dtype
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    s = len(b)

    def comb(w, K):
        # Σ_j w_j K_j over the stages as one fused broadcast-sum (no CPU dot kernel)
        nz = [j for j in range(len(w)) if w[j] != 0.0]
        if not nz:
            return jnp.zeros_like(y0)
        W = jnp.asarray(np.asarray(w)[nz], dtype)
        return jnp.sum(W[:, None] * jnp.stack([K[j] for j in nz]), axis=0)

    def scale(y, y_new):
        return atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))

    def rms(x):
        return jnp.sqrt(jnp.mean(x * x))

    k0 = rhs(t0, y0)
    # Hairer, Nørsett & Wanner, Solving ODEs I, §II.4: initial step from two RHS evaluations
    d0, d1 = rms(y0 / scale(y0, y0)), rms(k0 / scale(y0, y0))
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    h0 = jnp.minimum(h0, t1 - t0)
    k1 = rhs(t0 + h0, y0 + h0 * k0)
    d2 = rms((k1 - k0) / scale(y0, y0)) / h0
    h1 = jnp.where(
        jnp.maximum(d1, d2) <= 1e-15,
        jnp.maximum(1e-6, h0 * 1e-3),
        (0.01 / jnp.maximum(d1, d2)) ** (1.0 / order),
    )
    h_init = jnp.minimum(jnp.minimum(100.0 * h0, h1), t1 - t0)

    def cond(carry):
        t, _, _, _, n, _, ok = carry
        return (t < t1) & (n < max_steps) & ok

    def body(carry):
        t, y, k_first, h, n, n_acc, ok = carry
        h = jnp.minimum(h, t1 - t)
        if unroll:
            K = [k_first]
            for i in range(1, s):
                K.append(rhs(t + c[i] * h, y + h * comb(a[i, :i], K)))
            y_new = y + h * comb(b, K)
            err = rms(h * comb(e, K) / scale(y, y_new))
            k_last = K[-1]
        else:
            A, Cs = jnp.asarray(a, dtype), jnp.asarray(c, dtype)

            def stage(i, K):
                yi = y + h * jnp.sum(A[i][:, None] * K, axis=0)
                return K.at[i].set(rhs(t + Cs[i] * h, yi))

            K0 = jnp.zeros((s,) + y.shape, dtype).at[0].set(k_first)
            K = jax.lax.fori_loop(1, s, stage, K0)
            y_new = y + h * jnp.sum(jnp.asarray(b, dtype)[:, None] * K, axis=0)
            err = rms(h * jnp.sum(jnp.asarray(e, dtype)[:, None] * K, axis=0) / scale(y, y_new))
            k_last = K[-1]
        accept = err <= 1.0
        finite = jnp.all(jnp.isfinite(y_new)) & jnp.isfinite(err)
        factor = safety * jnp.where(err > 0.0, err, 1e-10) ** (-1.0 / order)
        factor = jnp.clip(factor, factormin, jnp.where(accept, factormax, 1.0))
        t_new = jnp.where(accept, jnp.where(h >= t1 - t, t1, t + h), t)
        y_out = jnp.where(accept, y_new, y)
        if fsal:
            k_next = jnp.where(accept, k_last, k_first)
        else:
            k_next = jax.lax.cond(accept, lambda: rhs(t_new, y_new), lambda: k_first)
        return (t_new, y_out, k_next, h * factor, n + 1, n_acc + accept, finite)

    zero = jnp.zeros((), jnp.int32)
    init = (t0, y0, k0, h_init, zero, zero, jnp.all(jnp.isfinite(k0)))
    t, y, _, _, n, n_acc, ok = jax.lax.while_loop(cond, body, init)
    return ERKResult(y1=y, t=t, num_steps=n, num_accepted_steps=n_acc, ok=ok & (t >= t1))
