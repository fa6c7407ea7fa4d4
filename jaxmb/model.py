"""The multibody model: an immutable pytree of bodies, joints and a joint map (seed 001 §3-1, §3-2).

Bodies are numbered 0..nb-1 so that a parent precedes its children (Featherstone); the ground is
parent ``-1``. Body i is attached to its parent by one 1-DOF joint: the parent frame is translated
by ``d_i`` along the unit vector ``V_d`` and then rotated by ``θ_i`` about the unit vector ``V_θ``,
both given in the parent frame (Eqs. 38–39). For a revolute joint ``θ_i = f_i(q)`` and ``d_i`` is
constant; for a prismatic joint ``d_i = f_i(q)`` and ``θ_i`` is constant. So n_j = n_b: body i's
joint is joint i. Multi-DOF joints are chains of 1-DOF joints through massless bodies.

Build models with :func:`build_model` (which validates everything and names the offending element);
:class:`Model` itself only stores arrays, so that JAX can rebuild it from traced leaves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .joint_maps import AbstractJointMap, identity_map
from .math.functions import as_array

__all__ = [
    "Body",
    "Model",
    "NamedPoint",
    "build_model",
    "ModelError",
    "REVOLUTE",
    "PRISMATIC",
    "check_coordinate_vectors",
]

REVOLUTE = "revolute"
PRISMATIC = "prismatic"
_AXIS_TOL = 1e-9


class ModelError(ValueError):
    """A model that cannot be built, with the offending element named in the message."""


@dataclasses.dataclass(frozen=True)
class Body:
    """Specification of one body and the joint to its parent (plain data, validated by build_model).

    Attributes:
        name: unique body name.
        parent: parent body name, index, or ``None``/``"ground"`` for the ground.
        joint: ``"revolute"`` or ``"prismatic"``.
        axis: V_θ, unit rotation axis in the parent frame.
        offset_axis: V_d, unit translation direction in the parent frame. For a revolute joint, give
            either ``offset_axis`` and ``offset`` or ``position`` (the joint origin in the parent
            frame, m). For a prismatic joint ``offset_axis`` is the sliding axis.
        offset: d, the constant translation (m) of a revolute joint.
        position: shortcut for ``offset_axis``/``offset`` of a revolute joint.
        angle: θ, the constant rotation (rad) of a prismatic joint about ``axis``.
        mass: kg (0 for the massless bodies of a multi-DOF joint chain).
        com: centre of mass in the body frame (m).
        inertia: 3×3 inertia tensor about the centre of mass in body axes (kg·m²); all zeros for
            a point mass, otherwise positive definite when ``mass > 0``.
    """

    name: str
    parent: Any = None
    joint: str = REVOLUTE
    axis: Sequence[float] = (0.0, 0.0, 1.0)
    offset_axis: Sequence[float] | None = None
    offset: float = 0.0
    position: Sequence[float] | None = None
    angle: float = 0.0
    mass: float = 0.0
    com: Sequence[float] = (0.0, 0.0, 0.0)
    inertia: Any = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))


class NamedPoint(eqx.Module):
    """A named point fixed in a body: the body index is static, the position a traced leaf.

    Unpacks like the pair ``(body, position)``: ``b, r = model.points[name]``.

    Attributes:
        body: body index, -1 for the ground (static).
        position: (3,) position in the body frame (m).
    """

    body: int = eqx.field(static=True)
    position: Float[Array, " 3"]

    def __iter__(self):
        return iter((self.body, self.position))

    def __getitem__(self, k):
        return (self.body, self.position)[k]

    def __len__(self):
        return 2


class Model(eqx.Module):
    """A multibody system with joint variables f(q). Immutable; every array is a traced leaf.

    Attributes:
        parent: (nb,) parent index per body, -1 for the ground (static).
        joint_type: (nb,) ``"revolute"``/``"prismatic"`` (static).
        body_names, coordinate_names: names (static).
        axis_d: (nb, 3) V_d unit vectors in the parent frame.
        axis_theta: (nb, 3) V_θ unit vectors in the parent frame.
        d: (nb,) constant translations of revolute joints (m; unused for prismatic joints).
        theta: (nb,) constant rotations of prismatic joints (rad; unused for revolute joints).
        mass: (nb,) kg. com: (nb, 3) m, body frame. inertia: (nb, 3, 3) kg·m² about the com.
        gravity: (3,) m/s² in the ground frame.
        joint_map: the map q ↦ f(q).
        forces: applied generalized-force elements (springs, motors, ...), each a pytree.
        muscles: musculotendon units (or ``None``).
        points: named points ``{name: NamedPoint(body index, (3,) position in body frame)}``.
        name: model name (static).
        prescribed: ``None``, or the coordinates that follow functions of time
            (:class:`jaxmb.dynamics.prescribed.PrescribedCoordinates`).
    """

    parent: tuple[int, ...] = eqx.field(static=True)
    joint_type: tuple[str, ...] = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    coordinate_names: tuple[str, ...] = eqx.field(static=True)
    axis_d: Float[Array, "nb 3"]
    axis_theta: Float[Array, "nb 3"]
    d: Float[Array, " nb"]
    theta: Float[Array, " nb"]
    mass: Float[Array, " nb"]
    com: Float[Array, "nb 3"]
    inertia: Float[Array, "nb 3 3"]
    gravity: Float[Array, " 3"]
    joint_map: AbstractJointMap
    forces: tuple = ()
    muscles: Any = None
    points: dict = eqx.field(default_factory=dict)
    name: str = eqx.field(static=True, default="model")
    prescribed: Any = None

    @property
    def nb(self) -> int:
        """Number of moving bodies (= number of joints)."""
        return len(self.parent)

    @property
    def nj(self) -> int:
        """Number of joints (= number of bodies)."""
        return len(self.parent)

    @property
    def nq(self) -> int:
        """Number of generalized coordinates."""
        return self.joint_map.nq

    @property
    def is_revolute(self) -> np.ndarray:
        """(nb,) static boolean mask of revolute joints."""
        return np.array([t == REVOLUTE for t in self.joint_type], dtype=bool)

    @property
    def ancestors(self) -> np.ndarray:
        """(nb, nb) static mask: ``ancestors[i, j]`` is True when j ∈ Anc(i) ∪ {i}."""
        return ancestor_mask(self.parent)

    @property
    def muscle_names(self) -> tuple[str, ...]:
        return tuple(getattr(self.muscles, "names", ())) if self.muscles is not None else ()

    def body_index(self, body: int | str | None) -> int:
        """Index of a body given by index or name (``None``/``"ground"``/-1: the ground, -1);
        raises naming the unknown body."""
        if body is None or body == "ground":
            return -1
        if isinstance(body, str):
            if body not in self.body_names:
                raise ModelError(f"unknown body {body!r}; bodies are {list(self.body_names)}")
            return self.body_names.index(body)
        b = int(body)
        if not -1 <= b < self.nb:
            raise ModelError(f"body index {b} out of range for {self.nb} bodies")
        return b

    def coordinate_index(self, coordinate: int | str) -> int:
        if isinstance(coordinate, str):
            if coordinate not in self.coordinate_names:
                raise ModelError(
                    f"unknown coordinate {coordinate!r}; "
                    f"coordinates are {list(self.coordinate_names)}"
                )
            return self.coordinate_names.index(coordinate)
        c = int(coordinate)
        if not 0 <= c < self.nq:
            raise ModelError(f"coordinate index {c} out of range for {self.nq} coordinates")
        return c


def ancestor_mask(parent: Sequence[int]) -> np.ndarray:
    """``mask[i, j]`` is True when j ∈ Anc(i) ∪ {i} (numpy, static)."""
    nb = len(parent)
    mask = np.zeros((nb, nb), dtype=bool)
    for i in range(nb):
        mask[i, i] = True
        p = parent[i]
        if p >= 0:
            mask[i] |= mask[p]
    return mask


def _unit(v, what: str) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    if v.shape != (3,):
        raise ModelError(f"{what} must be a 3-vector, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ModelError(f"{what} has non-finite entries: {v.tolist()}")
    n = np.linalg.norm(v)
    if n == 0.0:
        raise ModelError(f"{what} is the zero vector; a joint axis must be a unit vector")
    if abs(n - 1.0) > _AXIS_TOL:
        raise ModelError(
            f"{what} = {v.tolist()} has norm {n:.12g}; a joint axis must be a unit vector"
        )
    return v


def build_model(
    bodies: Sequence[Body],
    joint_map: AbstractJointMap | None = None,
    *,
    gravity: Sequence[float] = (0.0, 0.0, -9.81),
    coordinate_names: Sequence[str] | None = None,
    forces: Sequence[Any] = (),
    muscles: Any = None,
    points: dict | None = None,
    name: str = "model",
) -> Model:
    """Validate body specifications and assemble a :class:`Model`.

    Args:
        bodies: the bodies in an order where every parent precedes its children.
        joint_map: q ↦ f(q) with ``nj == len(bodies)``; default the identity (one coordinate per
            joint).
        gravity: (3,) m/s² in the ground frame.
        coordinate_names: nq names; default ``q0, q1, ...``.
        forces: applied force elements (see :mod:`jaxmb.forces`).
        muscles: musculotendon set (see :mod:`jaxmb.muscles`).
        points: named points ``{name: (body name or index, (x, y, z))}``.
        name: model name.

    Raises:
        ModelError: naming the offending body, joint or value.
    """
    bodies = list(bodies)
    if not bodies:
        raise ModelError("a model needs at least one body")
    for i, b in enumerate(bodies):
        if not isinstance(b, Body):
            raise ModelError(f"bodies[{i}] is a {type(b).__name__}, expected jaxmb.Body")
    names = [b.name for b in bodies]
    for i, b in enumerate(bodies):
        if not isinstance(b.name, str) or not b.name:
            raise ModelError(f"bodies[{i}] has an invalid name {b.name!r}")
        if names.count(b.name) > 1:
            raise ModelError(f"body name {b.name!r} is used more than once")
        if b.name == "ground":
            raise ModelError("'ground' is reserved for the fixed frame; rename the body")

    parent, jtype = [], []
    axis_d, axis_t, dvals, tvals, mass, com, inertia = [], [], [], [], [], [], []
    for i, b in enumerate(bodies):
        where = f"body {b.name!r} (index {i})"
        p = b.parent
        if p is None or p == "ground" or p == -1:
            pi = -1
        elif isinstance(p, str):
            if p not in names:
                raise ModelError(f"{where}: unknown parent {p!r}")
            pi = names.index(p)
        else:
            pi = int(p)
        if pi >= i:
            raise ModelError(
                f"{where}: parent {pi} does not precede it; number bodies so that parents come"
                " first (this also rules out cycles)"
            )
        if pi < -1:
            raise ModelError(f"{where}: invalid parent index {pi}")
        parent.append(pi)
        if b.joint not in (REVOLUTE, PRISMATIC):
            raise ModelError(f"{where}: joint type {b.joint!r} is not 'revolute' or 'prismatic'")
        jtype.append(b.joint)
        axis_t.append(_unit(b.axis, f"{where}: joint axis V_theta"))
        if b.joint == REVOLUTE:
            if b.position is not None:
                if b.offset_axis is not None or b.offset != 0.0:
                    raise ModelError(
                        f"{where}: give either position or offset_axis/offset, not both"
                    )
                r = np.asarray(b.position, dtype=float)
                if r.shape != (3,) or not np.all(np.isfinite(r)):
                    raise ModelError(
                        f"{where}: position must be a finite 3-vector, got {b.position}"
                    )
                n = np.linalg.norm(r)
                axis_d.append(r / n if n > 0 else np.array([1.0, 0.0, 0.0]))
                dvals.append(n)
            else:
                va = (1.0, 0.0, 0.0) if b.offset_axis is None else b.offset_axis
                axis_d.append(_unit(va, f"{where}: offset axis V_d"))
                dvals.append(_finite_scalar(b.offset, f"{where}: offset d"))
            tvals.append(0.0)
        else:
            if b.offset_axis is None:
                raise ModelError(
                    f"{where}: a prismatic joint needs offset_axis (the sliding axis V_d)"
                )
            if b.position is not None:
                raise ModelError(f"{where}: position is for revolute joints; use offset_axis")
            axis_d.append(_unit(b.offset_axis, f"{where}: sliding axis V_d"))
            dvals.append(0.0)
            tvals.append(_finite_scalar(b.angle, f"{where}: constant angle theta"))
        m = _finite_scalar(b.mass, f"{where}: mass")
        if m < 0:
            raise ModelError(f"{where}: negative mass {m}")
        mass.append(m)
        c = np.asarray(b.com, dtype=float)
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise ModelError(f"{where}: centre of mass must be a finite 3-vector, got {b.com}")
        com.append(c)
        inertia.append(_check_inertia(b.inertia, m, where))

    nb = len(bodies)
    if joint_map is None:
        joint_map = identity_map(nb)
    if not isinstance(joint_map, AbstractJointMap):
        raise ModelError(f"joint_map must be a jaxmb joint map, got {type(joint_map).__name__}")
    if joint_map.nj != nb:
        raise ModelError(
            f"joint map gives {joint_map.nj} joint variables but the model has {nb} joints"
        )
    try:
        out = jax.eval_shape(joint_map, jax.ShapeDtypeStruct((joint_map.nq,), jnp.float64))
    except Exception as e:  # the user's callable failed to trace
        raise ModelError(f"joint map failed on q of shape ({joint_map.nq},): {e}") from e
    if out.shape != (nb,):
        raise ModelError(
            f"joint map output has shape {out.shape}, expected ({nb},) (one value per joint)"
        )
    nq = joint_map.nq
    if coordinate_names is None:
        coordinate_names = tuple(f"q{k}" for k in range(nq))
    coordinate_names = tuple(coordinate_names)
    if len(coordinate_names) != nq:
        raise ModelError(f"{len(coordinate_names)} coordinate names for {nq} coordinates")
    if len(set(coordinate_names)) != nq:
        raise ModelError(f"coordinate names are not unique: {coordinate_names}")
    g = np.asarray(gravity, dtype=float)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise ModelError(f"gravity must be a finite 3-vector, got {gravity}")
    pts = {}
    for pname, (pb, pr) in (points or {}).items():
        if isinstance(pb, str):
            if pb not in names and pb != "ground":
                raise ModelError(f"point {pname!r}: unknown body {pb!r}")
            pb = -1 if pb == "ground" else names.index(pb)
        elif not -1 <= int(pb) < len(names):
            raise ModelError(
                f"point {pname!r}: body index {int(pb)} out of range for {len(names)} bodies"
            )
        pr = np.asarray(pr, dtype=float)
        if pr.shape != (3,) or not np.all(np.isfinite(pr)):
            raise ModelError(
                f"point {pname!r}: position must be a finite 3-vector, got {pr.tolist()}"
            )
        pts[pname] = NamedPoint(int(pb), as_array(pr))

    return Model(
        parent=tuple(parent),
        joint_type=tuple(jtype),
        body_names=tuple(names),
        coordinate_names=coordinate_names,
        axis_d=as_array(np.stack(axis_d), None),
        axis_theta=as_array(np.stack(axis_t), None),
        d=as_array(dvals, None),
        theta=as_array(tvals, None),
        mass=as_array(mass, None),
        com=as_array(np.stack(com), None),
        inertia=as_array(np.stack(inertia), None),
        gravity=as_array(g, None),
        joint_map=joint_map,
        forces=tuple(forces),
        muscles=muscles,
        points=pts,
        name=name,
    )


def _finite_scalar(x, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number, got {x!r}") from None
    if not np.isfinite(v):
        raise ModelError(f"{what} is not finite: {v}")
    return v


def _check_inertia(I, mass: float, where: str) -> np.ndarray:
    I = np.asarray(I, dtype=float)
    if I.shape == (3,):
        I = np.diag(I)
    if I.shape != (3, 3):
        raise ModelError(f"{where}: inertia must be 3x3 (or its diagonal), got shape {I.shape}")
    if not np.all(np.isfinite(I)):
        raise ModelError(f"{where}: inertia has non-finite entries")
    scale = max(np.abs(I).max(), 1e-300)
    if np.abs(I - I.T).max() > 1e-12 * scale:
        raise ModelError(f"{where}: inertia tensor is not symmetric: {I.tolist()}")
    if not np.any(I):
        return I  # a point mass (mass > 0) or a massless body: no rotational inertia
    ev = np.linalg.eigvalsh(I)
    if mass > 0 and ev.min() <= 0:
        raise ModelError(
            f"{where}: inertia tensor is not positive definite (eigenvalues {ev.tolist()})"
        )
    if ev.min() < -1e-12 * scale:
        raise ModelError(f"{where}: inertia tensor has a negative eigenvalue ({ev.min():.3g})")
    if mass > 0 and ev[0] + ev[1] < ev[2] * (1 - 1e-9):
        raise ModelError(
            f"{where}: principal moments {ev.tolist()} violate the triangle inequality"
        )
    return I


def check_coordinate_vectors(model, function: str, **vectors) -> None:
    """Raise ``ValueError`` unless every given array (``q=..., qd=...``) has shape (nq,).

    A check on static shapes (free at trace time, so jit/vmap/grad are unaffected) at the public
    entry points, so a vector of the wrong length is named with the function, the model's ``nq``
    and the shape given, instead of surfacing as an XLA shape error deep in the computation.
    """
    want = (model.nq,)
    for name, x in vectors.items():
        if x is None or callable(x):
            continue
        shape = np.shape(x)
        if shape != want:
            raise ValueError(
                f"{function}: {name} must have shape (nq,) = {want} for model {model.name!r}"
                f" (one value per coordinate: {_names(model.coordinate_names)}), got shape {shape}"
            )


def _names(names, most: int = 8) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "")
