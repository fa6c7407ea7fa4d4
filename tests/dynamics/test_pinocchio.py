"""M, N q̇ and G against Pinocchio on chain(n) and random trees with one coordinate per joint.

Pinocchio's twin of a jaxmb body: the joint placement is ``SE3(R_c, d V_d)`` with the joint axis in
the placement frame. Revolute: ``R_c = 1`` and axis ``V_θ``. Prismatic (translate f V_d, then rotate
by the constant θ about V_θ): ``R_c = Rot(V_θ, θ)`` and axis ``R_cᵀ V_d``. Body inertia
``Inertia(m, c, I_c)`` in the body frame. Pinocchio's ``nonLinearEffects`` is ``C q̇ + g`` with
``g = computeGeneralizedGravity = −G`` in our sign convention (G on the right-hand side).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_rel
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, random_bodies, slow_twin

import jaxmb as mb
from jaxmb import dynamics as dy
from jaxmb.kinematics import rotation
from jaxmb.models.chain import chain

pin = pytest.importorskip("pinocchio")

REL = 1e-10


def depth_first_order(parent) -> list[int]:
    """Pinocchio needs every subtree contiguous in v (its CRBA fills M by subtree ranges)."""
    children = {p: [i for i, pi in enumerate(parent) if pi == p] for p in range(-1, len(parent))}
    order, stack = [], list(reversed(children[-1]))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children[i]))
    return order


def to_pinocchio(model: mb.Model):
    """Pinocchio's twin; its joint k is our body ``depth_first_order(model.parent)[k]``."""
    pm = pin.Model()
    pm.gravity = pin.Motion(np.asarray(model.gravity), np.zeros(3))  # (linear, angular)
    ids = {}
    for i in depth_first_order(model.parent):
        parent = 0 if model.parent[i] < 0 else ids[model.parent[i]]
        Vd = np.asarray(model.axis_d[i])
        Vt = np.asarray(model.axis_theta[i])
        if model.joint_type[i] == "revolute":
            placement = pin.SE3(np.eye(3), float(model.d[i]) * Vd)
            joint = pin.JointModelRevoluteUnaligned(Vt)
        else:
            Rc = np.asarray(rotation(jnp.asarray(Vt), model.theta[i]))
            placement = pin.SE3(Rc, np.zeros(3))
            joint = pin.JointModelPrismaticUnaligned(Rc.T @ Vd)
        jid = pm.addJoint(parent, joint, placement, f"j{i}")
        pm.appendBodyToJoint(
            jid,
            pin.Inertia(
                float(model.mass[i]), np.asarray(model.com[i]), np.asarray(model.inertia[i])
            ),
            pin.SE3.Identity(),
        )
        ids[i] = jid
    return pm


def pinocchio_terms(model, q, qd):
    """M, N q̇ and G from Pinocchio, in our coordinate order."""
    pm = to_pinocchio(model)
    data = pm.createData()
    perm = np.asarray(depth_first_order(model.parent))  # pinocchio index k ↔ our perm[k]
    inv = np.argsort(perm)
    q, qd = np.asarray(q)[perm], np.asarray(qd)[perm]
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    g = pin.computeGeneralizedGravity(pm, data, q).copy()
    nle = pin.nonLinearEffects(pm, data, q, qd).copy()
    return M[np.ix_(inv, inv)], (nle - g)[inv], -g[inv]


@eqx.filter_jit
def _ours(model, q, qd):
    return {
        m: (
            dy.mass_matrix(model, q, method=m),
            dy.bias_forces(model, q, qd, method=m),
            dy.gravity_forces(model, q, method=m),
        )
        for m in ("tree", "closed_form")
    }


def check_against_pinocchio(model, q, qd):
    ref = pinocchio_terms(model, q, qd)
    for method, terms in _ours(model, q, qd).items():
        for name, a, b in zip(("M", "N q̇", "G"), terms, ref, strict=True):
            assert_rel(a, b, f"{name} ({method})")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 30])
def test_chain_matches_pinocchio(n):
    model = chain(n)
    rng = np.random.default_rng(n)
    q, qd = rng.normal(size=n), rng.normal(size=n) * 2.0
    check_against_pinocchio(model, jnp.asarray(q), jnp.asarray(qd))


def test_chain_is_pinocchios_twin_with_rx_ry_rz():
    """chain(n) equals the DESIGN.md Pinocchio chain built with JointModelRX/RY/RZ."""
    n = 7
    pm = pin.Model()
    pm.gravity.linear = np.array([0.0, 0.0, -9.81])
    jid = 0
    for i in range(n):
        joint = (pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ)[i % 3]()
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.0 if i == 0 else 0.3]))
        jid = pm.addJoint(jid, joint, placement, f"joint{i}")
        inertia = pin.Inertia(
            1.0 + 0.1 * i, np.array([0.0, 0.0, 0.15]), np.diag([0.02, 0.02, 0.005])
        )
        pm.appendBodyToJoint(jid, inertia, pin.SE3.Identity())
    data = pm.createData()
    rng = np.random.default_rng(7)
    q, qd = rng.normal(size=n), rng.normal(size=n)
    model = chain(n)
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    g = pin.computeGeneralizedGravity(pm, data, q).copy()
    nle = pin.nonLinearEffects(pm, data, q, qd).copy()
    assert_rel(dy.mass_matrix(model, jnp.asarray(q)), M, "M")
    assert_rel(dy.bias_forces(model, jnp.asarray(q), jnp.asarray(qd)), nle - g, "N q̇")
    assert_rel(dy.gravity_forces(model, jnp.asarray(q)), -g, "G")
    tau = pin.rnea(pm, data, q, qd, 0.3 * q)
    assert_rel(
        dy.inverse_dynamics(model, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(0.3 * q)), tau, "ID"
    )
    qdd = pin.aba(pm, data, q, qd, np.ones(n))
    fd = dy.forward_dynamics(model, jnp.asarray(q), jnp.asarray(qd), jnp.ones(n))
    np.testing.assert_allclose(fd, qdd, rtol=1e-9, atol=1e-9 * np.abs(qdd).max())


@st.composite
def random_open_models(draw, chain):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    nb = draw(st.integers(1, 10))
    bodies = random_bodies(rng, nb, chain=chain)
    return mb.build_model(bodies, gravity=tuple(rng.normal(size=3) * 5.0), name=f"open{seed}")


@settings(max_examples=examples(4))
@given(random_open_models(chain=True), st.integers(0, 2**31 - 1))
def test_random_open_chains_match_pinocchio(model, seed):
    rng = np.random.default_rng(seed)
    q, qd = rng.normal(size=model.nq), rng.normal(size=model.nq)
    check_against_pinocchio(model, jnp.asarray(q), jnp.asarray(qd))


@settings(max_examples=examples(4))
@given(random_open_models(chain=False), st.integers(0, 2**31 - 1))
def test_random_trees_match_pinocchio(model, seed):
    rng = np.random.default_rng(seed)
    q, qd = rng.normal(size=model.nq), rng.normal(size=model.nq)
    check_against_pinocchio(model, jnp.asarray(q), jnp.asarray(qd))


# the two properties above at their former depth
test_random_open_chains_match_pinocchio_deep = slow_twin(
    test_random_open_chains_match_pinocchio,
    6,
    random_open_models(chain=True),
    st.integers(0, 2**31 - 1),
)
test_random_trees_match_pinocchio_deep = slow_twin(
    test_random_trees_match_pinocchio,
    6,
    random_open_models(chain=False),
    st.integers(0, 2**31 - 1),
)
