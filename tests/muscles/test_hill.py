"""Hill-type model (De Groote et al. 2016 curves) and its coupling to the multibody ODE."""

import json

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
from helpers import DATA

from jaxmb import muscles as mu
from jaxmb.dynamics import forward_dynamics
from jaxmb.model import Body, build_model
from jaxmb.models.arm26 import arm26
from jaxmb.muscles import hill

REF = json.loads(
    (DATA / "degroote_opensim_reference.json").read_text()
)


@pytest.mark.parametrize(
    "fn, x, y",
    [
        (hill.active_force_length, "lm_norm", "active"),
        (hill.passive_force_length, "lm_norm", "passive"),
        (hill.force_velocity, "v_norm", "force_velocity"),
        (hill.force_velocity_inverse, "fv", "force_velocity_inverse"),
        (hill.tendon_force_length, "lt_norm", "tendon"),
        (hill.tendon_length_from_force, "ft", "tendon_inverse"),
    ],
)
def test_curves_equal_opensim(fn, x, y):
    """Peer referee: OpenSim 4.6's DeGrooteFregly2016Muscle on grids
    (tests/data/make_degroote_reference.py); same formulas and constants, so equal to rounding."""
    got = np.asarray(fn(jnp.asarray(REF[x])))
    ref = np.asarray(REF[y])
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)) < 1e-13


def test_curve_landmarks():
    # the landmarks OpenSim's constants were chosen for (the supplement's rounded ones miss them)
    assert abs(float(hill.force_velocity(0.0)) - 1.0) < 1e-15
    assert abs(float(hill.force_velocity(-1.0))) < 1e-15
    assert float(hill.force_velocity(1.0)) > 1.4  # eccentric plateau ≈ 1.5-1.8
    assert abs(float(hill.active_force_length(1.0)) - 1.0) < 1e-15
    assert float(hill.passive_force_length(0.2)) == 0.0  # zero at the shortest fibre, never < 0
    assert bool(jnp.all(hill.passive_force_length(jnp.linspace(0.2, 1.8, 161)) >= 0.0))
    assert abs(float(hill.passive_force_length(1.6)) - 1.0) < 1e-12  # e0 = 0.6: F_max at 60 %
    x = jnp.linspace(0.4, 1.6, 1201)
    assert abs(float(x[jnp.argmax(hill.active_force_length(x))]) - 1.0) < 0.05
    # tendon: zero at slack length, F_max at 4.9 % strain
    assert abs(float(hill.tendon_force_length(1.0))) < 1e-15
    assert abs(float(hill.tendon_length_from_force(1.0)) - 1.049) < 1e-12


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


@pytest.mark.slow  # compiles arm26's wrapped paths twice over (about 2 min CPU)
def test_coupled_rhs_matches_forward_dynamics():
    model = arm26()
    p = model.muscles.params
    exc = lambda t: jnp.full(6, 0.3)
    rhs = hill.musculoskeletal_rhs(model, exc, tendon="rigid")
    q, qd, a = jnp.array([0.4, 1.1]), jnp.array([0.2, -0.3]), jnp.full(6, 0.1)

    @jax.jit  # one compilation of arm26's paths for both routes
    def both(q, qd, a):
        R = mu.moment_arms(model, q)
        lmt, vmt = mu.muscle_lengths(model, q), mu.muscle_velocities(model, q, qd)
        ref = forward_dynamics(model, q, qd, R @ hill.rigid_tendon_force(p, a, lmt, vmt))
        return rhs(0.0, jnp.concatenate([q, qd, a])), ref

    dy, ref = both(q, qd, a)
    assert float(jnp.max(jnp.abs(dy[:2] - qd))) == 0.0
    assert float(jnp.max(jnp.abs(dy[2:4] - ref))) < 1e-10
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


def test_soft_clip_is_identity_inside_and_c2_at_the_edges():
    lo, hi, w = 0.0, float(hill.force_velocity(1.0)), 0.05
    clip = jax.jit(lambda x: hill.soft_clip(x, lo, hi, w))
    d1 = jax.jit(jax.vmap(jax.grad(clip)))
    d2 = jax.jit(jax.vmap(jax.grad(jax.grad(clip))))
    x = jnp.linspace(lo + w, hi - w, 101)
    assert float(jnp.max(jnp.abs(clip(x) - x))) == 0.0
    far = jnp.array([-1e300, -1e6, -3.0, 5.0, 1e6, 1e300])
    y = clip(far)
    assert bool(jnp.all((y >= lo) & (y <= hi)))
    assert abs(float(y[-1]) - hi) < 1e-15 and abs(float(y[0]) - lo) < 1e-15
    for edge in (lo + w, hi - w):
        e = jnp.array([edge - 1e-10, edge + 1e-10])
        assert float(jnp.max(jnp.abs(d1(e) - 1.0))) < 1e-15
        assert float(jnp.max(jnp.abs(d2(e)))) < 1e-6  # −3z/w → 0 with the distance z
    assert bool(jnp.all(d1(jnp.concatenate([jnp.linspace(-1.0, 3.0, 401), far[1:-1]])) > 0))


