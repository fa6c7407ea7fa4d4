"""Forward simulation: the equations of motion as a first-order ODE, integrated by diffrax.

The state is ``y = (q, q̇)`` and ``ẏ = (q̇, q̈(q, q̇, t))`` with q̈ from
:func:`jaxmb.dynamics.forward_dynamics` (a Cholesky solve of ``M q̈ = G + Q + τ − N q̇``).
Explicit solvers (``"tsit5"``, ``"dopri5"``, ``"dopri8"``) and stiff ones (``"kvaerno5"``, ESDIRK;
``"kencarp4"``, IMEX with the whole right-hand side in the implicit part) take adaptive steps
under a PID controller. The model is an argument of the compiled solve, not a constant baked
into it, so a second model with the same structure (same topology, parameter shapes, force
elements) reuses the compiled code; :func:`simulate_batch` vmaps over initial states and,
optionally, over models.

This is the one integrator driver: :func:`erk_solve` (a flat state, end point only) and
:func:`batched_rk4` (fixed-step RK4 of a batch-last state) are calls into ``diffeqsolve`` with the
matching solver and step-size controller, not loops of their own.

Failures are reported, not hidden: a solve that stops early raises :class:`SimulationError` naming
the cause (maximum steps reached, step-size collapse below ``dtmin``, a non-finite right-hand side —
singular mass matrix or joint map that failed to converge — with the time and state where it
happened), or, with ``throw=False``, returns a :class:`Trajectory` whose ``result`` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

from ..dynamics import batched_forward_dynamics, try_forward_dynamics
from ..dynamics.prescribed import prescribe_state
from ..model import Model
from .checks import check_max_steps, check_run_arguments, check_time_span
from .compiled_call import (
    CALLS,
    SOLVERS,
    SimulationError,
    call_solve,
    checked_states,
    keep,
    set_up,
)
from .routes import choose_route

__all__ = [
    "SOLVERS",
    "SimulationError",
    "Trajectory",
    "simulate",
    "simulate_batch",
    "ode_rhs",
    "ERKResult",
    "erk_solve",
    "ClassicalRK4",
    "batched_rk4",
]

# diffrax's success code; a result is read through NumPy (int() of a fresh 0-d jax array took
# ~25 µs more per call)
_SUCCESSFUL = int(np.asarray(dfx.RESULTS.successful._value))
_IMEX = ("kencarp4",)


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
        # prescribed coordinates on their functions of time, as OpenSim's integrators put them
        q, qd = prescribe_state(model, q, qd, t)
        qdd, _ = try_forward_dynamics(model, q, qd, tau, t)
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


def _solve(
    model, q0, qd0, t0, t1, ts, tau, dt0, rtol, atol, dtmin, pm=None, *, solver, max_steps,
    progress,
):  # fmt: skip
    """One diffrax solve (traced); returns a Trajectory. With a premodel ``pm`` (one coordinate,
    no tau, verified against the exact route when it was fitted) it is the right-hand side.

    The state is one flat array ``(q, q̇)`` of shape (2 nq,), not a pair: diffrax works leaf by
    leaf, and on Andrews' premodel a pair of (1,) leaves made the Dopri8 solve cost 0.51 ms
    against 0.14 ms flat (same steps: the error norm is the RMS over all entries either way)."""
    nq = q0.shape[-1]
    if pm is None:
        pair_rhs = ode_rhs(model, tau)

        def rhs(t, y, args):
            return jnp.concatenate(pair_rhs(t, (y[:nq], y[nq:]), args))

    else:
        rhs = lambda t, y, args: jnp.concatenate([y[1:], pm(y[:1], y[1:])])
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
        jnp.concatenate([q0, qd0]),
        stepsize_controller=controller,
        saveat=dfx.SaveAt(subs=subs),
        max_steps=max_steps,
        throw=False,
        progress_meter=meter,
    )
    (ts_out, t_end), (ys, y_end) = sol.ts, sol.ys
    q, qd, q_end, qd_end = ys[:, :nq], ys[:, nq:], y_end[:, :nq], y_end[:, nq:]
    # the integrated q_p drifts by the tolerance: report g(t) (a premodel, whose solve gets no
    # model, is never made for a model with prescribed coordinates)
    if pm is None and model.prescribed is not None:
        on_functions = jax.vmap(lambda a, b, t: prescribe_state(model, a, b, t))
        q, qd = on_functions(q, qd, ts_out)
        q_end, qd_end = on_functions(q_end, qd_end, t_end)
    stats = {
        k: jnp.asarray(sol.stats[k])
        for k in ("num_steps", "num_accepted_steps", "num_rejected_steps")
    }
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


@eqx.filter_jit
def _probe_states(model, tau, t, q, qd):
    """Joint map and right-hand side at the stop state and at Euler predictions a little ahead."""
    h = jnp.concatenate([jnp.zeros(1), jnp.logspace(-14, -1, 27)]) * jnp.maximum(1.0, jnp.abs(t))
    qdd0, _ = try_forward_dynamics(model, q, qd, tau, t)

    def at(hk):
        qk, qdk = q + hk * qd, qd + hk * jnp.where(jnp.isfinite(qdd0), qdd0, 0.0)
        f_ok = jnp.all(jnp.isfinite(model.joint_map(qk)))
        _, rhs_ok = try_forward_dynamics(model, qk, qdk, tau, t + hk)
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
    solver: str = "auto",
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0: float | None = None,
    dtmin: float | None = None,
    max_steps: int = 100_000,
    tau=None,
    progress: bool = False,
    throw: bool = True,
    route: str = "auto",
) -> Trajectory:
    """Integrate ``M q̈ + N q̇ = G + Q_applied + τ`` from ``(q0, q̇0)`` at t0 to t1.

    Args:
        model: the model (its own force elements are applied).
        q0, qd0: (nq,) initial state.
        t1: final time (s).
        ts: (nt,) output times in [t0, t1]; default ``(t0, t1)``.
        t0: initial time (s).
        solver: ``"tsit5"``, ``"dopri5"``, ``"dopri8"`` (explicit) or ``"kvaerno5"``,
            ``"kencarp4"`` (stiff); ``"auto"`` (default): ``"dopri8"`` on the premodel route (a
            right-hand side of a few dozen flops: the step's fixed cost dominates, and the
            eighth-order method takes about half the steps of Tsit5 at equal error on Andrews'
            squeezer), ``"tsit5"`` on the exact route. ``stats["solver"]`` says which ran.
        rtol, atol: tolerances of the PID step-size controller.
        dt0: first step (s); ``None`` lets diffrax choose.
        dtmin: smallest step (s) before the solve is declared a step-size collapse;
            default ``1e-14·(t1 − t0)``.
        max_steps: step budget (static: changing it recompiles).
        tau: extra generalized force: ``None``, an (nq,) array, or a callable ``tau(t, q, q̇)``.
        progress: show a tqdm progress bar (``diffrax.TqdmProgressMeter``).
        throw: raise :class:`SimulationError` if t1 is not reached; else return the partial
            :class:`Trajectory` with its ``result``.
        route: the right-hand side. ``"exact"``: the tree route (joint map, CRBA/RNEA, force
            elements) at every evaluation. ``"premodel"``: the one-coordinate premodel
            ``q̈ = a(q) + b(q) q̇²`` (:mod:`jaxmb.simulation.routes`; raises where it does not
            apply). ``"auto"`` (default): the premodel where it applies (nq = 1, a joint map with
            a declared period, force elements depending on q only, no tau) and the premodel as
            integrated deviates from the exact route by at most 1e-12 relative at every state of
            its verification (run once per model, when it is fitted, and cached with it);
            otherwise the exact route. ``stats["route"]`` says which ran (with
            ``premodel_fit_s``, the fit's and verification's seconds on the call that paid for
            them, ``premodel_deviation`` and ``premodel_verified_states``).

    Returns:
        :class:`Trajectory` with ts (nt,), q and qd (nt, nq), stats and result.
    """
    call = key = None
    if tau is None and ts is None:
        try:  # plain-number arguments: the call is set up once (compiled_call.Call)
            key = (id(model), jax.config.jax_enable_x64, t0, t1, dt0, rtol, atol, dtmin, solver,
                   max_steps, progress, route)  # fmt: skip
            call = CALLS.get(key)
        except TypeError:  # an array or a traced argument: set up on every call
            key = None
    if (
        call is not None
        and call.model() is model
        and not isinstance(q0, jax.core.Tracer)
        and not isinstance(qd0, jax.core.Tracer)
    ):
        q0, qd0 = checked_states(model, q0, qd0, call.ft, call.want)
    else:
        check_max_steps(max_steps)
        pm, info = choose_route(model, route, tau)
        bind = getattr(tau, "bind_plant", None)
        if callable(bind):  # a controller of this very model shares its terms (Eq. 200)
            tau = bind(model)
        solver = solver if solver != "auto" else ("tsit5" if pm is None else "dopri8")
        call, q0, qd0 = set_up(
            "simulate", _checked_solve, model, q0, qd0, t0, t1, ts, dt0, rtol, atol, dtmin, tau,
            solver, batch_dims=0, pm=pm, max_steps=int(max_steps), progress=bool(progress),
        )  # fmt: skip
        call = call._replace(info=dict(info, solver=solver))
        if key is not None:  # kept with the fit's seconds at 0: later calls do not pay for it
            kept = {k: 0.0 if k == "premodel_fit_s" else v for k, v in call.info.items()}
            keep(key, call._replace(info=kept), model)
    traj = call_solve(call, model, q0, qd0)
    traj.stats.update(call.info)
    if (throw or not call.traced) and int(np.asarray(traj.result._value)) != _SUCCESSFUL:
        # a repeated call leaves the finiteness of the state to the compiled solve
        # (_checked_solve), which stops at a non-finite state: name its entry
        check_run_arguments(q0, qd0, None, None, None, None, model.coordinate_names)
        if throw:
            raise SimulationError(
                f"simulate({model.name!r}, solver={call.solver!r}): " + _diagnose(model, traj, tau)
            )
    return traj


def _checked_solve(model, q0, qd0, *args, **kw):
    """:func:`_solve` of a finite initial state: a non-finite entry raises (``equinox.error_if``)
    before the solve starts. A repeated call of :func:`simulate` leaves this check to the
    compiled solve (reading the state back to the host for it cost ~40 µs a call); a NaN state
    would otherwise take ``max_steps`` steps to fail."""
    ok = jnp.all(jnp.isfinite(q0)) & jnp.all(jnp.isfinite(qd0))
    q0 = eqx.error_if(q0, ~ok, "the initial state (q0, qd0) is not finite")
    return _solve(model, q0, qd0, *args, **kw)


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


def simulate_batch(
    model: Model,
    q0s: Float[Array, "batch nq"],
    qd0s: Float[Array, "batch nq"],
    t1: float,
    ts: Float[Array, " nt"] | None = None,
    *,
    batched_model: bool = False,
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
        batched_model: ``model`` is a batched model from :func:`jaxmb.simulation.vary` or
            :func:`jaxmb.simulation.stack_models` (every array leaf with a leading batch axis);
            the same as ``model_axes=eqx.if_array(0)``.
        model_axes: ``None`` (one model for the whole batch) or an ``in_axes`` prefix for
            ``equinox.filter_vmap`` over the model: ``eqx.if_array(0)`` when every array leaf
            carries a leading batch axis (models stacked with ``jax.tree_util.tree_map``), or a
            model-shaped tree of ``None``/``0`` built with ``eqx.tree_at`` to batch a few leaves.
        Other arguments as in :func:`simulate`.

    Returns:
        :class:`Trajectory` whose fields carry a leading batch axis. With ``throw=True`` a
        :class:`SimulationError` names the first failing batch members and why they failed.
    """
    if batched_model:
        if model_axes is not None:
            raise ValueError("simulate_batch: give batched_model=True or model_axes, not both")
        model_axes = eqx.if_array(0)
    check_max_steps(max_steps)
    call, q0s, qd0s = set_up(
        "simulate_batch", _batch_solve, model, q0s, qd0s, t0, t1, ts, dt0, rtol, atol, dtmin,
        tau, solver, batch_dims=1, model_axes=model_axes, max_steps=int(max_steps),
    )  # fmt: skip
    traj = call_solve(call, model, q0s, qd0s)
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


