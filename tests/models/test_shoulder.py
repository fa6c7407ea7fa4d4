"""The shoulder model (seed §4-4) and computed-torque tracking (Eqs. 200–201).

Referees: OpenSim 4.6 on MoBL-ARMS (recorded by ``tests/data/make_shoulder_reference.py``; a live
rerun is marked slow), the de Groot & Brand regression evaluated in numpy straight from the data
file, the Lagrangian (autodiff) route to M, N, G, and autodiff of the desired trajectory.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import DATA

import jaxmb
from jaxmb.dynamics import try_forward_dynamics
from jaxmb.simulation import MinimumJerk, computed_torque, eq200_solve, simulate_tracking

# the module, not the function jaxmb.models.shoulder of the same name
sh = importlib.import_module("jaxmb.models.shoulder")

REF = json.loads((DATA / "shoulder_opensim_reference.json").read_text())
DEGROOT = json.loads(
    (Path(jaxmb.__file__).parent / "data" / "shoulder" / "degroot_brand_2001.json").read_text()
)
HAS_OPENSIM = importlib.util.find_spec("opensim") is not None
K = (100.0, 100.0, 1000.0)


@pytest.fixture(scope="module")
def mobl():
    return sh.shoulder("mobl", muscles=False)


@pytest.fixture(scope="module")
def degroot():
    return sh.shoulder("degroot", muscles=False)


@pytest.fixture(scope="module")
def poses():
    rng = np.random.default_rng(6)
    lo, hi = np.array([-1.5, 0.05, -1.5]), np.array([2.2, 3.1, 0.3])
    return lo + (hi - lo) * rng.random((6, 3))


# ----------------------------------------------------------------------------------------------
# MoBL variant against OpenSim 4.6
# ----------------------------------------------------------------------------------------------


@eqx.filter_jit
def _terms(model, qs):
    one = lambda q: (
        model.joint_map(q),
        jaxmb.body_transforms(model, q),
        jaxmb.mass_matrix(model, q),
        jaxmb.gravity_forces(model, q),
    )
    return jax.vmap(one)(qs)


def _compare_opensim(model, records):
    fs, As, Ms, Gs = (np.asarray(x) for x in _terms(model, jnp.asarray([r["q"] for r in records])))
    f_err = t_err = m_err = g_err = 0.0
    for rec, f, A, M, G in zip(records, fs, As, Ms, Gs, strict=True):
        ref_f = np.array([rec["coordinates"][n] for n in sh.JOINT_VARIABLES])
        f_err = max(f_err, np.abs(f - ref_f).max())
        for body, T in rec["transforms"].items():
            t_err = max(t_err, np.abs(A[model.body_names.index(body)] - np.asarray(T)).max())
        Mr, Gr = np.asarray(rec["mass_matrix"]), np.asarray(rec["gravity"])
        m_err = max(m_err, np.abs(M - Mr).max() / np.abs(Mr).max())
        g_err = max(g_err, np.abs(G - Gr).max() / max(np.abs(Gr).max(), 1e-3))
    return f_err, t_err, m_err, g_err


def test_mobl_matches_opensim(mobl):
    # measured: joint variables 0, poses 1e-15, M 2.3e-13 relative, G 1.2e-13 relative
    assert np.allclose(REF["gravity_vector"], np.asarray(mobl.gravity), rtol=0, atol=0)
    f_err, t_err, m_err, g_err = _compare_opensim(mobl, REF["poses"])
    assert f_err < 1e-12, f"coupled coordinates differ from OpenSim's by {f_err:.3g} rad"
    assert t_err < 1e-12, f"body poses differ from OpenSim's by {t_err:.3g}"
    assert m_err < 1e-10, f"mass matrix differs from OpenSim's by {m_err:.3g} relative"
    assert g_err < 1e-10, f"gravity forces differ from OpenSim's by {g_err:.3g} relative"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_OPENSIM, reason="opensim is not installed")
def test_mobl_matches_live_opensim(mobl):
    spec = importlib.util.spec_from_file_location(
        "_make_shoulder", DATA / "make_shoulder_reference.py"
    )
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    rng = np.random.default_rng(12345)
    poses = [np.array([-1.5, 0.0, -1.5]) + np.array([3.7, 3.1, 1.8]) * rng.random(3)]
    records, gravity = gen.compute(poses)
    f_err, t_err, m_err, g_err = _compare_opensim(mobl, records)
    assert max(f_err, t_err) < 1e-12 and max(m_err, g_err) < 1e-10


def test_phantom_inertias_zeroed_and_masses_kept(mobl):
    for name in sh.PHANTOMS:
        i = mobl.body_names.index(name)
        assert float(mobl.mass[i]) == 1e-4
        assert not np.any(np.asarray(mobl.inertia[i]))
    for name in ("clavicle", "scapula", "humerus"):
        i = mobl.body_names.index(name)
        assert np.all(np.linalg.eigvalsh(np.asarray(mobl.inertia[i])) > 0)


def test_mobl_slopes_as_in_osim():
    k = sh.mobl_couplings()
    slope = np.asarray((k.y[:, 1] - k.y[:, 0]) / (k.x[:, 1] - k.x[:, 0]))
    sc_r3 = sh._MOBL_DEPENDENT.index("sternoclavicular_r3")
    assert slope[sc_r3] == pytest.approx(0.322013 / 3.14159, rel=1e-15)
    assert slope[sc_r3] == pytest.approx(0.1025, abs=5e-5)


# ----------------------------------------------------------------------------------------------
# de Groot & Brand variant
# ----------------------------------------------------------------------------------------------

# joint variable -> (regressed angle, sign); the shoulder coordinates are passed through
_JOINT_OF = {
    "sternoclavicular_r2": ("clavicle_Y", 1),
    "sternoclavicular_r3": ("clavicle_Z", 1),
    "unrotscap_r3": ("clavicle_Z", -1),
    "unrotscap_r2": ("clavicle_Y", -1),
    "acromioclavicular_r2": ("scapula_Y", 1),
    "acromioclavicular_r3": ("scapula_Z", 1),
    "acromioclavicular_r1": ("scapula_X", 1),
    "unrothum_r1": ("scapula_X", -1),
    "unrothum_r3": ("scapula_Z", -1),
    "unrothum_r2": ("scapula_Y", -1),
}


def _regression_numpy(q):
    """The regression in numpy from the raw JSON, relative to the rest posture (rad)."""
    hy, hz = np.degrees(q[0]), np.degrees(q[1])
    rest = {
        "C0": DEGROOT["rest_posture"]["C0_clavicle_YZX"],
        "S0": DEGROOT["rest_posture"]["S0_scapula_YZX"],
    }
    out = {}
    for name, r in DEGROOT["regressions"].items():
        r0 = rest[r["rest"][:2]][int(r["rest"][3])]
        out[name] = np.radians(r["a"] + r["b"] * hy + r["c"] * hz + r["d"] * r0 - r0)
    f = []
    for jv in sh.JOINT_VARIABLES:
        if jv in _JOINT_OF:
            name, sign = _JOINT_OF[jv]
            f.append(sign * out[name])
        else:
            f.append({"elv_angle": q[0], "shoulder_elv": q[1], "shoulder_rot": q[2]}.get(jv, -q[0]))
    return np.array(f)


def test_degroot_joint_variables_equal_regression(degroot, poses):
    for q in poses:
        f = np.asarray(degroot.joint_map(jnp.asarray(q)))
        np.testing.assert_allclose(f, _regression_numpy(q), rtol=0, atol=1e-12)
    # the published value at Hy = Hz = 0 (data note): Cy = -29.3 deg
    ang = np.degrees(np.asarray(sh.rhythm_angles(jnp.zeros(3), sh.degroot_brand_coefficients())))
    assert ang[0] + DEGROOT["rest_posture"]["C0_clavicle_YZX"][0] == pytest.approx(-29.3, abs=0.05)


def test_degroot_elevation_terms_only_reproduce_mobl(mobl, poses):
    """With intercepts, plane terms and rest weights zeroed and MoBL's slopes as c, the two maps
    coincide: the joint layout and signs of both variants agree."""
    slopes = np.asarray(
        (lambda k: (k.y[:, 1] - k.y[:, 0]) / (k.x[:, 1] - k.x[:, 0]))(sh.mobl_couplings())
    )
    dep = sh._MOBL_DEPENDENT
    c = [slopes[dep.index(n)] for n in ("sternoclavicular_r2", "sternoclavicular_r3",
                                         "acromioclavicular_r2", "acromioclavicular_r3",
                                         "acromioclavicular_r1")]  # fmt: skip
    z = jnp.zeros(5)
    k = sh.DeGrootBrandCoefficients(z, z, jnp.asarray(c), z, z, z)
    model = sh.shoulder("degroot", muscles=False, coefficients=k)
    for q in poses:
        np.testing.assert_allclose(
            model.joint_map(jnp.asarray(q)), mobl.joint_map(jnp.asarray(q)), rtol=0, atol=1e-15
        )


def test_degroot_coefficients_are_traced_without_recompiling(poses):
    k0 = sh.degroot_brand_coefficients()
    q = jnp.asarray(poses[0])
    # ∂(angle_i)/∂c_i = Hz in degrees, converted back to rad: = q[1]
    jac = jax.jacfwd(lambda c: sh.rhythm_angles(q, eqx.tree_at(lambda k: k.c, k0, c)))(k0.c)
    np.testing.assert_allclose(jac, np.eye(5) * poses[0][1], rtol=1e-14, atol=0)
    traces = []

    @eqx.filter_jit
    def mass(model, q):
        traces.append(1)
        return jaxmb.mass_matrix(model, q)

    base = sh.shoulder("degroot", muscles=False)
    for scale in (1.0, 1.1):
        k = eqx.tree_at(lambda k: k.c, k0, k0.c * scale)
        mass(eqx.tree_at(lambda m: m.joint_map.params, base, k), q)
    assert len(traces) == 1


@eqx.filter_jit
def _routes(model, q, qd):
    return [
        (fn(model, q, *a), fn(model, q, *a, method="lagrangian"))
        for fn, a in (
            (jaxmb.mass_matrix, ()),
            (jaxmb.gravity_forces, ()),
            (jaxmb.bias_forces, (qd,)),
        )
    ]


@pytest.mark.slow
def test_degroot_dynamics_routes_agree(degroot, poses):
    # the tree route against the Lagrangian (autodiff) referee
    for q in poses[:2]:
        for a, b in _routes(degroot, jnp.asarray(q), jnp.asarray([0.4, -0.7, 1.1])):
            a, b = np.asarray(a), np.asarray(b)
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max())
    M = np.asarray(jaxmb.mass_matrix(degroot, jnp.asarray(poses[0])))
    assert np.linalg.eigvalsh(M).min() > 0


def test_bad_input_raises_named_errors(monkeypatch):
    with pytest.raises(jaxmb.ModelError, match="unknown shoulder rhythm 'holzbaur'"):
        sh.shoulder("holzbaur", muscles=False)
    with pytest.raises(jaxmb.ModelError, match="needs MoblCouplings"):
        sh.shoulder("mobl", muscles=False, coefficients=sh.degroot_brand_coefficients())
    real = importlib.import_module

    def missing(name, package=None):
        if name == ".shoulder_muscles":
            raise ModuleNotFoundError("no", name="jaxmb.models.shoulder_muscles")
        return real(name, package)

    monkeypatch.setattr(sh.importlib, "import_module", missing)
    monkeypatch.delitem(sys.modules, "jaxmb.models.shoulder_muscles", raising=False)
    with pytest.raises(jaxmb.ModelError, match="shoulder_muscles.*muscles=False"):
        sh.shoulder("degroot", muscles=True)


# ----------------------------------------------------------------------------------------------
# Computed torque (Eqs. 200–201)
# ----------------------------------------------------------------------------------------------


def _desired():
    """Plane of elevation 90°, axial rotation −30°, elevation 0.1 → 2.1 rad (minimum jerk, 2 s)."""
    return MinimumJerk(
        [np.pi / 2, 0.1, -np.pi / 6], [np.pi / 2, 2.1, -np.pi / 6], 2.0
    )  # fmt: skip


def test_minimum_jerk_derivatives_by_autodiff():
    des = _desired()

    @jax.jit
    def derivs(t):
        return des(t)[1:], (jax.jacfwd(lambda s: des(s)[0])(t), jax.jacfwd(lambda s: des(s)[1])(t))

    for t in (0.13, 0.9, 1.0, 1.77):
        (qd, qdd), (qd_ad, qdd_ad) = derivs(jnp.asarray(t))
        np.testing.assert_allclose(qd, qd_ad, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(qdd, qdd_ad, rtol=1e-13, atol=1e-13)
    q_end, qd_end, _ = des(jnp.asarray(2.5))
    np.testing.assert_allclose(q_end, [np.pi / 2, 2.1, -np.pi / 6], rtol=0, atol=1e-15)
    assert not np.any(np.asarray(qd_end))


@eqx.filter_jit
def _evaluate(model, ctrl, block, t, q, qd):
    Qd = ctrl.commanded(t, q, qd)
    qdd, tau = eq200_solve(model, q, qd, Qd, t)
    plant = jaxmb.forward_dynamics(model, q, qd, tau, t)
    return Qd, qdd, tau, ctrl(t, q, qd), block(t, q, qd), plant


def test_computed_torque_eq200_equals_inverse_dynamics(degroot, poses):
    ctrl = computed_torque(degroot, K, _desired())
    block = computed_torque(degroot, np.diag(K), _desired(), method="eq200")
    rng = np.random.default_rng(1)
    for q in poses[:3]:
        q, qd, t = (
            jnp.asarray(q),
            jnp.asarray(rng.normal(size=3)),
            jnp.asarray(rng.random() * 2, dtype=jnp.float64),
        )
        Qd, qdd, tau, tau_rnea, tau_block, plant = _evaluate(degroot, ctrl, block, t, q, qd)
        np.testing.assert_allclose(qdd, Qd, rtol=0, atol=1e-10 * np.abs(Qd).max())
        np.testing.assert_allclose(tau_rnea, tau, rtol=0, atol=1e-12 * np.abs(tau).max())
        np.testing.assert_allclose(tau_block, tau, rtol=1e-12, atol=0)
        # the plant driven by τ accelerates as commanded
        np.testing.assert_allclose(plant, Qd, rtol=0, atol=1e-8)


def test_computed_torque_bound_to_its_plant_shares_its_terms(degroot, poses):
    """simulate binds a controller of its own model: τ from the right-hand side's M and
    N q̇ − G (Eq. 200's second row) equals the controller's own inverse dynamics, and q̈ is the
    plant's forward dynamics under that τ (independent routes: RNEA pass, Cholesky solve)."""
    ctrl = computed_torque(degroot, K, _desired())
    bound = ctrl.bind_plant(degroot)
    assert bound.reads_plant_terms and not ctrl.reads_plant_terms
    other = jaxmb.models.shoulder("mobl", muscles=False)
    assert ctrl.bind_plant(other) is ctrl  # a controller of another model keeps its own terms
    with pytest.raises(ValueError, match="bound to its plant"):
        bound(0.1, jnp.asarray(poses[0]), jnp.zeros(3))
    rng = np.random.default_rng(4)
    for q in poses[:3]:
        q, qd = jnp.asarray(q), jnp.asarray(rng.normal(size=3))
        t = jnp.asarray(rng.random() * 2, dtype=jnp.float64)
        qdd_bound, ok = try_forward_dynamics(degroot, q, qd, bound, t)
        qdd_plain, _ = try_forward_dynamics(degroot, q, qd, ctrl, t)
        assert bool(ok)
        scale = np.abs(np.asarray(ctrl.commanded(t, q, qd))).max()
        np.testing.assert_allclose(qdd_bound, qdd_plain, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(qdd_bound, ctrl.commanded(t, q, qd), rtol=0, atol=1e-10 * scale)


def test_computed_torque_rejects_bad_gains(degroot):
    with pytest.raises(ValueError, match="positive"):
        computed_torque(degroot, (100.0, -1.0, 1000.0), _desired())
    with pytest.raises(ValueError, match="diagonal"):
        computed_torque(degroot, np.ones((3, 3)), _desired())
    with pytest.raises(ValueError, match="3 diagonal gains"):
        computed_torque(degroot, (1.0, 2.0), _desired())
    with pytest.raises(ValueError, match="method"):
        computed_torque(degroot, K, _desired(), method="pd")


@pytest.fixture(scope="module")
def tracking(degroot):
    return simulate_tracking(degroot, K, _desired(), 2.0, solver="dopri5", rtol=1e-10, atol=1e-10)


def test_tracking_error_below_1e6(tracking):
    # measured (rtol = atol = 1e-10, dopri5): 0, 4.2e-12, 1.1e-16 rad; seed: 2e-4 rad on elevation
    err = np.abs(np.asarray(tracking.error)).max(axis=0)
    assert np.all(err < 1e-6), f"tracking errors {err.tolist()} rad"
    assert err[1] < 1e-9
    verr = np.abs(np.asarray(tracking.qd - tracking.qd_des)).max(axis=0)
    assert np.all(verr < 1e-6), f"velocity tracking errors {verr.tolist()} rad/s"


@eqx.filter_jit
def _lagrangian_torque(model, ctrl, t, q, qd):
    Qd = ctrl.commanded(t, q, qd)
    M = jaxmb.mass_matrix(model, q, method="lagrangian")
    N = jaxmb.bias_forces(model, q, qd, method="lagrangian")
    G = jaxmb.gravity_forces(model, q, method="lagrangian")
    return M @ Qd + N - G


def test_tracking_torques_by_eq200(tracking, degroot):
    """The controller's τ (inverse dynamics, RNEA) equals Eq. 200's block solve with M, N, G."""
    ctrl = computed_torque(degroot, K, _desired())
    block = computed_torque(degroot, np.diag(K), _desired(), method="eq200")
    for i in (0, 57, 100, 163, 200):
        t, q, qd = tracking.ts[i], tracking.q[i], tracking.qd[i]
        _, _, tau, _, _, _ = _evaluate(degroot, ctrl, block, t, q, qd)
        np.testing.assert_allclose(tracking.tau[i], tau, rtol=0, atol=1e-10)
    # holding the arm up takes a real elevation torque (N·m) at the end (static: τ = −G)
    np.testing.assert_allclose(
        tracking.tau[-1], -jaxmb.gravity_forces(degroot, tracking.q[-1]), rtol=0, atol=1e-6
    )
    assert abs(float(tracking.tau[-1, 1])) > 1.0


@pytest.mark.slow
def test_tracking_torques_against_lagrangian(tracking, degroot):
    """τ = M Q_d + N q̇ − G with M, N, G from the Lagrangian referee at sampled states."""
    ctrl = computed_torque(degroot, K, _desired())
    idx = np.array([0, 57, 100, 163, 200])
    ref = jax.vmap(lambda t, q, qd: _lagrangian_torque(degroot, ctrl, t, q, qd))(
        tracking.ts[idx], tracking.q[idx], tracking.qd[idx]
    )
    np.testing.assert_allclose(tracking.tau[idx], ref, rtol=0, atol=1e-10)
