"""Parameter identification: recover known parameters from noisy simulated measurements.

Synthetic experiments: simulate the true model, add Gaussian noise of 1e-3 rad to the sampled
angles, start the fit from wrong values and ask for the true values to within 1 % (the issue's
target). Andrews' squeezer: spring stiffness c0 and the mass of body K3 from β(t) alone;
a double pendulum: the second body's mass and the first link's length.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmb.model import Body, ModelError, build_model
from jaxmb.simulation import Observations, identify, predict

NOISE = 1e-3  # rad


def double_pendulum(m2=1.0, length=0.5):
    """Two links hanging along −z, both joints about x (a planar double pendulum)."""
    bodies = [
        Body("upper", None, axis=(1, 0, 0), position=(0, 0, 0), mass=1.0, com=(0, 0, -0.25),
             inertia=np.diag([0.02, 0.02, 0.002])),
        Body("lower", "upper", axis=(1, 0, 0), position=(0, 0, -length), mass=m2,
             com=(0, 0, -0.2), inertia=np.diag([0.015, 0.015, 0.002])),
    ]  # fmt: skip
    return build_model(bodies, gravity=(0, 0, -9.81), name="double_pendulum")


def noisy_observations(model, q0, qd0, ts, seed, observed=None):
    clean = Observations(ts=ts, q=jnp.zeros((ts.size, model.nq)), q0=q0, qd0=qd0)
    q = np.asarray(predict(model, clean, rtol=1e-10, atol=1e-10, max_steps=20000))
    if observed is not None:
        q = q[:, list(observed)]
    q = q + np.random.default_rng(seed).normal(0.0, NOISE, q.shape)
    return Observations(ts=ts, q=jnp.asarray(q), q0=q0, qd0=qd0, observed=observed,
                        noise_std=NOISE)  # fmt: skip


@pytest.mark.slow
def test_double_pendulum_mass_and_length_lbfgs():
    true = double_pendulum(m2=1.3, length=0.5)
    ts = jnp.linspace(0.0, 2.0, 81)
    data = noisy_observations(true, jnp.array([1.2, -0.6]), jnp.zeros(2), ts, seed=0)
    guess = double_pendulum(m2=0.9, length=0.42)
    res = identify(
        guess,
        lambda m: (m.mass, m.d),
        data,
        elements=[1, 1],  # the lower body's mass and the offset of its joint (upper link length)
        bounds=[(0.01, None), (0.05, 2.0)],
        optimizer="lbfgs",
        max_iter=60,
        gtol=1e-6,
    )
    m2, L = float(res.params[0]), float(res.params[1])
    assert abs(m2 / 1.3 - 1) < 0.01, (m2, res.history["loss"][-5:])
    assert abs(L / 0.5 - 1) < 0.01, L
    assert res.history["loss"][-1] < res.history["loss"][0]
    assert float(res.model.mass[1]) == m2 and float(res.model.mass[0]) == 1.0
    print(f"double pendulum: m2 {m2:.6f} (true 1.3), L {L:.6f} (true 0.5), {res.iterations} it")


@pytest.mark.parametrize(
    "p0, bound",
    [(2.5, (1.0, 4.0)), (2.5, (1.0, None)), (2.5, (None, 4.0)), (-3.0, None), (4.5e6, (0.0, None))],
)
def test_bijective_transforms_round_trip_and_respect_bounds(p0, bound):
    from jaxmb.simulation.identify import bound_transform

    t = bound_transform(jnp.array([p0]), bound, 0)
    u0 = t.inverse(jnp.array([p0]))
    np.testing.assert_allclose(t.forward(u0), [p0], rtol=1e-14)
    assert abs(float(u0[0])) < 2.0  # scaled to order one
    for u in (-30.0, -3.0, 0.0, 3.0, 30.0):
        v = float(t.forward(jnp.array([u]))[0])
        if bound is not None and bound[0] is not None:
            assert v >= bound[0]
        if bound is not None and bound[1] is not None:
            assert v <= bound[1]


def test_identify_rejects_bad_input():
    m = double_pendulum()
    ts = jnp.linspace(0, 1, 5)
    data = Observations(ts=ts, q=jnp.zeros((5, 2)), q0=jnp.zeros(2), qd0=jnp.zeros(2))
    with pytest.raises(ModelError, match="not strictly inside"):
        identify(m, lambda m: m.mass, data, bounds=[(2.0, 3.0)])
    with pytest.raises(ModelError, match="out of range"):
        identify(m, lambda m: m.mass, data, elements=[5])
    with pytest.raises(ModelError, match="expected \\(5, 1\\)"):
        identify(m, lambda m: m.mass, Observations(ts, jnp.zeros((5, 2)), jnp.zeros(2),
                                                   jnp.zeros(2), observed=(1,)))  # fmt: skip
    with pytest.raises(ModelError, match="2 bounds"):
        identify(m, lambda m: m.mass, data, bounds=[None, None])
    with pytest.raises(ValueError, match="optimizer"):
        identify(m, lambda m: m.mass, data, optimizer="sgd")


@pytest.mark.slow
def test_andrews_spring_stiffness_and_body_mass_lbfgs():
    """Recover c0 and the mass of K3 from β(t) of Andrews' squeezer (0.03 s, 1e-3 rad noise)."""
    from jaxmb.models import andrews as an

    true = an.andrews_squeezer()
    k3 = true.body_names.index("K3")
    c0, m3 = float(true.forces[0].stiffness), float(true.mass[k3])
    ts = jnp.linspace(0.0, 0.03, 31)
    q0, qd0 = jnp.array([an.BETA0]), jnp.zeros(1)
    data = noisy_observations(true, q0, qd0, ts, seed=1)
    guess = eqx.tree_at(
        lambda m: (m.forces[0].stiffness, m.mass), true, (0.9 * c0, true.mass.at[k3].set(1.1 * m3))
    )
    res = identify(
        guess,
        lambda m: (m.forces[0].stiffness, m.mass),
        data,
        elements=[None, k3],
        bounds=[(0.0, None), (0.0, None)],
        optimizer="lbfgs",
        max_iter=40,
        gtol=1e-6,
        rtol=1e-9,
        atol=1e-9,
    )
    c0_fit, m3_fit = float(res.params[0]), float(res.params[1])
    print(f"andrews: c0 {c0_fit:.6g} (true {c0:.6g}), m3 {m3_fit:.6g} (true {m3:.6g})")
    assert abs(c0_fit / c0 - 1) < 0.01
    assert abs(m3_fit / m3 - 1) < 0.01


