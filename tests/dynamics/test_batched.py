"""The batched entry points of the tree algorithm (batch-last CRBA/RNEA) against the per-state
functions, autodiff and Pinocchio.

Every model here is one structure compiled once per test (module-scoped data, fixed seeds), so the
file stays well under 20 s on one core.
"""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from strategies import random_bodies, random_coupling

import jaxmb as mb
from jaxmb.dynamics import (
    batched_forward_dynamics,
    batched_terms,
    bias_forces,
    equations_of_motion_bm,
    forward_dynamics,
    gravity_forces,
    mass_matrix,
)
from jaxmb.dynamics.tree import is_identity_map
from jaxmb.model import ModelError
from jaxmb.models.chain import chain
from jaxmb.simulation import batched_rk4

B = 6


def _states(nq, seed, B=B, dtype=jnp.float64):
    rng = np.random.default_rng(seed)
    q = jnp.asarray(rng.uniform(-np.pi, np.pi, (B, nq)), dtype)
    qd = jnp.asarray(rng.uniform(-2.0, 2.0, (B, nq)), dtype)
    return q, qd


@eqx.filter_jit
def _reference(model, q, qd):
    M = jax.vmap(mass_matrix, (None, 0))(model, q)
    N = jax.vmap(bias_forces, (None, 0, 0))(model, q, qd)
    G = jax.vmap(gravity_forces, (None, 0))(model, q)
    return M, N, G


def _assert_close(a, b, tol, what):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.abs(b).max()))
    err = float(np.abs(a - b).max())
    assert err <= tol * scale, f"{what}: max |Δ| {err:.3e} > {tol:g} × {scale:.3g}"


def _tree_model(seed, coupled):
    rng = np.random.default_rng(seed)
    bodies = random_bodies(rng, 6)  # branching, revolute and prismatic, some massless bodies
    jm = random_coupling(rng, 4, 6) if coupled else None
    return mb.build_model(bodies, jm, gravity=tuple(rng.normal(size=3) * 5.0), name=f"tree{seed}")


@pytest.mark.parametrize(
    "make",
    [lambda: chain(7), lambda: _tree_model(11, False), lambda: _tree_model(12, True)],
    ids=["chain7", "tree-identity", "tree-coupled"],
)
def test_terms_match_tree_path(make):
    """M, N q̇ and G equal vmap of the tree path to 1e-12 (relative to max(1, |ref|))."""
    model = make()
    q, qd = _states(model.nq, 0)
    M, N, G = eqx.filter_jit(batched_terms)(model, q, qd)
    Mr, Nr, Gr = _reference(model, q, qd)
    assert M.shape == (B, model.nq, model.nq) and N.shape == G.shape == (B, model.nq)
    _assert_close(M, Mr, 1e-12, "M")
    _assert_close(N, Nr, 1e-12, "N q̇")
    _assert_close(G, Gr, 1e-12, "G")
    np.testing.assert_array_equal(np.asarray(M), np.asarray(jnp.swapaxes(M, 1, 2)))


def test_identity_flag_under_jit_matches_projection():
    """identity_map=True (no projection, the benchmark's setting) = the projected general route."""
    # a LinearMap with A = I: undecidable once traced, so None must project
    model = eqx.tree_at(lambda m: m.joint_map, chain(5), mb.LinearMap(np.eye(5)))
    q, qd = _states(5, 1)
    dyn, static = eqx.partition(model, eqx.is_array)

    @jax.jit
    def both(dyn, q, qd):  # the map's A is a tracer here: None must fall back to projecting
        m = eqx.combine(dyn, static)
        return (
            equations_of_motion_bm(m, q.T, qd.T, identity_map=True),
            equations_of_motion_bm(m, q.T, qd.T, identity_map=None),
        )

    fast, general = both(dyn, q, qd)
    for a, b, what in zip(fast, general, ("M", "N q̇", "G"), strict=True):
        _assert_close(a, b, 1e-13, what)