# arm26's lengths at q = (0.4, 1.1) with l̃_M = 1 (the old xfail's start): four muscles' tendons
# are slack (f_v < 0 required), one is stretched to 10⁴ F_max (f_v ≫ f_v(1)); all were clipped
_FAR_LMT = jnp.array([0.31776265, 0.19189226, 0.17952006, 0.38694959, 0.31394591, 0.13195687])


def _arm26_params():
    return mu.MuscleParameters(
        jnp.array([798.5, 624.3, 624.3, 624.3, 435.56, 987.26]),
        jnp.array([0.134, 0.1138, 0.1138, 0.1157, 0.1321, 0.0858]),
        jnp.array([0.143, 0.098, 0.0908, 0.2723, 0.1923, 0.0535]),
        jnp.zeros(6),
        jnp.full(6, 10.0),
    )


def central_fd(f, x, rel):
    """Fourth-order central differences of the jitted f: R^n → R^m at x, step rel·|x_i|; (m, n)."""
    cols = []
    for i in range(x.size):
        h = rel * abs(float(x[i]))
        y = [np.asarray(f(x.at[i].add(k * h))) for k in (2, 1, -1, -2)]
        cols.append(np.atleast_1d((-y[0] + 8 * y[1] - 8 * y[2] + y[3]) / (12 * h)))
    return np.stack(cols, axis=-1)


def test_elastic_fiber_velocity_gradient_far_from_equilibrium():
    """The cause of the old reverse-mode zero: the hard f_v clip made ∂v/∂(everything) = 0 for
    saturated muscles. Now every ∂v_k/∂(l_opt,k, l_s,k) is nonzero, reverse = forward mode, and both
    equal central differences: to 1e-5 relative where FD resolves them (measured ≤ 4.9e-6), to 10 %
    to 1 % for the ≈ 1e-9 slopes of the two most saturated muscles (|v| ≈ 10 l_opt/s), whose
    differences need a 30× longer step to rise above round-off."""
    p = _arm26_params()

    @jax.jit
    def v(x):
        q = mu.MuscleParameters(p.max_isometric_force, x[0:6], x[6:12], 0.0, 10.0)
        return hill.elastic_tendon_fiber_velocity(q, 0.2, jnp.ones(6), _FAR_LMT)

    x = jnp.concatenate([p.optimal_fiber_length, p.tendon_slack_length])
    assert bool(jnp.all(jnp.abs(v(x)) < 10.0 * 1.05))  # within ≈ ±v_max (l_opt/s)
    J_rev, J_fwd = jax.jit(jax.jacrev(v))(x), jax.jit(jax.jacfwd(v))(x)
    assert float(jnp.max(jnp.abs(J_rev - J_fwd))) < 1e-12 * float(jnp.max(jnp.abs(J_fwd)))
    J = np.asarray(J_rev)
    diag = np.concatenate([np.diag(J[:, :6]), np.diag(J[:, 6:])])
    assert np.all(np.abs(diag) > 0)  # the clip gave exactly 0 for five of the six muscles
    off = J.copy()
    off[:, :6] -= np.diag(np.diag(J[:, :6]))
    off[:, 6:] -= np.diag(np.diag(J[:, 6:]))
    assert np.all(off == 0.0)  # muscles are independent
    fd = np.concatenate([np.diag(m) for m in np.split(central_fd(v, x, 1e-4), 2, axis=1)])
    err = np.abs(diag - fd) / np.abs(diag)
    resolved = np.abs(diag) > 1e-6 * np.max(np.abs(diag))
    assert resolved.sum() >= 9
    assert float(np.max(err[resolved])) < 1e-5
    # the two saturated slopes (≈ 1e-9 of the largest) need a longer step to rise above round-off
    fd_long = np.concatenate([np.diag(m) for m in np.split(central_fd(v, x, 3e-3), 2, axis=1)])
    err_long = np.abs(diag - fd_long) / np.abs(diag)
    assert float(np.max(err_long[~resolved])) < 1e-2  # measured 4.1e-3, 3.0e-3


