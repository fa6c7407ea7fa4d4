"""OpenSim's XML read into plain data: the helpers every part of the reader uses, and the specs.

The reader (:mod:`.reader`) turns an ``.osim`` document (:mod:`.document`) into an
:class:`OsimImport`: the jaxmb model plus what the file said in OpenSim's terms (coordinates, body
frames, muscle and wrap specifications). The specs are plain data, in OpenSim's units and each
OpenSim body's own frame, so they can be checked, filtered and handed to the muscle builders of
:mod:`.muscles`.

Geometry: ``body_fixed_xyz`` is OpenSim's orientation convention (body-fixed X-Y-Z Euler angles);
transforms are (4, 4) homogeneous matrices ``[[R, p], [0, 1]]`` with ``x_parent = R x + p`` (m).
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...math import AbstractFunction
from ...model import Model, ModelError

__all__ = [
    "OsimImportError",
    "osim_xml",
    "JOINT_AXES",
    "OsimCoordinate",
    "OsimImport",
    "PathPointSpec",
    "MuscleSpec",
    "WrapObjectSpec",
    "PathWrapSpec",
    "SUPPORTED_JOINTS",
    "SUPPORTED_MUSCLES",
    "SUPPORTED_WRAPS",
    "SUPPORTED_WRAP_METHODS",
    "child_text",
    "child_vector",
    "child_flag",
    "socket_path",
    "axis_rotation",
    "body_fixed_xyz",
    "homogeneous",
    "inverse_transform",
    "axis_angle",
    "unit_axis",
]

SUPPORTED_JOINTS = (
    "CustomJoint",
    "PinJoint",
    "SliderJoint",
    "WeldJoint",
    "UniversalJoint",
    "GimbalJoint",
    "BallJoint",
    "FreeJoint",
    "PlanarJoint",
    "EllipsoidJoint",
)
# joints whose OpenSim generalized speeds are the angular velocity in the parent frame, not the
# rates of their three body-fixed X-Y-Z angle coordinates (Simbody's Ball, Free and Ellipsoid)
EULER_SPEED_JOINTS = ("BallJoint", "FreeJoint", "EllipsoidJoint")
SUPPORTED_MUSCLES = (
    "Thelen2003Muscle",
    "Millard2012EquilibriumMuscle",
    "Millard2012AccelerationMuscle",
    "DeGrooteFregly2016Muscle",
    "Schutte1993Muscle_Deprecated",
)
SUPPORTED_WRAPS = ("WrapCylinder", "WrapEllipsoid", "WrapSphere", "WrapTorus")
# OpenSim's PathWrap methods; "hybrid" is the default and the only one all wrap types share
SUPPORTED_WRAP_METHODS = ("hybrid",)

# Joint types as a sequence of axes in the joint frame F, in the order they act (translations
# along F's axes first, then body-fixed rotations), each ``(kind, axis, index of the coordinate
# in the joint's coordinate list)``. Simbody's mobilizers: Pin (rotation about z), Slider
# (translation along x), Universal (x then the new y), Gimbal and Ball (body-fixed X-Y-Z; for the
# ball OpenSim's coordinates are these Euler angles of its quaternion), Free (translation in F, then
# the ball's rotation), Planar (translation x, y in F, then rotation about z).
_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
JOINT_AXES = {
    "PinJoint": (("rotation", _Z, 0),),
    "SliderJoint": (("translation", _X, 0),),
    "UniversalJoint": (("rotation", _X, 0), ("rotation", _Y, 1)),
    "GimbalJoint": (("rotation", _X, 0), ("rotation", _Y, 1), ("rotation", _Z, 2)),
    "BallJoint": (("rotation", _X, 0), ("rotation", _Y, 1), ("rotation", _Z, 2)),
    "FreeJoint": (
        ("translation", _X, 3),
        ("translation", _Y, 4),
        ("translation", _Z, 5),
        ("rotation", _X, 0),
        ("rotation", _Y, 1),
        ("rotation", _Z, 2),
    ),
    "PlanarJoint": (("translation", _X, 1), ("translation", _Y, 2), ("rotation", _Z, 0)),
    "WeldJoint": (),
    # the translations are functions of the first two rotations (EllipsoidSurfacePoint); listed
    # here with the first rotation as a placeholder, replaced in OsimDocument._joint_body
    "EllipsoidJoint": (
        ("translation", _X, 0),
        ("translation", _Y, 0),
        ("translation", _Z, 0),
        ("rotation", _X, 0),
        ("rotation", _Y, 1),
        ("rotation", _Z, 2),
    ),
}


class OsimImportError(ModelError):
    """An .osim element jaxmb cannot import; the message names the element, its type and file."""


# --------------------------------------------------------------------------------------------
# small XML and geometry helpers
# --------------------------------------------------------------------------------------------


# OpenSim writes a property of a base class as ``<Class::property>`` (e.g.
# ``<HuntCrossleyForce::ContactParametersSet>``): not a well-formed XML name, read by OpenSim as
# ``<property>``. The text is rewritten the same way before parsing.
_SCOPED_TAG = re.compile(rb"<(/?)[A-Za-z_][A-Za-z0-9_]*::")


def osim_xml(text: bytes) -> bytes:
    """An ``.osim`` document's bytes with OpenSim's ``<Class::tag>`` spelling read as ``<tag>``."""
    return _SCOPED_TAG.sub(rb"<\1", text)


def child_text(el: ET.Element | None, tag: str, default: str | None = None) -> str | None:
    """The stripped text of ``el``'s child ``<tag>``, or ``default`` if either is absent."""
    if el is None:
        return default
    c = el.find(tag)
    if c is None or c.text is None:
        return default
    return c.text.strip()


