"""Closed kinematic loops as joint maps: the holonomic constraints g(f, q) = 0 solved by Newton's
method inside JAX, with ∇f and H by the implicit function theorem (seed §3-3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .base import AbstractJointMap

#: Newton iterations per continuation step of :meth:`ImplicitMap.guess`.
CONTINUATION_NEWTON = 2


class ImplicitSolution(NamedTuple):
    """Result of :meth:`ImplicitMap.solve` at one q (a status instead of an error).

    Attributes:
        f: (nj,) joint variables (the last Newton iterate, whether converged or not).
        residual: max |g| at ``f`` (constraint units, e.g. m).
        converged: ``residual <= tol`` and everything finite.
        singular: the last Newton step met an (almost) singular ∂g/∂f (pivot ratio below ``rcond``).
    """

    f: Float[Array, " nj"]
    residual: Float[Array, ""]
    converged: Bool[Array, ""]
    singular: Bool[Array, ""]


class ImplicitMap(AbstractJointMap):
    """Joint variables defined implicitly by the holonomic constraints of closed loops (seed §3-3).

    The n_j joint variables split into *independent* ones, given explicitly as functions of q
    (by default ``f[independent] = q``, e.g. the driving joints of a five-bar), and m *dependent*
    ones fixed by m constraint equations ``g(f, q) = 0`` (Eq. 100). At every q the dependent
    variables are found by a FIXED number of Newton iterations (no data-dependent loop, so
    reverse mode, vmap and jit all work) from a warm start, and differentiated by the implicit
    function theorem through a ``jax.custom_jvp``:

        ∂g/∂f_dep · ḟ_dep = −(∂g/∂q · q̇ + ∂g/∂params · ṗ),

    so ``jax.jacfwd``, ``jax.hessian`` (nested JVPs) and ``jax.grad`` of anything built on f are
    exact, and gradients with respect to the constraint parameters are available too.

    Assembly branch. A closed loop generally assembles in several ways (elbow up / down). Newton's
    method converges to the branch nearest (in its basin of attraction) to the warm start, so the
    warm start *chooses the branch*: it must be a function of q that stays in the same basin over
    the whole motion. In order of precedence it is ``initial_guess(q, params)`` (a closed-form
    branch, or a cheap approximation), ``warm_start(q)[dependent]`` (another joint map, e.g. a
    :class:`PremodelMap` of this one built by continuation), continuation from the assembly
    ``reference`` at ``reference_q`` (``continuation`` steps along the straight line to q, each
    a few Newton iterations from the previous step's solution: a fixed cost that follows the
    branch of the reference over large excursions), or the constant reference assembly
    ``reference`` (adequate only for small excursions).

    Failure is never a silent NaN: if after ``iterations`` steps ``max|g| > tol`` (no solution near
    the warm start, q outside the mechanism's range) or ∂g/∂f is singular (a singular configuration,
    where q does not determine f), ``__call__`` raises through ``equinox.error_if``. With
    ``check=False`` it does not; call :meth:`solve` to get the status instead.

    Attributes:
        constraints: static ``g(f (nj,), q (nq,), params) -> (m,)``, f the full joint vector with
            the independent entries already filled in.
        dependent: static indices of the m dependent joint variables (the columns of ∂g/∂f).
        independent: static ``(q, params) -> (nj − m,)`` values of the other joint variables, in
            increasing joint order; ``None`` means ``f[independent] = q`` (needs nj − m == nq).
        params: pytree of traced constraint parameters (link lengths, ...).
        reference: (m,) reference assembly of the dependent variables (rad or m).
        warm_start: optional joint map whose ``[dependent]`` entries are the warm start.
        initial_guess: optional static ``(q, params) -> (m,)`` warm start.
        iterations: static number of Newton iterations.
        tol: static residual tolerance (constraint units) for the convergence check.
        rcond: static threshold on min|U_kk| / max|U_kk| of the LU of ∂g/∂f (singularity check).
        check: static; raise on failure (``True``) or leave the status to :meth:`solve`.
        reference_q: (nq,) the q at which ``reference`` is the assembly (for ``continuation``).
        continuation: static number of continuation steps (0: none).
    """

    constraints: Callable = eqx.field(static=True)
    dependent: tuple[int, ...] = eqx.field(static=True)
    independent: Callable | None = eqx.field(static=True)
    params: Any
    reference: Float[Array, " m"]
    warm_start: AbstractJointMap | None
    initial_guess: Callable | None = eqx.field(static=True)
    iterations: int = eqx.field(static=True)
    tol: float = eqx.field(static=True)
    rcond: float = eqx.field(static=True)
    check: bool = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)
    reference_q: Float[Array, " nq"] | None
    continuation: int = eqx.field(static=True)

    def __init__(
        self,
        constraints: Callable,
        nq: int,
        nj: int,
        dependent: Sequence[int],
        reference,
        params=None,
        *,
        independent: Callable | None = None,
        initial_guess: Callable | None = None,
        warm_start: AbstractJointMap | None = None,
        iterations: int = 8,
        tol: float = 1e-9,
        rcond: float = 1e-12,
        check: bool = True,
        reference_q=None,
        continuation: int = 0,
    ):
        self.constraints = constraints
        self.nq, self.nj = int(nq), int(nj)
        dep = tuple(int(i) for i in dependent)
        if len(set(dep)) != len(dep) or any(not 0 <= i < self.nj for i in dep):
            raise ValueError(f"ImplicitMap: dependent joints {dep} must be distinct indices < {nj}")
        if not dep:
            raise ValueError("ImplicitMap: no dependent joint variables; use ExplicitMap instead")
        self.dependent = dep
        n_ind = self.nj - len(dep)
        if independent is None and n_ind not in (0, self.nq):
            raise ValueError(
                f"ImplicitMap: {n_ind} independent joint variables but nq = {self.nq}; give "
                "`independent(q, params)` for them (the default f[independent] = q needs "
                "nj - m = nq)"
            )
        self.independent = independent
        self.params = params
        ref = jnp.asarray(reference, dtype=float)
        if ref.shape != (len(dep),):
            raise ValueError(
                f"ImplicitMap: reference assembly has shape {ref.shape}, expected ({len(dep)},) "
                "(one value per dependent joint)"
            )
        self.reference = ref
        if warm_start is not None and (warm_start.nq != self.nq or warm_start.nj != self.nj):
            raise ValueError(
                f"ImplicitMap: warm_start maps R^{warm_start.nq} -> R^{warm_start.nj}, "
                f"expected R^{self.nq} -> R^{self.nj}"
            )
        self.warm_start = warm_start
        self.initial_guess = initial_guess
        if int(iterations) < 1:
            raise ValueError(f"ImplicitMap: iterations must be >= 1, got {iterations}")
        self.iterations = int(iterations)
        self.tol = float(tol)
        self.rcond = float(rcond)
        self.check = bool(check)
        self.continuation = int(continuation)
        if self.continuation < 0:
            raise ValueError(f"ImplicitMap: continuation must be >= 0, got {continuation}")
        if self.continuation and reference_q is None:
            raise ValueError(
                "ImplicitMap: continuation needs reference_q (where `reference` holds)"
            )
        self.reference_q = None if reference_q is None else jnp.asarray(reference_q, dtype=float)
        if self.reference_q is not None and self.reference_q.shape != (self.nq,):
            raise ValueError(
                f"ImplicitMap: reference_q has shape {self.reference_q.shape},"
                f" expected ({self.nq},)"
            )

    def replace(self, **changes) -> ImplicitMap:
        """A copy with some constructor arguments changed (e.g. ``check=False``, ``iterations``)."""
        return dataclasses.replace(self, **changes)

    # -- plumbing --------------------------------------------------------------------------------
    @property
    def m(self) -> int:
        """Number of constraint equations (= dependent joint variables)."""
        return len(self.dependent)

    @property
    def independent_joints(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.nj) if i not in self.dependent)

    def _independent_values(self, q):
        if self.independent is not None:
            return jnp.asarray(self.independent(q, self.params))
        if self.nj - self.m == 0:
            return jnp.zeros((0,), dtype=jnp.result_type(q, float))
        return q

    def assemble(self, f_dep: Float[Array, " m"], q: Float[Array, " nq"]) -> Float[Array, " nj"]:
        """The full joint vector from the dependent values and q."""
        dtype = jnp.result_type(f_dep, q)
        ind = self.independent_joints
        # a static permutation of [f_ind, f_dep]: no scatter (slow when batched on CPU)
        parts = [f_dep.astype(dtype)]
        if ind:
            parts.insert(0, self._independent_values(q).astype(dtype))
        src = jnp.concatenate(parts)
        order = list(ind) + list(self.dependent)
        perm = np.argsort(np.asarray(order))
        if np.array_equal(perm, np.arange(self.nj)):
            return src
        return jnp.stack([src[k] for k in perm])

    def residual(self, f_dep: Float[Array, " m"], q: Float[Array, " nq"]) -> Float[Array, " m"]:
        """``g(f(f_dep, q), q)`` (m,), constraint units."""
        return jnp.asarray(self.constraints(self.assemble(f_dep, q), q, self.params))

    def guess(self, q: Float[Array, " nq"]) -> Float[Array, " m"]:
        """The warm start of the dependent variables at q (it chooses the assembly branch)."""
        if self.initial_guess is not None:
            x = jnp.asarray(self.initial_guess(q, self.params))
        elif self.warm_start is not None:
            x = self.warm_start(q)[np.asarray(self.dependent)]
        elif self.continuation:
            x = self._continue(jax.lax.stop_gradient(q))
        else:
            x = self.reference
        return jax.lax.stop_gradient(jnp.broadcast_to(x, (self.m,)).astype(jnp.result_type(q)))

    def _continue(self, q):
        """Continuation from ``(reference_q, reference)`` to q: at s = k/K (k = 1..K) a few
        Newton steps at ``q(s) = reference_q + s (q − reference_q)`` from the previous solution."""
        q0 = self.reference_q.astype(jnp.result_type(q))
        gf = jax.jacfwd(self.residual, argnums=0)

        def step(k, x):
            qs = q0 + (k + 1) / self.continuation * (q - q0)
            for _ in range(CONTINUATION_NEWTON):
                x = x - jnp.linalg.solve(gf(x, qs), self.residual(x, qs))
            return x

        x0 = self.reference.astype(jnp.result_type(q))
        return jax.lax.fori_loop(0, self.continuation, step, x0)

    def _newton(self, q, x0):
        """Fixed-count Newton iterations; returns the iterate, residual and singularity flag.

        A ``fori_loop`` with a static trip count: one traced body however many iterations, so
        compile time stays small under nested differentiation.
        """
        import jax.scipy.linalg as jsl  # here: ~70 ms of import, for closed loops only

        gf = jax.jacfwd(self.residual, argnums=0)

        def step(_, carry):
            x, _ = carry
            lu, piv = jsl.lu_factor(gf(x, q))
            d = jnp.abs(jnp.diagonal(lu))
            ratio = jnp.min(d) / jnp.maximum(jnp.max(d), jnp.finfo(d.dtype).tiny)
            return x - jsl.lu_solve((lu, piv), self.residual(x, q)), ratio

        x, ratio = jax.lax.fori_loop(0, self.iterations, step, (x0, jnp.ones((), x0.dtype)))
        r = jnp.max(jnp.abs(self.residual(x, q)))
        converged = jnp.isfinite(r) & jnp.all(jnp.isfinite(x)) & (r <= self.tol)
        singular = ~(ratio > self.rcond)
        return x, r, converged, singular

    def _raise_on_failure(self, x, converged, singular):
        if not self.check:
            return x
        return eqx.branched_error_if(
            x,
            singular | ~converged,
            jnp.where(singular, 0, 1),
            (
                "ImplicitMap: the constraint Jacobian ∂g/∂f of the dependent joints "
                f"{self.dependent} is singular at this q (a singular configuration: q does not "
                "determine the dependent joint variables here)",
                f"ImplicitMap: Newton's method did not converge to max|g| <= {self.tol:g} in "
                f"{self.iterations} iterations (no assembly near the warm start at this q: q "
                "outside the mechanism's range, or a warm start in another branch's basin)",
            ),
        )

    def _solve_dependent(self, q):
        """Dependent joint variables f_dep(q), differentiable by the implicit function theorem."""
        dyn, static = eqx.partition(self, eqx.is_inexact_array)

        @jax.custom_jvp
        def solve(q, dyn):
            mp = eqx.combine(dyn, static)
            x, _, converged, singular = mp._newton(q, mp.guess(q))
            return mp._raise_on_failure(x, converged, singular)

        @solve.defjvp
        def solve_jvp(primals, tangents):
            q, dyn = primals
            dq, ddyn = tangents
            x = solve(q, dyn)
            mp = eqx.combine(dyn, static)

            def g_at_x(q_, dyn_):
                return eqx.combine(dyn_, static).residual(x, q_)

            gdot = jax.jvp(g_at_x, (q, dyn), (dq, ddyn))[1]
            gf = jax.jacfwd(mp.residual, argnums=0)(x, q)
            return x, -jnp.linalg.solve(gf, gdot)

        return solve(q, dyn)

    # -- public ----------------------------------------------------------------------------------
    def solve(self, q: Float[Array, " nq"], guess: Float[Array, " m"] | None = None):
        """Solve without raising: an :class:`ImplicitSolution` (f, residual, converged, singular).

        ``guess`` overrides the warm start (continuation sweeps use the previous solution).
        Not differentiable through the solve; use ``__call__`` for that.
        """
        return _implicit_solve(self, jnp.asarray(q), guess)

    def _solve_impl(self, q, guess):
        x0 = self.guess(q) if guess is None else jnp.asarray(guess, dtype=jnp.result_type(q))
        x, r, converged, singular = self._newton(q, x0)
        return ImplicitSolution(self.assemble(x, q), r, converged, singular)

    def __call__(self, q):
        return _implicit_call(self, q)

    def derivatives(self, q):
        """``(f, J, H)`` with one Newton solve and ONE LU of ∂g/∂f shared by ∇f and H.

        With ``x = f_dep(q)``, ``G_f = ∂g/∂f_dep`` and ``G_q = ∂g/∂q`` (partials, independent joints
        substituted): ``J_dep = −G_f⁻¹ G_q``. Differentiating ``g(f(q), q) = 0`` twice gives
        ``G_f H_dep = −Γ`` where Γ is the Hessian at q₀ of ``q ↦ g(x + J_dep (q − q₀), q)`` (all
        second-order terms except G_f H, see :func:`projection_derivatives`), so
        ``H_dep = −G_f⁻¹ Γ``. Everything stays differentiable (x through the custom JVP).
        """
        return _implicit_derivatives(self, q)

    def _derivatives_impl(self, q):
        import jax.scipy.linalg as jsl  # see _solve_dependent

        q = jnp.asarray(q)
        m = self.m
        x = self._solve_dependent(q)
        # one forward-mode pass gives [∂g/∂f_dep | ∂g/∂q]; one LU of ∂g/∂f_dep serves J and H
        G = jax.jacfwd(lambda z: self.residual(z[:m], z[m:]))(jnp.concatenate([x, q]))
        lu = jsl.lu_factor(G[:, :m])
        Jd = -jsl.lu_solve(lu, G[:, m:])

        def linearized(qq):
            return self.residual(x + Jd @ (qq - q), qq)

        Gamma = jax.jacfwd(jax.jacfwd(linearized))(q)  # (m, nq, nq)
        Hd = -jsl.lu_solve(lu, Gamma.reshape(m, -1)).reshape(m, self.nq, self.nq)
        dep = np.asarray(self.dependent)
        f = self.assemble(x, q)
        J = jnp.zeros((self.nj, self.nq), f.dtype).at[dep].set(Jd)
        H = jnp.zeros((self.nj, self.nq, self.nq), f.dtype).at[dep].set(Hd)
        ind = self.independent_joints
        if ind and self.independent is None:  # f[independent] = q
            J = J.at[np.asarray(ind)].set(jnp.eye(self.nq, dtype=f.dtype))
        elif ind:
            ind = np.asarray(ind)
            J = J.at[ind].set(jax.jacfwd(self._independent_values)(q))
            H = H.at[ind].set(jax.jacfwd(jax.jacfwd(self._independent_values))(q))
        return f, J, H

    def jacobian(self, q):
        return self.derivatives(q)[1]

    def hessian(self, q):
        return self.derivatives(q)[2]


# Compiled entry points (cached on the map's static structure): eager calls compile once, and
# inside an outer jit they are simply inlined.
@eqx.filter_jit
def _implicit_call(jm: ImplicitMap, q):
    return jm.assemble(jm._solve_dependent(q), q)


@eqx.filter_jit
def _implicit_solve(jm: ImplicitMap, q, guess):
    return jm._solve_impl(q, guess)


@eqx.filter_jit
def _implicit_derivatives(jm: ImplicitMap, q):
    return jm._derivatives_impl(q)


# -------------------------------------------------------------------------------------------------
# Pre-modeling: a spline fit of a joint map sampled on a grid of q
# -------------------------------------------------------------------------------------------------