_EXPLICIT = {"tsit5": dfx.Tsit5, "dopri5": dfx.Dopri5, "dopri8": dfx.Dopri8}


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
    """Adaptive embedded Runge–Kutta for a flat state ``ẏ = rhs(t, y)``, end state only.

    ``diffeqsolve`` with diffrax's ``Tsit5`` / ``Dopri5`` / ``Dopri8`` (stages in a plain
    ``lax`` loop, ``scan_kind="lax"``), an integral controller (diffrax's error order, ``safety``,
    factor clip ``[factormin, factormax]``) and ``diffrax.ForwardMode``, whose plain while loop is
    the cheapest for small right-hand sides: as fast per solve as the hand-written loop it replaced
    (``benchmarks/erk_driver.py``). Forward-mode and vmap work; for reverse-mode use
    :func:`simulate`.

    Args:
        rhs: ``(t, y) -> ẏ``, y of shape (n,). y0: (n,) initial state. t0 < t1: times (s).
        method: ``"tsit5"``, ``"dopri5"`` or ``"dopri8"``. rtol, atol: tolerances.
        max_steps: step budget; ``ok`` is False if it runs out or the state turns non-finite.
        unroll: accepted for compatibility; diffrax evaluates the stages.

    Returns:
        :class:`ERKResult` (y1 (n,), t reached, num_steps, num_accepted_steps, ok).
    """
    del unroll
    if method not in _EXPLICIT:
        raise ValueError(f"erk_solve: unknown method {method!r}; choose one of {tuple(_EXPLICIT)}")
    if jnp.ndim(y0) != 1:
        raise ValueError(f"erk_solve: y0 must be a flat state of shape (n,), got {jnp.shape(y0)}")
    check_time_span(t0, t1, "erk_solve")
    check_max_steps(max_steps, "erk_solve")
    check_run_arguments(y0, (), rtol, atol, None, None, where="erk_solve", names=("y0", "qd0"))
    if not (0 < safety <= 1 and 0 < factormin < 1 < factormax):
        raise ValueError(
            "erk_solve: need 0 < safety ≤ 1 and 0 < factormin < 1 < factormax, got "
            f"safety={safety}, factormin={factormin}, factormax={factormax}"
        )
    return _erk_solve(
        rhs, jnp.asarray(y0, dtype=float), t0, t1, rtol, atol, safety, factormin, factormax,
        method=method, max_steps=int(max_steps),
    )  # fmt: skip


