"""Hypothesis strategies shared by the tests: random trees, random couplings, random states."""

from __future__ import annotations

import functools
import os

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxmb as mb

# Every example of a property over random trees compiles new JAX code, so the default suite draws
# half the examples each property names; JAXMB_HYPOTHESIS_SCALE=1 (or 4) runs them in full (or
# deeper).
SCALE = float(os.environ.get("JAXMB_HYPOTHESIS_SCALE", "0.5"))


def examples(n: int) -> int:
    """The number of hypothesis examples for a property that names ``n`` at full depth."""
    return max(2, round(n * SCALE))


def slow_twin(prop, n, *given_args, **given_kwargs):
    """A ``-m slow`` copy of the hypothesis property ``prop`` that draws ``examples(n)`` examples.

    The default suite runs a property on the few random models it needs to catch a wrong formula;
    its twin, given the same strategies, runs it at the depth it had before (assign it to a
    ``test_*_deep`` name in the test module).
    """
    inner = prop.hypothesis.inner_test

    @functools.wraps(inner)
    def deep(*args, **kwargs):
        return inner(*args, **kwargs)

    deep.__name__ = deep.__qualname__ = inner.__name__ + "_deep"
    for key in [k for k in vars(deep) if k.startswith("_hypothesis_internal")]:
        delattr(deep, key)  # the property's own settings, copied by functools.wraps
    return pytest.mark.slow(
        settings(max_examples=examples(n))(given(*given_args, **given_kwargs)(deep))
    )


def _unit(rng):
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def _inertia(rng, mass):
    if mass == 0.0:
        return np.zeros((3, 3))
    # principal moments that satisfy the triangle inequality, randomly rotated
    a, b = rng.uniform(0.01, 0.1, size=2)
    c = rng.uniform(abs(a - b) + 1e-3, a + b - 1e-3)
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    I = Q @ np.diag([a, b, c]) @ Q.T
    return 0.5 * (I + I.T)


def random_bodies(rng, nb, prismatic_fraction=0.3, massless_fraction=0.15, chain=False):
    bodies = []
    for i in range(nb):
        parent = i - 1 if chain else int(rng.integers(-1, i))
        prismatic = rng.uniform() < prismatic_fraction
        mass = 0.0 if rng.uniform() < massless_fraction else float(rng.uniform(0.2, 3.0))
        common = dict(
            name=f"b{i}",
            parent=parent,
            axis=tuple(_unit(rng)),
            mass=mass,
            com=tuple(rng.uniform(-0.3, 0.3, size=3)),
            inertia=_inertia(rng, mass),
        )
        if prismatic:
            bodies.append(
                mb.Body(
                    joint="prismatic",
                    offset_axis=tuple(_unit(rng)),
                    angle=float(rng.uniform(-np.pi, np.pi)),
                    **common,
                )
            )
        else:
            bodies.append(
                mb.Body(joint="revolute", position=tuple(rng.uniform(-0.5, 0.5, size=3)), **common)
            )
    return bodies


def random_coupling(rng, nq, nj):
    """A smooth nonlinear joint map f(q) = A q + b + c ⊙ sin(P q) + e ⊙ (Q q)², traced leaves."""
    params = {
        "A": jnp.asarray(rng.normal(size=(nj, nq))),
        "b": jnp.asarray(rng.normal(size=nj) * 0.3),
        "c": jnp.asarray(rng.normal(size=nj) * 0.5),
        "P": jnp.asarray(rng.normal(size=(nj, nq))),
        "e": jnp.asarray(rng.normal(size=nj) * 0.3),
        "Q": jnp.asarray(rng.normal(size=(nj, nq))),
    }

    def fn(q, p):
        return p["A"] @ q + p["b"] + p["c"] * jnp.sin(p["P"] @ q) + p["e"] * (p["Q"] @ q) ** 2

    return mb.ExplicitMap(fn, nq, nj, params)


@st.composite
def random_models(draw, max_bodies=12, max_nq=6, coupled=True, chain=False, min_bodies=1):
    """A random tree (branching, mixed revolute/prismatic, massless bodies) with a joint map."""
    seed = draw(st.integers(0, 2**31 - 1))
    nb = draw(st.integers(min_bodies, max_bodies))
    rng = np.random.default_rng(seed)
    bodies = random_bodies(rng, nb, chain=chain)
    if coupled:
        nq = draw(st.integers(1, max_nq))
        jm = random_coupling(rng, nq, nb)
    else:
        nq = nb
        jm = None
    g = tuple(rng.normal(size=3) * 5.0)
    return mb.build_model(bodies, jm, gravity=g, name=f"random{seed}")


@st.composite
def random_states(draw, nq, scale=1.0):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.normal(size=nq) * scale) for _ in range(3))
