"""Joint maps: every joint variable as a smooth function f(q) of the generalized coordinates.

A joint map is the heart of the method (seed 001 §3-1, §3-3): the multibody has n_j one-degree-of-
freedom joints whose variables f_i are functions of n_q generalized coordinates. The kinematics and
dynamics need f, its Jacobian ``J[i, :] = ∇f_iᵀ`` and the Hessians ``H[i] = ∂²f_i/∂q²``.

Three kinds of map live here:

* explicit maps (:class:`LinearMap`, :class:`ExplicitMap`): a measured rhythm f(q) in closed form;
* :class:`ImplicitMap`: the holonomic constraints ``g(f, q) = 0`` of closed kinematic loops, solved
  by Newton's method inside JAX with derivatives by the implicit function theorem (§3-3);
* :class:`PremodelMap` (built by :func:`premodel`): the seed's pre-modeling, a spline fit of any map
  sampled over a grid of q.

:func:`joint_gradients` and :func:`joint_hessians` compute ∇f and H by four selectable routes:
``"autodiff"``, ``"projection"`` (the analytical projection method, Eqs. 101–120), ``"molecule"``
(central differences on the computational molecule of Fig. 2) and ``"premodel"``.

Extension point: subclass :class:`AbstractJointMap` and implement ``__call__``; the derivatives
default to forward-mode autodiff, and a subclass may override :meth:`AbstractJointMap.derivatives`
with something cheaper or exact in closed form.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import interpax
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Bool, Float

__all__ = [
    "AbstractJointMap",
    "LinearMap",
    "ExplicitMap",
    "identity_map",
    "ImplicitMap",
    "ImplicitSolution",
    "PremodelMap",
    "premodel",
    "joint_values",
    "joint_gradients",
    "joint_hessians",
    "projection_derivatives",
    "molecule_derivatives",
    "projection_solve",
    "METHODS",
]


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
        return self.A @ q + self.b

    def derivatives(self, q):
        H = jnp.zeros((self.nj, self.nq, self.nq), dtype=self.A.dtype)
        return self(q), self.A, H

    def jacobian(self, q):
        return self.A

    def hessian(self, q):
        return jnp.zeros((self.nj, self.nq, self.nq), dtype=self.A.dtype)


def identity_map(n: int) -> LinearMap:
    """``f(q) = q``: one coordinate per joint (an open chain or tree)."""
    return LinearMap(np.eye(n))


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
    :class:`PremodelMap` of this one built by continuation), or the constant reference assembly
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
        else:
            x = self.reference
        return jax.lax.stop_gradient(jnp.broadcast_to(x, (self.m,)).astype(jnp.result_type(q)))

    def _newton(self, q, x0):
        """Fixed-count Newton iterations; returns the iterate, residual and singularity flag.

        A ``fori_loop`` with a static trip count: one traced body however many iterations, so
        compile time stays small under nested differentiation.
        """
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


class PremodelMap(AbstractJointMap):
    """A joint map fitted to samples of another one over a box of q (seed §3-3, pre-modeling).

    1 DOF: a not-a-knot cubic spline per joint (``interpax.CubicSpline``, error O(h⁴) in f, O(h³)
    in ∇f, O(h²) in H). 2 DOF: a tensor-product C² cubic spline (``interpax.Interpolator2D``,
    ``method="cubic2"``, natural end conditions, so O(h²) near the edges). ∇f and H are the exact
    derivatives of the fit. Built by :func:`premodel`.

    Attributes:
        spline: the interpax interpolator (pytree; knot values are traced leaves).
        lower, upper: static bounds of the fitted box per coordinate.
        extrapolate: static; outside the box, evaluate the end polynomials (``True``, e.g. for a
            warm start) or raise through ``equinox.error_if`` (``False``).
    """

    spline: Any
    lower: tuple[float, ...] = eqx.field(static=True)
    upper: tuple[float, ...] = eqx.field(static=True)
    extrapolate: bool = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)

    def __init__(self, spline, lower, upper, nj: int, extrapolate: bool = False):
        self.spline = spline
        self.lower = tuple(float(v) for v in lower)
        self.upper = tuple(float(v) for v in upper)
        self.nq = len(self.lower)
        self.nj = int(nj)
        self.extrapolate = bool(extrapolate)

    def _check(self, q):
        if self.extrapolate:
            return q
        lo, hi = jnp.asarray(self.lower), jnp.asarray(self.upper)
        slack = 1e-12 * (1.0 + jnp.abs(hi - lo))
        return eqx.error_if(
            q,
            jnp.any((q < lo - slack) | (q > hi + slack)),
            f"PremodelMap: q outside the pre-modeled box lower={self.lower}, upper={self.upper}",
        )

    def _eval(self, q, d):
        if self.nq == 1:
            return self.spline(q[0], nu=d[0])
        return self.spline(q[0], q[1], dx=d[0], dy=d[1])

    def __call__(self, q):
        q = self._check(jnp.asarray(q))
        return self._eval(q, (0,) * self.nq)

    def derivatives(self, q):
        q = self._check(jnp.asarray(q))
        f = self._eval(q, (0,) * self.nq)
        if self.nq == 1:
            J = self._eval(q, (1,))[:, None]
            H = self._eval(q, (2,))[:, None, None]
            return f, J, H
        J = jnp.stack([self._eval(q, (1, 0)), self._eval(q, (0, 1))], axis=1)
        hxy = self._eval(q, (1, 1))
        H = jnp.stack(
            [
                jnp.stack([self._eval(q, (2, 0)), hxy], -1),
                jnp.stack([hxy, self._eval(q, (0, 2))], -1),
            ],
            -2,
        )
        return f, J, H

    def jacobian(self, q):
        return self.derivatives(q)[1]

    def hessian(self, q):
        return self.derivatives(q)[2]


def _continuation(solve_at, qs, x0):
    """Solve along the rows of ``qs`` (N, nq) outward from the middle, each from its neighbour."""
    c = qs.shape[0] // 2

    def run(seq, x):
        def step(x, qk):
            sol = solve_at(qk, x)
            return sol.f, sol

        return jax.lax.scan(step, x, seq)[1]

    fwd = run(qs[c:], x0)
    bwd = run(qs[: c + 1][::-1], x0)
    return jax.tree_util.tree_map(lambda b, f: jnp.concatenate([b[::-1][:-1], f]), bwd, fwd)


def _sample(joint_map, axes):
    """Joint values on the grid spanned by ``axes`` (shape (n0, [n1,] nj)), checked for failure."""
    grids = np.meshgrid(*axes, indexing="ij")
    pts = np.stack([g.ravel() for g in grids], -1)
    if isinstance(joint_map, ImplicitMap):
        # neighbours are a grid step apart, farther than the map's own warm start may be
        mp = joint_map.replace(iterations=max(joint_map.iterations, 12))
        dep = np.asarray(mp.dependent)

        def solve_at(qk, x):
            return mp.solve(qk, x[dep])

        if len(axes) == 1:
            q0 = jnp.asarray(axes[0])[:, None]
            sol = jax.jit(
                lambda: _continuation(
                    solve_at, q0, mp.assemble(mp.guess(q0[len(q0) // 2]), q0[len(q0) // 2])
                )
            )()
        else:
            a0, a1 = jnp.asarray(axes[0]), jnp.asarray(axes[1])
            c1 = a1[len(a1) // 2]

            @jax.jit
            def sweep():
                row_q = jnp.stack([a0, jnp.full_like(a0, c1)], -1)
                qc = row_q[len(a0) // 2]
                row = _continuation(solve_at, row_q, mp.assemble(mp.guess(qc), qc))

                def column(q0i, f_start):
                    col_q = jnp.stack([jnp.full_like(a1, q0i), a1], -1)
                    return _continuation(solve_at, col_q, f_start)

                return jax.vmap(column)(a0, row.f)

            sol = sweep()
        F = np.asarray(sol.f).reshape(*(len(a) for a in axes), mp.nj)
        ok = np.asarray(sol.converged).reshape(F.shape[:-1]) & ~np.asarray(sol.singular).reshape(
            F.shape[:-1]
        )
        if not ok.all():
            bad = pts[np.flatnonzero(~ok.ravel())[0]]
            raise ValueError(
                f"premodel: the constraints could not be solved at q = {bad.tolist()} "
                f"({(~ok).sum()} of {ok.size} grid points failed); shrink the ranges to the "
                "mechanism's assembly range"
            )
        return F
    F = np.asarray(jax.jit(jax.vmap(joint_map))(jnp.asarray(pts)))
    if not np.all(np.isfinite(F)):
        raise ValueError("premodel: the joint map returned non-finite values on the grid")
    return F.reshape(*(len(a) for a in axes), joint_map.nj)


def premodel(
    joint_map: AbstractJointMap,
    ranges: Sequence[tuple[float, float]],
    n: int | Sequence[int] = 101,
    *,
    extrapolate: bool = False,
) -> PremodelMap:
    """Sweep q over ``ranges``, solve, and fit splines: the seed's pre-modeling of f(q).

    An :class:`ImplicitMap` is solved by continuation (each grid point warm-started from its
    neighbour, outward from the middle of the box, the middle from the map's own warm start), so the
    fit follows one assembly branch. Any other map is simply evaluated.

    Args:
        joint_map: the map to sample (nq = 1 or 2).
        ranges: ``[(lo, hi)]`` per coordinate (rad or m).
        n: knots per coordinate (int or one per coordinate); spacing h = (hi − lo)/(n − 1).
        extrapolate: see :class:`PremodelMap`.

    Raises:
        ValueError: for nq > 2, bad ranges, or a grid point where the constraints have no solution.
    """
    nq = joint_map.nq
    if nq not in (1, 2):
        raise ValueError(f"premodel: supports nq = 1 or 2 (splines); this map has nq = {nq}")
    ranges = [tuple(float(v) for v in r) for r in ranges]
    if len(ranges) != nq or any(len(r) != 2 or not r[0] < r[1] for r in ranges):
        raise ValueError(f"premodel: need {nq} ranges (lo, hi) with lo < hi, got {ranges}")
    ns = [int(n)] * nq if np.isscalar(n) else [int(v) for v in n]
    if len(ns) != nq or min(ns) < 4:
        raise ValueError(f"premodel: need at least 4 knots per coordinate, got {n}")
    axes = [np.linspace(lo, hi, k) for (lo, hi), k in zip(ranges, ns, strict=True)]
    F = jnp.asarray(_sample(joint_map, axes))
    if nq == 1:
        spline = interpax.CubicSpline(
            jnp.asarray(axes[0]), F, axis=0, bc_type="not-a-knot", extrapolate=True
        )
    else:
        spline = interpax.Interpolator2D(
            jnp.asarray(axes[0]), jnp.asarray(axes[1]), F, method="cubic2", extrap=True
        )
    return PremodelMap(
        spline, [r[0] for r in ranges], [r[1] for r in ranges], joint_map.nj, extrapolate
    )


# -------------------------------------------------------------------------------------------------
# ∇f and H four ways
# -------------------------------------------------------------------------------------------------

METHODS = ("autodiff", "projection", "molecule", "premodel")


def _joint_map(model_or_map) -> AbstractJointMap:
    jm = getattr(model_or_map, "joint_map", model_or_map)
    if not isinstance(jm, AbstractJointMap):
        raise TypeError(f"expected a jaxmb Model or joint map, got {type(model_or_map).__name__}")
    return jm


def joint_values(model, q: Float[Array, " nq"]) -> Float[Array, " nj"]:
    """f(q), shape (nj,) (rad / m); ``model`` is a :class:`~jaxmb.model.Model` or a joint map."""
    return _joint_map(model)(jnp.asarray(q))


def projection_solve(gbar: Float[Array, "m m"], rhs: Float[Array, "m k"]) -> Float[Array, "m k"]:
    """Solve ``Σ_j ḡ_j ⊗ x_j = vec-stacked rhs`` by the projection elimination of Eqs. 105–119.

    ``gbar[:, j] = ḡ_j`` (Eq. 104) and ``rhs`` is the (m·k) right-hand side reshaped to (m, k)
    (row a holds the k entries multiplying row a of the ḡ's): for ∇f, ``rhs = −∂G/∂q`` (k = nq);
    for H, ``rhs = Γ`` (k = nq²). The projectors ``γ_{m+1} = I``,
    ``γ_i = γ_{i+1} σ_i = γ_{i+1} − u_i u_iᵀ/‖u_i‖²`` with ``u_i = γ_{i+1} ḡ_i`` (Eqs. 116–117;
    ``γ_{i+1}`` is symmetric and idempotent, which gives this form) annihilate ḡ_i, …, ḡ_m, and
    Eq. 118 gives ``x_i = u_iᵀ (rhs − η^{(i−1)}) / ‖u_i‖²`` with ``η^{(i)} = η^{(i−1)} + ḡ_i x_iᵀ``
    (Eq. 119), where ``(ḡᵀγ ⊗ I_k)`` acting on an (m·k) vector is ``ḡᵀγ`` acting on its (m, k)
    reshape. A vanishing ‖u_i‖ (ḡ_i in the span of ḡ_{i+1..m}: singular ∂G/∂f) raises.
    """
    m = gbar.shape[0]
    eye = jnp.eye(m, dtype=gbar.dtype)
    gammas = [None] * (m + 2)
    gammas[m + 1] = eye
    us, norms = [None] * (m + 1), [None] * (m + 1)
    bad = jnp.zeros((), dtype=bool)
    for i in range(m, 0, -1):
        g_i = gbar[:, i - 1]
        u = gammas[i + 1] @ g_i
        nu = u @ u
        bad = bad | ~(nu > 1e-24 * jnp.maximum(g_i @ g_i, jnp.finfo(gbar.dtype).tiny))
        us[i], norms[i] = u, nu
        gammas[i] = gammas[i + 1] - jnp.outer(u, u) / nu
    eta = jnp.zeros_like(rhs)
    xs = []
    for i in range(1, m + 1):
        x_i = us[i] @ (rhs - eta) / norms[i]
        eta = eta + jnp.outer(gbar[:, i - 1], x_i)
        xs.append(x_i)
    return eqx.error_if(
        jnp.stack(xs),
        bad,
        "projection method: ∂G/∂f is singular (a column ḡ_i lies in the span of the later "
        "ones); the configuration is singular",
    )


def projection_derivatives(joint_map: AbstractJointMap, q: Float[Array, " nq"]):
    """``(f, J, H)`` by the analytical projection method (seed Eqs. 101–120).

    For an :class:`ImplicitMap` with dependent variables x = f_dep and G(x, q) = g (m,):

    * Eq. 102: ``Σ_j ḡ_j ⊗ ∇f_j = −∂G/∂q``, ḡ_j = ∂G/∂x_j (partials with the independent joints
      substituted, so ∂G/∂q includes their chain rule) — solved by :func:`projection_solve`.
    * Eq. 120, derived here. Differentiate Eq. 102 once more with respect to q (Theorem 3: the
      derivative of ``ḡ_j ⊗ ∇f_j`` is ``(∂ḡ_j/∂q) ⊗ ∇f_j`` rearranged plus ``ḡ_j ⊗ vec(H_j)``;
      ``∂∇f_j/∂q = vec(H_j)`` because H_j is symmetric). The total derivative of ḡ_j is
      ``dḡ_j/dq_l = Σ_s ∂²G/∂x_j∂x_s ∇f_s[l] + ∂²G/∂x_j∂q_l``, and that of ∂G/∂q_k is
      ``Σ_j ∂²G/∂q_k∂x_j ∇f_j[l] + ∂²G/∂q_k∂q_l``. Collecting everything that does not contain H,

          Σ_j ḡ_j ⊗ vec(H_j) = Γ,
          Γ[a, k, l] = −( Σ_{j,s} G_a,x_j x_s ∇f_j[k] ∇f_s[l] + Σ_j G_a,x_j q_l ∇f_j[k]
                         + Σ_j G_a,q_k x_j ∇f_j[l] + G_a,q_k q_l ),

      flattened row-major over (k, l) into the (m·nq²) vector of Definition 1; in Kronecker form
      ``Γ = −[Σ_j Σ_s ∂²G/∂x_j∂x_s ⊗ ∇f_j ⊗ ∇f_s + Σ_j (∂ḡ_j/∂q ⊗ ∇f_j + U(∂ḡ_j/∂q ⊗ ∇f_j))
      + ∂²G/∂q²]`` with U the commutation of the two q slots. It has the same structure as
      Eq. 102, so :func:`projection_solve` gives vec(H_j) with Γ as the right-hand side.

    The second partials of G are exact (autodiff of the constraint function, not of the solve).
    For an explicit map the "constraints" ``f − φ(q) = 0`` have ḡ_j = e_j, and the method reduces to
    differentiating φ.
    """
    q = jnp.asarray(q)
    if not isinstance(joint_map, ImplicitMap):
        return joint_map(q), jax.jacfwd(joint_map)(q), jax.hessian(joint_map)(q)
    mp = joint_map
    x = mp._solve_dependent(q)
    G = mp.residual
    gbar = jax.jacfwd(G, argnums=0)(x, q)  # (m, m), column j = ḡ_j
    Gq = jax.jacfwd(G, argnums=1)(x, q)  # (m, nq) = ∂G/∂q reshaped
    Jd = projection_solve(gbar, -Gq)
    Gxx = jax.jacfwd(jax.jacfwd(G, argnums=0), argnums=0)(x, q)  # (m, m, m)
    Gxq = jax.jacfwd(jax.jacfwd(G, argnums=0), argnums=1)(x, q)  # (m, m, nq)
    Gqq = jax.jacfwd(jax.jacfwd(G, argnums=1), argnums=1)(x, q)  # (m, nq, nq)
    Gamma = -(
        jnp.einsum("ajs,jk,sl->akl", Gxx, Jd, Jd)
        + jnp.einsum("ajl,jk->akl", Gxq, Jd)
        + jnp.einsum("ajk,jl->akl", Gxq, Jd)
        + Gqq
    )
    Hd = projection_solve(gbar, Gamma.reshape(mp.m, -1)).reshape(mp.m, mp.nq, mp.nq)
    dep = np.asarray(mp.dependent)
    f = mp.assemble(x, q)
    J = jnp.zeros((mp.nj, mp.nq), f.dtype).at[dep].set(Jd)
    H = jnp.zeros((mp.nj, mp.nq, mp.nq), f.dtype).at[dep].set(Hd)
    ind = mp.independent_joints
    if ind:
        ind = np.asarray(ind)
        J = J.at[ind].set(jax.jacfwd(mp._independent_values)(q))
        H = H.at[ind].set(jax.hessian(mp._independent_values)(q))
    return f, J, H


def molecule_derivatives(joint_map: AbstractJointMap, q: Float[Array, " nq"], h: float = 1e-4):
    """``(f, J, H)`` by central differences on the computational molecule of Fig. 2.

    The map (for an :class:`ImplicitMap`: the constraints, re-solved from the warm start) is
    evaluated at the 3^nq points ``q + h·s``, s ∈ {−1, 0, 1}^nq (the 3×3 molecule of Fig. 2 for two
    coordinates), and

        ∇f[k] = (f(q + h e_k) − f(q − h e_k)) / 2h,
        H[k,k] = (f(q + h e_k) − 2 f(q) + f(q − h e_k)) / h²,
        H[k,l] = (f(q+he_k+he_l) − f(q+he_k−he_l) − f(q−he_k+he_l) + f(q−he_k−he_l)) / 4h².

    Truncation error O(h²); round-off ~ ε·|f|/h in ∇f and ~ ε·|f|/h² in H, so the best h is near
    ε^{1/3} for ∇f and ε^{1/4} for H (float64: 1e-5 and 1e-4). ``h`` in the units of q.
    """
    q = jnp.asarray(q)
    nq = q.shape[0]
    offsets = np.array(np.meshgrid(*([[-1, 0, 1]] * nq), indexing="ij")).reshape(nq, -1).T
    F = jax.vmap(joint_map)(q + h * jnp.asarray(offsets, q.dtype))
    F = F.reshape((3,) * nq + (-1,))

    def at(**idx):
        sel = [1] * nq
        for k, v in idx.items():
            sel[int(k[1:])] = v
        return F[tuple(sel)]

    f0 = F[(1,) * nq]
    J = jnp.stack([(at(**{f"k{k}": 2}) - at(**{f"k{k}": 0})) / (2 * h) for k in range(nq)], 1)
    rows = []
    for k in range(nq):
        row = []
        for l in range(nq):
            if k == l:
                row.append((at(**{f"k{k}": 2}) - 2 * f0 + at(**{f"k{k}": 0})) / h**2)
            else:
                pp = at(**{f"k{k}": 2, f"k{l}": 2})
                pm = at(**{f"k{k}": 2, f"k{l}": 0})
                mp = at(**{f"k{k}": 0, f"k{l}": 2})
                mm = at(**{f"k{k}": 0, f"k{l}": 0})
                row.append((pp - pm - mp + mm) / (4 * h**2))
        rows.append(jnp.stack(row, -1))
    return f0, J, jnp.stack(rows, -2)


def _derivatives(model, q, method: str, h: float, premodel_map: PremodelMap | None):
    jm = _joint_map(model)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if method == "premodel" and premodel_map is None and not isinstance(jm, PremodelMap):
        raise ValueError(
            'method="premodel" needs premodel_map=premodel(model.joint_map, ranges, n) '
            "(building the fit is a one-off sweep, not part of each evaluation)"
        )
    h = jnp.asarray(h, dtype=jnp.result_type(float)) if method == "molecule" else None
    return _derivatives_impl(jm, jnp.asarray(q), method, h, premodel_map)


@eqx.filter_jit
def _derivatives_impl(jm, q, method, h, premodel_map):
    if method == "autodiff":
        return jm(q), jax.jacfwd(jm)(q), jax.jacfwd(jax.jacfwd(jm))(q)
    if method == "projection":
        return projection_derivatives(jm, q)
    if method == "molecule":
        return molecule_derivatives(jm, q, h)
    return (jm if premodel_map is None else premodel_map).derivatives(q)


def joint_gradients(
    model,
    q: Float[Array, " nq"],
    method: str = "autodiff",
    *,
    h: float = 1e-5,
    premodel_map: PremodelMap | None = None,
) -> Float[Array, "nj nq"]:
    """``J[i, k] = ∂f_i/∂q_k`` (rows ∇f_iᵀ), shape (nj, nq), by the chosen route.

    Args:
        model: a :class:`~jaxmb.model.Model` or a joint map.
        q: (nq,) generalized coordinates.
        method: ``"autodiff"`` (jacfwd of f; for an ImplicitMap the implicit-function JVP),
            ``"projection"`` (:func:`projection_derivatives`), ``"molecule"``
            (:func:`molecule_derivatives` with step ``h``), or ``"premodel"`` (derivative of the fit
            ``premodel_map``, or of the model's own map if it is a :class:`PremodelMap`).
    """
    return _derivatives(model, q, method, h, premodel_map)[1]


def joint_hessians(
    model,
    q: Float[Array, " nq"],
    method: str = "autodiff",
    *,
    h: float = 1e-4,
    premodel_map: PremodelMap | None = None,
) -> Float[Array, "nj nq nq"]:
    """``H[i, k, l] = ∂²f_i/∂q_k∂q_l``, shape (nj, nq, nq); methods as :func:`joint_gradients`."""
    return _derivatives(model, q, method, h, premodel_map)[2]
