"""Batched APIs: vmap over states, initial conditions and model parameters; one compile per model.

References: every batched result is compared with the same function called element by element in a
Python loop (1e-12 relative: the same float64 arithmetic, only vectorized). Compilations are counted
with JAX's own monitoring events (``/jax/core/compile/backend_compile_duration``) and with a
Python-side trace counter.
"""

import contextlib

import equinox as eqx
import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, random_models

import jaxmb as mb
from jaxmb import batch
from jaxmb.model import ModelError
from jaxmb.models.chain import chain
from jaxmb.simulation import simulate

RTOL = 1e-12

_COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, *_a, **_k: (
        _COMPILES.append(name) if name == "/jax/core/compile/backend_compile_duration" else None
    )
)


@contextlib.contextmanager
def count_compiles():
    """Yield a list that ends up holding one entry per XLA compilation inside the block."""
    start = len(_COMPILES)
    out = []
    yield out
    out.extend(_COMPILES[start:])


TRACES = {"n": 0}


def traced_terms(model, q, qd):
    """M, N q̇ and G of one state; counts how often JAX traces it."""
    TRACES["n"] += 1
    return (
        mb.mass_matrix(model, q),
        mb.bias_forces(model, q, qd),
        mb.gravity_forces(model, q),
    )


def terms(model, q, qd):
    return mb.mass_matrix(model, q), mb.bias_forces(model, q, qd), mb.gravity_forces(model, q)


terms_one = eqx.filter_jit(terms)  # the unbatched reference: same function, no vmap