try:
    import pinocchio as pin
except ImportError:  # Pinocchio is an optional peer
    pin = None


@pytest.mark.skipif(pin is None, reason="pinocchio not installed")
def test_chain_against_pinocchio():
    """chain(7): M and N q̇ − G against Pinocchio's crba and nonLinearEffects to 1e-12."""
    n = 7
    pm = pin.Model()
    pm.gravity.linear = np.array([0.0, 0.0, -9.81])
    parent = 0
    joints = (pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ)
    for i in range(n):
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.0 if i == 0 else 0.3]))
        j = pm.addJoint(parent, joints[i % 3](), placement, f"j{i}")
        inertia = pin.Inertia(1.0 + 0.1 * i, np.array([0, 0, 0.15]), np.diag([0.02, 0.02, 0.005]))
        pm.appendBodyToJoint(j, inertia, pin.SE3.Identity())
        parent = j
    data = pm.createData()
    q, qd = _states(n, 2)
    M, N, G = eqx.filter_jit(batched_terms)(chain(n), q, qd)
    for b in range(B):
        Mp = pin.crba(pm, data, np.asarray(q[b]))
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        nle = pin.nonLinearEffects(pm, data, np.asarray(q[b]), np.asarray(qd[b]))
        _assert_close(M[b], Mp, 1e-12, f"M state {b}")
        _assert_close(N[b] - G[b], nle, 1e-12, f"N q̇ − G state {b}")


def test_forward_dynamics_and_rk4():
    """q̈ against dynamics.forward_dynamics (1e-10 relative) and RK4 against a per-state RK4."""
    model = _tree_model(13, True)
    q, qd = _states(model.nq, 3, dtype=jnp.float64)
    qd = 0.3 * qd
    qdd = eqx.filter_jit(batched_forward_dynamics)(model, q.T, qd.T)
    fd = eqx.filter_jit(jax.vmap(forward_dynamics, (None, 0, 0)))
    ref = fd(model, q, qd)
    _assert_close(qdd.T, ref, 1e-10, "q̈")

    dt, K = 1e-3, 3
    rq, rqd = q, qd
    for _ in range(K):  # the reference RK4 step by step in Python, reusing the compiled fd
        k1 = (rqd, fd(model, rq, rqd))
        k2 = (rqd + 0.5 * dt * k1[1], fd(model, rq + 0.5 * dt * k1[0], rqd + 0.5 * dt * k1[1]))
        k3 = (rqd + 0.5 * dt * k2[1], fd(model, rq + 0.5 * dt * k2[0], rqd + 0.5 * dt * k2[1]))
        k4 = (rqd + dt * k3[1], fd(model, rq + dt * k3[0], rqd + dt * k3[1]))
        rq = rq + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        rqd = rqd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    qK, qdK = eqx.filter_jit(batched_rk4)(model, q.T, qd.T, dt, K)
    _assert_close(qK.T, rq, 1e-11, "q after RK4")
    _assert_close(qdK.T, rqd, 1e-10, "q̇ after RK4")


def test_float32_stays_float32():
    """A float32 model and states give float32 terms within 1e-4 relative of float64."""
    model = chain(7)
    m32 = jax.tree.map(
        lambda x: (
            x.astype(jnp.float32)
            if eqx.is_array(x) and jnp.issubdtype(x.dtype, jnp.floating)
            else x
        ),
        model,
    )
    q, qd = _states(7, 4)
    out32 = eqx.filter_jit(batched_terms)(m32, q.astype(jnp.float32), qd.astype(jnp.float32))
    out64 = eqx.filter_jit(batched_terms)(model, q, qd)
    for a, b, what in zip(out32, out64, ("M", "N q̇", "G"), strict=True):
        assert a.dtype == jnp.float32, what
        _assert_close(a, b, 1e-4, what)


