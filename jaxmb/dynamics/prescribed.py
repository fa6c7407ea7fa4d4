"""Coordinates prescribed as functions of time (OpenSim's ``prescribed_function``).

A prescribed coordinate ``q_p`` stays one of the model's coordinates, but its motion is given:
``q_p = g(t)``, ``q̇_p = ġ(t)``, ``q̈_p = g̈(t)``. The equations of motion then hold for the free
coordinates only (the prescribed ones take whatever generalized force the motion needs, as
Simbody's prescribed mobilities do):

``M_FF q̈_F = rhs_F − M_FP g̈(t)``,  ``rhs = G + Q_applied + τ − N q̇``.

:func:`jaxmb.forward_dynamics` solves this at the state it is given (like OpenSim's
``realizeAcceleration``: q and q̇ are not overwritten, only q̈_p is the function's); the ODE
right-hand side of :func:`jaxmb.simulate` first places ``q_p, q̇_p`` on the functions (like
OpenSim's integrators, which ``prescribe()`` the state at every step), and its output reports
``g(t), ġ(t)`` for them.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = ["PrescribedCoordinates", "prescribed_motion", "prescribe_state", "prescribed_solve"]


class PrescribedCoordinates(eqx.Module):
    """Which coordinates follow which function of time.

    Attributes:
        indices: static indices in q of the prescribed coordinates, increasing.
        functions: per prescribed coordinate, a scalar JAX-traceable function of time
            ``g(t)`` (t in s; value in rad or m), e.g. a :mod:`jaxmb.math.functions` class;
            its first and second derivatives come by forward-mode autodiff.
    """

    indices: tuple[int, ...] = eqx.field(static=True)
    functions: tuple

    def __init__(self, indices, functions):
        indices = tuple(int(i) for i in indices)
        functions = tuple(functions)
        if len(indices) != len(functions):
            raise ValueError(
                f"PrescribedCoordinates: {len(indices)} indices but {len(functions)} functions"
            )
        if len(set(indices)) != len(indices) or list(indices) != sorted(indices):
            raise ValueError(f"PrescribedCoordinates: indices must increase, got {indices}")
        self.indices = indices
        self.functions = functions

    def free(self, nq: int) -> tuple[int, ...]:
        """The indices of the coordinates that are not prescribed."""
        return tuple(i for i in range(nq) if i not in self.indices)


def prescribed_motion(pc: PrescribedCoordinates, t, dtype=None):
    """``(g, ġ, g̈)`` of every prescribed coordinate at time t, each of shape (np,)."""
    t = jnp.asarray(t, dtype=dtype if dtype is not None else jnp.result_type(float))
    one = jnp.ones_like(t)

    def value_and_rate(s):
        return jax.jvp(lambda x: jnp.stack([g(x) for g in pc.functions]), (s,), (one,))

    (g, gd), (_, gdd) = jax.jvp(value_and_rate, (t,), (one,))
    return g, gd, gdd


def prescribe_state(model, q: Float[Array, " nq"], qd: Float[Array, " nq"], t):
    """``(q, q̇)`` with the prescribed coordinates placed on their functions at time t (the
    state unchanged for a model without prescribed coordinates)."""
    pc = model.prescribed
    if pc is None:
        return q, qd
    g, gd, _ = prescribed_motion(pc, t, jnp.result_type(q, float))
    idx = np.asarray(pc.indices)
    return q.at[idx].set(g.astype(q.dtype)), qd.at[idx].set(gd.astype(qd.dtype))


def prescribed_solve(pc: PrescribedCoordinates, M, rhs, t, solve):
    """q̈ (nq,) with ``q̈_P = g̈(t)`` and ``M_FF q̈_F = rhs_F − M_FP g̈(t)``.

    Args:
        pc: the prescribed coordinates.
        M: (nq, nq) mass matrix; rhs: (nq,) ``G + Q_applied + τ − N q̇``.
        t: time (s).
        solve: ``solve(A (n, n), b (n,)) -> x`` for a symmetric positive definite A.
    """
    nq = rhs.shape[0]
    P = np.asarray(pc.indices, dtype=int)
    F = np.asarray(pc.free(nq), dtype=int)
    _, _, a = prescribed_motion(pc, t, rhs.dtype)
    a = a.astype(rhs.dtype)
    qdd = jnp.zeros(nq, dtype=rhs.dtype).at[P].set(a)
    if F.size == 0:
        return qdd
    b = rhs[F] - M[np.ix_(F, P)] @ a
    return qdd.at[F].set(solve(M[np.ix_(F, F)], b))
