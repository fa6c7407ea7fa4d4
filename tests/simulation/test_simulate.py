"""simulate / simulate_batch: solvers against an independent integrator, saving, failures, batching.

The referee is scipy's DOP853 at rtol = atol = 1e-12 on the same right-hand side (a different
integrator implementation); the diffrax solutions at rtol = atol = 1e-10 must agree to 1e-7.
"""

from __future__ import annotations

import importlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import jaxmb as mb
from jaxmb import dynamics as dy
from jaxmb.models.chain import chain

# jaxmb.simulate is the public function; the module by its full name
sim = importlib.import_module("jaxmb.simulation.driver")

T1 = 0.5
TS = np.linspace(0.0, T1, 6)


@pytest.fixture(scope="module")
def pendulum():
    return chain(2)


@pytest.fixture(scope="module")
def reference(pendulum):
    model = pendulum
    fd = jax.jit(lambda q, qd: dy.forward_dynamics(model, q, qd))

    def rhs(t, y):
        q, qd = jnp.asarray(y[:2]), jnp.asarray(y[2:])
        return np.concatenate([y[2:], np.asarray(fd(q, qd))])

    y0 = np.array([0.9, -0.4, 0.0, 0.5])
    sol = solve_ivp(rhs, (0.0, T1), y0, method="DOP853", rtol=1e-12, atol=1e-12, t_eval=TS)
    return y0, sol.y.T


@pytest.mark.parametrize("solver", sim.SOLVERS)
def test_solvers_match_reference(pendulum, reference, solver):
    y0, ref = reference
    tr = sim.simulate(pendulum, y0[:2], y0[2:], T1, TS, solver=solver, rtol=1e-10, atol=1e-10)
    assert tr.q.shape == (6, 2) and tr.qd.shape == (6, 2) and tr.ts.shape == (6,)
    np.testing.assert_allclose(tr.ts, TS)
    np.testing.assert_allclose(tr.q, ref[:, :2], rtol=0, atol=1e-7)
    np.testing.assert_allclose(tr.qd, ref[:, 2:], rtol=0, atol=1e-7)
    assert bool(tr.successful)
    s = tr.stats
    assert int(s["num_steps"]) == int(s["num_accepted_steps"]) + int(s["num_rejected_steps"])
    assert int(s["num_accepted_steps"]) > 0
    np.testing.assert_allclose(tr.q_final, ref[-1, :2], atol=1e-7)


def test_default_saves_t0_and_t1_and_tau_forms(pendulum):
    q0, qd0 = jnp.array([0.2, 0.1]), jnp.zeros(2)
    tr = sim.simulate(pendulum, q0, qd0, 0.2)
    np.testing.assert_allclose(tr.ts, [0.0, 0.2])
    np.testing.assert_allclose(tr.q[0], q0)
    # a constant tau array and the same tau as a callable give the same motion
    tau = jnp.array([0.3, -0.1])
    a = sim.simulate(pendulum, q0, qd0, 0.2, tau=tau)
    b = sim.simulate(pendulum, q0, qd0, 0.2, tau=lambda t, q, qd: tau)
    np.testing.assert_allclose(a.q, b.q, atol=1e-14)
    assert not np.allclose(a.q[-1], tr.q[-1])


def test_max_steps_failure_is_reported(pendulum):
    ts = jnp.linspace(0.0, 5.0, 3)
    q0 = jnp.array([0.9, 0.1])
    with pytest.raises(sim.SimulationError, match=r"maximum number of steps \(max_steps=5\)"):
        sim.simulate(pendulum, q0, jnp.zeros(2), 5.0, ts, max_steps=5)
    tr = sim.simulate(pendulum, q0, jnp.zeros(2), 5.0, ts, max_steps=5, throw=False)
    assert not bool(tr.successful)
    assert 0.0 < float(tr.t_final) < 5.0
    assert np.isinf(np.asarray(tr.ts)[-1])  # output times not reached
    assert np.all(np.isfinite(np.asarray(tr.q_final)))


