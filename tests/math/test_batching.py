"""chunked_vmap: the same numbers as a plain vmap, for any batch size, batched or shared
arguments, pytrees, nested vmap and derivatives (forward and reverse)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from jaxmb.math.batching import chunked_vmap


def _item(p, x):
    """A per-item function with a pytree argument and a pytree result."""
    y = jnp.tanh(p["A"] @ x + p["b"]) * jnp.sum(x**2)
    return {"y": y, "n": jnp.linalg.norm(y)}, jnp.cumsum(x)


def _params(rng, n):
    return {"A": jnp.asarray(rng.normal(size=(n, n))), "b": jnp.asarray(rng.normal(size=n))}


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(1, 40), chunk=st.integers(1, 9),
       shared=st.booleans())  # fmt: skip
def test_equals_plain_vmap(seed, batch, chunk, shared):
    rng = np.random.default_rng(seed)
    p = _params(rng, 3)
    xs = jnp.asarray(rng.normal(size=(batch, 3)))
    f = chunked_vmap(_item, chunk)
    if shared:  # the parameters shared by every item (unbatched), as a model is
        got = jax.jit(jax.vmap(f, in_axes=(None, 0)))(p, xs)
        want = jax.vmap(_item, in_axes=(None, 0))(p, xs)
    else:
        ps = jax.tree_util.tree_map(lambda a: jnp.stack([a * (1 + 0.1 * k) for k in range(batch)]), p)
        got = jax.jit(jax.vmap(f))(ps, xs)
        want = jax.vmap(_item)(ps, xs)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-14)


def test_derivatives_nested_vmap_and_one_item():
    rng = np.random.default_rng(0)
    p = _params(rng, 3)
    xs = jnp.asarray(rng.normal(size=(11, 3)))
    f = chunked_vmap(_item, 4)

    def total(fn, p, xs):
        out, c = jax.vmap(fn, in_axes=(None, 0))(p, xs)
        return jnp.sum(out["y"] ** 2) + jnp.sum(out["n"]) + jnp.sum(jnp.sin(c))

    for argnums in (0, 1, (0, 1)):
        g = jax.jit(jax.grad(lambda p, x: total(f, p, x), argnums=argnums))(p, xs)
        g0 = jax.grad(lambda p, x: total(_item, p, x), argnums=argnums)(p, xs)
        for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g0), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=1e-13)
    J = jax.jacfwd(lambda x: total(f, p, x))(xs)
    J0 = jax.jacfwd(lambda x: total(_item, p, x))(xs)
    np.testing.assert_allclose(np.asarray(J), np.asarray(J0), rtol=1e-13, atol=1e-13)
    # second derivatives (the JVP rule differentiated: a vmap over tangents alone)
    H = jax.hessian(lambda b: total(f, {"A": p["A"], "b": b}, xs))(p["b"])
    H0 = jax.hessian(lambda b: total(_item, {"A": p["A"], "b": b}, xs))(p["b"])
    np.testing.assert_allclose(np.asarray(H), np.asarray(H0), rtol=1e-12, atol=1e-12)
    # a batch of batches, and one item without vmap
    xss = xs[:10].reshape(2, 5, 3)
    got = jax.vmap(jax.vmap(f, in_axes=(None, 0)), in_axes=(None, 0))(p, xss)
    want = jax.vmap(jax.vmap(_item, in_axes=(None, 0)), in_axes=(None, 0))(p, xss)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-14)
    for a, b in zip(jax.tree_util.tree_leaves(f(p, xs[0])),
                    jax.tree_util.tree_leaves(_item(p, xs[0])), strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_chunk_raises():
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        chunked_vmap(_item, 0)
