"""Trial-level inverse dynamics with external loads, on arrays, all frames at once.

An :class:`ExternalLoad` is OpenSim's ``ExternalForce`` sampled at the trial's frames: a force
(and optionally a point of application and a torque), each expressed in a frame fixed in a body of
the model (or ground), applied to one body. At each frame the force is re-expressed in ground and
applied to the material point of the applied body that coincides with the point, the torque to the
body, as ``ExternalForce::computeForce`` does (``applyForceToPoint`` / ``applyTorque``); without a
point the force acts at the applied body's origin. Their generalized force is, by virtual work,
``Q = J_p(q)ᵀ F + J_ω(q)ᵀ T``.

:func:`trial_inverse_dynamics` returns ``τ = M q̈ + N q̇ − G − Q_model − Σ Q_ext`` for every frame
(vmapped; jit/grad-able in q, q̇, q̈, the load data and the model's parameters).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..dynamics import inverse_dynamics
from ..kinematics import tree_kinematics
from ..model import Model

__all__ = [
    "Frame",
    "GROUND",
    "ExternalLoad",
    "external_generalized_forces",
    "trial_inverse_dynamics",
]


class Frame(eqx.Module):
    """A frame fixed in jaxmb body ``body`` (-1: ground): ``x_body = T @ [x_frame, 1]``.

    For an OpenSim body, ``T`` is the import's map from the OpenSim body frame to the jaxmb body
    frame (``OsimImport.body_frames``)."""

    body: int = eqx.field(static=True)
    T: Float[Array, "4 4"]

    def __init__(self, body: int = -1, T=None):
        self.body = int(body)
        # numpy for the identity: GROUND is built at import, which must not start JAX's backend
        self.T = np.eye(4) if T is None else jnp.asarray(T, dtype=float)

    def pose(self, kin) -> Float[Array, "4 4"]:
        """The frame's pose in ground at the configuration of ``kin``."""
        if self.body < 0:
            return self.T
        return kin.A[self.body] @ self.T


GROUND = Frame(-1)


class ExternalLoad(eqx.Module):
    """One external force sampled at nt frames.

    Attributes:
        body: jaxmb index of the body the load is applied to.
        force: (nt, 3) N, in ``force_frame``; ``torque`` (nt, 3) N·m in ``force_frame`` or None.
        point: (nt, 3) m in ``point_frame``, or None (the applied body's origin, ``body_frame``).
        name: a label for messages.
    """

    body: int = eqx.field(static=True)
    body_frame: Frame
    force: Float[Array, "nt 3"] | None
    force_frame: Frame
    point: Float[Array, "nt 3"] | None
    point_frame: Frame
    torque: Float[Array, "nt 3"] | None
    name: str = eqx.field(static=True, default="load")


def _load_q(model: Model, kin, load: ExternalLoad, k) -> Float[Array, " nq"]:
    b = load.body
    nq = model.nq
    Q = jnp.zeros(nq, dtype=kin.A.dtype)
    if b < 0:
        return Q
    w, v = kin.Jb[b, :3], kin.Jb[b, 3:]
    Rf = load.force_frame.pose(kin)[:3, :3]
    if load.force is not None:
        F = Rf @ load.force[k]
        if load.point is not None:
            P = load.point_frame.pose(kin)
            p = P[:3, :3] @ load.point[k] + P[:3, 3]
        else:
            p = load.body_frame.pose(kin)[:3, 3]
        Jr = jnp.cross(w.T, p).T + v  # (3, nq): velocity of the body's point at p
        Q = Q + Jr.T @ F
    if load.torque is not None:
        Q = Q + w.T @ (Rf @ load.torque[k])
    return Q


def external_generalized_forces(
    model: Model, q: Float[Array, " nq"], loads: Sequence[ExternalLoad], k, kin=None
) -> Float[Array, " nq"]:
    """Σ generalized forces (nq,) of ``loads`` at frame index ``k`` and configuration q.
    ``kin``: the :func:`~jaxmb.kinematics.tree_kinematics` of q when the caller has it (each
    kinematics pass traced is seconds of compile time on a model with spline joints)."""
    if kin is None:
        kin = tree_kinematics(model, q)
    Q = jnp.zeros(model.nq, dtype=kin.A.dtype)
    for load in loads:
        Q = Q + _load_q(model, kin, load, k)
    return Q


def trial_inverse_dynamics(
    model: Model,
    q: Float[Array, "nt nq"],
    qd: Float[Array, "nt nq"],
    qdd: Float[Array, "nt nq"],
    loads: Sequence[ExternalLoad] = (),
) -> Float[Array, "nt nq"]:
    """Generalized forces (nt, nq) that produce q̈ at (q, q̇) with the external loads applied,
    every frame at once: ``τ = M q̈ + N q̇ − G − Q_model − Σ Q_ext`` (N·m or N per coordinate)."""
    q, qd, qdd = (jnp.asarray(x, dtype=float) for x in (q, qd, qdd))
    if not (q.shape == qd.shape == qdd.shape) or q.ndim != 2 or q.shape[1] != model.nq:
        raise ValueError(
            f"trial_inverse_dynamics: q, qd, qdd must all be (nt, {model.nq}); got "
            f"{q.shape}, {qd.shape}, {qdd.shape}"
        )
    nt = q.shape[0]
    for ld in loads:
        for what in ("force", "point", "torque"):
            a = getattr(ld, what)
            if a is not None and tuple(np.shape(a)) != (nt, 3):
                raise ValueError(
                    f"trial_inverse_dynamics: load {ld.name!r}: {what} must be ({nt}, 3), got "
                    f"{tuple(np.shape(a))}"
                )
        # an index past the last body would read the last body (JAX clamps indices)
        for what, b in (("body", ld.body), ("body_frame", ld.body_frame.body),
                        ("force_frame", ld.force_frame.body), ("point_frame", ld.point_frame.body)):
            if not -1 <= b < model.nb:
                raise ValueError(
                    f"trial_inverse_dynamics: load {ld.name!r}: {what} is body {b}, not a body "
                    f"of model {model.name!r} (-1: ground, 0 … {model.nb - 1})"
                )

    def frame(q1, qd1, qdd1, k):
        return inverse_dynamics(model, q1, qd1, qdd1) - external_generalized_forces(
            model, q1, loads, k
        )

    return jax.vmap(frame)(q, qd, qdd, jnp.arange(nt))
