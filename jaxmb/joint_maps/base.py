"""The joint-map abstraction and the explicit maps.

:class:`AbstractJointMap` is the extension point: a subclass implements ``__call__`` (f(q), shape
(nj,)); the derivatives default to forward-mode autodiff and may be overridden with something
cheaper or exact in closed form. :class:`LinearMap` and :class:`ExplicitMap` are measured rhythms
f(q) in closed form.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class AbstractJointMap(eqx.Module):
    """Base class of joint maps ``f: R^{n_q} → R^{n_j}``.

    Subclasses carry their parameters as pytree leaves (so they are traced, differentiable and
    batchable) and the sizes ``nq``/``nj`` as static fields.
    """

    nq: eqx.AbstractVar[int]
    nj: eqx.AbstractVar[int]

    @abc.abstractmethod
    def __call__(self, q: Float[Array, " nq"]) -> Float[Array, " nj"]:
        """Joint variables f(q), shape (nj,) (rad for revolute, m for prismatic joints)."""

    def jacobian(self, q: Float[Array, " nq"]) -> Float[Array, "nj nq"]:
        """``J[i, k] = ∂f_i/∂q_k``: rows are ∇f_iᵀ."""
        return jax.jacfwd(self)(q)

    def hessian(self, q: Float[Array, " nq"]) -> Float[Array, "nj nq nq"]:
        """``H[i, k, l] = ∂²f_i/∂q_k∂q_l``."""
        return jax.jacfwd(jax.jacfwd(self))(q)

    def derivatives(self, q: Float[Array, " nq"]):
        """``(f, J, H)`` together; override where they share work (an implicit solve)."""
        return self(q), self.jacobian(q), self.hessian(q)

    def periods(self) -> tuple[float | None, ...] | None:
        """Per coordinate, the period P after which every body is back in the same pose
        (``f(q + P e_k)`` differs from ``f(q)`` by whole turns of revolute joints: a crank angle
        that turns round has P = 2π), or None where there is none; ``None`` (the default): not
        declared. :func:`jaxmb.simulate` uses it to premodel a one-coordinate model's dynamics
        automatically (a Fourier fit over one period, checked against the exact route)."""
        return None


class LinearMap(AbstractJointMap):
    """``f(q) = A q + b``: identity maps, fixed joints (zero rows) and linear couplings.

    Attributes:
        A: (nj, nq) coupling matrix (dimensionless, or m/rad for mixed units).
        b: (nj,) offsets (rad or m).
    """

    A: Float[Array, "nj nq"]
    b: Float[Array, " nj"]
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)

    def __init__(self, A, b=None):
        A = jnp.asarray(A, dtype=float)
        if A.ndim != 2:
            raise ValueError(f"LinearMap: A must be a (nj, nq) matrix, got shape {A.shape}")
        self.A = A
        self.b = jnp.zeros(A.shape[0], dtype=A.dtype) if b is None else jnp.asarray(b, float)
        self.nj, self.nq = A.shape
        if self.b.shape != (self.nj,):
            raise ValueError(f"LinearMap: b must have shape ({self.nj},), got {self.b.shape}")

    def __call__(self, q):
        # a broadcast product and sum fuses with its consumers; ``A @ q`` is a separate CPU dot
        # call, which costs more than a small tree's whole pose pass
        return jnp.sum(self.A * q, axis=1) + self.b

    def derivatives(self, q):
        H = jnp.zeros((self.nj, self.nq, self.nq), dtype=self.A.dtype)
        return self(q), self.A, H

    def jacobian(self, q):
        return self.A

    def hessian(self, q):
        return jnp.zeros((self.nj, self.nq, self.nq), dtype=self.A.dtype)


class IdentityMap(AbstractJointMap):
    """``f(q) = q``: one coordinate per joint (an open chain or tree).

    It has no parameters, so it is the identity by its type: a model passed to ``jax.jit`` as an
    argument (its arrays traced) still takes the dynamics' route without the projection through
    ∇f = I and H = 0. (A :class:`LinearMap` with A = I is recognized only where its values are
    concrete.) ``A`` and ``b`` give the same map as a :class:`LinearMap`.

    Attributes:
        nq, nj: the number of coordinates and joints (equal).
    """

    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)

    def __init__(self, n: int):
        n = int(n)
        if n < 0:
            raise ValueError(f"IdentityMap: the number of joints must be >= 0, got {n}")
        self.nq = self.nj = n

    @property
    def A(self) -> Float[Array, "nj nq"]:
        return jnp.eye(self.nj)

    @property
    def b(self) -> Float[Array, " nj"]:
        return jnp.zeros(self.nj)

    def __call__(self, q):
        q = jnp.asarray(q)
        if q.shape[-1:] != (self.nq,):
            raise ValueError(
                f"IdentityMap({self.nq}): q must have shape ({self.nq},), got {q.shape}"
            )
        return q

    def derivatives(self, q):
        f = self(q)
        dtype = jnp.result_type(f, float)
        return f, jnp.eye(self.nj, dtype=dtype), jnp.zeros((self.nj, self.nq, self.nq), dtype)

    def jacobian(self, q):
        return self.derivatives(q)[1]

    def hessian(self, q):
        return self.derivatives(q)[2]


def identity_map(n: int) -> IdentityMap:
    """``f(q) = q``: one coordinate per joint (an open chain or tree), :class:`IdentityMap`."""
    return IdentityMap(n)


class ExplicitMap(AbstractJointMap):
    """``f(q) = fn(q, params)`` for any JAX-traceable function, e.g. a measured joint rhythm.

    Attributes:
        fn: static callable ``(q (nq,), params) -> f (nj,)``.
        params: pytree of traced parameters (regression coefficients, spline values, ...).
    """

    fn: Callable[[Array, Any], Array] = eqx.field(static=True)
    params: Any
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)

    def __init__(self, fn, nq: int, nj: int, params=None):
        self.fn = fn
        self.params = params
        self.nq = int(nq)
        self.nj = int(nj)

    def __call__(self, q):
        return self.fn(q, self.params)


# -------------------------------------------------------------------------------------------------
# Implicit joint maps: closed kinematic loops g(f, q) = 0
# -------------------------------------------------------------------------------------------------
