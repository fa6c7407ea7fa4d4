"""The integrator driver on a small right-hand side: :func:`jaxmb.simulation.erk_solve` (diffrax,
stages in a ``lax`` loop) against its peers, on Andrews' squeezer to t = 0.03 s.

Peers, timed interleaved in this one process (process-CPU seconds of the compiled solve, min over
rounds; the load average is recorded):

* ``lean_loop``: the hand-written adaptive ERK that ``erk_solve`` was before issue 19 (one
  ``lax.while_loop``, Hairer's initial step, FSAL; copied verbatim below from
  ``jaxmb/simulate.py`` at commit 984ec0b), stages unrolled for the cheap RHS and looped for the
  exact one, as the Andrews benchmark called it;
* ``diffrax_checkpointed``: the same ``diffeqsolve`` with diffrax's default (checkpointed) stage
  loop, i.e. ``erk_solve`` as issue 19 left it.

Right-hand sides: ``ode`` (the exact tree dynamics of ``models.andrews_squeezer()``) and
``projected`` (the test set's equations projected on the joint map: a cheap RHS, standing in for the
premodel route without its fit). Writes ``benchmarks/results/erk_driver.json`` and ``.png``.

    python benchmarks/erk_driver.py
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, metadata, save_results
from andrews import T1, ode_projected_rhs, ode_rhs
from jaxtyping import Array, Float

from jaxmb.models import andrews as an
from jaxmb.simulation import erk_solve


# --------------------------------------------- the peer: erk_solve of commit 984ec0b, verbatim
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
def lean_loop(
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


# ------------------------------------------------------------------------------------ benchmark


def diffrax_checkpointed(rhs, y0, t0, t1, *, method, rtol, atol, max_steps, unroll):
    """``erk_solve`` as issue 19 left it: diffrax's default checkpointed stage loop."""
    del unroll
    solver = {"tsit5": dfx.Tsit5, "dopri8": dfx.Dopri8}[method]()
    ctrl = dfx.PIDController(rtol=rtol, atol=atol, pcoeff=0.0, icoeff=1.0, safety=0.9,
                             factormin=0.2, factormax=10.0)  # fmt: skip
    sol = dfx.diffeqsolve(dfx.ODETerm(lambda t, y, a: rhs(t, y)), solver, t0, t1, None, y0,
                          stepsize_controller=ctrl, saveat=dfx.SaveAt(t1=True),
                          max_steps=max_steps, adjoint=dfx.ForwardMode(), throw=False)  # fmt: skip
    ok = sol.result == dfx.RESULTS.successful
    st = sol.stats
    return ERKResult(sol.ys[-1], sol.ts[-1], st["num_steps"], st["num_accepted_steps"], ok)


def make(fn, rhs, method, unroll):
    @jax.jit
    def solve(s0, tol):
        r = fn(lambda t, y: rhs(t, y, None), s0, 0.0, T1, method=method, rtol=tol, atol=tol,
               max_steps=200_000, unroll=unroll)  # fmt: skip
        return r.y1, r.num_steps

    return solve


def main():
    model = an.andrews_squeezer()
    s0 = jnp.array([an.BETA0, 0.0])
    meta = metadata(benchmark="erk_driver", t1=T1)
    rows = []
    for route, rhs in {"projected": ode_projected_rhs(model), "ode": ode_rhs(model)}.items():
        for method in ("tsit5", "dopri8"):
            unroll = route != "ode"  # the exact RHS is large: loop its stages (as andrews.py did)
            fns = {
                "erk_solve": make(erk_solve, rhs, method, unroll),
                "lean_loop": make(lean_loop, rhs, method, unroll),
                "diffrax_checkpointed": make(diffrax_checkpointed, rhs, method, unroll),
            }
            for tol in (1e-6, 1e-8):
                res = {}
                for name, f in fns.items():
                    t = time.perf_counter()
                    y, n = jax.block_until_ready(f(s0, tol))
                    res[name] = dict(steps=int(n), first_call_s=time.perf_counter() - t,
                                     cpu_s=np.inf, y=np.asarray(y))  # fmt: skip
                for _ in range(9):  # rounds: every peer once per round
                    for name, f in fns.items():
                        c = time.process_time()
                        jax.block_until_ready(f(s0, tol))
                        res[name]["cpu_s"] = min(res[name]["cpu_s"], time.process_time() - c)
                load = os.getloadavg()
                y_erk = res["erk_solve"]["y"]
                for name, r in res.items():
                    dy = float(np.max(np.abs(r.pop("y") - y_erk)))
                    rows.append(dict(route=route, method=method, tol=tol, driver=name, load=load,
                                     **r, max_diff_to_erk_solve=dy))  # fmt: skip
                e = res["erk_solve"]["cpu_s"]
                print(f"{route:9s} {method} tol {tol:.0e}: " + ", ".join(
                    f"{k} {v['cpu_s'] * 1e3:.3f} ms ({v['steps']} steps)" for k, v in res.items())
                    + f"; lean_loop / erk_solve = {res['lean_loop']['cpu_s'] / e:.2f}, "
                    f"checkpointed / erk_solve = {res['diffrax_checkpointed']['cpu_s'] / e:.2f}"
                    f"  [load {load[0]:.1f}]", flush=True)  # fmt: skip
    save_results("erk_driver", dict(meta, rows=rows, clock="process CPU s, min over 9 rounds"))
    plot(rows, RESULTS / "erk_driver.png")


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({(r["route"], r["method"], r["tol"]) for r in rows})
    drivers = ("erk_solve", "lean_loop", "diffrax_checkpointed")
    fig, ax = plt.subplots(figsize=(10, 4))
    for j, d in enumerate(drivers):
        v = [next(r["cpu_s"] for r in rows if (r["route"], r["method"], r["tol"]) == k
                  and r["driver"] == d) * 1e3 for k in keys]  # fmt: skip
        ax.bar(np.arange(len(keys)) + 0.27 * (j - 1), v, 0.27, label=d)
    ax.set_xticks(np.arange(len(keys)), [f"{a}\n{b} {c:.0e}" for a, b, c in keys], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("solve, process CPU (ms)")
    ax.set_title("Andrews' squeezer to t = 0.03 s: integrator drivers")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