def _blowup_model(kind):
    """A pendulum whose joint map (kind='map') or applied force (kind='force') fails at q > 0.5."""
    if kind == "map":
        fn = lambda q, p: jnp.where(q > 0.5, jnp.nan, q)  # "no assembly" past q = 0.5
        jm = mb.ExplicitMap(fn, 1, 1)
        forces = ()
    else:
        jm = None

        class Broken(mb.forces.AbstractForce):
            def generalized_force(self, model, q, qd, t):
                return jnp.where(q > 0.5, jnp.nan, 0.0)

        forces = (Broken(),)
    body = mb.Body("bob", axis=(0, 0, 1), mass=1.0, com=(0.5, 0, 0), inertia=np.diag([0.01] * 3))
    return mb.build_model([body], jm, gravity=(0.0, 0.0, 0.0), forces=forces)


def test_joint_map_failure_is_named():
    model = _blowup_model("map")
    with pytest.raises(sim.SimulationError, match="joint map did not converge") as e:
        sim.simulate(model, jnp.array([0.0]), jnp.array([1.0]), 2.0, max_steps=2000)
    assert "step-size collapse" in str(e.value) or "maximum number of steps" in str(e.value)
    assert "t = 0.5" in str(e.value)


def test_nonfinite_right_hand_side_is_named():
    model = _blowup_model("force")
    with pytest.raises(sim.SimulationError, match="right-hand side is not finite"):
        sim.simulate(model, jnp.array([0.0]), jnp.array([1.0]), 2.0, max_steps=2000)


def test_route_is_reported_and_premodel_declined_with_its_reason(pendulum):
    """The automatic route says what ran; a premodel that does not apply is declined by name."""
    q0, qd0 = jnp.array([0.2, 0.1]), jnp.zeros(2)
    tr = sim.simulate(pendulum, q0, qd0, 0.2)
    assert tr.stats["route"] == "exact"
    assert "nq = 2" in tr.stats["premodel_declined"]
    assert sim.simulate(pendulum, q0, qd0, 0.2, route="exact").stats["route"] == "exact"
    with pytest.raises(ValueError, match="route='premodel'.*nq = 2"):
        sim.simulate(pendulum, q0, qd0, 0.2, route="premodel")
    with pytest.raises(ValueError, match="unknown route 'fast'"):
        sim.simulate(pendulum, q0, qd0, 0.2, route="fast")


def test_bad_arguments(pendulum):
    with pytest.raises(ValueError, match="unknown solver 'euler'"):
        sim.simulate(pendulum, jnp.zeros(2), jnp.zeros(2), 1.0, solver="euler")
    with pytest.raises(ValueError, match="initial state must have shape"):
        sim.simulate(pendulum, jnp.zeros(3), jnp.zeros(2), 1.0)
    with pytest.raises(ValueError, match="t0 < t1"):
        sim.simulate(pendulum, jnp.zeros(2), jnp.zeros(2), -1.0)
    with pytest.raises(ValueError, match="ts must be non-decreasing within"):
        sim.simulate(pendulum, jnp.zeros(2), jnp.zeros(2), 1.0, ts=jnp.array([0.0, 2.0]))


def test_repeated_call_checks_the_state_every_time(pendulum):
    """Times and tolerances given as plain numbers are checked once per value (kept for later
    calls); the initial state is checked on every call, and a bad tolerance is refused even after
    good calls with the same times."""
    q0, qd0 = jnp.array([0.2, 0.1]), jnp.zeros(2)
    a = sim.simulate(pendulum, q0, qd0, 0.3, rtol=1e-7, atol=1e-7)
    b = sim.simulate(pendulum, q0, qd0, 0.3, rtol=1e-7, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(a.q), np.asarray(b.q))
    with pytest.raises(ValueError, match=r"q0\[1\] .* = nan is not finite"):
        sim.simulate(pendulum, q0.at[1].set(jnp.nan), qd0, 0.3, rtol=1e-7, atol=1e-7)
    with pytest.raises(ValueError, match=r"qd0\[0\] .* = inf is not finite"):
        sim.simulate(pendulum, q0, np.array([np.inf, 0.0]), 0.3, rtol=1e-7, atol=1e-7)
    with pytest.raises(ValueError, match="rtol must be a positive number, got -1e-07"):
        sim.simulate(pendulum, q0, qd0, 0.3, rtol=-1e-7, atol=1e-7)
    # the kept set-up serves the next good call, and a state traced by the user's jit
    c = sim.simulate(pendulum, q0, qd0, 0.3, rtol=1e-7, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(a.q), np.asarray(c.q))
    traced = jax.jit(
        lambda q: sim.simulate(pendulum, q, qd0, 0.3, rtol=1e-7, atol=1e-7, throw=False).q_final
    )
    np.testing.assert_allclose(np.asarray(traced(q0)), np.asarray(a.q_final), rtol=0, atol=1e-14)


