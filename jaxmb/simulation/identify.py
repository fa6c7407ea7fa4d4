"""Parameter identification: fit model parameters to measured trajectories with optax.

The model is simulated from the measured initial state with diffrax (reverse-mode gradients by
recursive checkpointing, :class:`diffrax.RecursiveCheckpointAdjoint`), and the fitted parameters
minimize the negative log posterior

    L(θ) = ½ Σ_{t,k} ((q_sim,k(t; θ) − q_meas,k(t)) / σ_noise)² + ½ Σ_j ((θ_j − μ_j) / σ_j)²,

the first sum over the observed coordinates and samples, the second over the Gaussian priors (if
any). The optimizer sees bounded parameters through a bijective transform to unconstrained
variables u, scaled so that u is of order one:
``θ = lo + (hi − lo)·sigmoid(u)`` (both bounds), ``θ = lo + s·softplus(u)`` (lower bound),
``θ = hi − s·softplus(u)`` (upper bound), ``θ = s·u`` (none), with ``s`` the initial magnitude.
Optimizers: ``"lbfgs"`` (``optax.lbfgs`` with its zoom line search) and ``"adam"``.

One compiled step serves the whole fit: the loss, its gradient and the optimizer update are one
``jax.jit``, called from a Python loop that records the history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from ..model import Model, ModelError
from .batch import resolve_where
from .checks import check_max_steps, check_run_arguments
from .driver import ode_rhs

__all__ = [
    "Observations",
    "IdentificationResult",
    "identify",
    "predict",
    "BoundTransform",
    "bound_transform",
]


class Observations(eqx.Module):
    """Measured trajectory of (some) coordinates.

    Attributes:
        ts: (nt,) sample times (s), increasing; ``ts[0]`` is the time of the initial state.
        q: (nt, nobs) measured coordinates (rad or m) at ``ts``.
        q0, qd0: (nq,) initial state the simulation starts from (known, or first samples).
        observed: static tuple of the nobs coordinate indices that ``q`` holds (default: all).
        noise_std: measurement noise standard deviation (same units as q); weights the data term.
    """

    ts: Float[Array, " nt"]
    q: Float[Array, "nt nobs"]
    q0: Float[Array, " nq"]
    qd0: Float[Array, " nq"]
    observed: tuple[int, ...] | None = eqx.field(static=True, default=None)
    noise_std: float = 1.0


@dataclasses.dataclass
class IdentificationResult:
    """Outcome of :func:`identify`.

    Attributes:
        model: the model with the fitted parameters.
        params: the fitted values (a tuple of arrays, one per selected leaf: the fitted entries).
        loss: final value of the negative log posterior.
        history: ``{"loss": (k,), "params": [tuple per iteration], "grad_norm": (k,)}``.
        iterations: optimizer iterations taken.
        converged: whether the gradient-norm tolerance was met before ``max_iter``.
        optimizer: ``"lbfgs"`` or ``"adam"``.
    """

    model: Model
    params: tuple
    loss: float
    history: dict
    iterations: int
    converged: bool
    optimizer: str


# ------------------------------------------------------------------------------------------------
# bijective transforms


def _softplus_inv(y):
    return y + jnp.log(-jnp.expm1(-y))


class BoundTransform(eqx.Module):
    """A parameter bijection ``p = forward(u)`` (``kind``: "both", "lower", "upper" or "none")."""

    lo: Any
    hi: Any
    scale: Any
    kind: str = eqx.field(static=True)

    def forward(self, u):
        if self.kind == "both":
            return self.lo + (self.hi - self.lo) * jax.nn.sigmoid(u)
        if self.kind == "lower":
            return self.lo + self.scale * jax.nn.softplus(u)
        if self.kind == "upper":
            return self.hi - self.scale * jax.nn.softplus(u)
        return self.scale * u

    def inverse(self, p):
        if self.kind == "both":
            x = (p - self.lo) / (self.hi - self.lo)
            return jnp.log(x) - jnp.log1p(-x)
        if self.kind == "lower":
            return _softplus_inv((p - self.lo) / self.scale)
        if self.kind == "upper":
            return _softplus_inv((self.hi - p) / self.scale)
        return p / self.scale


def bound_transform(p0, bound, k: int) -> BoundTransform:
    """The bijection for parameter k with initial value p0 and ``bound = (lo, hi)`` (either may be
    None, or the whole bound): sigmoid between two bounds, softplus against one, a scaling without;
    scaled so that p0 maps to an unconstrained value of order one."""
    p0 = jnp.asarray(p0, dtype=float)
    lo, hi = (None, None) if bound is None else bound
    lo = None if lo is None else jnp.broadcast_to(jnp.asarray(lo, float), p0.shape)
    hi = None if hi is None else jnp.broadcast_to(jnp.asarray(hi, float), p0.shape)
    if lo is not None and hi is not None:
        if np.any(np.asarray(hi) <= np.asarray(lo)):
            raise ModelError(f"identify: parameter {k} has bounds with hi <= lo: ({lo}, {hi})")
        if np.any(np.asarray(p0) <= np.asarray(lo)) or np.any(np.asarray(p0) >= np.asarray(hi)):
            raise ModelError(
                f"identify: initial value of parameter {k} = {np.asarray(p0).tolist()} is not "
                f"strictly inside its bounds ({np.asarray(lo).tolist()}, {np.asarray(hi).tolist()})"
            )
        return BoundTransform(lo, hi, jnp.ones_like(p0), "both")
    if lo is not None:
        if np.any(np.asarray(p0) <= np.asarray(lo)):
            raise ModelError(
                f"identify: initial value of parameter {k} = {np.asarray(p0).tolist()} is not "
                f"above its lower bound {np.asarray(lo).tolist()}"
            )
        return BoundTransform(lo, jnp.zeros_like(p0), p0 - lo, "lower")
    if hi is not None:
        if np.any(np.asarray(p0) >= np.asarray(hi)):
            raise ModelError(
                f"identify: initial value of parameter {k} = {np.asarray(p0).tolist()} is not "
                f"below its upper bound {np.asarray(hi).tolist()}"
            )
        return BoundTransform(jnp.zeros_like(p0), hi, hi - p0, "upper")
    scale = jnp.where(jnp.abs(p0) > 0, jnp.abs(p0), 1.0)
    return BoundTransform(jnp.zeros_like(p0), jnp.zeros_like(p0), scale, "none")


# ------------------------------------------------------------------------------------------------
# forward model


def predict(
    model: Model,
    obs: Observations,
    *,
    solver=None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 4096,
    adjoint=None,
) -> Float[Array, "nt nq"]:
    """Simulated coordinates at ``obs.ts`` from ``(obs.q0, obs.qd0)`` (differentiable).

    Args:
        solver: a diffrax solver (default ``Tsit5()``). rtol, atol: PID tolerances.
        max_steps: step budget (static; reverse mode checkpoints within it).
        adjoint: diffrax adjoint (default ``RecursiveCheckpointAdjoint()``; use
            ``DirectAdjoint()`` where second derivatives are needed).

    Returns:
        (nt, nq) coordinates. Solver failure (step budget, non-finite right-hand side) raises
        through ``equinox.error_if``.
    """
    sol = dfx.diffeqsolve(
        dfx.ODETerm(ode_rhs(model)),
        dfx.Tsit5() if solver is None else solver,
        obs.ts[0],
        obs.ts[-1],
        None,
        (jnp.asarray(obs.q0, float), jnp.asarray(obs.qd0, float)),
        saveat=dfx.SaveAt(ts=obs.ts),
        stepsize_controller=dfx.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        adjoint=dfx.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        throw=False,
    )
    q = sol.ys[0]
    return eqx.error_if(
        q,
        sol.result != dfx.RESULTS.successful,
        "identify.predict: the simulation did not reach the last sample time (step budget "
        "max_steps exhausted or a non-finite right-hand side); raise max_steps or check bounds",
    )


# ------------------------------------------------------------------------------------------------
# identification


def _as_tuple(x, several: bool):
    return tuple(x) if several else (x,)


def _check_fit_arguments(model, data, max_iter, learning_rate, gtol, ftol, rtol, atol, max_steps):
    """The initial state's shape and values, the measurements' finiteness (a gap in measured data
    would make the loss NaN and stop the optimizer at its first step) and the optimizer's
    settings, named where they are wrong."""
    for name in ("q0", "qd0"):
        shape = tuple(np.shape(getattr(data, name)))
        if shape != (model.nq,):
            raise ModelError(
                f"identify: data.{name} must have shape (nq,) = ({model.nq},) for model "
                f"{model.name!r}, got {shape}"
            )
    check_run_arguments(
        data.q0, data.qd0, rtol, atol, None, None, model.coordinate_names, where="identify",
        names=("data.q0", "data.qd0"),
    )  # fmt: skip
    check_max_steps(max_steps, "identify")
    check_max_steps(max_iter, "identify", "max_iter")
    q = np.asarray(data.q, dtype=float)
    bad = np.argwhere(~np.isfinite(q))
    if bad.size:
        i, j = (int(k) for k in bad[0])
        raise ModelError(
            f"identify: data.q[{i}, {j}] (t = {float(np.asarray(data.ts)[i])} s) = {q[i, j]} is "
            f"not finite ({len(bad)} non-finite samples); drop or fill the gaps before fitting"
        )
    noise = np.asarray(data.noise_std, dtype=float)
    if not np.all(np.isfinite(noise) & (noise > 0)):
        raise ModelError(f"identify: data.noise_std must be positive, got {data.noise_std!r}")
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"identify: learning_rate must be positive, got {learning_rate!r}")
    for name, v in (("gtol", gtol), ("ftol", ftol)):
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"identify: {name} must be a non-negative number, got {v!r}")


def identify(
    model: Model,
    params_where,
    data: Observations,
    *,
    elements: Sequence | None = None,
    loss: Callable | None = None,
    observe: Callable | None = None,
    bounds: Sequence | None = None,
    prior: Sequence | None = None,
    optimizer: str = "lbfgs",
    max_iter: int = 100,
    learning_rate: float = 0.05,
    gtol: float = 1e-8,
    ftol: float = 0.0,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 4096,
    adjoint=None,
    verbose: bool = False,
) -> IdentificationResult:
    """Fit the model parameters selected by ``params_where`` to measured trajectories.

    Args:
        model: the model with initial guesses of the parameters.
        params_where: ``lambda m: m.mass`` or ``lambda m: (m.forces[0].stiffness, m.mass)`` or a
            dotted path (``"forces.0.stiffness"``); every selected leaf is fitted whole.
        data: an :class:`Observations` (initial state, sample times, measured coordinates).
        elements: per selected leaf ``None`` (fit the whole leaf) or an index into it (an int,
            a tuple of ints for one entry of a multi-dimensional leaf, or an index array): only
            those entries are fitted, the rest keep their values. E.g. ``params_where=lambda m:
            m.mass, elements=[1]`` fits body 1's mass alone.
        loss: optional data term ``loss(q_sim (nt, nq), data) -> scalar`` replacing the default
            ``½ Σ ((q_sim[:, observed] − q_meas) / noise_std)²`` (given ``observe``, the loss
            receives ``observe(model, q_sim)`` in place of ``q_sim``).
        observe: optional measurement model ``observe(model, q_sim (nt, nq)) -> (nt, k)``: what
            was measured, given the model being fitted and its simulated coordinates (e.g. joint
            variables through the joint map, ``lambda m, q: jax.vmap(m.joint_map)(q)[:, idx]``,
            or marker positions). ``data.q`` then holds those k columns and ``data.observed`` is
            ignored. Default: the observed coordinates themselves.
        bounds: per selected leaf ``None`` or ``(lo, hi)`` with ``None`` for a missing side
            (broadcast to the shape of the fitted entries).
        prior: per selected leaf ``None`` or ``(mean, std)`` of the fitted entries: a Gaussian
            prior term.
        optimizer: ``"lbfgs"`` or ``"adam"``.
        max_iter: optimizer iterations. learning_rate: Adam's step size (in the scaled variables).
        gtol: stop when the gradient norm in the scaled variables falls below it.
        ftol: stop when the relative change of the loss falls below it (0: off).
        rtol, atol, max_steps, adjoint: passed to :func:`predict`.

    Returns:
        :class:`IdentificationResult` with the fitted model and the history of loss and
        parameters.

    Raises:
        ModelError: for bounds or priors that do not match the selection, or an initial value
            outside its bounds (naming the parameter).
    """
    get = resolve_where(params_where)
    sel = get(model)
    several = isinstance(sel, tuple)
    full0 = tuple(jnp.asarray(p, dtype=float) for p in _as_tuple(sel, several))
    npar = len(full0)
    elements = [None] * npar if elements is None else list(elements)
    bounds = [None] * npar if bounds is None else list(bounds)
    prior = [None] * npar if prior is None else list(prior)
    if not (len(bounds) == len(prior) == len(elements) == npar):
        raise ModelError(
            f"identify: {npar} parameters selected but {len(elements)} elements, "
            f"{len(bounds)} bounds and {len(prior)} priors"
        )
    for k, (full, idx) in enumerate(zip(full0, elements, strict=True)):
        if idx is not None:
            try:
                np.asarray(full)[idx]  # numpy raises where jax would clamp
            except IndexError as e:
                raise ModelError(
                    f"identify: elements[{k}] = {idx!r} is out of range for a leaf of shape "
                    f"{full.shape}"
                ) from e
    p0 = tuple(
        full if idx is None else full[idx] for full, idx in zip(full0, elements, strict=True)
    )
    if optimizer not in ("lbfgs", "adam"):
        raise ValueError(f"identify: unknown optimizer {optimizer!r}; use 'lbfgs' or 'adam'")
    if not isinstance(data, Observations):
        raise TypeError(f"identify: data must be jaxmb.identify.Observations, got {type(data)}")
    ts = np.asarray(data.ts)
    if ts.ndim != 1 or ts.size < 2 or np.any(np.diff(ts) <= 0):
        raise ModelError("identify: data.ts must be a strictly increasing 1-D array of times")
    _check_fit_arguments(model, data, max_iter, learning_rate, gtol, ftol, rtol, atol, max_steps)
    observed = tuple(range(model.nq)) if data.observed is None else tuple(data.observed)
    if observe is not None:
        q_try = jnp.zeros((ts.size, model.nq)) + jnp.asarray(data.q0)
        shape = jax.eval_shape(observe, model, q_try).shape
        if tuple(shape) != tuple(data.q.shape):
            raise ModelError(
                f"identify: observe(model, q) gives shape {tuple(shape)} but data.q has shape "
                f"{data.q.shape}"
            )
    elif data.q.shape != (ts.size, len(observed)):
        raise ModelError(
            f"identify: data.q has shape {data.q.shape}, expected ({ts.size}, {len(observed)}) "
            f"for observed coordinates {observed}"
        )
    transforms = tuple(
        bound_transform(p, b, k) for k, (p, b) in enumerate(zip(p0, bounds, strict=True))
    )
    priors = tuple(
        None if pr is None else (jnp.asarray(pr[0], float), jnp.asarray(pr[1], float))
        for pr in prior
    )
    obs_idx = np.asarray(observed)

    def to_model(u):
        vals = tuple(t.forward(x) for t, x in zip(transforms, u, strict=True))
        leaves = tuple(
            v if idx is None else full.at[idx].set(v)
            for v, full, idx in zip(vals, full0, elements, strict=True)
        )
        return eqx.tree_at(get, model, leaves if several else leaves[0]), vals

    def objective(u):
        m, vals = to_model(u)
        q = predict(m, data, rtol=rtol, atol=atol, max_steps=max_steps, adjoint=adjoint)
        if observe is not None:
            y = observe(m, q)
        else:
            y = q[:, obs_idx]
        if loss is None:
            r = (y - data.q) / data.noise_std
            J = 0.5 * jnp.sum(r * r)
        else:
            J = loss(q if observe is None else y, data)
        for v, pr in zip(vals, priors, strict=True):
            if pr is not None:
                z = (v - pr[0]) / pr[1]
                J = J + 0.5 * jnp.sum(z * z)
        return J

    u = tuple(t.inverse(p) for t, p in zip(transforms, p0, strict=True))
    if optimizer == "adam":
        opt = optax.adam(learning_rate)
        vg = jax.value_and_grad(objective)

        @jax.jit
        def step(u, state):
            value, grad = vg(u)
            updates, state = opt.update(grad, state, u)
            return optax.apply_updates(u, updates), state, value, grad

    else:
        opt = optax.lbfgs()
        vg = optax.value_and_grad_from_state(objective)

        @jax.jit
        def step(u, state):
            value, grad = vg(u, state=state)
            updates, state = opt.update(grad, state, u, value=value, grad=grad, value_fn=objective)
            return optax.apply_updates(u, updates), state, value, grad

    state = opt.init(u)
    hist_loss, hist_params, hist_g = [], [], []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        u_prev = u
        u, state, value, grad = step(u, state)
        gnorm = float(optax.tree.norm(grad))
        value = float(value)
        hist_loss.append(value)
        hist_g.append(gnorm)
        hist_params.append(
            tuple(np.asarray(t.forward(x)) for t, x in zip(transforms, u_prev, strict=True))
        )
        if verbose:
            print(f"identify[{optimizer}] {it:4d}: loss {value:.10g}  |grad| {gnorm:.3e}")
        if not np.isfinite(value):
            raise ModelError(f"identify: the loss became {value} at iteration {it}")
        if gnorm < gtol:
            u = u_prev  # the gradient was evaluated at u_prev: that is the converged point
            converged = True
            break
        if ftol > 0 and len(hist_loss) > 1:
            if abs(hist_loss[-2] - value) <= ftol * max(abs(value), 1e-300):
                converged = True
                break
    fitted, vals = to_model(u)
    final = float(jax.jit(objective)(u))
    history = {
        "loss": np.asarray(hist_loss),
        "grad_norm": np.asarray(hist_g),
        "params": hist_params,
    }
    return IdentificationResult(
        model=fitted,
        params=tuple(vals),
        loss=final,
        history=history,
        iterations=it,
        converged=converged,
        optimizer=optimizer,
    )
