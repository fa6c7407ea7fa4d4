"""arm26 muscle lengths and moment arms against OpenSim 4.6.

Reference: tests/data/arm26_opensim_reference.json (made by tests/data/make_arm26_reference.py):
``Muscle.getLength`` and −dL/dq by central differences (step 1e-6 rad) of OpenSim's length, on a
9 × 8 grid of (shoulder elevation, elbow flexion). When ``opensim`` is importable the JSON is also
re-checked live.

Measured (this commit): wherever OpenSim's path has no wrap object, lengths agree to 4e-16 m and
moment arms to 1.2e-10 m (the finite-difference noise). Where a wrap object is engaged, OpenSim's
own wrap algorithms are approximate (its cylinder slides the tangent points "to within 1 degree";
its ellipsoid uses a different section plane; TRIlong is iterated over two objects) and the
differences are larger — stated per case below. jaxmb's cylinder path is the exact geodesic
(tests/test_muscles.py checks it against brute-force minimisation), and it is never longer than
OpenSim's.
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmb import muscles as mu
from jaxmb.models.arm26 import arm26

REF = json.loads(
    (pathlib.Path(__file__).parent / "data" / "arm26_opensim_reference.json").read_text()
)


@pytest.fixture(scope="module")
def computed():
    model = arm26()
    qs = jnp.asarray(REF["poses"])
    L = jax.jit(jax.vmap(lambda q: mu.muscle_lengths(model, q)))(qs)
    R = jax.jit(jax.vmap(lambda q: mu.moment_arms(model, q)))(qs)
    return model, np.asarray(L), np.asarray(R)


def _masks(name):
    k = REF["muscles"].index(name)
    objs = [tuple(w[k]) for w in REF["wrap_objects_in_path"]]
    return k, objs


def test_names_match(computed):
    model, _, _ = computed
    assert model.muscle_names == tuple(REF["muscles"])
    assert model.coordinate_names == tuple(REF["coordinates"])


def test_unwrapped_paths_equal_opensim(computed):
    _, L, R = computed
    Lr, Rr = np.asarray(REF["lengths_m"]), np.asarray(REF["moment_arms_m"])
    n_checked = 0
    for name in REF["muscles"]:
        k, objs = _masks(name)
        free = np.array([len(o) == 0 for o in objs])
        if not free.any():
            continue
        n_checked += free.sum()
        assert np.abs(L[free, k] - Lr[free, k]).max() < 1e-12
        assert np.abs(R[free, :, k] - Rr[free, :, k]).max() < 1e-6
    assert n_checked >= 150  # BICshort never wraps: 72 poses alone


@pytest.mark.parametrize(
    "name, objects, dL, dR",
    [
        ("TRIlat", ("TRI",), 3e-6, 5e-6),
        ("TRImed", ("TRI",), 3e-6, 5e-6),
        ("BRA", ("TRI",), 3e-5, 1e-4),
        ("TRIlong", ("TRI",), 3e-6, 5e-6),
        # TRIlongglen (radius 3 mm, quadrant x): up to 1.96 mm at shoulder elevation ≥ 1.8 rad,
        # 3.6e-6 m elsewhere; not yet explained (OpenSim's constrained-cylinder heuristic?)
        ("TRIlong", ("TRIlongglen",), 2.5e-3, 2e-2),
        ("TRIlong", ("TRIlongglen", "TRI"), 2.5e-3, 2e-2),
    ],
)
def test_cylinder_wraps_are_geodesics_close_to_opensim(computed, name, objects, dL, dR):
    _, L, R = computed
    Lr, Rr = np.asarray(REF["lengths_m"]), np.asarray(REF["moment_arms_m"])
    k, objs = _masks(name)
    sel = np.array([o == objects for o in objs])
    if not sel.any():
        pytest.skip(f"no pose of the grid wraps {name} over exactly {objects}")
    diff = L[sel, k] - Lr[sel, k]
    assert diff.max() <= 1e-9  # the exact geodesic is never longer than OpenSim's approximation
    assert np.abs(diff).max() < dL
    assert np.abs(R[sel, :, k] - Rr[sel, :, k]).max() < dR


def test_ellipsoid_wrap_close_to_opensim(computed):
    """BIClong over BIClonghh: both are planar-section approximations with different planes."""
    _, L, R = computed
    Lr, Rr = np.asarray(REF["lengths_m"]), np.asarray(REF["moment_arms_m"])
    k, objs = _masks("BIClong")
    sel = np.array([o == ("BIClonghh",) for o in objs])
    assert sel.sum() >= 30
    assert np.abs(L[sel, k] - Lr[sel, k]).max() < 6e-5
    assert np.abs(R[sel, :, k] - Rr[sel, :, k]).max() < 5e-4


def test_trilong_double_wrap_is_the_known_gap(computed):
    """Where OpenSim wraps TRIlong over TRIlonghh as well (not modelled, see models/arm26.py) jaxmb
    is shorter by the extra wrap, under 1 cm on the grid."""
    _, L, _ = computed
    Lr = np.asarray(REF["lengths_m"])
    k, objs = _masks("TRIlong")
    sel = np.array(["TRIlonghh" in o for o in objs])
    assert sel.any()
    diff = L[sel, k] - Lr[sel, k]
    assert diff.max() <= 1e-9
    assert np.abs(diff).max() < 1e-2


def test_reference_json_matches_live_opensim():
    osim = pytest.importorskip("opensim")
    path = pathlib.Path(__file__).resolve().parent.parent / "jaxmb" / "data" / "arm26.osim"
    model = osim.Model(str(path))
    state = model.initSystem()
    coords, muscles = model.getCoordinateSet(), model.getMuscles()
    for idx in (0, 17, 40, 71):
        for i, v in enumerate(REF["poses"][idx]):
            coords.get(i).setValue(state, float(v), False)
        model.realizePosition(state)
        live = [muscles.get(i).getLength(state) for i in range(muscles.getSize())]
        assert np.abs(np.asarray(live) - np.asarray(REF["lengths_m"][idx])).max() < 1e-12