def test_elastic_tendon_equilibrium_against_brentq_and_its_derivatives():
    p = _params(0.2)
    lmt, a = jnp.array([0.30, 0.33, 0.36]), jnp.array([0.05, 0.6, 1.0])
    lm = jax.jit(hill.elastic_tendon_equilibrium)(p, a, lmt)

    def imbalance(lm_n, a1, lmt1):  # the same balance, written on l̃_M with numpy
        h = 0.12 * np.sin(0.2)
        lm1 = lm_n * 0.12
        cos_a = np.sqrt(lm1**2 - h**2) / lm1
        ft = float(hill.tendon_force_length((lmt1 - lm1 * cos_a) / 0.2))
        fm = a1 * float(hill.active_force_length(lm_n)) + float(hill.passive_force_length(lm_n))
        return ft - fm * cos_a

    for k in range(3):
        ref = scipy.optimize.brentq(imbalance, 0.3, 2.0, args=(float(a[k]), float(lmt[k])),
                                    xtol=1e-15)  # fmt: skip
        assert abs(float(lm[k]) - ref) < 1e-12
    v = jax.jit(hill.elastic_tendon_fiber_velocity)(p, a, lm, lmt)
    assert float(jnp.max(jnp.abs(v - 10.0 * hill.force_velocity_inverse(1.0)))) < 1e-9

    @jax.jit
    def eq(x):  # (a, l_MT, l_s, l_opt, α_opt) of the middle muscle
        q = mu.MuscleParameters(800.0, x[3], x[2], x[4], 10.0)
        return hill.elastic_tendon_equilibrium(q, x[0], x[1])

    x = jnp.array([0.6, 0.33, 0.2, 0.12, 0.2])
    g_rev = jax.jit(jax.grad(eq))(x)
    g_fwd = jax.jit(jax.jacfwd(eq))(x)
    fd = central_fd(eq, x, 1e-6)[0]
    assert float(jnp.max(jnp.abs(g_rev - g_fwd))) < 1e-12 * float(jnp.max(jnp.abs(g_fwd)))
    assert float(np.max(np.abs(np.asarray(g_rev) - fd) / np.abs(fd))) < 1e-6


def elbow():
    """One hinge (z), a flexor and an extensor with straight elastic-tendon paths: small enough
    that reverse mode through diffrax compiles in seconds."""
    forearm = Body("forearm", None, axis=(0, 0, 1), position=(0, 0, 0), mass=1.5,
                   com=(0.0, -0.15, 0.0), inertia=np.diag([0.008, 0.002, 0.008]))  # fmt: skip
    flexor = mu.Muscle(
        "flexor",
        (mu.PathPoint("ground", (0.02, 0.28, 0.0)), mu.PathPoint("forearm", (0.03, -0.04, 0.0))),
        params=mu.MuscleParameters(300.0, 0.12, 0.18, 0.1, 10.0),
    )
    extensor = mu.Muscle(
        "extensor",
        (mu.PathPoint("ground", (-0.02, 0.3, 0.0)), mu.PathPoint("forearm", (-0.025, 0.03, 0.0))),
        params=mu.MuscleParameters(400.0, 0.13, 0.20, 0.15, 10.0),
    )
    model = build_model([forearm], gravity=(0, -9.81, 0), name="elbow")
    return mu.with_muscles(model, [flexor, extensor])


ELBOW_Q0 = jnp.array([1.2])
ELBOW_EXC = jnp.array([0.5, 0.2])


def test_coupled_elastic_rhs_matches_its_parts():
    model = elbow()
    p = model.muscles.params
    rhs = hill.musculoskeletal_rhs(model, lambda t: ELBOW_EXC, tendon="elastic")
    q, qd, a, lm = ELBOW_Q0, jnp.array([0.3]), jnp.array([0.3, 0.1]), jnp.array([0.8, 0.9])

    @jax.jit
    def both(y):
        lmt = mu.muscle_lengths(model, q)
        F = hill.elastic_tendon_force(p, lm, lmt)
        R = jax.jacfwd(lambda q: -mu.muscle_lengths(model, q))(q).T  # moment arms as −∂L/∂q
        parts = (forward_dynamics(model, q, qd, R @ F), hill.activation_derivative(a, ELBOW_EXC))
        return rhs(0.0, y), parts + (hill.elastic_tendon_fiber_velocity(p, a, lm, lmt),)

    dy, (qdd, da, dlm) = both(jnp.concatenate([q, qd, a, lm]))
    assert float(jnp.max(jnp.abs(dy[0:1] - qd))) == 0.0
    assert float(jnp.max(jnp.abs(dy[1:2] - qdd))) < 1e-10
    assert float(jnp.max(jnp.abs(dy[2:4] - da))) < 1e-14
    assert float(jnp.max(jnp.abs(dy[4:] - dlm))) < 1e-14
    with pytest.raises(ValueError, match="tendon must be"):
        hill.musculoskeletal_rhs(model, lambda t: ELBOW_EXC, tendon="springy")