def _close(a, b, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(np.abs(b).max(), 1.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


# ------------------------------------------------------------------------------------------------
# building batched models


def test_vary_shapes_and_values():
    m = chain(4)
    masses = jnp.linspace(0.5, 2.0, 6)[:, None] * m.mass
    bm = batch.vary(m, lambda m: m.mass, masses)
    assert batch.batch_size(bm) == 6
    assert bm.mass.shape == (6, 4) and bm.inertia.shape == (6, 4, 3, 3)
    np.testing.assert_array_equal(bm.mass, masses)
    np.testing.assert_array_equal(bm.d[3], m.d)
    one = batch.unstack_model(bm, 2)
    np.testing.assert_array_equal(one.mass, masses[2])
    assert one.parent == m.parent and one.name == m.name


def test_vary_several_leaves_and_paths():
    m = chain(3)
    d = jnp.stack([m.d * s for s in (0.9, 1.0, 1.1)])
    mass = jnp.stack([m.mass * s for s in (1.0, 2.0, 3.0)])
    bm = batch.vary(m, lambda m: (m.d, m.mass), (d, mass))
    np.testing.assert_array_equal(bm.d, d)
    np.testing.assert_array_equal(bm.mass, mass)
    bm2 = batch.vary(m, "d", d, broadcast=False)
    assert bm2.d.shape == (3, 3) and bm2.mass.shape == (3,)


def test_vary_rejects_bad_values():
    m = chain(3)
    with pytest.raises(ModelError, match="expected"):
        batch.vary(m, lambda m: m.mass, jnp.ones((5, 4)))
    with pytest.raises(ModelError, match="leading batch axis"):
        batch.vary(m, lambda m: (m.mass, m.d), (jnp.ones((5, 3)), jnp.ones((4, 3))))
    with pytest.raises(ModelError, match="2 leaves"):
        batch.vary(m, lambda m: (m.mass, m.d), (jnp.ones((5, 3)),))


def test_stack_models_matches_and_rejects_other_structures():
    ms = [chain(3) for _ in range(3)]
    ms = [eqx.tree_at(lambda m: m.mass, m, m.mass * (k + 1)) for k, m in enumerate(ms)]
    s = batch.stack_models(ms)
    assert s.mass.shape == (3, 3)
    np.testing.assert_array_equal(s.mass[2], ms[2].mass)
    with pytest.raises(ModelError, match="model 1"):
        batch.stack_models([chain(3), chain(4)])


# ------------------------------------------------------------------------------------------------
# vmap over states, initial conditions and model parameters


@settings(max_examples=examples(3))
@given(random_models(max_bodies=5, max_nq=4, coupled=True), st.integers(0, 2**31 - 1))
def test_batched_terms_match_loop_over_states(model, seed):
    rng = np.random.default_rng(seed)
    B = 5
    q = jnp.asarray(rng.uniform(-1.5, 1.5, (B, model.nq)))
    qd = jnp.asarray(rng.uniform(-2.0, 2.0, (B, model.nq)))
    M, h, g = batch.shard_batch(terms, model, q, qd, in_axes=(None, 0, 0))
    for b in range(B):
        Mb, hb, gb = terms_one(model, q[b], qd[b])
        _close(M[b], Mb)
        _close(h[b], hb)
        _close(g[b], gb)


def test_batched_terms_match_loop_over_parameters():
    m = chain(5)
    rng = np.random.default_rng(0)
    B = 7
    masses = jnp.asarray(rng.uniform(0.5, 2.0, (B, 5)))
    offsets = jnp.asarray(rng.uniform(0.1, 0.5, (B, 5)))
    bm = batch.vary(m, lambda m: (m.mass, m.d), (masses, offsets))
    q = jnp.asarray(rng.uniform(-1, 1, (B, 5)))
    qd = jnp.asarray(rng.uniform(-1, 1, (B, 5)))
    M, h, g = eqx.filter_jit(eqx.filter_vmap(terms))(bm, q, qd)
    for b in range(B):
        mb_ = eqx.tree_at(lambda m: (m.mass, m.d), m, (masses[b], offsets[b]))
        Mb, hb, gb = terms_one(mb_, q[b], qd[b])
        _close(M[b], Mb)
        _close(h[b], hb)
        _close(g[b], gb)
    # shard_batch over the batched model gives the same
    M2, h2, g2 = batch.shard_batch(terms, bm, q, qd)
    _close(M2, M)
    _close(h2, h)
    _close(g2, g)


def test_batch_not_divisible_by_devices_is_padded_and_trimmed():
    m = chain(3)
    q = jnp.linspace(-1, 1, 9).reshape(3, 3)
    out = batch.shard_batch(terms, m, q, q, in_axes=(None, 0, 0))
    assert out[0].shape == (3, 3, 3)


# ------------------------------------------------------------------------------------------------
# compile once per model structure


def test_new_parameter_values_and_states_never_recompile():
    m = chain(6)
    rng = np.random.default_rng(1)
    B = 8
    inputs = []
    for _ in range(4):
        bm = batch.vary(
            m,
            lambda m: (m.mass, m.d, m.com, m.inertia, m.gravity),
            (
                jnp.asarray(rng.uniform(0.5, 2, (B, 6))),
                jnp.asarray(rng.uniform(0.1, 0.5, (B, 6))),
                jnp.asarray(rng.uniform(-0.2, 0.2, (B, 6, 3))),
                jnp.broadcast_to(m.inertia * rng.uniform(0.5, 2), (B, 6, 3, 3)),
                jnp.asarray(rng.normal(size=(B, 3))),
            ),
        )
        inputs.append(
            (bm, jnp.asarray(rng.normal(size=(B, 6))), jnp.asarray(rng.normal(size=(B, 6))))
        )
    TRACES["n"] = 0
    first = batch.shard_batch(traced_terms, *inputs[0])
    jax.block_until_ready(first)
    assert TRACES["n"] == 1
    outs = []
    with count_compiles() as compiles:
        for args in inputs[1:]:
            outs.append(batch.shard_batch(traced_terms, *args))
        jax.block_until_ready(outs)
    assert TRACES["n"] == 1, "new parameter values retraced the batched function"
    assert compiles == [], f"new parameter values recompiled: {len(compiles)} compilations"
    # and the values are really the new ones, not a cached result
    assert not np.allclose(np.asarray(outs[0][0]), np.asarray(first[0]))


def test_single_model_jit_does_not_recompile_on_parameter_change():
    m = chain(4)
    f = eqx.filter_jit(traced_terms)
    q = jnp.full(4, 0.3)
    models = [
        eqx.tree_at(lambda m: (m.mass, m.inertia), m, (m.mass * s, m.inertia * s))
        for s in (1.0, 2.0, 3.0)
    ]
    TRACES["n"] = 0
    jax.block_until_ready(f(models[0], q, q))
    with count_compiles() as compiles:
        outs = [f(mm, q, q) for mm in models[1:]]
        jax.block_until_ready(outs)
    assert TRACES["n"] == 1 and compiles == []
    _close(outs[1][0], 3.0 * f(models[0], q, q)[0])  # M is linear in (m, I)


def test_a_different_structure_does_compile():
    """The counter is not blind: a new structure (another chain length) must compile."""
    TRACES["n"] = 0
    q3, q4 = jnp.zeros((2, 3)), jnp.zeros((2, 4))
    jax.block_until_ready(batch.shard_batch(traced_terms, chain(3), q3, q3, in_axes=(None, 0, 0)))
    with count_compiles() as compiles:
        jax.block_until_ready(
            batch.shard_batch(traced_terms, chain(4), q4, q4, in_axes=(None, 0, 0))
        )
    assert TRACES["n"] == 2 and len(compiles) >= 1


# ------------------------------------------------------------------------------------------------
# batched simulation


def test_simulate_batch_matches_single_runs_and_does_not_recompile():
    m = chain(3)
    rng = np.random.default_rng(2)
    B = 4
    ts = jnp.linspace(0.0, 0.2, 5)
    runs = []
    for _ in range(3):
        masses = jnp.asarray(rng.uniform(0.5, 2.0, (B, 3)))
        bm = batch.vary(m, lambda m: m.mass, masses)
        q0 = jnp.asarray(rng.uniform(-1, 1, (B, 3)))
        qd0 = jnp.asarray(rng.uniform(-1, 1, (B, 3)))
        runs.append((masses, bm, q0, qd0))
    opts = dict(rtol=1e-10, atol=1e-10)
    masses, bm, q0, qd0 = runs[0]
    tr = batch.simulate_batch(bm, q0, qd0, 0.2, ts, batched_model=True, **opts)
    assert tr.q.shape == (B, 5, 3) and tr.qd.shape == (B, 5, 3)
    for b in range(B):
        one = simulate(eqx.tree_at(lambda m: m.mass, m, masses[b]), q0[b], qd0[b], 0.2, ts, **opts)
        np.testing.assert_allclose(tr.q[b], one.q, rtol=0, atol=1e-11)
        np.testing.assert_allclose(tr.qd[b], one.qd, rtol=0, atol=1e-10)
    ts2 = ts * 0.75  # new values prepared outside the counted block (they compile small kernels)
    t12 = float(ts2[-1])
    with count_compiles() as compiles:
        outs = [
            batch.simulate_batch(bm_, q0_, qd0_, 0.2, ts, batched_model=True, **opts).q
            for _, bm_, q0_, qd0_ in runs[1:]
        ]
        # a new final time and output grid are traced values as well
        outs.append(batch.simulate_batch(bm, q0, qd0, t12, ts2, batched_model=True, **opts).q)
        jax.block_until_ready(outs)
    assert compiles == [], f"{len(compiles)} recompilations for new values"


def test_simulate_batch_over_initial_conditions_only():
    m = chain(2)
    q0 = jnp.array([[0.1, 0.2], [0.3, -0.2], [0.0, 0.5]])
    qd0 = jnp.zeros_like(q0)
    ts = jnp.linspace(0, 0.1, 3)
    tr = batch.simulate_batch(m, q0, qd0, 0.1, ts, rtol=1e-10, atol=1e-10)
    for b in range(3):
        one = simulate(m, q0[b], qd0[b], 0.1, ts, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(tr.q[b], one.q, rtol=0, atol=1e-11)