def test_identify_names_bad_data_and_settings():
    """Issue 22: a gap (NaN) in the measurements, a wrongly sized or non-finite initial state and
    non-physical optimizer settings are refused before anything compiles, each named."""
    m = double_pendulum()
    ts = jnp.linspace(0, 1, 5)
    z = jnp.zeros(2)

    def data(q=None, q0=z, qd0=z, noise=1.0):
        q = jnp.zeros((5, 2)) if q is None else q
        return Observations(ts=ts, q=q, q0=q0, qd0=qd0, noise_std=noise)

    cases = [
        (dict(data=data(q=jnp.zeros((5, 2)).at[3, 1].set(jnp.nan))),
         ModelError, r"data.q\[3, 1\] \(t = 0.75 s\) = nan is not finite"),
        (dict(data=data(q0=jnp.zeros(3))), ModelError, r"data.q0 must have shape \(nq,\) = \(2,\)"),
        (dict(data=data(qd0=z.at[0].set(jnp.inf))), ValueError, r"initial state data.qd0\[0\] .* = inf"),
        (dict(data=data(noise=0.0)), ModelError, r"noise_std must be positive, got 0.0"),
        (dict(data=data(), max_iter=0), ValueError, r"max_iter must be a positive integer, got 0"),
        (dict(data=data(), rtol=-1.0), ValueError, r"identify: rtol must be a positive number"),
        (dict(data=data(), learning_rate=-0.1), ValueError, r"learning_rate must be positive"),
        (dict(data=data(), gtol=float("nan")), ValueError, r"gtol must be a non-negative number"),
    ]
    for kw, error, pattern in cases:
        kw = dict(kw)
        with pytest.raises(error, match=pattern):
            identify(m, lambda m: m.mass, kw.pop("data"), **kw)
