"""Hill-type model (De Groote et al. 2016 curves) and its coupling to the multibody ODE."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from jaxmb import hill
from jaxmb import muscles as mu
from jaxmb.dynamics import forward_dynamics
from jaxmb.models.arm26 import arm26


def test_curve_landmarks():
    # values of the published curves at their landmarks
    assert abs(float(hill.force_velocity(0.0)) - 1.0) < 3e-3
    assert abs(float(hill.force_velocity(-1.0))) < 1.5e-2  # 0.0121 in the published fit
    assert float(hill.force_velocity(1.0)) > 1.4  # eccentric plateau ≈ 1.5-1.8
    assert float(hill.passive_force_length(1.0)) == 0.0
    assert abs(float(hill.passive_force_length(1.6)) - 1.0) < 1e-12  # e0 = 0.6: F_max at 60 %
    assert abs(float(hill.active_force_length(1.0)) - 1.0) < 2e-2
    x = jnp.linspace(0.4, 1.6, 1201)
    assert abs(float(x[jnp.argmax(hill.active_force_length(x))]) - 1.0) < 0.05
    # tendon: about zero at slack length, F_max near 4-5 % strain
    assert abs(float(hill.tendon_force_length(1.0))) < 2e-2
    strain = float(hill.tendon_length_from_force(1.0)) - 1.0
    assert 0.03 < strain < 0.06


def test_inverses_round_trip():
    v = jnp.linspace(-1.0, 1.0, 41)
    assert float(jnp.max(jnp.abs(hill.force_velocity_inverse(hill.force_velocity(v)) - v))) < 1e-12
    f = jnp.linspace(0.0, 1.5, 31)
    lt = hill.tendon_length_from_force(f)
    assert float(jnp.max(jnp.abs(hill.tendon_force_length(lt) - f))) < 1e-12


def test_activation_dynamics():
    a = jnp.linspace(0.0, 1.0, 11)
    assert float(jnp.max(jnp.abs(hill.activation_derivative(a, a)))) == 0.0
    assert bool(jnp.all(hill.activation_derivative(a[:-1], 1.0) > 0))
    assert bool(jnp.all(hill.activation_derivative(a[1:], 0.0) < 0))
    # activation is faster than deactivation (τ_a = 15 ms < τ_d = 60 ms)
    assert float(hill.activation_derivative(0.5, 0.6)) > -float(
        hill.activation_derivative(0.5, 0.4)
    )


def _params(alpha=0.3):
    return mu.MuscleParameters(800.0, 0.12, 0.2, alpha, 10.0)


def test_rigid_tendon_force_against_geometry():
    """Independent route: pennation from the fibre triangle with arcsin, not the code's cos α."""
    p = _params()
    lmt, vmt, a = 0.33, -0.2, 0.7
    h = 0.12 * np.sin(0.3)
    lm = np.hypot(h, lmt - 0.2)
    alpha = np.arcsin(h / lm)
    vm = vmt * np.cos(alpha)
    lm_n, v_n = lm / 0.12, vm / (10.0 * 0.12)
    expected = (
        800.0
        * np.cos(alpha)
        * (
            a * float(hill.active_force_length(lm_n)) * float(hill.force_velocity(v_n))
            + float(hill.passive_force_length(lm_n))
        )
    )
    got = float(hill.rigid_tendon_force(p, a, lmt, vmt))
    assert abs(got - expected) < 1e-10 * abs(expected)


def test_elastic_tendon_static_equilibrium():
    """At the fibre length where tendon force = fibre force along the tendon (scipy brentq), the
    fibre velocity is the isometric one, f_v = 1 ⇒ ṽ = f_v⁻¹(1)."""
    p = _params(0.2)
    a, lmt = 0.6, 0.33

    def imbalance(lm_n):
        lm = lm_n * 0.12
        cos_a = float(hill.pennation(p, lm))
        ft = float(hill.elastic_tendon_force(p, lm_n, lmt)) / 800.0
        fm = a * float(hill.active_force_length(lm_n)) + float(hill.passive_force_length(lm_n))
        return ft - fm * cos_a

    lm_eq = scipy.optimize.brentq(imbalance, 0.5, 1.5, xtol=1e-15)
    v = float(hill.elastic_tendon_fiber_velocity(p, a, lm_eq, lmt))
    assert abs(v - 10.0 * float(hill.force_velocity_inverse(1.0))) < 1e-8


def test_coupled_rhs_matches_forward_dynamics():
    model = arm26()
    p = model.muscles.params
    exc = lambda t: jnp.full(6, 0.3)
    rhs = hill.musculoskeletal_rhs(model, exc, tendon="rigid")
    q, qd, a = jnp.array([0.4, 1.1]), jnp.array([0.2, -0.3]), jnp.full(6, 0.1)
    dy = jax.jit(rhs)(0.0, jnp.concatenate([q, qd, a]))

    @jax.jit
    def reference(q, qd, a):
        R = mu.moment_arms(model, q)
        lmt, vmt = mu.muscle_lengths(model, q), mu.muscle_velocities(model, q, qd)
        return forward_dynamics(model, q, qd, R @ hill.rigid_tendon_force(p, a, lmt, vmt))

    assert float(jnp.max(jnp.abs(dy[2:4] - reference(q, qd, a)))) < 1e-10
    assert float(jnp.max(jnp.abs(dy[4:] - hill.activation_derivative(a, 0.3)))) < 1e-14


@pytest.mark.slow
def test_coupled_simulation_runs():
    model = arm26()
    rhs = hill.musculoskeletal_rhs(model, lambda t: jnp.full(6, 0.3), tendon="rigid")
    q, qd, a = jnp.array([0.4, 1.1]), jnp.array([0.2, -0.3]), jnp.full(6, 0.1)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs),
        diffrax.Tsit5(),
        0.0,
        0.05,
        1e-3,
        jnp.concatenate([q, qd, a]),
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
        max_steps=4096,
    )
    yf = sol.ys[-1]
    assert bool(jnp.all(jnp.isfinite(yf)))
    assert bool(jnp.all(yf[4:] > 0.1))  # activations rise towards the excitation 0.3


@pytest.mark.slow
@pytest.mark.xfail(
    reason="open: d(final elbow angle)/d(F_max scale) by reverse mode 0.608 vs central difference "
    "24.9 (measured); suspects: the f_v clip in elastic_tendon_fiber_velocity (zero gradient where "
    "the initial fibre length is far from equilibrium) and step-size noise of the adaptive solver",
    strict=False,
)
def test_elastic_tendon_simulation_is_differentiable():
    model = arm26()
    p0 = model.muscles.params
    lm0 = jnp.ones(6)

    def final_angle(fmax_scale):
        import equinox as eqx

        ms = eqx.tree_at(
            lambda m: [mm.params.max_isometric_force for mm in m.muscles.muscles],
            model,
            [f * fmax_scale for f in p0.max_isometric_force],
        )
        rhs = hill.musculoskeletal_rhs(ms, lambda t: jnp.full(6, 0.2), tendon="elastic")
        y0 = jnp.concatenate([jnp.array([0.4, 1.1]), jnp.zeros(2), jnp.full(6, 0.2), lm0])
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs),
            diffrax.Tsit5(),
            0.0,
            0.02,
            1e-4,
            y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
            max_steps=8192,
        )
        return sol.ys[-1][1]

    g = jax.grad(final_angle)(1.0)
    h = 1e-4
    fd = (final_angle(1.0 + h) - final_angle(1.0 - h)) / (2 * h)
    assert bool(jnp.isfinite(g))
    assert abs(float(g) - float(fd)) < 1e-3 * max(1.0, abs(float(fd)))
