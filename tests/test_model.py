"""Model construction: every validation error of build_model, the pytree contract, and chain(n)."""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxmb as mb
from jaxmb.model import ModelError
from jaxmb.models.chain import chain

I_OK = np.diag([0.02, 0.03, 0.04])


def body(name="b", **kw):
    """A valid body spec; keyword arguments override fields."""
    spec = dict(
        name=name,
        parent=None,
        axis=(0.0, 0.0, 1.0),
        position=(0.1, 0.0, 0.0),
        mass=1.0,
        com=(0.0, 0.0, 0.05),
        inertia=I_OK,
    )
    spec.update(kw)
    return mb.Body(**spec)


def slider(name="s", **kw):
    spec = dict(
        name=name,
        parent=None,
        joint="prismatic",
        axis=(0.0, 0.0, 1.0),
        offset_axis=(1.0, 0.0, 0.0),
        mass=1.0,
        inertia=I_OK,
    )
    spec.update(kw)
    return mb.Body(**spec)


def two_bodies(**second):
    second.setdefault("parent", "upper")
    return [body("upper"), body("lower", **second)]


def raises(match, bodies, *args, **kwargs):
    with pytest.raises(ModelError, match=match) as info:
        mb.build_model(bodies, *args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# validation: each error names the offending element
# ---------------------------------------------------------------------------------------------

LOWER = re.escape("body 'lower' (index 1)")


@pytest.mark.parametrize("axis", [(0.0, 0.0, 2.0), (1.0, 1.0, 0.0), (0.0, 0.0, 1.0 + 1e-6)])
def test_non_unit_rotation_axis(axis):
    msg = raises(LOWER + ".*V_theta.*unit vector", two_bodies(axis=axis))
    assert "norm" in msg


def test_zero_rotation_axis():
    raises(LOWER + ".*V_theta.*zero vector", two_bodies(axis=(0.0, 0.0, 0.0)))


def test_non_unit_and_zero_offset_axis():
    raises(LOWER + ".*V_d.*unit vector", two_bodies(position=None, offset_axis=(0, 2.0, 0)))
    raises(LOWER + ".*V_d.*zero vector", two_bodies(position=None, offset_axis=(0, 0, 0)))


def test_non_unit_and_zero_sliding_axis():
    raises(
        re.escape("body 's' (index 0)") + ".*sliding axis V_d.*unit",
        [slider(offset_axis=(0.5, 0.0, 0.0))],
    )
    raises("body 's'.*sliding axis V_d.*zero vector", [slider(offset_axis=(0.0, 0.0, 0.0))])
    raises("body 's'.*prismatic joint needs offset_axis", [slider(offset_axis=None)])


def test_non_finite_axis():
    raises(LOWER + ".*non-finite", two_bodies(axis=(np.nan, 0.0, 1.0)))


@pytest.mark.parametrize("parent", [1, 2, 5])
def test_parent_not_earlier(parent):
    """Self-parent (a one-body cycle) and forward references are rejected."""
    raises(LOWER + f": parent {parent} does not precede it.*cycles", two_bodies(parent=parent))


def test_forward_reference_by_name_is_a_cycle():
    bodies = [body("a", parent="b"), body("b", parent="a")]
    raises(re.escape("body 'a' (index 0): parent 1 does not precede"), bodies)


def test_self_parent_by_name():
    raises(re.escape("body 'a' (index 0): parent 0 does not precede"), [body("a", parent="a")])


def test_negative_parent_index():
    raises(LOWER + ": invalid parent index -3", two_bodies(parent=-3))


def test_unknown_parent_name():
    raises(LOWER + ": unknown parent 'uper'", two_bodies(parent="uper"))


@pytest.mark.parametrize(
    "field, value, pattern",
    [
        ("com", (0.0, 0.1), "centre of mass must be a finite 3-vector"),
        ("com", (0.0, 0.1, 0.2, 0.3), "centre of mass must be a finite 3-vector"),
        ("com", (0.0, np.inf, 0.0), "centre of mass must be a finite 3-vector"),
        ("inertia", np.eye(2), r"inertia must be 3x3 \(or its diagonal\), got shape \(2, 2\)"),
        ("inertia", np.ones((3, 4)), r"inertia must be 3x3 .* got shape \(3, 4\)"),
        ("inertia", np.ones(4), r"inertia must be 3x3 .* got shape \(4,\)"),
        ("axis", (0.0, 1.0), r"joint axis V_theta must be a 3-vector, got shape \(2,\)"),
        ("axis", np.eye(3), r"joint axis V_theta must be a 3-vector, got shape \(3, 3\)"),
        ("position", (0.1, 0.2), "position must be a finite 3-vector"),
        ("position", (0.1, np.nan, 0.0), "position must be a finite 3-vector"),
    ],
)
def test_wrong_shapes(field, value, pattern):
    raises(LOWER + ": " + pattern, two_bodies(**{field: value}))


def test_wrong_shape_offset_axis():
    raises(
        LOWER + r".*V_d must be a 3-vector, got shape \(4,\)",
        two_bodies(position=None, offset_axis=(1.0, 0.0, 0.0, 0.0)),
    )


def test_position_and_offset_together():
    raises(
        LOWER + ": give either position or offset_axis/offset",
        two_bodies(offset_axis=(1.0, 0.0, 0.0)),
    )


def test_negative_mass():
    raises(LOWER + ": negative mass -0.5", two_bodies(mass=-0.5))


def test_non_finite_mass():
    raises(LOWER + ": mass is not finite", two_bodies(mass=np.nan))
    raises(LOWER + ": mass must be a number", two_bodies(mass="heavy"))


def test_non_symmetric_inertia():
    I = I_OK.copy()
    I[0, 1] = 0.001
    raises(LOWER + ": inertia tensor is not symmetric", two_bodies(inertia=I))


@pytest.mark.parametrize("I", [np.diag([0.02, 0.03, 0.0]), np.diag([0.02, -0.01, 0.02])])
def test_non_positive_definite_inertia(I):
    raises(LOWER + ": inertia tensor is not positive definite", two_bodies(inertia=I))


def test_point_mass_is_allowed():
    # OpenSim models (double_pendulum) use point masses: mass > 0 with zero inertia.
    model = mb.build_model(two_bodies(inertia=np.zeros((3, 3))))
    assert float(model.mass[1]) > 0 and not np.any(np.asarray(model.inertia[1]))


def test_massless_body_with_negative_inertia():
    raises(
        LOWER + ": inertia tensor has a negative eigenvalue",
        two_bodies(mass=0.0, inertia=np.diag([0.1, -0.1, 0.1])),
    )


def test_triangle_inequality():
    # principal moments 0.01 + 0.02 < 0.05, rotated so the check is not on the diagonal alone
    Q = Rotation.from_euler("xyz", [0.3, -0.2, 1.1]).as_matrix()
    I = Q @ np.diag([0.01, 0.02, 0.05]) @ Q.T
    I = 0.5 * (I + I.T)
    raises(LOWER + ": principal moments .* violate the triangle inequality", two_bodies(inertia=I))


def test_triangle_inequality_boundary_is_allowed():
    """A thin rod (I_xx = 0 is not PD) fails, but a flat plate (a + b = c) is physical."""
    mb.build_model(two_bodies(inertia=np.diag([0.01, 0.02, 0.03])))


def test_unknown_joint_type():
    raises(LOWER + ": joint type 'ball' is not", two_bodies(joint="ball"))


def test_position_on_prismatic_joint():
    raises("body 's'.*position is for revolute joints", [slider(position=(0.1, 0.0, 0.0))])


def test_joint_map_nj_attribute_mismatch():
    jm = mb.LinearMap(np.ones((3, 2)))
    raises("joint map gives 3 joint variables but the model has 2 joints", two_bodies(), jm)


def test_explicit_map_returning_wrong_length():
    """The nj attribute says 2 but fn returns 3 values: caught by tracing the map."""
    jm = mb.ExplicitMap(lambda q, p: jnp.stack([q[0], q[0] ** 2, jnp.sin(q[0])]), nq=1, nj=2)
    raises(r"joint map output has shape \(3,\), expected \(2,\)", two_bodies(), jm)


def test_explicit_map_returning_matrix():
    jm = mb.ExplicitMap(lambda q, p: jnp.outer(q, q), nq=2, nj=2)
    raises(r"joint map output has shape \(2, 2\), expected \(2,\)", two_bodies(), jm)


def test_explicit_map_that_fails_to_trace():
    jm = mb.ExplicitMap(lambda q, p: q[:2] @ jnp.ones(3), nq=2, nj=2)
    raises(r"joint map failed on q of shape \(2,\)", two_bodies(), jm)


def test_joint_map_wrong_type():
    raises("joint_map must be a jaxmb joint map, got function", two_bodies(), lambda q: q)


def test_duplicate_body_names():
    raises("body name 'upper' is used more than once", [body("upper"), body("upper", parent=0)])


def test_reserved_ground_name():
    raises("'ground' is reserved", [body("ground")])


def test_empty_model():
    raises("at least one body", [])


def test_not_a_body():
    raises(r"bodies\[1\] is a dict, expected jaxmb.Body", [body("a"), {"name": "b"}])


def test_coordinate_names_length():
    raises("3 coordinate names for 2 coordinates", two_bodies(), coordinate_names=["a", "b", "c"])
    raises("coordinate names are not unique", two_bodies(), coordinate_names=["a", "a"])


def test_gravity_shape():
    raises("gravity must be a finite 3-vector", two_bodies(), gravity=(0.0, -9.81))


def test_points_validation():
    raises("point 'tip': unknown body 'foot'", two_bodies(), points={"tip": ("foot", (0, 0, 0))})
    raises(r"point 'tip': body index 7 out of range", two_bodies(), points={"tip": (7, (0, 0, 0))})
    raises(
        r"point 'tip': position must be a finite 3-vector",
        two_bodies(),
        points={"tip": ("lower", (0, 0))},
    )
    raises(
        r"point 'tip': position must be a finite 3-vector",
        two_bodies(),
        points={"tip": ("lower", (0, np.nan, 0))},
    )


def test_unknown_body_and_coordinate_lookup():
    model = mb.build_model(two_bodies(), coordinate_names=["hip", "knee"])
    assert model.body_index("lower") == 1
    assert model.coordinate_index("knee") == 1
    with pytest.raises(ModelError, match="unknown body 'foot'"):
        model.body_index("foot")
    with pytest.raises(ModelError, match="body index 2 out of range"):
        model.body_index(2)
    with pytest.raises(ModelError, match="unknown coordinate 'ankle'"):
        model.coordinate_index("ankle")


def test_valid_model_contents():
    Q = Rotation.from_euler("zyx", [0.4, 0.1, -0.3]).as_matrix()
    I = Q @ np.diag([0.02, 0.03, 0.04]) @ Q.T
    I = 0.5 * (I + I.T)
    bodies = [
        body("upper", position=(0.0, 0.0, 0.0), inertia=(0.1, 0.2, 0.25)),
        slider(
            "lower",
            parent="upper",
            offset_axis=(0.0, 0.6, 0.8),
            angle=0.3,
            inertia=I,
            mass=2.0,
            com=(0.1, 0.2, 0.3),
        ),
        body("tip", parent=1, position=(0.0, 0.3, 0.4), mass=0.0, inertia=np.zeros((3, 3))),
    ]
    m = mb.build_model(
        bodies, points={"toe": ("tip", (0.1, 0.0, 0.0)), "origin": ("ground", (0, 0, 0))}
    )
    assert (m.nb, m.nj, m.nq) == (3, 3, 3)
    assert m.parent == (-1, 0, 1)
    assert m.joint_type == ("revolute", "prismatic", "revolute")
    np.testing.assert_array_equal(m.is_revolute, [True, False, True])
    np.testing.assert_array_equal(m.ancestors, [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_allclose(m.axis_d[2], [0.0, 0.6, 0.8], atol=1e-15)
    np.testing.assert_allclose(m.d, [0.0, 0.0, 0.5], atol=1e-15)
    np.testing.assert_allclose(m.theta, [0.0, 0.3, 0.0])
    np.testing.assert_allclose(m.inertia[0], np.diag([0.1, 0.2, 0.25]))
    np.testing.assert_allclose(m.inertia[1], I)
    np.testing.assert_allclose(m.mass, [1.0, 2.0, 0.0])
    np.testing.assert_allclose(m.com[1], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(m.gravity, [0.0, 0.0, -9.81])
    assert m.coordinate_names == ("q0", "q1", "q2")
    b, r = m.points["toe"]
    assert b == 2
    np.testing.assert_allclose(r, [0.1, 0.0, 0.0])
    assert m.points["origin"][0] == -1


def test_ancestor_mask_of_a_branching_tree():
    parent = (-1, 0, 0, 1, -1, 4)
    m = mb.build_model([body(f"b{i}", parent=p) for i, p in enumerate(parent)])
    expected = np.zeros((6, 6), dtype=bool)
    for i in range(6):
        j = i
        while j >= 0:
            expected[i, j] = True
            j = parent[j]
    np.testing.assert_array_equal(m.ancestors, expected)


# ---------------------------------------------------------------------------------------------
# the pytree contract
# ---------------------------------------------------------------------------------------------


def _tree_model():
    rng = np.random.default_rng(0)
    from strategies import random_bodies, random_coupling

    bodies = random_bodies(rng, 5)
    return mb.build_model(
        bodies, random_coupling(rng, 3, 5), points={"tip": ("b4", (0.1, 0.2, 0.3))}
    )


def test_model_is_a_pytree():
    model = _tree_model()
    leaves, treedef = jax.tree_util.tree_flatten(model)
    assert all(isinstance(x, jax.Array) for x in leaves), [type(x) for x in leaves]
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(rebuilt, mb.Model)
    assert rebuilt.parent == model.parent and rebuilt.body_names == model.body_names
    q = jnp.array([0.3, -0.2, 0.5])
    np.testing.assert_array_equal(mb.body_transforms(rebuilt, q), mb.body_transforms(model, q))
    # the joint map's parameters and the named point are traced leaves
    n_params = len(jax.tree_util.tree_leaves(model.joint_map.params))
    n_points = len(jax.tree_util.tree_leaves(model.points))
    assert n_params == 6 and n_points == 1
    assert len(leaves) == 8 + n_params + n_points


def test_jit_over_model_and_parameter_change_keeps_treedef():
    model = _tree_model()
    traces = []

    @jax.jit
    def tip(model, q):
        traces.append(1)
        return mb.point_position(model, "tip", None, q), mb.body_transforms(model, q)

    q = jnp.array([0.3, -0.2, 0.5])
    p0, A0 = tip(model, q)
    np.testing.assert_allclose(p0, mb.point_position(model, "tip", None, q), rtol=0, atol=1e-15)

    heavier = eqx.tree_at(lambda m: m.mass, model, model.mass * 2.0)
    moved = eqx.tree_at(lambda m: m.d, model, model.d + 0.1)
    for changed in (heavier, moved):
        assert jax.tree_util.tree_structure(changed) == jax.tree_util.tree_structure(model)
    tip(heavier, q)
    p2, A2 = tip(moved, q)
    assert len(traces) == 1, "changing a parameter leaf must not retrace"
    assert not np.allclose(A2, A0)
    np.testing.assert_allclose(A2, mb.body_transforms(moved, q), rtol=0, atol=1e-15)


def test_model_is_immutable():
    model = _tree_model()
    with pytest.raises(dataclasses_frozen_errors()):
        model.mass = jnp.zeros(5)


def dataclasses_frozen_errors():
    import dataclasses

    return (dataclasses.FrozenInstanceError, AttributeError)


def test_vmap_over_a_parameter():
    model = _tree_model()
    q = jnp.array([0.3, -0.2, 0.5])
    ds = jnp.linspace(0.0, 0.3, 4)

    def pose(dd):
        return mb.body_transforms(eqx.tree_at(lambda m: m.d, model, model.d + dd), q)

    batched = jax.vmap(pose)(ds)
    for k, dd in enumerate(ds):
        np.testing.assert_allclose(batched[k], pose(dd), rtol=0, atol=1e-15)


def test_grad_with_respect_to_model_parameters():
    """Kinematics are differentiable in the model's leaves (a check against finite differences)."""
    model = _tree_model()
    q = jnp.array([0.3, -0.2, 0.5])

    def tip_x(d):
        return mb.point_position(eqx.tree_at(lambda m: m.d, model, d), "tip", None, q)[0]

    g = jax.grad(tip_x)(model.d)
    h = 1e-6
    fd = np.array(
        [
            (tip_x(model.d.at[k].add(h)) - tip_x(model.d.at[k].add(-h))) / (2 * h)
            for k in range(model.nb)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=0, atol=1e-8)


# ---------------------------------------------------------------------------------------------
# chain(n) matches its DESIGN.md specification
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 7])
def test_chain_matches_its_specification(n):
    m = chain(n)
    axes = np.eye(3)
    assert m.nb == n and m.nq == n and m.parent == tuple(range(-1, n - 1))
    assert m.joint_type == ("revolute",) * n
    assert m.coordinate_names == tuple(f"joint{i}" for i in range(n))
    for i in range(n):
        np.testing.assert_array_equal(m.axis_theta[i], axes[i % 3])
        np.testing.assert_allclose(m.d[i] * m.axis_d[i], [0.0, 0.0, 0.0 if i == 0 else 0.3])
        assert m.mass[i] == pytest.approx(1.0 + 0.1 * i, abs=1e-15)
        np.testing.assert_array_equal(m.com[i], [0.0, 0.0, 0.15])
        np.testing.assert_array_equal(m.inertia[i], np.diag([0.02, 0.02, 0.005]))
    np.testing.assert_array_equal(m.gravity, [0.0, 0.0, -9.81])
    q = jnp.asarray(np.random.default_rng(n).normal(size=n))
    np.testing.assert_array_equal(m.joint_map(q), q)


def test_chain_poses_against_scipy_rotations():
    """Poses from the spec, built independently with scipy.

    ``R_i = R_{i-1} Rot(axis_i, q_i)``, ``p_i = p_{i-1} + R_{i-1} (0, 0, 0.3)``.
    """
    n = 7
    m = chain(n)
    q = np.random.default_rng(1).uniform(-np.pi, np.pi, size=n)
    A = np.asarray(mb.body_transforms(m, jnp.asarray(q)))
    R, p = np.eye(3), np.zeros(3)
    for i in range(n):
        p = p + R @ np.array([0.0, 0.0, 0.0 if i == 0 else 0.3])
        R = R @ Rotation.from_rotvec(np.eye(3)[i % 3] * q[i]).as_matrix()
        np.testing.assert_allclose(A[i, :3, :3], R, rtol=0, atol=1e-14)
        np.testing.assert_allclose(A[i, :3, 3], p, rtol=0, atol=1e-14)
        np.testing.assert_array_equal(A[i, 3], [0.0, 0.0, 0.0, 1.0])


def test_models_chain_public_access_is_stable():
    import jaxmb.models

    for _ in range(2):
        assert callable(jaxmb.models.chain) and not isinstance(jaxmb.models.chain, type(jaxmb))


def test_chain_rejects_bad_n():
    with pytest.raises(ValueError, match="positive integer"):
        chain(0)