def child_vector(el, tag, n, where, default=None) -> np.ndarray:
    """The ``n`` finite numbers of ``<tag>`` as an (n,) array; ``default`` if the tag is absent.

    Raises :class:`OsimImportError` naming ``where`` for a missing (no default), non-numeric,
    wrongly sized or non-finite value.
    """
    t = child_text(el, tag)
    if t is None:
        if default is not None:
            return np.asarray(default, dtype=float)
        raise OsimImportError(f"{where}: missing <{tag}>")
    try:
        v = np.array([float(x) for x in t.split()], dtype=float)
    except ValueError:
        raise OsimImportError(f"{where}: <{tag}> is not numeric: {t!r}") from None
    if v.shape != (n,):
        raise OsimImportError(f"{where}: <{tag}> needs {n} numbers, got {v.size}: {t!r}")
    if not np.all(np.isfinite(v)):
        raise OsimImportError(f"{where}: <{tag}> has non-finite values: {t!r}")
    return v


def socket_path(el, name: str) -> str | None:
    """A socket's connectee path, in the 4.0 final and the 4.0 beta spellings."""
    for tag in (
        f"socket_{name}",
        f"socket_{name}_connectee_name",
        f"connector_{name}_connectee_name",
    ):
        t = child_text(el, tag)
        if t is not None:
            return t
    return None


def child_flag(el, tag, default=False) -> bool:
    """OpenSim's boolean ``<tag>`` ("true"/"1" are true), ``default`` if absent."""
    t = child_text(el, tag)
    if t is None:
        return default
    return t.lower() in ("true", "1")


def axis_rotation(axis, angle) -> np.ndarray:
    """(3, 3) rotation by ``angle`` (rad) about the unit ``axis`` (Rodrigues)."""
    a = np.asarray(axis, dtype=float)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * (K @ K)


def body_fixed_xyz(angles) -> np.ndarray:
    """OpenSim's orientation convention: body-fixed X-Y-Z Euler angles, R = Rx(a) Ry(b) Rz(c)."""
    a, b, c = angles
    return axis_rotation((1, 0, 0), a) @ axis_rotation((0, 1, 0), b) @ axis_rotation((0, 0, 1), c)


