"""OpenSim import against OpenSim 4.6: body poses, mass matrices, gravity forces, path points.

Muscles (lengths, moment arms, wrap objects, what raises) are in ``tests/test_osim_muscles.py``.

References come from ``tests/data/osim_reference.json`` (made with OpenSim 4.6 by
``tests/data/make_osim_reference.py``), so the default suite needs no ``opensim``; where
``opensim`` imports, the ``live`` tests (slow) recompute fresh poses with it. Targets: mass matrix
and gravity to 1e-8 relative (asserted 1e-10; measured ~1e-14); poses and path points 1e-12 m.
"""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import DATA

import jaxmb  # noqa: F401  (x64)
from jaxmb.dynamics import gravity_forces, mass_matrix
from jaxmb.io import functions as F
from jaxmb.io.osim import (
    OsimImportError,
    load_osim,
    osim_muscle_specs,
    read_osim,
)
from jaxmb.kinematics import body_transforms

REF = json.loads((DATA / "osim_reference.json").read_text())
MODELS = sorted(REF["models"])
REL = 1e-10  # stricter than the 1e-8 target; both sides are exact to rounding


def _import(key):
    r = REF["models"][key]
    # the reference puts MoBL-ARMS' file inertias back into OpenSim (its 3.0 upgrade rounds them)
    path = DATA / "osim" / r["file"]
    return read_osim(path, zero_inertia=tuple(r["phantoms"]), locked="free", inertia="file"), r


_CACHE: dict = {}


def _computed(key: str, imp, r) -> dict:
    """Everything the tests compare, for all reference poses at once: one compile per model."""
    if key not in _CACHE:
        qs = jnp.asarray([p["q"] for p in r["poses"]])
        jm = imp.model.joint_map

        @eqx.filter_jit
        def run(model, qs):
            def one(q):
                return dict(
                    Q=jm.full_coordinates(q),
                    P=jax.jacfwd(jm.full_coordinates)(q),
                    A=body_transforms(model, q),
                    M=mass_matrix(model, q, method="tree"),
                    G=gravity_forces(model, q),
                )

            return jax.vmap(one)(qs)

        _CACHE[key] = jax.tree.map(np.asarray, run(imp.model, qs))
    return _CACHE[key]


_SLOW = ("gait2354_simbody", "mobl_arms")  # ~30-60 s to compile each on a shared 2-core machine


def _params():
    return [pytest.param(k, marks=[pytest.mark.slow] if k in _SLOW else []) for k in MODELS]


@pytest.fixture(scope="module", params=_params())
def imported(request):
    imp, r = _import(request.param)
    return request.param, imp, r, _computed(request.param, imp, r)


def test_coordinates_are_opensims_independent_ones(imported):
    key, imp, r, _ = imported
    assert list(imp.model.coordinate_names) == r["independent"]
    assert [c.name for c in imp.coordinates] == r["coordinates"]
    assert set(imp.coupled) == set(r["coordinates"]) - set(r["independent"])


def test_full_coordinates_and_coupling_jacobian(imported):
    key, imp, r, out = imported
    u = np.asarray(r["u_index"])
    for k, pose in enumerate(r["poses"]):
        Qref = [pose["Q_full"][n] for n in r["coordinates"]]
        np.testing.assert_allclose(out["Q"][k], Qref, atol=1e-14)
        np.testing.assert_allclose(out["P"][k], np.asarray(pose["P"])[u], atol=1e-13)


def test_body_poses_match_opensim(imported):
    key, imp, r, out = imported
    for k, pose in enumerate(r["poses"]):
        for body, T in pose["body_transforms"].items():
            if body == "ground":
                continue
            idx, X = imp.body_frames[body]
            np.testing.assert_allclose(out["A"][k, idx] @ X, T, atol=1e-12, err_msg=body)


def test_mass_matrix_matches_opensim(imported):
    key, imp, r, out = imported
    for k, pose in enumerate(r["poses"]):
        Mref = np.asarray(pose["M"])
        err = np.abs(out["M"][k] - Mref).max() / np.abs(Mref).max()
        assert err < REL, f"{key}: mass matrix relative error {err:.2e}"


@pytest.mark.parametrize("key", _params())
def test_closed_form_mass_matrix_matches_opensim(key):
    imp, r = _import(key)
    pose = r["poses"][0]
    M = eqx.filter_jit(mass_matrix)(imp.model, jnp.asarray(pose["q"]), method="closed_form")
    Mref = np.asarray(pose["M"])
    err = np.abs(np.asarray(M) - Mref).max() / np.abs(Mref).max()
    assert err < REL, f"{key}: closed-form mass matrix relative error {err:.2e}"


def test_gravity_forces_match_opensim(imported):
    key, imp, r, out = imported
    for k, pose in enumerate(r["poses"]):
        Gref = np.asarray(pose["G"])
        err = np.abs(out["G"][k] - Gref).max() / np.abs(Gref).max()
        assert err < REL, f"{key}: gravity relative error {err:.2e}"