@eqx.filter_jit
def _erk_solve(rhs, y0, t0, t1, rtol, atol, safety, factormin, factormax, *, method, max_steps):
    dtype = y0.dtype
    controller = dfx.PIDController(
        rtol=rtol, atol=atol, pcoeff=0.0, icoeff=1.0, safety=safety, factormin=factormin,
        factormax=factormax,
    )  # fmt: skip
    sol = dfx.diffeqsolve(
        dfx.ODETerm(lambda t, y, args: rhs(t, y)),
        # the stages as a plain lax loop: diffrax's default checkpointed stage loop (kept for
        # reverse mode) costs ~60 µs more per Dopri8 step on a cheap RHS; ForwardMode needs none
        _EXPLICIT[method](scan_kind="lax"),
        jnp.asarray(t0, dtype),
        jnp.asarray(t1, dtype),
        None,
        y0,
        stepsize_controller=controller,
        saveat=dfx.SaveAt(t1=True),
        max_steps=max_steps,
        adjoint=dfx.ForwardMode(),
        throw=False,
    )
    ok = (sol.result == dfx.RESULTS.successful) & jnp.all(jnp.isfinite(sol.ys[-1]))
    return ERKResult(
        y1=sol.ys[-1],
        t=sol.ts[-1],
        num_steps=sol.stats["num_steps"],
        num_accepted_steps=sol.stats["num_accepted_steps"],
        ok=ok,
    )