def homogeneous(R=None, p=None) -> np.ndarray:
    """(4, 4) transform ``[[R, p], [0, 1]]``; identity rotation / zero translation if omitted."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def inverse_transform(T) -> np.ndarray:
    """Inverse of a (4, 4) rigid transform."""
    R, p = T[:3, :3], T[:3, 3]
    return homogeneous(R.T, -R.T @ p)


def axis_angle(R) -> tuple[np.ndarray, float]:
    """Unit axis and angle in [0, π] of a rotation matrix (axis z for the identity)."""
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(c))
    if angle < 1e-14:
        return np.array([0.0, 0.0, 1.0]), 0.0
    if np.pi - angle < 1e-6:
        # near π the skew part vanishes: take the axis from R + I = 2 a aᵀ
        M = (R + np.eye(3)) / 2.0
        k = int(np.argmax(np.diag(M)))
        a = M[:, k] / np.sqrt(M[k, k])
        return a / np.linalg.norm(a), angle
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w / np.linalg.norm(w), angle


def unit_axis(v, where) -> np.ndarray:
    """``v / |v|``; :class:`OsimImportError` naming ``where`` for a zero or non-finite axis."""
    n = np.linalg.norm(v)
    if not np.isfinite(n) or n < 1e-12:
        raise OsimImportError(f"{where}: axis {np.asarray(v).tolist()} is zero or not finite")
    return np.asarray(v, dtype=float) / n


# --------------------------------------------------------------------------------------------
# public data
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OsimCoordinate:
    """An OpenSim coordinate. ``rotational`` (rad) or translational (m); ``range`` (2,);
    ``prescribed``: ``None``, or the function of time (s) its value follows (OpenSim's
    ``prescribed_function`` with ``prescribed`` true)."""

    name: str
    joint: str
    rotational: bool
    default_value: float
    range: tuple[float, float]
    locked: bool
    clamped: bool
    prescribed: Any = None


#: OpenSim's constraints between body frames, read as :class:`FrameConstraintSpec` kinds.
FRAME_CONSTRAINTS = {
    "WeldConstraint": "weld",
    "PointConstraint": "point",
    "PointOnLineConstraint": "point_on_line",
    "ConstantDistanceConstraint": "distance",
}


@dataclasses.dataclass(frozen=True)
class FrameConstraintSpec:
    """A closed-loop constraint between two body frames (OpenSim body names, "ground" too).

    ``kind`` is ``"weld"`` (WeldConstraint: the frames coincide), ``"point"`` (PointConstraint:
    their origins coincide), ``"point_on_line"`` (PointOnLineConstraint: frame 1's origin and x
    axis are the line, frame 2's origin the follower point) or ``"distance"``
    (ConstantDistanceConstraint: the origins stay ``value`` m apart). ``X1``, ``X2``: (4, 4) poses
    of the frames in their bodies' OpenSim frames (m).
    """

    name: str
    type: str
    kind: str
    body1: str
    X1: np.ndarray
    body2: str
    X2: np.ndarray
    value: float = 0.0


@dataclasses.dataclass(frozen=True)
class PathPointSpec:
    """One point of a muscle path, in the OpenSim body's own frame (m).

    ``kind`` is "PathPoint", "ConditionalPathPoint" (active while ``coordinate`` lies within
    ``range``) or "MovingPathPoint" (``functions[k]`` of ``coordinates[k]`` give x, y, z; ``None``
    entries fall back to ``location``).
    """

    name: str
    kind: str
    body: str
    location: tuple[float, float, float]
    coordinate: str | None = None
    range: tuple[float, float] | None = None
    coordinates: tuple[str | None, str | None, str | None] | None = None
    functions: tuple[AbstractFunction | None, ...] | None = None


@dataclasses.dataclass(frozen=True)
class WrapObjectSpec:
    """A wrap object as plain data, in its OpenSim body's frame.

    ``kind`` is the OpenSim type (WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus);
    ``rotation`` (3, 3) has the wrap frame's axes as columns (``xyz_body_rotation``, body-fixed
    X-Y-Z); ``translation`` (3,) m; ``parameters``: radius, length, dimensions (m), as present.
    """

    name: str
    kind: str
    body: str
    translation: tuple[float, float, float]
    rotation: np.ndarray
    quadrant: str
    active: bool
    parameters: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class PathWrapSpec:
    """One entry of a muscle's PathWrapSet.

    ``range`` is OpenSim's, 1-based inclusive path-point indices with ``-1`` for "from the first" /
    "to the last" (the default ``(-1, -1)`` covers the whole path); ``method`` is OpenSim's
    ellipsoid-wrapping method (``hybrid``, ``midpoint``, ``axial``).
    """

    wrap: str
    method: str
    range: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class MuscleSpec:
    """A muscle as plain data: type, parameters (SI units, angles in rad), path and wrapping.

    ``wraps`` are the names of the wrap objects of its PathWrapSet, ``path_wraps`` the entries.
    """

    name: str
    kind: str
    parameters: dict[str, float]
    path: tuple[PathPointSpec, ...]
    wraps: tuple[str, ...]
    applies_force: bool = True
    path_wraps: tuple[PathWrapSpec, ...] = ()


@dataclasses.dataclass(frozen=True)
class OsimImport:
    """Everything :func:`read_osim` learned from a file, around the jaxmb model.

    Attributes:
        model: the jaxmb model (q = OpenSim's independent coordinates).
        coordinates: every OpenSim coordinate in OpenSim's order (independent and coupled).
        coupled: ``{dependent name: (constraint name, independent name)}``.
        locked: names of coordinates OpenSim marks locked (held at their default values by the
            joint map unless read with ``locked="free"``).
        body_frames: ``{OpenSim body: (jaxmb body index, T (4, 4))}`` with ``x_jaxmb = T x_osim``
            for points given in the OpenSim body's frame (m).
        jaxmb_joints: per jaxmb joint, ``"<OpenSim joint>/<axis>"`` (``fixed`` for welds).
        muscles: muscle specifications.
        wrap_objects: ``{name: WrapObjectSpec}`` of every body's wrap objects.
        version: the file's OpenSim document version (e.g. 40000, 30000).
        path: the file.
        left_out: with ``unsupported="warn"``, one message per element not imported.
        euler_rotations: the rotational coordinates of ball, free and ellipsoid joints (body-fixed
            X-Y-Z Euler angles; OpenSim's generalized speeds there are angular velocities, see
            :meth:`speeds_from_rates`).
        constrained: ``{coordinate: constraint names}`` of the coordinates that closed loops
            (Weld, Point, PointOnLine, ConstantDistance constraints) make dependent.
        prescribed: the coordinates whose motion follows a function of time (``model.prescribed``).
        tree_order: every OpenSim coordinate in OpenSim 4.6's multibody tree order
            (``Model::getCoordinatesInMultibodyTreeOrder``: the joints level by level from the
            ground, in file order within a level), the column order of its tools' outputs.
    """

    model: Model
    coordinates: tuple[OsimCoordinate, ...]
    coupled: dict[str, tuple[str, str]]
    locked: tuple[str, ...]
    body_frames: dict[str, tuple[int, np.ndarray]]
    jaxmb_joints: tuple[str, ...]
    muscles: tuple[MuscleSpec, ...]
    version: int
    path: str
    wrap_objects: dict[str, WrapObjectSpec] = dataclasses.field(default_factory=dict)
    left_out: tuple[str, ...] = ()
    euler_rotations: tuple[str, ...] = ()
    constrained: dict[str, str] = dataclasses.field(default_factory=dict)
    prescribed: tuple[str, ...] = ()
    tree_order: tuple[str, ...] = ()

    def point_in_model(self, body: str, location) -> tuple[int, np.ndarray]:
        """``(jaxmb body index, position in that body's frame)`` of a point on an OpenSim body."""
        if body not in self.body_frames:
            raise OsimImportError(f"{self.path}: unknown body {body!r}")
        b, T = self.body_frames[body]
        return b, T[:3, :3] @ np.asarray(location, dtype=float) + T[:3, 3]

    def path_point(self, point: PathPointSpec, q: Float[Array, " nq"]):
        """``(jaxmb body index, (3,) position in that body's frame, m)`` of a muscle path point.

        A MovingPathPoint's coordinates are evaluated through the joint map (coupled coordinates
        included), so the position is JAX-traceable and differentiable in ``q``.
        """
        b, T = self.body_frames[point.body]
        loc = jnp.asarray(point.location, dtype=float)
        if point.kind == "MovingPathPoint":
            Q = self.model.joint_map.full_coordinates(q)
            names = [c.name for c in self.coordinates]
            xyz = []
            for k in range(3):
                f, c = point.functions[k], point.coordinates[k]
                if f is None:
                    xyz.append(loc[k])
                elif c is None:
                    xyz.append(f(jnp.zeros((), dtype=loc.dtype)))
                else:
                    xyz.append(f(Q[names.index(c)]))
            loc = jnp.stack(xyz)
        return b, jnp.asarray(T[:3, :3]) @ loc + jnp.asarray(T[:3, 3])

    # ---- OpenSim's generalized speeds (ball, free and ellipsoid joints) -------------------
    def _euler_blocks(self):
        """Per ball, free or ellipsoid joint, the positions in q of its Euler angles (X, Y, Z)."""
        names = list(self.model.coordinate_names)
        by_joint: dict[str, list[int]] = {}
        for c in self.coordinates:
            if c.name in self.euler_rotations and c.name in names:
                by_joint.setdefault(c.joint, []).append(names.index(c.name))
        for j, idx in by_joint.items():
            if len(idx) != 3:
                raise OsimImportError(
                    f"{self.path}: joint {j!r}: some of its rotations are locked or coupled;"
                    " OpenSim's speeds there are not defined coordinate by coordinate"
                )
        return list(by_joint.values())

    @staticmethod
    def _euler_rate_matrix(angles, rates):
        """``E`` with ``ω_F = E θ̇`` (body-fixed X-Y-Z angles, ω in the parent frame F) and
        ``Ė θ̇``."""
        a, b = angles[0], angles[1]
        ca, sa, cb, sb = jnp.cos(a), jnp.sin(a), jnp.cos(b), jnp.sin(b)
        one, zero = jnp.ones_like(a), jnp.zeros_like(a)
        x = jnp.stack([one, zero, zero])
        e2 = jnp.stack([zero, ca, sa])
        e3 = jnp.stack([sb, -sa * cb, ca * cb])
        E = jnp.stack([x, e2, e3], axis=1)
        w1 = rates[0] * x
        w2 = w1 + rates[1] * e2
        dE = rates[1] * jnp.cross(w1, e2) + rates[2] * jnp.cross(w2, e3)
        return E, dE

    def osim_speeds(self, q, qd):
        """OpenSim's generalized speeds ``u`` (model order) from coordinate rates ``q̇``.

        jaxmb's ``q̇`` are the coordinates' time derivatives everywhere. OpenSim's speeds equal
        them except at ball, free and ellipsoid joints, whose three rotational speeds are the
        angular velocity of the child frame M in the parent frame F, expressed in F:
        ``u = E(θ) θ̇`` with ``E = [x, Rx(θ₁) y, Rx(θ₁) Ry(θ₂) z]`` for the body-fixed X-Y-Z
        angles θ (free joints' translational speeds are the translations' rates in F, as
        elsewhere).
        """
        u = jnp.asarray(qd)
        for idx in self._euler_blocks():
            i = jnp.asarray(idx)
            E, _ = self._euler_rate_matrix(jnp.asarray(q)[i], u[i])
            u = u.at[i].set(E @ jnp.asarray(qd)[i])
        return u

    def rates_from_osim_speeds(self, q, u):
        """Coordinate rates ``q̇`` from OpenSim's speeds ``u`` (inverse of :meth:`osim_speeds`;
        singular where ``cos θ₂ = 0``, gimbal lock)."""
        qd = jnp.asarray(u)
        for idx in self._euler_blocks():
            i = jnp.asarray(idx)
            E, _ = self._euler_rate_matrix(jnp.asarray(q)[i], qd[i])
            qd = qd.at[i].set(jnp.linalg.solve(E, jnp.asarray(u)[i]))
        return qd

    def osim_accelerations(self, q, qd, qdd):
        """OpenSim's ``u̇`` from ``q̈`` (e.g. of :func:`jaxmb.forward_dynamics`):
        ``u̇ = E θ̈ + Ė θ̇`` at ball, free and ellipsoid joint rotations, ``q̈`` elsewhere."""
        ud = jnp.asarray(qdd)
        for idx in self._euler_blocks():
            i = jnp.asarray(idx)
            E, dE = self._euler_rate_matrix(jnp.asarray(q)[i], jnp.asarray(qd)[i])
            ud = ud.at[i].set(E @ jnp.asarray(qdd)[i] + dE)
        return ud

    @property
    def rotational(self) -> tuple[bool, ...]:
        """Per model coordinate (q), True for rotational (rad), False for translational (m)."""
        kind = {c.name: c.rotational for c in self.coordinates}
        return tuple(kind[n] for n in self.model.coordinate_names)
