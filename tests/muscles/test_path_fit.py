"""mb.fit_paths: polynomial paths fitted to the exact ones (the seed's pre-modeling, §3-3).

Checked against independent routes: the fitted moment arms against autodiff −∂L/∂q of the fitted
lengths; the fitted lengths and moment arms against the exact paths at fresh poses (within the
errors the fit reports on its own validation poses); the Chebyshev basis against numpy's chebval
and autodiff, for random numbers of coordinates and degrees (hypothesis).
"""

from __future__ import annotations

from math import comb

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxmb as mb
from jaxmb.io import ModelFileError
from jaxmb.model import ModelError
from jaxmb.muscles.path_fit import chebyshev_basis, derivative_coefficients

GAIT10 = DATA / "osim" / "zoo" / "gait10dof18musc.osim"


def _gait_ranges():
    """A walking trial's range of motion (deg) for Gait10dof18musc; the pelvis translations,
    which no muscle spans, held."""
    r = np.radians
    out = {
        "pelvis_tilt": (r(-20), r(20)),
        "pelvis_tx": (0.0, 0.0),
        "pelvis_ty": (0.95, 0.95),
        "lumbar_extension": (r(-20), r(20)),
    }
    for s in "rl":
        out[f"hip_flexion_{s}"] = (r(-30), r(50))
        out[f"knee_angle_{s}"] = (r(-80), r(0))
        out[f"ankle_angle_{s}"] = (r(-25), r(25))
    return out


@pytest.fixture(scope="module")
def gait():
    model = mb.io.load_osim(GAIT10)
    fitted = mb.fit_paths(model, _gait_ranges(), samples=400, validation=200, max_degree=8)
    return model, fitted


def _poses(model, ranges, n, seed):
    r = np.asarray([ranges[c] for c in model.coordinate_names])
    u = np.random.default_rng(seed).uniform(size=(n, model.nq))
    return jnp.asarray(r[:, 0] + (r[:, 1] - r[:, 0]) * u)


def test_fit_reports_each_muscle_and_spans_the_right_coordinates(gait):
    model, fitted = gait
    rep = fitted.muscles.fit.report
    assert rep.names == model.muscle_names
    spans = dict(zip(rep.names, rep.coordinates, strict=True))
    # the hamstrings cross hip and knee, the soleus the ankle alone, nobody the pelvis translations
    assert spans["hamstrings_r"] == ("hip_flexion_r", "knee_angle_r")
    assert spans["soleus_l"] == ("ankle_angle_l",)
    assert spans["gastroc_r"] == ("knee_angle_r", "ankle_angle_r")
    assert not any("pelvis" in c for cs in rep.coordinates for c in cs)
    assert rep.samples == 400 and rep.validation == 200
    assert all(0.0 <= f <= 1.0 for f in rep.within_goal)
    assert "goal: lengths ≤ 0.1 mm" in str(rep)
    # muscles whose exact path is smooth over this range meet the goal at every pose
    for name in ("hamstrings_r", "glut_max_r", "soleus_r", "tib_ant_r", "glut_max_l"):
        i = rep.names.index(name)
        assert rep.max_length_error[i] <= 1e-4, (name, rep.max_length_error[i])
        assert rep.max_moment_arm_error[i] <= 1e-3, (name, rep.max_moment_arm_error[i])
    # and no muscle is off by more than a few millimetres anywhere
    assert max(rep.max_length_error) < 1e-3
    assert max(rep.max_moment_arm_error) < 1e-2


