"""Compliant contact between spheres and half-spaces: Hunt–Crossley as Simbody computes it.

Each surface is fixed in a body (``-1``: the ground) with a pose ``X`` (4, 4) in that body's frame.
A half-space occupies ``x > 0`` of its own frame (outward normal ``−x``); a sphere is centred at
its frame's origin. Contacts (Simbody's ``CollisionDetectionAlgorithm``): a half-space and a sphere
overlap by ``d = r + x_c`` (``x_c`` the sphere centre's x in the half-space frame), touching at
``X_H (d/2, y_c, z_c)``, normal ``R_H (−1, 0, 0)``, radius ``r``; two spheres by
``d = r₁ + r₂ − |c₂ − c₁|``, at ``c₁ + (r₁ − d/2) n``, ``n = (c₂ − c₁)/|c₂ − c₁|``, radius
``r₁ r₂ / (r₁ + r₂)``.

Force (``HuntCrossleyForceImpl::calcForce``): per surface ``k = stiffness^(2/3)``,
``s₁ = k₂/(k₁ + k₂)``, the point moves by ``d (½ − s₁) n``; ``k = k₁ s₁``,
``c = c₁ s₁ + c₂ s₂``, ``f_H = 4/3 k d √(R k d)``, ``f = f_H (1 + 3/2 c v_n)`` with
``v = v₁ − v₂`` at the point, and where ``f > 0`` the force on surface 2 is
``f n + f (min(v_s/v_t, 1) (μ_d + 2 (μ_s − μ_d)/(1 + (v_s/v_t)²)) + μ_v v_s) v_t̂`` (μ pairwise
harmonic means, ``v_s`` the slip speed), minus that on surface 1; both act at the contact point, so
the generalized force is ``Q = (J₂ − J₁)ᵀ F`` by virtual work.

Simbody stops summing a force element's contacts at the first one with ``f ≤ 0`` (a ``return``
in its loop); so does this element, in Simbody's order (``GeneralContactSubsystem``'s sweep and
prune: surfaces sorted by ``c_a − R`` along the axis ``a`` of largest spread of their bounding-sphere
centres, a half-space first; pairs in that order). Pairs of surfaces on the same body are skipped:
their forces cancel, and their ``f = f_H > 0`` never stops the loop.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..kinematics import point_jacobian_from, tree_kinematics
from .base import AbstractForce, as_float

__all__ = ["HuntCrossleyForce", "SmoothSphereHalfSpaceForce", "HALF_SPACE", "SPHERE"]

HALF_SPACE, SPHERE = "half_space", "sphere"


def _harmonic(a, b):
    s = a + b
    return jnp.where(s != 0, 2 * a * b / jnp.where(s != 0, s, 1.0), 0.0)


class HuntCrossleyForce(AbstractForce):
    """Hunt–Crossley contact among spheres and half-spaces (Simbody's ``HuntCrossleyForce``).

    Attributes:
        kinds: per surface, ``"half_space"`` or ``"sphere"`` (static).
        bodies: per surface, its jaxmb body index, ``-1`` for the ground (static).
        pairs: the surface pairs ``(i, j)`` checked for contact (static).
        poses: (ns, 4, 4) surface frames in their bodies' frames (m).
        radii: (ns,) sphere radii (m; unused for half-spaces).
        stiffness: (ns,) OpenSim's stiffness (N/m^(3/2) for a sphere pair as Simbody uses it).
        dissipation: (ns,) s/m. static_friction, dynamic_friction, viscous_friction: (ns,).
        transition_velocity: m/s.
    """

    kinds: tuple[str, ...] = eqx.field(static=True)
    bodies: tuple[int, ...] = eqx.field(static=True)
    pairs: tuple[tuple[int, int], ...] = eqx.field(static=True)
    poses: Float[Array, "ns 4 4"]
    radii: Float[Array, " ns"]
    stiffness: Float[Array, " ns"]
    dissipation: Float[Array, " ns"]
    static_friction: Float[Array, " ns"]
    dynamic_friction: Float[Array, " ns"]
    viscous_friction: Float[Array, " ns"]
    transition_velocity: Float[Array, ""]

    def __init__(
        self, kinds, bodies, poses, radii, stiffness, dissipation, static_friction,
        dynamic_friction, viscous_friction, transition_velocity, pairs=None,
    ):
        self.kinds = tuple(kinds)
        self.bodies = tuple(int(b) for b in bodies)
        if pairs is None:
            n = len(self.kinds)
            pairs = [
                (i, j)
                for i in range(n)
                for j in range(i + 1, n)
                if self.bodies[i] != self.bodies[j]
                and SPHERE in (self.kinds[i], self.kinds[j])
            ]
        # half-space first, as Simbody orders a half-space/sphere pair
        self.pairs = tuple(
            (j, i) if self.kinds[j] == HALF_SPACE and self.kinds[i] == SPHERE else (i, j)
            for i, j in pairs
        )
        self.poses = as_float(poses)
        self.radii = as_float(radii)
        self.stiffness = as_float(stiffness)
        self.dissipation = as_float(dissipation)
        self.static_friction = as_float(static_friction)
        self.dynamic_friction = as_float(dynamic_friction)
        self.viscous_friction = as_float(viscous_friction)
        self.transition_velocity = as_float(transition_velocity)

    def _frame(self, kin, i):
        X = self.poses[i]
        b = self.bodies[i]
        return X if b < 0 else kin.A[b] @ X

    def _point(self, kin, i, x):
        """Body point coincident with ground point x, its position and Jacobian (3, nq)."""
        b = self.bodies[i]
        if b < 0:
            return point_jacobian_from(kin, -1, x)
        A = kin.A[b]
        return point_jacobian_from(kin, b, A[:3, :3].T @ (x - A[:3, 3]))

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def _order_ranks(self, kin):
        """Rank of each surface in Simbody's sweep-and-prune order: by ``c_a − R`` along the axis
        ``a`` of largest spread of the bounding-sphere centres (a half-space's centre is its
        frame origin and its radius infinite, so it comes first)."""
        centers = jnp.stack([self._frame(kin, i)[:3, 3] for i in range(len(self.kinds))])
        spread = jnp.sum(jnp.abs(centers - jnp.mean(centers, axis=0)), axis=0)
        axis = jnp.where(spread[0] > spread[1], 0, 1)
        axis = jnp.where(spread[2] > spread[axis], 2, axis)
        c = jnp.take(centers, axis, axis=1)
        inf = jnp.asarray(jnp.inf, dtype=c.dtype)
        start = jnp.stack([
            c[i] - (inf if self.kinds[i] == HALF_SPACE else self.radii[i])
            for i in range(len(self.kinds))
        ])
        idx = jnp.arange(len(self.kinds))
        before = (start[None, :] < start[:, None]) | (
            (start[None, :] == start[:, None]) & (idx[None, :] < idx[:, None])
        )
        return jnp.sum(before, axis=1)

    def from_kinematics(self, model, kin, qd, t):
        total = jnp.zeros(kin.J.shape[1], dtype=jnp.result_type(kin.A, qd))
        if not self.pairs:
            return total
        k23 = self.stiffness ** (2.0 / 3.0)
        rank = self._order_ranks(kin)
        n = len(self.kinds)
        keys, engaged_list, f_list, Q_list = [], [], [], []
        for i, j in self.pairs:
            X1, X2 = self._frame(kin, i), self._frame(kin, j)
            if self.kinds[i] == HALF_SPACE and self.kinds[j] == SPHERE:
                r = self.radii[j]
                c = X1[:3, :3].T @ (X2[:3, 3] - X1[:3, 3])
                depth = r + c[0]
                normal = -X1[:3, 0]
                loc = X1[:3, :3] @ jnp.stack([depth / 2, c[1], c[2]]) + X1[:3, 3]
                radius = r
                key = rank[i] * n + rank[j]
            elif self.kinds[i] == SPHERE and self.kinds[j] == SPHERE:
                r1, r2 = self.radii[i], self.radii[j]
                delta = X2[:3, 3] - X1[:3, 3]
                dist = jnp.sqrt(jnp.sum(delta * delta))
                depth = r1 + r2 - dist
                normal = delta / jnp.where(dist > 0, dist, 1.0)
                loc = X1[:3, 3] + (r1 - depth / 2) * normal
                radius = r1 * r2 / (r1 + r2)
                key = jnp.minimum(rank[i], rank[j]) * n + jnp.maximum(rank[i], rank[j])
            else:
                continue
            k1, k2 = k23[i], k23[j]
            s1 = k2 / (k1 + k2)
            s2 = 1 - s1
            loc = loc + depth * (0.5 - s1) * normal
            k = k1 * s1
            cdiss = self.dissipation[i] * s1 + self.dissipation[j] * s2
            engaged = depth > 0
            dsafe = jnp.where(engaged, depth, 0.0)
            fH = 4.0 / 3.0 * k * dsafe * jnp.sqrt(radius * k * dsafe)
            _, J1 = self._point(kin, i, loc)
            _, J2 = self._point(kin, j, loc)
            v = (J1 - J2) @ qd
            vn = jnp.sum(v * normal)
            vt = v - vn * normal
            f = fH * (1 + 1.5 * cdiss * vn)
            vs2 = jnp.sum(vt * vt)
            slipping = vs2 > 0
            vslip = jnp.sqrt(jnp.where(slipping, vs2, 1.0))
            us = _harmonic(self.static_friction[i], self.static_friction[j])
            ud = _harmonic(self.dynamic_friction[i], self.dynamic_friction[j])
            uv = _harmonic(self.viscous_friction[i], self.viscous_friction[j])
            vrel = vslip / self.transition_velocity
            ff = f * (jnp.minimum(vrel, 1.0) * (ud + 2 * (us - ud) / (1 + vrel * vrel)) + uv * vslip)
            force = f * normal + jnp.where(slipping, ff / vslip, 0.0) * vt
            keys.append(key)
            engaged_list.append(engaged)
            f_list.append(f)
            Q_list.append((J2 - J1).T @ force)
        if not keys:
            return total
        keys, engaged_arr, f_arr = jnp.stack(keys), jnp.stack(engaged_list), jnp.stack(f_list)
        # Simbody returns at the first contact (in its order) whose force is not positive
        stop = engaged_arr & (f_arr <= 0)
        blocked = jnp.any(stop[None, :] & (keys[None, :] < keys[:, None]), axis=1)
        counts = engaged_arr & (f_arr > 0) & ~blocked
        for m, Q in enumerate(Q_list):
            total = total + jnp.where(counts[m], Q, 0.0)
        return total


class SmoothSphereHalfSpaceForce(AbstractForce):
    """Smooth Hunt–Crossley contact of one sphere and one half-space (Simbody's
    ``SmoothSphereHalfSpaceForce``, OpenSim's element of the same name; Serrancolí et al. 2019).

    With ``n`` the half-space frame's +x (into the half-space), indentation
    ``d = (c − o_H)·n + r``; ``k = ½ stiffness^(2/3)``,
    ``f_H = 4/3 k √(r k) (√(d² + c_f))^(3/2) (½ + ½ tanh(b_d d))``,
    ``f = f_H (1 + 3/2 c v_n) (½ + ½ tanh(b_v (v_n + 2/(3c))))`` with ``v = v_sphere − v_half-space``
    at the point ``c + r n − d/2 n``; friction ``f (min(v_s/v_t, 1)(μ_d + 2(μ_s − μ_d)/(1 + (v_s/v_t)²))
    + μ_v v_s)`` along the slip, ``v_s = √(|v_t|² + c_f)``. The half-space receives ``F = f n +
    friction``, the sphere ``−F``.

    Attributes:
        sphere_body, half_space_body (static): jaxmb bodies (-1: ground).
        sphere_center: (3,) in the sphere body's jaxmb frame; radius (m).
        half_space_pose: (4, 4) half-space frame in its body's jaxmb frame.
        stiffness, dissipation, static_friction, dynamic_friction, viscous_friction,
        transition_velocity, constant_contact_force, hertz_smoothing, hunt_crossley_smoothing.
    """

    sphere_body: int = eqx.field(static=True)
    half_space_body: int = eqx.field(static=True)
    sphere_center: Float[Array, " 3"]
    radius: Float[Array, ""]
    half_space_pose: Float[Array, "4 4"]
    stiffness: Float[Array, ""]
    dissipation: Float[Array, ""]
    static_friction: Float[Array, ""]
    dynamic_friction: Float[Array, ""]
    viscous_friction: Float[Array, ""]
    transition_velocity: Float[Array, ""]
    constant_contact_force: Float[Array, ""]
    hertz_smoothing: Float[Array, ""]
    hunt_crossley_smoothing: Float[Array, ""]

    def __init__(
        self, sphere_body, sphere_center, radius, half_space_body, half_space_pose, stiffness,
        dissipation, static_friction=0.0, dynamic_friction=0.0, viscous_friction=0.0,
        transition_velocity=0.01, constant_contact_force=1e-5, hertz_smoothing=300.0,
        hunt_crossley_smoothing=50.0,
    ):
        self.sphere_body, self.half_space_body = int(sphere_body), int(half_space_body)
        self.sphere_center, self.radius = as_float(sphere_center), as_float(radius)
        self.half_space_pose = as_float(half_space_pose)
        self.stiffness, self.dissipation = as_float(stiffness), as_float(dissipation)
        self.static_friction = as_float(static_friction)
        self.dynamic_friction = as_float(dynamic_friction)
        self.viscous_friction = as_float(viscous_friction)
        self.transition_velocity = as_float(transition_velocity)
        self.constant_contact_force = as_float(constant_contact_force)
        self.hertz_smoothing = as_float(hertz_smoothing)
        self.hunt_crossley_smoothing = as_float(hunt_crossley_smoothing)

    def _station(self, kin, b, x):
        if b < 0:
            return point_jacobian_from(kin, -1, x)
        A = kin.A[b]
        return point_jacobian_from(kin, b, A[:3, :3].T @ (x - A[:3, 3]))

    def generalized_force(self, model, q, qd, t):
        return self.from_kinematics(model, tree_kinematics(model, q), qd, t)

    def from_kinematics(self, model, kin, qd, t):
        bs, bh = self.sphere_body, self.half_space_body
        X = self.half_space_pose if bh < 0 else kin.A[bh] @ self.half_space_pose
        c = self.sphere_center if bs < 0 else kin.A[bs, :3, :3] @ self.sphere_center + kin.A[bs, :3, 3]
        n = X[:3, 0]
        r = self.radius
        d = jnp.sum((c - X[:3, 3]) * n) + r
        p = c + r * n - 0.5 * d * n
        _, J1 = self._station(kin, bs, p)
        _, J2 = self._station(kin, bh, p)
        v = (J1 - J2) @ qd
        vn = jnp.sum(v * n)
        vt = v - vn * n
        cf = self.constant_contact_force
        k = 0.5 * self.stiffness ** (2.0 / 3.0)
        fh = (4.0 / 3.0) * k * jnp.sqrt(r * k) * jnp.sqrt(d * d + cf) ** 1.5
        fh = fh * (0.5 + 0.5 * jnp.tanh(self.hertz_smoothing * d))
        cd = self.dissipation
        f = fh * (1.0 + 1.5 * cd * vn)
        f = f * (0.5 + 0.5 * jnp.tanh(self.hunt_crossley_smoothing * (vn + 2.0 / (3.0 * cd))))
        vslip = jnp.sqrt(jnp.sum(vt * vt) + cf)
        vrel = vslip / self.transition_velocity
        us, ud, uv = self.static_friction, self.dynamic_friction, self.viscous_friction
        ff = f * (jnp.minimum(vrel, 1.0) * (ud + 2 * (us - ud) / (1 + vrel * vrel)) + uv * vslip)
        force = f * n + ff * vt / vslip
        return (J2 - J1).T @ force
