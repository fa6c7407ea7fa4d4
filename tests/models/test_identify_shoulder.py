"""Identify the shoulder rhythm's elevation coefficients from noisy clavicle and scapula angles.

Issue #8 item 4. Synthetic experiment: 200 arm poses (plane of elevation 0–120°, elevation
10–150°), the five clavicle/scapula joint variables of ``shoulder("degroot")`` at those poses with
Gaussian noise σ = 0.5° added (palpation-level noise is several degrees; this is a well-measured
subject). The five elevation slopes c are fitted by L-BFGS (optax) on the negative log
likelihood, differentiating through the model's joint map (the coefficients are traced leaves of
the model pytree); intercepts, plane slopes and rest weights keep their published values.

Referees: the same data solved as a linear least-squares problem in numpy (the map is affine in
c), and the true values within four standard errors.

The static fit drives optax directly. ``test_identify_rhythm_from_a_simulated_swing`` does the
dynamic version through ``jaxmb.identify``: the arm swings under gravity, the measured signals are
the clavicle and scapula angles along the simulated trajectory (``observe`` maps the fitted
model's coordinates through its own joint map), and the coefficients change the dynamics too.
"""

from __future__ import annotations

import importlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

# the module, not the function jaxmb.models.shoulder of the same name
sh = importlib.import_module("jaxmb.models.shoulder")

SIGMA = np.radians(0.5)
N = 200
# the regressed angle -> its joint variable in the model
JOINTS = [
    sh.JOINT_VARIABLES.index(n)
    for n in ("sternoclavicular_r2", "sternoclavicular_r3", "acromioclavicular_r2",
              "acromioclavicular_r3", "acromioclavicular_r1")
]  # fmt: skip


@pytest.fixture(scope="module")
def experiment():
    rng = np.random.default_rng(8)
    q = np.column_stack(
        [
            np.radians(rng.uniform(0, 120, N)),
            np.radians(rng.uniform(10, 150, N)),
            np.radians(rng.uniform(-60, 10, N)),
        ]
    )
    model = sh.shoulder("degroot", muscles=False)
    clean = np.asarray(jax.vmap(model.joint_map)(jnp.asarray(q)))[:, JOINTS]
    return model, q, clean + SIGMA * rng.normal(size=clean.shape)


def _fit(model, q, measured, c0):
    q = jnp.asarray(q)

    def nll(c):
        m = eqx.tree_at(lambda m: m.joint_map.params.c, model, c)
        r = (jax.vmap(m.joint_map)(q)[:, JOINTS] - measured) / SIGMA
        return 0.5 * jnp.sum(r * r)

    opt = optax.lbfgs()
    vg = optax.value_and_grad_from_state(nll)

    @jax.jit
    def step(c, state):
        value, grad = vg(c, state=state)
        updates, state = opt.update(grad, state, c, value=value, grad=grad, value_fn=nll)
        return optax.apply_updates(c, updates), state, value, jnp.linalg.norm(grad)

    c, state = c0, opt.init(c0)
    history = []
    for _ in range(100):
        c_new, state, value, gnorm = step(c, state)
        history.append(float(value))
        if gnorm < 1e-9:
            break
        c = c_new
    return np.asarray(c), history


def _lstsq(model, q, measured):
    """Per angle: measured − (a + b·Hy + d·rest − zero) = c·Hz, in degrees (numpy)."""
    k = model.joint_map.params
    hy, hz = np.degrees(q[:, 0]), np.degrees(q[:, 1])
    a, b, d, rest, zero = (np.asarray(x) for x in (k.a, k.b, k.d, k.rest, k.zero))
    c, se = [], []
    for i in range(5):
        y = np.degrees(measured[:, i]) - (a[i] + b[i] * hy + d[i] * rest[i] - zero[i])
        ci = (hz @ y) / (hz @ hz)
        c.append(ci)
        se.append(np.degrees(SIGMA) / np.sqrt(hz @ hz))
    return np.array(c), np.array(se)