def test_path_points_match_opensim(imported):
    key, imp, r, out = imported
    specs = {m.name: m for m in imp.muscles}
    assert len(specs) == len({k.split("/")[0] for k in r["poses"][0]["path_points_in_ground"]})
    pose = r["poses"][0]
    q = jnp.asarray(pose["q"])
    A = out["A"][0]
    for muscle, spec in specs.items():
        for i, pt in enumerate(spec.path):
            b, x = imp.path_point(pt, q)
            xg = np.asarray(x) if b < 0 else A[b, :3, :3] @ np.asarray(x) + A[b, :3, 3]
            ref = pose["path_points_in_ground"][f"{muscle}/{i}"]
            np.testing.assert_allclose(xg, ref, atol=1e-12, err_msg=f"{muscle}/{pt.name}")


def test_joint_map_is_jittable_and_differentiable():
    imp, r = _import("leg6dof9musc")
    jm = imp.model.joint_map
    q = jnp.asarray(r["poses"][0]["q"])
    f, J, H = eqx.filter_jit(lambda m, q: m.derivatives(q))(jm, q)
    assert f.shape == (imp.model.nj,) and J.shape == (imp.model.nj, imp.model.nq)
    assert H.shape == (imp.model.nj, imp.model.nq, imp.model.nq)
    assert np.all(np.isfinite(np.asarray(H)))
    # the knee's translation splines: central differences of the exact Jacobian give the Hessian
    k = imp.model.coordinate_names.index("knee_angle_r")
    e = jnp.zeros(imp.model.nq).at[k].set(1e-6)
    Hfd = (jm.jacobian(q + e) - jm.jacobian(q - e)) / 2e-6
    np.testing.assert_allclose(np.asarray(H[:, :, k]), np.asarray(Hfd), atol=1e-6)


@eqx.filter_jit
def _evaluate(fn, xs):
    return tuple(jax.vmap(g)(xs) for g in (fn, jax.grad(fn), jax.grad(jax.grad(fn))))