@pytest.mark.slow
def test_gradient_wrt_parameters_matches_tree_path():
    """∂(Σ M + Σ N q̇ + Σ G)/∂(masses, com) through the batch-last route = through the tree path."""
    model = chain(4)
    q, qd = _states(4, 5)

    def loss(fn, mass, com):
        m = eqx.tree_at(lambda m: (m.mass, m.com), model, (mass, com))
        return sum(jnp.sum(x) for x in fn(m, q, qd))

    g1 = jax.jit(jax.grad(lambda a, c: loss(batched_terms, a, c), argnums=(0, 1)))(
        model.mass, model.com
    )
    g2 = jax.jit(jax.grad(lambda a, c: loss(_reference, a, c), argnums=(0, 1)))(
        model.mass, model.com
    )
    for a, b in zip(g1, g2, strict=True):
        _assert_close(a, b, 1e-12, "gradient")


def test_identity_map_is_known_under_a_trace():
    """chain(n)'s IdentityMap is the identity by type: with the model a jit argument (traced),
    the public terms take the route without projection, and equal the projected route of the
    same model with a LinearMap(I) (1e-13 relative)."""
    model = chain(5)
    assert isinstance(model.joint_map, mb.IdentityMap)
    linear = eqx.tree_at(lambda m: m.joint_map, model, mb.LinearMap(np.eye(5)))
    q, qd = _states(5, 2)
    seen = []

    @eqx.filter_jit  # the model an argument, its arrays traced
    def terms(m, q, qd):
        seen.append(is_identity_map(m))
        return jax.vmap(lambda a, b: (mass_matrix(m, a), bias_forces(m, a, b),
                                      gravity_forces(m, a)))(q, qd)  # fmt: skip

    outs = [terms(mdl, q, qd) for mdl in (model, linear)]
    assert seen == [True, None]
    for a, b, what in zip(*outs, ("M", "N q̇", "G"), strict=True):
        _assert_close(a, b, 1e-13, what)


def test_bad_input_raises():
    model = chain(3)
    with pytest.raises(ValueError, match="chain3.*shape"):
        equations_of_motion_bm(model, jnp.zeros((4, 3)), jnp.zeros((4, 3)))
    coupled = _tree_model(12, True)
    with pytest.raises(ModelError, match="identity_map=True.*tree12"):
        equations_of_motion_bm(coupled, jnp.zeros((4, 2)), jnp.zeros((4, 2)), identity_map=True)
    lin = mb.build_model(random_bodies(np.random.default_rng(0), 2), mb.LinearMap(2 * np.eye(2)))
    with pytest.raises(ModelError, match="not f\\(q\\) = q"):
        equations_of_motion_bm(lin, jnp.zeros((2, 3)), jnp.zeros((2, 3)), identity_map=True)


def test_chunked_batch_equals_whole_batch():
    """Processing the batch in cache-sized chunks (lax.map) changes nothing but the last bit.

    Not bit for bit: XLA:CPU contracts a multiply and an add into one FMA or not depending on how
    it vectorises a fused loop, and that depends on the chunk's width (chain(3): ``I a`` of the
    RNEA differs by one ulp between chunks of 8 and of 4 states), so the bound is 4 ulp of the
    largest entry."""
    model = chain(3)
    q, qd = _states(3, 6, B=8)
    # as users compile it: conftest lowers the suite's XLA optimization level
    opt = {"xla_backend_optimization_level": 3}

    def run(chunk):
        f = jax.jit(lambda q, qd: equations_of_motion_bm(model, q, qd, chunk=chunk))
        return f.lower(q.T, qd.T).compile(compiler_options=opt)(q.T, qd.T)

    whole, parts = run(None), run(4)
    for a, b in zip(whole, parts, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=0, atol=4 * np.finfo(float).eps * np.abs(a).max())


