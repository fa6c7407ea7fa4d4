"""Batch sharding over a device mesh: identical results to the single-device run.

The check runs in a subprocess started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
(the flag must be set before JAX initialises its backend), which gives 4 CPU devices. Inside it the
same batched computations run once on a one-device mesh and once sharded over all 4 devices, and
the outputs are compared. Tolerance: the same float64 arithmetic per batch member, so we ask for
agreement to 1e-13 absolute and report whether it is bitwise.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import ROOT

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    import jaxmb as mb
    from jaxmb import batch
    from jaxmb.models.chain import chain

    assert len(jax.devices()) == 4, jax.devices()
    one = batch.batch_mesh(jax.devices()[:1])
    four = batch.batch_mesh()

    def terms(model, q, qd):
        return mb.mass_matrix(model, q), mb.bias_forces(model, q, qd), mb.gravity_forces(model, q)

    rng = np.random.default_rng(0)
    m = chain(5)
    B = 10  # not a multiple of 4: padded and trimmed
    bm = batch.vary(m, lambda m: (m.mass, m.d), (rng.uniform(0.5, 2, (B, 5)),
                                                  rng.uniform(0.1, 0.5, (B, 5))))
    q = jnp.asarray(rng.uniform(-1, 1, (B, 5)))
    qd = jnp.asarray(rng.uniform(-1, 1, (B, 5)))
    out = {}
    a = batch.shard_batch(terms, bm, q, qd, mesh=one)
    b = batch.shard_batch(terms, bm, q, qd, mesh=four)
    out["terms_devices"] = len(b[0].sharding.device_set)
    a, b = [np.asarray(x) for x in a], [np.asarray(x) for x in b]
    out["terms_maxdiff"] = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
    out["terms_bitwise"] = all(bool(np.array_equal(x, y)) for x, y in zip(a, b))

    m3 = chain(3)
    B = 6
    bm3 = batch.vary(m3, lambda m: m.mass, rng.uniform(0.5, 2, (B, 3)))
    q0 = jnp.asarray(rng.uniform(-1, 1, (B, 3)))
    qd0 = jnp.zeros((B, 3))
    ts = jnp.linspace(0, 0.3, 4)
    kw = dict(batched_model=True, rtol=1e-9, atol=1e-9)
    s1 = batch.simulate_sharded(bm3, q0, qd0, 0.3, ts, mesh=one, **kw)
    s4 = batch.simulate_sharded(bm3, q0, qd0, 0.3, ts, mesh=four, **kw)
    out["sim_devices"] = len(s4.q.sharding.device_set)
    out["sim_shape"] = list(s4.q.shape)
    q1, q4 = np.asarray(s1.q), np.asarray(s4.q)
    out["sim_maxdiff"] = float(np.max(np.abs(q1 - q4)))
    out["sim_bitwise"] = bool(np.array_equal(q1, q4))
    # and the plain single-device batch without any sharding
    s0 = batch.simulate_batch(bm3, q0, qd0, 0.3, ts, batched_model=True, rtol=1e-9, atol=1e-9)
    out["sim_vs_unsharded_maxdiff"] = float(np.max(np.abs(np.asarray(s0.q) - q4)))
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def sharded_run():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    root = str(ROOT)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


def test_terms_sharded_over_four_devices_match_one_device(sharded_run):
    r = sharded_run
    assert r["terms_devices"] == 4
    assert r["terms_maxdiff"] <= 1e-13, r


def test_simulation_sharded_over_four_devices_matches_one_device(sharded_run):
    r = sharded_run
    assert r["sim_devices"] == 4
    assert r["sim_shape"] == [6, 4, 3]
    assert r["sim_maxdiff"] <= 1e-13, r
    assert r["sim_vs_unsharded_maxdiff"] <= 1e-13, r
    assert np.isfinite(r["sim_maxdiff"])