def test_functions_match_opensim():
    import xml.etree.ElementTree as ET

    for ref in REF["functions"]:
        fn = F.parse_function(ET.fromstring(ref["xml"].split("?>", 1)[1])[0], "test")
        assert type(fn).__name__ == ref["tag"]
        xs = jnp.asarray(ref["at"])
        knots = np.asarray(ref.get("x", []))
        v, d1, d2 = (np.asarray(a) for a in _evaluate(fn, xs))
        np.testing.assert_allclose(v, ref["value"], rtol=1e-13, atol=1e-13, err_msg=ref["tag"])
        # a derivative exactly at a knot depends on the side each code picks: compare elsewhere
        away = np.array([np.all(np.abs(x - knots) > 1e-9) for x in ref["at"]])
        np.testing.assert_allclose(d1[away], np.asarray(ref["d1"])[away], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(d2[away], np.asarray(ref["d2"])[away], rtol=1e-11, atol=1e-11)


def test_muscle_specs():
    specs = osim_muscle_specs(DATA / "osim" / "arm26.osim")
    assert [m.name for m in specs] == ["TRIlong", "TRIlat", "TRImed", "BIClong", "BICshort", "BRA"]
    tri = specs[0]
    assert tri.kind == "Thelen2003Muscle"
    assert tri.parameters["max_isometric_force"] == pytest.approx(798.52)
    assert tri.wraps == ("TRI", "TRIlonghh", "TRIlongglen")
    leg = osim_muscle_specs(DATA / "osim" / "leg6dof9musc.osim")
    kinds = {p.kind for m in leg for p in m.path}
    assert kinds == {"PathPoint", "ConditionalPathPoint", "MovingPathPoint"}


def _edited(tmp_path, src, old, new):
    text = (DATA / "osim" / src).read_text()
    assert old in text
    p = tmp_path / src
    p.write_text(text.replace(old, new, 1))
    return p


def test_unsupported_joint_type_names_it(tmp_path):
    p = _edited(
        tmp_path, "double_pendulum.osim", '<PinJoint name="pin1">',
        '<ScapulothoracicJoint name="pin1">',
    )
    text = p.read_text().replace("</PinJoint>", "</ScapulothoracicJoint>", 1)
    p.write_text(text)
    with pytest.raises(OsimImportError, match=r"'pin1'.*'ScapulothoracicJoint'"):
        load_osim(p)


def test_unsupported_function_names_it(tmp_path):
    p = _edited(
        tmp_path,
        "leg6dof9musc.osim",
        "<coefficients> 1 0</coefficients>\n\t\t\t\t\t\t</LinearFunction>\n\t\t\t\t\t</coupled",
        "<coefficients> 1 0</coefficients>\n\t\t\t\t\t\t</LinearFunction>\n\t\t\t\t\t</coupled",
    )
    text = p.read_text()
    i = text.index("<coupled_coordinates_function>")
    j = text.index("</coupled_coordinates_function>")
    text = (
        text[:i] + "<coupled_coordinates_function><Sine><amplitude>1</amplitude></Sine>" + text[j:]
    )
    p.write_text(text)
    with pytest.raises(
        OsimImportError, match=r"'pat_angle_r'.*unsupported OpenSim function type 'Sine'"
    ):
        load_osim(p)


def test_unsupported_constraint_names_it(tmp_path):
    p = _edited(
        tmp_path,
        "leg6dof9musc.osim",
        '<CoordinateCouplerConstraint name="pat_angle_r">',
        '<WeldConstraint name="pat_angle_r">',
    )
    p.write_text(p.read_text().replace("</CoordinateCouplerConstraint>", "</WeldConstraint>", 1))
    with pytest.raises(OsimImportError, match=r"WeldConstraint 'pat_angle_r'"):
        load_osim(p)


def test_bad_files(tmp_path):
    with pytest.raises(OsimImportError, match="file not found"):
        load_osim(tmp_path / "missing.osim")
    bad = tmp_path / "bad.osim"
    bad.write_text("<OpenSimDocument><Model>")
    with pytest.raises(OsimImportError, match="not valid XML"):
        load_osim(bad)


@pytest.mark.slow
def test_locked_coordinates_are_noted():
    imp, _ = _import("mobl_arms")
    assert imp.locked == ("r_z",)
    assert "r_z" in imp.model.coordinate_names


# ---- live comparison with OpenSim (only where opensim is installed) --------------------------


@pytest.mark.slow
@pytest.mark.parametrize("key", MODELS)
def test_live_against_opensim(key):
    pytest.importorskip("opensim")
    import sys

    sys.path.insert(0, str(DATA))
    import make_osim_reference as mk

    r = mk.reference(key, np.random.default_rng(7))
    imp, _ = _import(key)
    for pose in r["poses"]:
        q = jnp.asarray(pose["q"])
        M = np.asarray(eqx.filter_jit(mass_matrix)(imp.model, q))
        G = np.asarray(eqx.filter_jit(gravity_forces)(imp.model, q))
        assert np.abs(M - np.asarray(pose["M"])).max() < REL * np.abs(np.asarray(pose["M"])).max()
        assert np.abs(G - np.asarray(pose["G"])).max() < REL * np.abs(np.asarray(pose["G"])).max()


def test_wrap_object_specs():
    imp, _ = _import("arm26")
    w = imp.wrap_objects
    assert set(w) == {"TRIlongglen", "TRI", "TRIlonghh", "BIClonghh"}
    tri = w["TRI"]
    assert tri.kind == "WrapCylinder" and tri.body == "r_humerus" and tri.quadrant == "all"
    assert tri.parameters["radius"] == 0.016
    np.testing.assert_allclose(tri.rotation.T @ tri.rotation, np.eye(3), atol=1e-15)


def test_motion_types_are_opensims_and_constraints_can_be_ignored():
    """OpenSim 4.6's motion type of a CustomJoint coordinate (CustomJoint::constructCoordinates):
    a LinearFunction of slope ±1 on a rotation axis makes it rotational, on a translation axis
    translational (the last such axis decides); only other functions make it "Coupled" (not in
    degrees in motion files, a ``_force`` in ID). leg6dof9musc's patella coordinate drives its
    rotation and translations through splines and multipliers: Coupled, though it turns a
    rotation axis. With ``constraints="ignore"`` it is a coordinate of the model beside the knee
    it otherwise follows."""
    path = DATA / "osim" / "leg6dof9musc.osim"
    imp = read_osim(path)
    kinds = {c.name: c.rotational for c in imp.coordinates}
    assert kinds["knee_angle_pat_r"] is False
    assert kinds["knee_angle_r"] and kinds["hip_flexion_r"] and not kinds["pelvis_tx"]
    assert "knee_angle_pat_r" not in imp.model.coordinate_names
    free = read_osim(path, constraints="ignore")
    assert free.model.coordinate_names == tuple(c.name for c in imp.coordinates)
    assert free.coupled == {} and imp.coupled["knee_angle_pat_r"][1] == "knee_angle_r"
    # multibody tree order: the patella (child of the femur, level 2) before the ankle (level 3)
    assert free.tree_order.index("knee_angle_pat_r") < free.tree_order.index("ankle_angle_r")
    with pytest.raises(ValueError, match="constraints"):
        read_osim(path, constraints="drop")


@pytest.mark.slow
def test_every_coordinates_motion_type_is_opensims():
    """``OsimCoordinate.rotational`` (degrees in motion files, ``_moment`` columns, a
    CoordinateLimitForce's limits in degrees) equals OpenSim 4.6's ``getMotionType() ==
    Rotational`` for every coordinate of every test model, 4.x and 3.x (measured: 306 of 306;
    before, 4 coordinates driven through splines or scaled functions, Coupled in OpenSim, read as
    rotational)."""
    osim = pytest.importorskip("opensim")
    files = sorted((DATA / "osim").glob("*.osim")) + sorted((DATA / "osim" / "zoo").glob("*.osim"))
    checked = 0
    for f in files:
        imp = read_osim(f, unsupported="warn")
        model = osim.Model(str(f))
        model.initSystem()
        cs = model.getCoordinateSet()
        for c in imp.coordinates:
            rotational = cs.get(c.name).getMotionType() == osim.Coordinate.Rotational
            assert c.rotational == rotational, (f.name, c.name)
            checked += 1
    assert checked > 250