def _elbow_solve(model, x, adjoint=None, t1=0.3, tol=1e-11):
    """Final elbow angle (rad) for x = (flexor F_max scale, extensor tendon slack length l_s (m),
    initial angle (rad)); fibres start at their static equilibrium for a(0) = 0.2."""
    m = eqx.tree_at(
        lambda m: (
            m.muscles.muscles[0].params.max_isometric_force,
            m.muscles.muscles[1].params.tendon_slack_length,
        ),
        model,
        (x[0] * 300.0, x[1]),
    )
    q0 = x[2:3]
    a0 = jnp.full(2, 0.2)
    lm0 = hill.elastic_tendon_equilibrium(m.muscles.params, a0, mu.muscle_lengths(m, q0))
    rhs = hill.musculoskeletal_rhs(m, lambda t: ELBOW_EXC, tendon="elastic")
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs),
        diffrax.Tsit5(),
        0.0,
        t1,
        1e-4,
        jnp.concatenate([q0, jnp.zeros(1), a0, lm0]),
        stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        max_steps=20000,
    )
    return sol.ys[-1]


@pytest.mark.slow
def test_elastic_tendon_simulation_is_differentiable():
    """Reverse mode (RecursiveCheckpointAdjoint) and forward mode (ForwardMode) through the coupled
    elastic-tendon simulation equal central differences to 1e-6 relative. Solver tolerance 1e-11
    and relative FD step 1e-5 (truncation ~1e-10, solver noise ~1e-11/1e-5). The old xfail's
    0.608 vs 24.9 came from a start 10⁴ F_max away from equilibrium: clipped (zero-derivative)
    fibre velocities and an FD that changed as 1/h (9.2, 2.1, 23.5, 269, 1502 for h = 1e-2…1e-6):
    the adaptive step choices, which diffrax keeps out of the derivative, jumped under it."""
    model = elbow()
    f = jax.jit(lambda x: _elbow_solve(model, x)[0])
    x = jnp.array([1.0, 0.2, 1.2])
    g = jax.jit(jax.grad(f))(x)
    fwd = lambda x: _elbow_solve(model, x, diffrax.ForwardMode())[0]  # noqa: E731
    jvp = jax.jit(lambda x, v: jax.jvp(fwd, (x,), (v,))[1])
    fd = np.zeros(3)
    for i in range(3):
        h = 1e-5 * abs(float(x[i]))
        e = jnp.zeros(3).at[i].set(h)
        fd[i] = (float(f(x + e)) - float(f(x - e))) / (2 * h)
    assert bool(jnp.all(jnp.abs(g) > 1e-2))
    assert float(np.max(np.abs(np.asarray(g) - fd) / np.abs(fd))) < 1e-6
    for i in range(3):
        t = float(jvp(x, jnp.zeros(3).at[i].set(1.0)))
        assert abs(t - fd[i]) < 1e-6 * abs(fd[i])


@pytest.mark.slow
def test_elastic_tendon_simulation_equals_scipy():
    """The coupled ODE integrated by diffrax (Tsit5) and by scipy (DOP853) on the same rhs."""
    model = elbow()
    rhs = jax.jit(hill.musculoskeletal_rhs(model, lambda t: ELBOW_EXC, tendon="elastic"))
    y1 = jax.jit(lambda x: _elbow_solve(model, x, tol=1e-12))(jnp.array([1.0, 0.2, 1.2]))
    a0 = jnp.full(2, 0.2)
    lm0 = hill.elastic_tendon_equilibrium(
        model.muscles.params, a0, mu.muscle_lengths(model, ELBOW_Q0)
    )
    y0 = np.concatenate([ELBOW_Q0, [0.0], a0, lm0])
    ref = scipy.integrate.solve_ivp(
        lambda t, y: np.asarray(rhs(t, jnp.asarray(y))), (0.0, 0.3), y0, method="DOP853",
        rtol=1e-12, atol=1e-12,
    )  # fmt: skip
    assert ref.success
    assert float(np.max(np.abs(np.asarray(y1) - ref.y[:, -1]))) < 1e-8
    assert abs(float(y1[0]) - 1.2) > 1e-2  # it moved
