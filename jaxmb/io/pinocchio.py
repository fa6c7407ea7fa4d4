"""Export a jaxmb tree to Pinocchio (``pinocchio``, imported when an export is made), the peer the
benchmarks and the ``jaxmb benchmark`` command time jaxmb against.

Pinocchio's twin of a jaxmb body: the joint placement is ``SE3(R_c, d V_d)`` with the joint axis in
the placement frame. Revolute: ``R_c = 1`` and axis ``V_θ`` (``JointModelRX/RY/RZ`` when ``V_θ`` is
a coordinate axis, Pinocchio's fastest joints, as in the reference chain of ``DESIGN.md``;
``JointModelRevoluteUnaligned`` otherwise). Prismatic (translate f V_d, then rotate by the constant
θ about V_θ): ``R_c = Rot(V_θ, θ)`` and axis ``R_cᵀ V_d``. Body inertia ``Inertia(m, c, I_c)`` in
the body frame (kg, m, kg·m²).

Pinocchio's configuration is the joint variables θ = f(q), in :func:`depth_first_order`; it is q
itself only when the joint map is the identity (:func:`is_identity_map`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..dynamics.tree import is_identity_map as tree_is_identity_map
from ..kinematics import rotation

__all__ = ["depth_first_order", "is_identity_map", "to_pinocchio"]

_COORDINATE_AXES = {(1, 0, 0): "JointModelRX", (0, 1, 0): "JointModelRY", (0, 0, 1): "JointModelRZ"}


def depth_first_order(parent) -> list[int]:
    """Bodies in depth-first order: Pinocchio needs every subtree contiguous in v (its CRBA fills M
    by subtree ranges), so its joint k + 1 is body ``depth_first_order(parent)[k]``."""
    children = {p: [i for i, pi in enumerate(parent) if pi == p] for p in range(-1, len(parent))}
    order, stack = [], list(reversed(children[-1]))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children[i]))
    return order


def is_identity_map(model) -> bool:
    """True when the joint map is f(q) = q (:func:`jaxmb.dynamics.tree.is_identity_map`) with one
    coordinate per joint of the tree, so that Pinocchio's configuration is jaxmb's q."""
    return bool(tree_is_identity_map(model)) and model.joint_map.nj == model.nb


def to_pinocchio(model):
    """Pinocchio's ``Model`` of the tree of ``model`` (gravity included), configured by the joint
    variables θ in :func:`depth_first_order`."""
    import pinocchio as pin

    pm = pin.Model()
    pm.gravity = pin.Motion(np.asarray(model.gravity), np.zeros(3))  # (linear, angular)
    ids = {}
    for i in depth_first_order(model.parent):
        parent = 0 if model.parent[i] < 0 else ids[model.parent[i]]
        Vd = np.asarray(model.axis_d[i])
        Vt = np.asarray(model.axis_theta[i])
        if model.joint_type[i] == "revolute":
            placement = pin.SE3(np.eye(3), float(model.d[i]) * Vd)
            axis = tuple(int(v) for v in Vt)
            if axis in _COORDINATE_AXES and np.array_equal(Vt, axis):
                joint = getattr(pin, _COORDINATE_AXES[axis])()
            else:
                joint = pin.JointModelRevoluteUnaligned(Vt)
        else:
            Rc = np.asarray(rotation(jnp.asarray(Vt), model.theta[i]))
            placement = pin.SE3(Rc, np.zeros(3))
            joint = pin.JointModelPrismaticUnaligned(Rc.T @ Vd)
        jid = pm.addJoint(parent, joint, placement, model.body_names[i])
        pm.appendBodyToJoint(
            jid,
            pin.Inertia(
                float(model.mass[i]), np.asarray(model.com[i]), np.asarray(model.inertia[i])
            ),
            pin.SE3.Identity(),
        )
        ids[i] = jid
    return pm
