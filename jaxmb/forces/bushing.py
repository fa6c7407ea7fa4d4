"""A linear bushing between two body frames, as Simbody's ``Force::LinearBushing`` (OpenSim's
``BushingForce``).

Frame F is fixed in body 1 and M in body 2 (poses ``X_B1F``, ``X_B2M`` in the jaxmb body frames,
body ``-1`` is the ground). The bushing's six coordinates are ``q_b = (θ, p)``: ``θ`` the body-fixed
X-Y-Z Euler angles of ``R_FM`` and ``p`` the origin of M in F, expressed in F. Its generalized force
on ``q_b`` is ``f = −(k ∘ q_b + c ∘ q̇_b)`` (``k`` and ``c`` ordered rotational then translational),
which Simbody turns into equal and opposite spatial forces; by virtual work the same force in the
model's coordinates is ``Q = (∂q_b/∂q)ᵀ f``, with ``q̇_b = (∂q_b/∂q) q̇``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import tree_kinematics
from .base import AbstractForce, as_float

__all__ = ["BushingForce", "body_fixed_xyz_angles"]


def body_fixed_xyz_angles(R: Float[Array, "3 3"]) -> Float[Array, " 3"]:
    """Body-fixed X-Y-Z Euler angles ``(a, b, c)`` with ``R = Rx(a) Ry(b) Rz(c)`` (rad)."""
    b = jnp.arcsin(jnp.clip(R[0, 2], -1.0, 1.0))
    a = jnp.arctan2(-R[1, 2], R[2, 2])
    c = jnp.arctan2(-R[0, 1], R[0, 0])
    return jnp.stack([a, b, c])


def _skew(w):
    return jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]], dtype=w.dtype)


class BushingForce(AbstractForce):
    """Linear bushing between frame F on ``body_1`` and frame M on ``body_2``.

    Attributes:
        body_1, body_2: jaxmb body indices, ``-1`` for the ground (static).
        frame_1, frame_2: (4, 4) poses of F and M in those bodies' frames (m).
        stiffness: (6,) rotational (N·m/rad) then translational (N/m).
        damping: (6,) rotational (N·m·s/rad) then translational (N·s/m).
    """

    body_1: int = eqx.field(static=True)
    body_2: int = eqx.field(static=True)
    frame_1: Float[Array, "4 4"]
    frame_2: Float[Array, "4 4"]
    stiffness: Float[Array, " 6"]
    damping: Float[Array, " 6"]

    def __init__(self, body_1, frame_1, body_2, frame_2, stiffness, damping):
        self.body_1, self.body_2 = int(body_1), int(body_2)
        self.frame_1, self.frame_2 = as_float(frame_1), as_float(frame_2)
        self.stiffness, self.damping = as_float(stiffness), as_float(damping)

    def _pose_and_rates(self, kin, b, X):
        """Ground pose (R, p) of a body-fixed frame and its derivatives (3,3,nq), (3,nq)."""
        nq = kin.J.shape[1]
        if b < 0:
            z = jnp.zeros((3, 3, nq), dtype=X.dtype)
            return X[:3, :3], X[:3, 3], z, jnp.zeros((3, nq), dtype=X.dtype)
        G = kin.A[b] @ X
        R, p = G[:3, :3], G[:3, 3]
        w, v = kin.Jb[b, :3], kin.Jb[b, 3:]
        dR = jax.vmap(lambda wl: _skew(wl) @ R, in_axes=1, out_axes=2)(w)
        dp = jnp.cross(w.T, p).T + v
        return R, p, dR, dp

    @staticmethod
    def _coordinates(R1, p1, R2, p2):
        R_FM = R1.T @ R2
        return jnp.concatenate([body_fixed_xyz_angles(R_FM), R1.T @ (p2 - p1)])

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        R1, p1, dR1, dp1 = self._pose_and_rates(kin, self.body_1, self.frame_1)
        R2, p2, dR2, dp2 = self._pose_and_rates(kin, self.body_2, self.frame_2)
        qb = self._coordinates(R1, p1, R2, p2)
        jac = jax.jacfwd(self._coordinates, argnums=(0, 1, 2, 3))(R1, p1, R2, p2)
        Jq = (
            jnp.einsum("kij,ijl->kl", jac[0], dR1)
            + jnp.einsum("ki,il->kl", jac[1], dp1)
            + jnp.einsum("kij,ijl->kl", jac[2], dR2)
            + jnp.einsum("ki,il->kl", jac[3], dp2)
        )
        f = -(self.stiffness * qb + self.damping * (Jq @ qd))
        return Jq.T @ f