def test_recover_elevation_coefficients(experiment):
    model, q, measured = experiment
    true = np.asarray(model.joint_map.params.c)
    c0 = jnp.full(5, 0.1)  # a neutral start: every slope 0.1 deg/deg
    fitted, history = _fit(model, q, jnp.asarray(measured), c0)
    ref, se = _lstsq(model, q, measured)
    # the optimizer reaches the least-squares solution of the same data
    np.testing.assert_allclose(fitted, ref, rtol=0, atol=1e-9)
    # and the truth lies within four standard errors (se = 4.0e-4 deg/deg here). Measured:
    # true (−0.242, 0.123, −0.049, 0.396, 0.184), fitted (−0.24221, 0.12248, −0.04948, 0.39608,
    # 0.18340): relative errors 0.09 %, 0.43 %, 0.99 %, 0.02 %, 0.32 % — the smallest slope is
    # the hardest, its standard error alone is 0.8 % of it
    z = (fitted - true) / se
    assert np.all(np.abs(z) < 4), f"fitted {fitted}, true {true}, z {z}"
    assert np.all(np.abs(fitted - true) < 4 * se)
    assert history[-1] < history[0]
    # the residual is the noise: ½ Σ r² ≈ 5N/2 for 5N samples of unit variance
    assert history[-1] == pytest.approx(0.5 * 5 * N, rel=0.15)


@pytest.mark.slow
def test_identify_rhythm_from_a_simulated_swing():
    """Through ``jaxmb.identify``: elevation slopes from noisy clavicle/scapula angles of a swing.

    The arm (no muscles) starts raised (plane 60°, elevation 100°, rotation −30°) and swings under
    gravity for 0.4 s; 41 samples of the five regressed angles with σ = 0.5° noise. L-BFGS from
    every slope at 0.1 deg/deg. Measured (this test): every slope within 0.6 % of the truth
    (−0.24187, 0.12345, −0.04872, 0.39616, 0.18370 against −0.242, 0.123, −0.049, 0.396, 0.184),
    final loss 108.8 ≈ the noise level 102.5.
    """
    from jaxmb.simulation import Observations, identify, predict

    model = sh.shoulder("degroot", muscles=False)
    true = np.asarray(model.joint_map.params.c)
    q0 = jnp.radians(jnp.array([60.0, 100.0, -30.0]))
    ts = jnp.linspace(0.0, 0.4, 41)
    clean_obs = Observations(ts=ts, q=jnp.zeros((41, 3)), q0=q0, qd0=jnp.zeros(3))
    q_true = predict(model, clean_obs, rtol=1e-10, atol=1e-10)
    angles = np.asarray(jax.vmap(model.joint_map)(q_true))[:, JOINTS]
    rng = np.random.default_rng(3)
    data = Observations(
        ts=ts,
        q=jnp.asarray(angles + SIGMA * rng.normal(size=angles.shape)),
        q0=q0,
        qd0=jnp.zeros(3),
        noise_std=SIGMA,
    )
    start = eqx.tree_at(lambda m: m.joint_map.params.c, model, jnp.full(5, 0.1))
    res = identify(
        start,
        lambda m: m.joint_map.params.c,
        data,
        observe=lambda m, q: jax.vmap(m.joint_map)(q)[:, JOINTS],
        max_iter=60,
        rtol=1e-9,
        atol=1e-9,
    )
    fitted = np.asarray(res.params[0])
    print("true", true, "fitted", fitted, "relative error", (fitted - true) / true)
    np.testing.assert_allclose(fitted, true, rtol=0.02)
    # the residual is the noise: ½ Σ r² ≈ 5·41/2 for 205 samples of unit variance (108.8 seen)
    assert res.history["loss"][-1] == pytest.approx(0.5 * 5 * 41, rel=0.3)
    assert res.history["loss"][-1] < 1e-2 * res.history["loss"][0]