def test_progress_bar_runs(pendulum, capsys):
    tr = sim.simulate(pendulum, jnp.array([0.2, 0.1]), jnp.zeros(2), 0.1, progress=True)
    assert bool(tr.successful)


def test_batch_equals_single_runs_and_compiles_once(pendulum, monkeypatch):
    rng = np.random.default_rng(0)
    q0s = jnp.asarray(rng.normal(size=(3, 2)))
    qd0s = jnp.asarray(rng.normal(size=(3, 2)))
    ts = jnp.linspace(0.0, 0.3, 4)
    traces = []
    real = sim.ode_rhs
    monkeypatch.setattr(sim, "ode_rhs", lambda *a, **k: (traces.append(1), real(*a, **k))[1])
    tr = sim.simulate_batch(pendulum, q0s, qd0s, 0.3, ts, rtol=1e-10, atol=1e-10)
    assert tr.q.shape == (3, 4, 2)
    for i in range(3):
        one = sim.simulate(pendulum, q0s[i], qd0s[i], 0.3, ts, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(tr.q[i], one.q, atol=1e-12)
    # batched models: vary the link masses; one compile for the second, different-valued batch
    masses = jnp.stack([pendulum.mass * s for s in (1.0, 1.5, 2.0)])
    batched = eqx.tree_at(lambda m: m.mass, pendulum, masses)
    nones = jax.tree_util.tree_map(lambda _: None, pendulum)
    axes = eqx.tree_at(lambda m: m.mass, nones, 0, is_leaf=lambda x: x is None)
    n0 = len(traces)
    trm = sim.simulate_batch(batched, q0s, qd0s, 0.3, ts, model_axes=axes, rtol=1e-10, atol=1e-10)
    n1 = len(traces)
    sim.simulate_batch(
        eqx.tree_at(lambda m: m.mass, pendulum, masses * 1.1),
        q0s,
        qd0s,
        0.3,
        ts,
        model_axes=axes,
        rtol=1e-10,
        atol=1e-10,
    )
    assert len(traces) == n1 > n0  # traced once for the structure, reused for new values
    for i in range(3):
        mi = eqx.tree_at(lambda m: m.mass, pendulum, masses[i])
        one = sim.simulate(mi, q0s[i], qd0s[i], 0.3, ts, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(trm.q[i], one.q, atol=1e-12)


def test_batch_failure_names_members(pendulum):
    q0s = jnp.array([[0.1, 0.0], [0.2, 0.0]])
    with pytest.raises(sim.SimulationError, match=r"2 of 2 solves failed \(indices \[0, 1\]\)"):
        sim.simulate_batch(pendulum, q0s, jnp.zeros((2, 2)), 5.0, max_steps=4)


def test_simulation_is_differentiable(pendulum):
    """Gradient of a final angle with respect to the initial angle, against central differences."""

    def final(q00):
        q0 = jnp.array([q00, 0.1])
        return sim.simulate(pendulum, q0, jnp.zeros(2), 0.2, rtol=1e-10, atol=1e-10).q[-1, 0]

    g = jax.grad(final)(0.4)
    h = 1e-5
    np.testing.assert_allclose(g, (final(0.4 + h) - final(0.4 - h)) / (2 * h), rtol=1e-5)


def test_public_name_is_the_function(pendulum):
    q0 = jnp.array([0.2, 0.1])
    a = mb.simulate(pendulum, q0, jnp.zeros(2), 0.1)
    b = sim.simulate(pendulum, q0, jnp.zeros(2), 0.1)
    np.testing.assert_array_equal(a.q, b.q)