def test_fitted_paths_agree_with_exact_ones_at_fresh_poses(gait):
    model, fitted = gait
    rep = fitted.muscles.fit.report
    q = _poses(model, _gait_ranges(), 300, seed=7)
    f = jax.jit(jax.vmap(lambda x, m: mb.lengths_and_moment_arms(m, x), in_axes=(0, None)))
    L, R = f(q, model)
    Lf, Rf = f(q, fitted)
    eL = np.abs(np.asarray(Lf - L)).max(0)
    eR = np.abs(np.asarray(Rf - R)).max((0, 1))
    # fresh poses of the same distribution: within 1.5× the reported maximum (plus 10 µm)
    assert np.all(eL <= 1.5 * np.asarray(rep.max_length_error) + 1e-5), eL
    assert np.all(eR <= 1.5 * np.asarray(rep.max_moment_arm_error) + 1e-4), eR
    # muscle_lengths, moment_arms and muscle_velocities read the same fit
    assert np.allclose(jax.vmap(lambda x: mb.muscle_lengths(fitted, x))(q), Lf, rtol=0, atol=1e-15)
    assert np.allclose(jax.vmap(lambda x: mb.moment_arms(fitted, x))(q), Rf, rtol=0, atol=1e-15)


def test_fitted_moment_arms_are_minus_the_gradient_of_fitted_lengths(gait):
    model, fitted = gait
    q = _poses(model, _gait_ranges(), 5, seed=3)

    @jax.jit
    @jax.vmap
    def routes(x):
        R = mb.lengths_and_moment_arms(fitted, x)[1]
        J = jax.jacfwd(lambda y: mb.muscle_lengths(fitted, y))(x)  # (nm, nq)
        Jr = jax.jacrev(lambda y: mb.muscle_lengths(fitted, y))(x)
        return R, J, Jr

    R, J, Jr = routes(q)
    np.testing.assert_allclose(np.asarray(R), -np.swapaxes(np.asarray(J), 1, 2), rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.asarray(Jr), np.asarray(J), rtol=0, atol=1e-13)


def test_fitted_paths_in_float32(gait):
    """The Chebyshev basis is bounded by 1: float32 evaluation stays near float64 (no
    cancellation of large coefficients)."""
    model, fitted = gait
    q = _poses(model, _gait_ranges(), 64, seed=5)
    f32 = jax.tree_util.tree_map(
        lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, fitted
    )
    f = jax.jit(jax.vmap(lambda x, m: mb.lengths_and_moment_arms(m, x), in_axes=(0, None)))
    L, R = f(q, fitted)
    L32, R32 = f(q.astype(jnp.float32), f32)
    assert L32.dtype == jnp.float32
    assert float(jnp.abs(L32 - L).max()) < 2e-6 and float(jnp.abs(R32 - R).max()) < 2e-6


def test_exact_paths_drops_the_fit_and_nan_stays_nan(gait):
    model, fitted = gait
    q = _poses(model, _gait_ranges(), 1, seed=1)[0]
    back = mb.exact_paths(fitted)
    assert back.muscles.fit is None
    lengths = jax.jit(mb.muscle_lengths)
    np.testing.assert_array_equal(lengths(back, q), lengths(model, q))
    assert mb.exact_paths(model) is model
    L, R = jax.jit(mb.lengths_and_moment_arms)(fitted, q.at[3].set(jnp.nan))
    assert np.all(np.isnan(L)) and np.all(np.isnan(R))


def test_a_held_coordinate_is_named_and_a_muscle_spanning_none_is_constant(gait):
    model, _ = gait
    ranges = _gait_ranges() | {"ankle_angle_r": (0.1, 0.1)}
    with pytest.warns(UserWarning, match="soleus_r.*ankle_angle_r|ankle_angle_r.*soleus_r"):
        fitted = mb.fit_paths(model, ranges, samples=60, validation=20)
    rep = fitted.muscles.fit.report
    i = rep.names.index("soleus_r")  # spans the ankle alone, held here
    assert rep.coordinates[i] == () and rep.degrees[i] == 0
    assert rep.max_length_error[i] < 1e-12
    q = _poses(model, ranges, 3, seed=2)
    L, R = jax.jit(jax.vmap(lambda x: mb.lengths_and_moment_arms(fitted, x)))(q)
    L0 = jax.jit(jax.vmap(lambda x: mb.muscle_lengths(model, x)))(q)
    np.testing.assert_allclose(L[:, i], L0[:, i], rtol=0, atol=1e-12)
    assert np.all(R[:, :, i] == 0.0)