def test_accelerator_batch_runs_unchunked_and_equals_cpu_chunks(monkeypatch):
    """On an accelerator the batched kernel takes the whole batch at once (no lax.map over
    cache-sized chunks, which serializes a GPU batch into launch-bound steps); that program, run
    here by pretending the backend is a GPU, equals the CPU's chunked one to 4 ulp (see above)."""
    import jaxmb.dynamics.tree as tree

    assert tree.batch_chunk(64) == 64  # this suite runs on a CPU
    model = chain(4)
    q, qd = _states(4, 5, B=5 * tree.CHUNK)
    f = lambda q, qd: tree.equations_of_motion_bm(model, q.T, qd.T)
    # a new function each time: JAX caches a traced function's jaxpr
    scans = lambda: [e.params["length"] for e in jax.make_jaxpr(lambda *a: f(*a))(q, qd).eqns
                     if e.primitive.name == "scan"]  # fmt: skip
    assert 5 in scans()  # lax.map over 5 chunks
    cpu = jax.jit(f)(q, qd)
    monkeypatch.setattr(tree.jax, "default_backend", lambda: "gpu")
    assert tree.batch_chunk(64) is None
    assert 5 not in scans() and 1 in scans()  # one chunk: the whole batch
    gpu = jax.jit(lambda *a: f(*a))(q, qd)
    for a, b in zip(cpu, gpu, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=0, atol=4 * np.finfo(float).eps * np.abs(a).max())


def test_vmap_of_public_terms_runs_the_batch_last_kernel_and_stays_exact():
    """jax.vmap of mb.mass_matrix / bias_forces / gravity_forces (their custom_vmap rule calls the
    batch-last kernel, chunked) equals the one-state code state by state to 1e-12, for a chain
    (f = q: projection skipped) and with a batch of models (the rule's fallback); reverse-mode
    derivatives through the vmapped functions are the one-state code's."""
    model = chain(5)
    q, qd = _states(5, 11, B=256)
    one = lambda q, qd: (mb.mass_matrix(model, q), mb.bias_forces(model, q, qd),
                         mb.gravity_forces(model, q))  # fmt: skip
    got = jax.jit(jax.vmap(one))(q, qd)
    per_state = [one(q[i], qd[i]) for i in range(8)]
    want = [np.stack(x) for x in zip(*per_state, strict=True)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g[:8], w, rtol=0, atol=1e-12 * np.max(np.abs(w)))
    stack = lambda x: jnp.stack([x, 1.5 * x]) if eqx.is_inexact_array(x) else x
    models = jax.tree_util.tree_map(stack, model)
    axes = jax.tree_util.tree_map(lambda x: 0 if eqx.is_inexact_array(x) else None, model)
    Ms = eqx.filter_vmap(lambda m, a: mb.mass_matrix(m, a), in_axes=(axes, None))(models, q[0])
    np.testing.assert_allclose(Ms[0], want[0][0], rtol=0, atol=1e-12 * np.max(np.abs(want[0])))
    loss = lambda q: jnp.sum(jax.vmap(lambda a: mb.gravity_forces(model, a))(q) ** 2)
    ref = lambda q: sum(jnp.sum(mb.gravity_forces(model, a) ** 2) for a in q)
    np.testing.assert_allclose(jax.grad(loss)(q[:4]), jax.grad(ref)(q[:4]), rtol=1e-12)


def test_vmap_of_the_three_terms_computes_the_kinematics_once():
    """In one jit of jax.vmap of M, N q̇ and G the three batching rules emit the same kinematics
    loop, and XLA keeps one: four loops (kinematics, CRBA, RNEA, gravity sums), not six."""
    model = chain(5)
    q = jnp.zeros((1024, 5))

    def loops(f):
        return len(re.findall(r"\bwhile\(", jax.jit(jax.vmap(f)).lower(q, q).compile().as_text()))

    one = lambda q, qd: (mb.mass_matrix(model, q), mb.bias_forces(model, q, qd),
                         mb.gravity_forces(model, q))  # fmt: skip
    assert loops(lambda q, qd: mb.mass_matrix(model, q)) == 2
    assert loops(one) == 4