class ClassicalRK4(dfx.AbstractERK):
    """The classical fourth-order Runge–Kutta method (Kutta 1901) as a diffrax solver, for fixed
    steps (no embedded error estimate: use it with ``ConstantStepSize`` or ``StepTo``)."""

    tableau: ClassVar[dfx.ButcherTableau] = dfx.ButcherTableau(
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
        b_sol=np.array([1.0, 2.0, 2.0, 1.0]) / 6.0,
        b_error=np.zeros(4),
        c=np.array([0.5, 0.5, 1.0]),
    )
    interpolation_cls: ClassVar[Callable] = dfx.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        del terms
        return 4


def batched_rk4(
    model: Model,
    q0: Float[Array, "nq B"],
    qd0: Float[Array, "nq B"],
    dt,
    num_steps: int,
    identity_map: bool | None = None,
):
    """``num_steps`` classical RK4 steps of size dt (s) of the batch-last state (q, q̇), each
    (nq, B), with q̈ from :func:`jaxmb.dynamics.batched_forward_dynamics`; returns (q, q̇).

    Time starts at 0; steps end exactly at ``k dt`` (``diffrax.StepTo``), so time-dependent force
    elements see ``t = k dt`` (+ dt/2 at the midpoints).
    """
    names = model.coordinate_names
    check_run_arguments(q0, qd0, 1, 1, None, None, names, where="batched_rk4", coordinate_axis=0)
    if not isinstance(dt, jax.core.Tracer) and not (np.isfinite(dt) and dt > 0):
        msg = f"the step dt must be a positive number of seconds, got {dt!r}"
        raise ValueError(f"batched_rk4: {msg}")
    if isinstance(num_steps, bool) or not isinstance(num_steps, int | np.integer) or num_steps < 0:
        raise ValueError(f"batched_rk4: num_steps must be an integer ≥ 0, got {num_steps!r}")
    if num_steps == 0:
        return q0, qd0

    def rhs(t, y, args):
        q, qd = y
        return qd, batched_forward_dynamics(model, q, qd, None, t, identity_map)

    ts = jnp.arange(num_steps + 1, dtype=q0.dtype) * dt
    sol = dfx.diffeqsolve(
        dfx.ODETerm(rhs),
        ClassicalRK4(),
        ts[0],
        ts[-1],
        None,
        (q0, qd0),
        stepsize_controller=dfx.StepTo(ts),
        saveat=dfx.SaveAt(t1=True),
        max_steps=int(num_steps),
    )
    q, qd = sol.ys
    return q[-1], qd[-1]