def test_a_fitted_model_is_not_saved_silently(gait, tmp_path):
    _, fitted = gait
    with pytest.raises(ModelFileError, match="fit_paths"):
        mb.io.save_model(fitted, tmp_path / "m.json")


def test_bad_ranges_name_the_coordinate():
    model = mb.io.load_osim(GAIT10, muscles="supported")
    ranges = _gait_ranges()
    with pytest.raises(ModelError, match="knee_angel_r"):
        mb.fit_paths(model, ranges | {"knee_angel_r": (0.0, 1.0)})
    missing = dict(ranges)
    del missing["ankle_angle_l"]
    with pytest.raises(ModelError, match="ankle_angle_l"):
        mb.fit_paths(model, missing)
    with pytest.raises(ModelError, match="hip_flexion_r"):
        mb.fit_paths(model, ranges | {"hip_flexion_r": (1.0, 0.0)})
    with pytest.raises(ModelError, match="lumbar_extension"):
        mb.fit_paths(model, ranges | {"lumbar_extension": (0.0, np.inf)})
    with pytest.raises(ModelError, match="samples"):
        mb.fit_paths(model, ranges, samples=0)
    with pytest.raises(ModelError, match="no muscles"):
        mb.fit_paths(mb.io.load_osim(GAIT10, muscles="none"), ranges)


