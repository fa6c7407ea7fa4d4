"""Prescribed coordinates (OpenSim's ``prescribed_function`` with ``prescribed`` true) against
OpenSim 4.6, on a four-body chain written by the test (``reference/osim_documents.py``): pin a
prescribed by a SimmSpline of time, slider b free, pin c prescribed by a cubic, pin d free.

- ``forward_dynamics`` at random states and times (the spline's ends passed: OpenSim extrapolates
  linearly) equals OpenSim's ``realizeAcceleration`` (u = q̇ at pins and sliders), issue 20's
  target 1e-7 relative (measured ~1e-15);
- ``simulate`` follows the functions and matches OpenSim's ``Manager`` integration;
- what OpenSim cannot do or jaxmb does not represent raises, naming the coordinate and the file.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference.osim_documents import prescribed_chain

import jaxmb as mb
from jaxmb.dynamics import batched_forward_dynamics, prescribe_state
from jaxmb.io.model_file import ModelFileError
from jaxmb.io.osim import OsimImportError, read_osim
from jaxmb.model import ModelError


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    p = tmp_path_factory.mktemp("prescribed") / "prescribed_chain.osim"
    p.write_text(prescribed_chain())
    return p


@pytest.fixture(scope="module")
def jm(written):
    return read_osim(written).model


@pytest.fixture(scope="module")
def opensim_chain(written):
    osim = pytest.importorskip("opensim")
    osim.Logger.setLevelString("error")
    model = osim.Model(str(written))
    state = model.initSystem()
    cs = model.getCoordinateSet()
    return osim, model, state, [cs.get(i) for i in range(cs.getSize())]


def test_reads_which_coordinates_are_prescribed(written):
    imp = read_osim(written)
    assert imp.prescribed == ("a", "c")
    assert imp.model.coordinate_names == ("a", "b", "c", "d")
    assert imp.model.prescribed.indices == (0, 2)
    # the functions of time are OpenSim's: a's spline through its knots, c's cubic
    for t, y in zip((0.0, 0.4, 0.9, 1.5, 2.0), (0.1, 0.6, -0.3, 0.4, 0.2), strict=True):
        assert float(imp.model.prescribed.functions[0](jnp.asarray(t))) == pytest.approx(y)
    t = 0.7
    assert float(imp.model.prescribed.functions[1](jnp.asarray(t))) == pytest.approx(
        0.3 * t**3 - 0.2 * t**2 + 0.5 * t - 0.4
    )


@given(
    q=st.lists(st.floats(-1.5, 1.5), min_size=4, max_size=4),
    u=st.lists(st.floats(-2.0, 2.0), min_size=4, max_size=4),
    t=st.floats(-0.5, 2.8),
)
def test_forward_dynamics_match_opensim(jm, opensim_chain, q, u, t):
    """q̈ at any state and time: prescribed coordinates take g̈(t), the others solve the
    partitioned equations with the state as given (OpenSim's realizeAcceleration)."""
    _, model, state, coords = opensim_chain
    state.setTime(t)
    for c, a, b in zip(coords, q, u, strict=True):
        c.setValue(state, a, False)
        c.setSpeedValue(state, b)
    model.realizeAcceleration(state)
    ref = np.array([c.getAccelerationValue(state) for c in coords])
    qdd = np.asarray(_fd(jm, jnp.asarray(q), jnp.asarray(u), jnp.asarray(t)))
    assert np.max(np.abs(qdd - ref)) <= 1e-10 * max(np.max(np.abs(ref)), 1.0)


_fd = eqx.filter_jit(lambda m, q, u, t: mb.forward_dynamics(m, q, u, t=t))


@pytest.mark.slow  # 14 s, most of it compiling the solve
def test_simulate_follows_the_functions_and_matches_opensims_manager(jm, opensim_chain):
    osim, model, _, coords = opensim_chain
    state = model.initSystem()
    q0 = np.array([0.3, 0.05, -0.2, 0.4])  # a and c are off their functions: both place them
    for c, v in zip(coords, q0, strict=True):
        c.setValue(state, float(v), False)
    state.setTime(0.0)
    manager = osim.Manager(model)
    manager.setIntegratorAccuracy(1e-11)
    manager.initialize(state)
    end = manager.integrate(0.6)
    q_ref = np.array([c.getValue(end) for c in coords])
    u_ref = np.array([c.getSpeedValue(end) for c in coords])

    ts = jnp.linspace(0.0, 0.6, 7)
    traj = mb.simulate(jm, jnp.asarray(q0), jnp.zeros(4), 0.6, ts=ts, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(np.asarray(traj.q[-1]), q_ref, rtol=0, atol=1e-7)
    np.testing.assert_allclose(np.asarray(traj.qd[-1]), u_ref, rtol=0, atol=1e-7)
    # the prescribed columns are the functions and their rates at every output time
    want = [prescribe_state(jm, q, qd, t) for q, qd, t in zip(traj.q, traj.qd, ts, strict=True)]
    np.testing.assert_array_equal(np.asarray(traj.q), np.stack([w[0] for w in want]))
    np.testing.assert_array_equal(np.asarray(traj.qd), np.stack([w[1] for w in want]))


def test_function_without_flag_or_flag_without_function_is_not_prescribed(tmp_path):
    """OpenSim 4.6: ``prescribed`` defaults to false, and true with an empty function is
    ignored (``Coordinate.isPrescribed`` is False in both; checked with OpenSim)."""
    p = tmp_path / "m.osim"
    p.write_text(prescribed_chain().replace("<prescribed>true</prescribed>", "", 1))
    assert read_osim(p).prescribed == ("c",)
    text = prescribed_chain()
    start = text.index("<prescribed_function><PolynomialFunction>")
    end = text.index("</prescribed_function>", start) + len("</prescribed_function>")
    p.write_text(text[:start] + "<prescribed_function />" + text[end:])
    assert read_osim(p).prescribed == ("a",)


def test_what_cannot_be_prescribed_raises_naming_it(tmp_path):
    p = tmp_path / "locked.osim"
    p.write_text(prescribed_chain(locked=True))  # OpenSim 4.6 fails to assemble this model
    with pytest.raises(OsimImportError, match=r"Coordinate 'a' of joint 'j1'.*also locked") as e:
        read_osim(p)
    assert str(p) in str(e.value)
    with pytest.warns(UserWarning, match="Coordinate 'a'.*also locked"):
        imp = read_osim(p, unsupported="warn")
    assert imp.prescribed == ("c",)
    p = tmp_path / "sine.osim"
    p.write_text(prescribed_chain(c="<Sine><amplitude>1</amplitude></Sine>"))
    with pytest.raises(OsimImportError, match=r"Coordinate 'c'.*prescribed_function.*'Sine'"):
        read_osim(p)


def test_batched_forward_dynamics_refuses_prescribed_coordinates(jm):
    with pytest.raises(ModelError, match="prescribed coordinates"):
        batched_forward_dynamics(jm, jnp.zeros((4, 2)), jnp.zeros((4, 2)))


def test_model_file_refuses_prescribed_coordinates_rather_than_dropping_them(jm, tmp_path):
    with pytest.raises(ModelFileError, match=r"prescribed coordinates \['a', 'c'\]"):
        mb.io.save_model(jm, tmp_path / "m.json")
