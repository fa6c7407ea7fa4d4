"""Force sharing on arm26: torque residual below 1e-6 N·m at every feasible frame, activations equal
an independent solver (scipy SLSQP on the same QP) to 1e-4, infeasible frames reported by index."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from jaxmb import muscles as mu
from jaxmb.models.arm26 import arm26
from jaxmb.muscles import sharing


@pytest.fixture(scope="module")
def case():
    # the solver is under test, not the path geometry: arm26 without its wrap objects compiles in
    # seconds where the wrapped paths take minutes
    model = arm26()
    bare = tuple(mu.Muscle(m.name, m.points, (), m.params) for m in model.muscles.muscles)
    model = mu.with_muscles(model, bare)
    nt = 12
    t = np.linspace(0.0, 1.0, nt)
    q = np.stack([0.6 + 0.5 * np.sin(2 * t), 1.0 + 0.6 * np.sin(3 * t)], axis=1)
    qd = np.stack([np.cos(2 * t), 1.8 * np.cos(3 * t)], axis=1)
    qd[:3] = 0.0  # static frames too
    rng = np.random.default_rng(0)
    a_true = rng.uniform(0.05, 0.5, (nt, 6))
    a_true[6:9] = rng.uniform(0.5, 1.0, (3, 6))  # strong frames: bounds become active

    def tau_of(q1, qd1, a1):
        _, _, Fa, Fp, R = sharing.sharing_problem(model, q1, qd1, jnp.zeros(2))
        return R @ (Fa * a1 + Fp)

    tau = np.array(jax.jit(jax.vmap(tau_of))(q, qd, a_true))
    tau[4] *= 40.0  # far beyond what the muscles can do
    res = sharing.share_forces(model, q, qd, tau)
    return model, q, qd, tau, res


def test_infeasible_frame_is_reported(case):
    *_, res = case
    assert res.infeasible_frames.tolist() == [4]
    assert float(res.max_residual[4]) > 1.0


def test_residual_below_1e_6_at_feasible_frames(case):
    *_, res = case
    ok = np.setdiff1d(np.arange(res.activations.shape[0]), res.infeasible_frames)
    assert float(jnp.max(res.max_residual[ok])) < 1e-6
    a = np.asarray(res.activations)
    assert a.min() >= 0.0 and a.max() <= 1.0


def test_activations_equal_slsqp(case):
    model, q, qd, tau, res = case
    ok = np.setdiff1d(np.arange(q.shape[0]), res.infeasible_frames)
    worst, n_active = 0.0, 0
    problem = jax.jit(lambda *x: sharing.sharing_problem(model, *x)[:2])
    for k in ok:
        M, b = (np.asarray(x) for x in problem(q[k], qd[k], tau[k]))
        ref = scipy.optimize.minimize(
            lambda a: a @ a,
            np.full(6, 0.5),
            jac=lambda a: 2 * a,
            bounds=[(0.0, 1.0)] * 6,
            constraints=[
                {"type": "eq", "fun": lambda a, M=M, b=b: M @ a - b, "jac": lambda a, M=M: M}
            ],
            method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        assert ref.success
        worst = max(worst, float(np.abs(ref.x - np.asarray(res.activations[k])).max()))
        n_active += int(np.any(ref.x < 1e-8) or np.any(ref.x > 1 - 1e-8))
    assert worst < 1e-4
    assert n_active >= 1  # some frames exercise the bounds


def test_bad_shapes_raise():
    model = arm26()
    with pytest.raises(ValueError, match="share_forces"):
        sharing.share_forces(model, np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((2, 2)))


def test_precomputed_paths_give_the_same_solution(case):
    """Lengths and moment arms passed in (computed once elsewhere) give the activations the solver
    finds from q; mismatched shapes are named."""
    model, q, qd, tau, res = case
    L = jax.jit(jax.vmap(lambda x: mu.muscle_lengths(model, x)))(q)
    R = jax.jit(jax.vmap(lambda x: mu.moment_arms(model, x)))(q)
    pre = sharing.share_forces(model, q, qd, tau, lengths=L, moment_arms=R)
    np.testing.assert_allclose(pre.activations, res.activations, rtol=0, atol=1e-12)
    assert pre.infeasible_frames.tolist() == res.infeasible_frames.tolist()
    with pytest.raises(ValueError, match="both lengths and moment_arms"):
        sharing.share_forces(model, q, qd, tau, lengths=L)
    with pytest.raises(ValueError, match=r"moment_arms \(12, 2, 6\)"):
        sharing.share_forces(model, q, qd, tau, lengths=L, moment_arms=R[:, :1])