@settings(max_examples=15, deadline=None)
@given(
    k=st.integers(1, 4),
    degree=st.integers(0, 6),
    seed=st.integers(0, 2**31 - 1),
)
def test_chebyshev_basis_and_its_derivative_coefficients(k, degree, seed):
    g = np.random.default_rng(seed)
    basis = chebyshev_basis(k, degree)
    x = g.uniform(-1, 1, size=(4, k))
    B = np.asarray(jax.jit(basis)(jnp.asarray(x)))
    ref = np.ones((4, basis.exponents.shape[0]))
    for j in range(k):
        for t, n in enumerate(basis.exponents[:, j]):
            ref[:, t] *= np.polynomial.chebyshev.chebval(x[:, j], np.eye(degree + 1)[n])
    np.testing.assert_allclose(B, ref, rtol=1e-13, atol=1e-14)
    assert np.all(basis.exponents.sum(1) <= degree)
    assert B.shape[1] == comb(k + degree, degree)
    coef = g.normal(size=B.shape[1])
    C = derivative_coefficients(basis, coef)
    grad = jax.jit(jax.vmap(jax.grad(lambda y: jnp.dot(basis(y), jnp.asarray(coef)))))(
        jnp.asarray(x)
    )
    np.testing.assert_allclose(B @ C[1:].T, np.asarray(grad), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(
        np.einsum("nkt,t->nk", basis.gradient_rows(B), coef),
        np.asarray(grad),
        rtol=1e-11,
        atol=1e-11,
    )
    np.testing.assert_array_equal(C[0], coef)


def _gait2354_ranges(model):
    """A walking trial's range of motion (deg) for gait2354; the pelvis translations held."""
    r = np.radians
    out = {c: (0.0, 0.0) for c in model.coordinate_names}
    out["pelvis_ty"] = (0.95, 0.95)
    for c, v in (("pelvis_tilt", 20), ("pelvis_list", 10), ("pelvis_rotation", 10)):
        out[c] = (r(-v), r(v))
    for c, v in (("lumbar_extension", 20), ("lumbar_bending", 15), ("lumbar_rotation", 15)):
        out[c] = (r(-v), r(v))
    for s in "rl":
        out[f"hip_flexion_{s}"] = (r(-30), r(50))
        out[f"knee_angle_{s}"] = (r(-80), r(0))
        out[f"ankle_angle_{s}"] = (r(-25), r(25))
        out[f"mtp_angle_{s}"] = (r(-20), r(20))
        for c in ("hip_adduction", "hip_rotation", "subtalar_angle"):
            out[f"{c}_{s}"] = (r(-15), r(15))
    return out


@pytest.mark.slow
def test_fit_paths_gait2354_over_a_walking_range():
    """gait2354's 54 muscles (via, conditional and moving points) over a walking trial's range:
    most meet the goal; those whose exact path switches a conditional point inside the range
    (iliacus, psoas, medial gastrocnemius) stay within a few millimetres."""
    model = mb.io.load_osim(DATA / "osim" / "gait2354_simbody.osim")
    ranges = _gait2354_ranges(model)
    fitted = mb.fit_paths(model, ranges, samples=2000, validation=500)
    rep = fitted.muscles.fit.report
    assert sum(rep.met) >= 40, rep
    i = {n: k for k, n in enumerate(rep.names)}
    for name in ("glut_med1_r", "glut_max2_l", "add_mag2_r", "soleus_l", "ercspn_r", "vas_int_r"):
        assert rep.met[i[name]], (name, rep)
    assert max(rep.p99_length_error) <= 2e-3 and max(rep.max_length_error) <= 3e-3, rep
    assert ("hip_flexion_r", "hip_adduction_r", "hip_rotation_r", "knee_angle_r") == (
        rep.coordinates[i["bifemlh_r"]]
    )


@pytest.mark.slow
def test_fit_paths_arm26_over_its_full_ranges():
    """arm26 over its coordinates' ranges (shoulder −90…180°, elbow 0…130°). The muscles whose
    exact path is smooth there meet the goal (lengths ≤ 0.1 mm, moment arms ≤ 1 mm); TRIlong and
    BIClong wrap an ellipsoid whose OpenSim path jumps (TRIlong by 2–8.5 mm at shoulder 41.5°,
    70.8°, 144.5°; BIClong by 1.7 mm at 31°, and an 87 mm one-pose spike at 29.5°, on a sweep at
    elbow 60°), which a smooth fit does not follow: bounded, not met."""
    imp = mb.io.read_osim(DATA / "osim" / "arm26.osim")
    model = mb.io.load_osim(DATA / "osim" / "arm26.osim")
    ranges = {c.name: c.range for c in imp.coordinates if c.name in model.coordinate_names}
    fitted = mb.fit_paths(model, ranges, samples=2000, validation=500)
    rep = fitted.muscles.fit.report
    i = {n: k for k, n in enumerate(rep.names)}
    for name in ("TRIlat", "TRImed", "BICshort"):
        assert rep.max_length_error[i[name]] <= 1e-4, (name, rep)
        assert rep.max_moment_arm_error[i[name]] <= 1e-3, (name, rep)
    assert rep.max_length_error[i["BRA"]] <= 1e-4 and rep.within_goal[i["BRA"]] >= 0.98, rep
    for name in ("TRIlong", "BIClong"):
        assert rep.p99_length_error[i[name]] <= 5e-3 and rep.within_goal[i[name]] >= 0.15, rep
    q = _poses(model, ranges, 256, seed=11)
    f = jax.jit(jax.vmap(lambda x, m: mb.lengths_and_moment_arms(m, x), in_axes=(0, None)))
    (L, R), (Lf, Rf) = f(q, model), f(q, fitted)
    eL = np.abs(np.asarray(Lf - L)).max(0)
    eR = np.abs(np.asarray(Rf - R)).max((0, 1))
    # where the exact path jumps, a fresh pose can land nearer a jump than any validation pose
    smooth = [i[n] for n in ("TRIlat", "TRImed", "BICshort", "BRA")]
    assert np.all(eL[smooth] <= 1.5 * np.asarray(rep.max_length_error)[smooth] + 1e-5), (eL, rep)
    assert np.all(eR[smooth] <= 1.5 * np.asarray(rep.max_moment_arm_error)[smooth] + 1e-4), eR
