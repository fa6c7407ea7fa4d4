"""OpenSim model import: ``.osim`` (4.x and 3.0) to a jaxmb :class:`~jaxmb.model.Model`.

OpenSim describes a joint as ``X_GB = X_GP · X_PF · X_FM(q) · X_BM⁻¹``: the parent body P, a fixed
parent offset frame F, the mobilizer transform X_FM and a fixed child offset frame M on the child
body B. A ``CustomJoint``'s SpatialTransform builds ``X_FM`` from six TransformAxis entries, each a
function of the coordinates: the three translations act along their axes in F, then the three
rotations act in order, each about its axis in the frame left by the previous rotation (body-fixed;
the tests confirm this against OpenSim's own body poses). PinJoint is ``rotation about F's z``,
SliderJoint ``translation along F's x``, WeldJoint the identity.

jaxmb's joints are 1-DOF "translate d along V_d, then rotate θ about V_θ" (seed Eqs. 38–39), so each
non-constant TransformAxis becomes one jaxmb joint, joined through massless bodies, and its value is
one row of the joint map: ``f_i(q) = g_i(Q_c(q))`` with ``g_i`` the axis's OpenSim function and
``Q_c`` the OpenSim coordinate it reads. Fixed transforms (offset frames, Euler orientations and
constant TransformAxis values) are folded into the neighbouring joints: a pending transform
``(C, t)`` between jaxmb's frame and OpenSim's is carried along the chain — a rotation about axis
``a`` becomes a jaxmb rotation about ``C a``, a translation along ``a`` a slide along ``C a``, and
a revolute joint absorbs the pending translation ``t`` as its constant offset. What is left at the
child body maps its OpenSim coordinates into the jaxmb body frame (``x_jaxmb = C x + t``), which
carries the mass, centre of mass, inertia and every point on that body. A body whose joint
contributes no motion (a WeldJoint) gets one revolute joint held at a constant angle by the joint
map. Massless bodies have no inertia (Simbody stores inertia per unit mass), as in OpenSim.

CoordinateCouplerConstraints are folded into the joint map: a dependent coordinate is
``scale · g(independent)``, so the model's q are OpenSim's independent coordinates, in OpenSim's
order, with OpenSim's names. Locked coordinates stay coordinates and are listed in
:attr:`OsimImport.locked`. Anything else (another joint type, a function type jaxmb cannot evaluate,
another constraint type, a reversed joint, a multivariate coupling) raises :class:`OsimImportError`
naming the element and its type.

Muscles are read into plain data (:func:`osim_muscle_specs`): path points (PathPoint,
ConditionalPathPoint, MovingPathPoint with their functions), each muscle's PathWrapSet (wrap object,
method, point range) and the parameters of Thelen2003, Millard2012, DeGroote–Fregly and
Schutte1993 muscles. :func:`osim_muscles` builds jaxmb musculotendon units from them: points move
into the jaxmb body frames (``x_jaxmb = C x + t`` of the body they sit on, merged or renamed bodies
included), a MovingPathPoint becomes an :class:`OsimMovingPathPoint` (any supported function of any
OpenSim coordinate, coupled ones through the joint map), and wrap objects become jaxmb's
WrapCylinder/WrapEllipsoid/WrapSphere/WrapTorus with their frames moved the same way. The coverage,
and what raises, is listed in ``docs/osim_import.md``.
"""

from __future__ import annotations

import dataclasses
import posixpath
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...joint_maps import OsimJointMap
from ...math import (
    AbstractFunction,
    Constant,
    LinearFunction,
    UnsupportedFunctionError,
    parse_function,
)
from ...model import PRISMATIC, REVOLUTE, Body, Model, ModelError, build_model
from ...muscles import OsimMovingPathPoint

__all__ = [
    "OsimImportError",
    "OsimCoordinate",
    "OsimImport",
    "PathPointSpec",
    "MuscleSpec",
    "WrapObjectSpec",
    "PathWrapSpec",
    "read_osim",
    "load_osim",
    "osim_muscle_specs",
    "osim_muscles",
    "model_with_muscles",
    "SUPPORTED_JOINTS",
    "SUPPORTED_MUSCLES",
    "SUPPORTED_WRAPS",
]

SUPPORTED_JOINTS = ("CustomJoint", "PinJoint", "SliderJoint", "WeldJoint")
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
_IGNORED_CONSTRAINT_FLAG = ("isEnforced", "isDisabled")


class OsimImportError(ModelError):
    """An .osim element jaxmb cannot import; the message names the element, its type and file."""


# --------------------------------------------------------------------------------------------
# small XML and geometry helpers
# --------------------------------------------------------------------------------------------


def _text(el: ET.Element | None, tag: str, default: str | None = None) -> str | None:
    if el is None:
        return default
    c = el.find(tag)
    if c is None or c.text is None:
        return default
    return c.text.strip()


def _vec(el, tag, n, where, default=None) -> np.ndarray:
    t = _text(el, tag)
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


def _socket(el, name: str) -> str | None:
    """A socket's connectee path, in the 4.0 final and the 4.0 beta spellings."""
    for tag in (
        f"socket_{name}",
        f"socket_{name}_connectee_name",
        f"connector_{name}_connectee_name",
    ):
        t = _text(el, tag)
        if t is not None:
            return t
    return None


def _bool(el, tag, default=False) -> bool:
    t = _text(el, tag)
    if t is None:
        return default
    return t.lower() in ("true", "1")


def _rot(axis, angle) -> np.ndarray:
    a = np.asarray(axis, dtype=float)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * (K @ K)


def body_fixed_xyz(angles) -> np.ndarray:
    """OpenSim's orientation convention: body-fixed X-Y-Z Euler angles, R = Rx(a) Ry(b) Rz(c)."""
    a, b, c = angles
    return _rot((1, 0, 0), a) @ _rot((0, 1, 0), b) @ _rot((0, 0, 1), c)


def _transform(R=None, p=None) -> np.ndarray:
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def _inv(T) -> np.ndarray:
    R, p = T[:3, :3], T[:3, 3]
    return _transform(R.T, -R.T @ p)


def _axis_angle(R) -> tuple[np.ndarray, float]:
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


def _unit_axis(v, where) -> np.ndarray:
    n = np.linalg.norm(v)
    if not np.isfinite(n) or n < 1e-12:
        raise OsimImportError(f"{where}: axis {np.asarray(v).tolist()} is zero or not finite")
    return np.asarray(v, dtype=float) / n


# --------------------------------------------------------------------------------------------
# public data
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OsimCoordinate:
    """An OpenSim coordinate. ``rotational`` (rad) or translational (m); ``range`` (2,)."""

    name: str
    joint: str
    rotational: bool
    default_value: float
    range: tuple[float, float]
    locked: bool
    clamped: bool


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
        locked: names of coordinates OpenSim marks locked (they remain coordinates in jaxmb).
        body_frames: ``{OpenSim body: (jaxmb body index, T (4, 4))}`` with ``x_jaxmb = T x_osim``
            for points given in the OpenSim body's frame (m).
        jaxmb_joints: per jaxmb joint, ``"<OpenSim joint>/<axis>"`` (``fixed`` for welds).
        muscles: muscle specifications.
        wrap_objects: ``{name: WrapObjectSpec}`` of every body's wrap objects.
        version: the file's OpenSim document version (e.g. 40000, 30000).
        path: the file.
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

    @property
    def rotational(self) -> tuple[bool, ...]:
        """Per model coordinate (q), True for rotational (rad), False for translational (m)."""
        kind = {c.name: c.rotational for c in self.coordinates}
        return tuple(kind[n] for n in self.model.coordinate_names)


# --------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Axis:
    kind: str  # "rotation" | "translation"
    axis: np.ndarray
    coordinate: str | None
    function: AbstractFunction
    label: str


@dataclasses.dataclass
class _Joint:
    name: str
    type: str
    parent: str  # OpenSim body name, "ground" for the ground
    child: str
    X_PF: np.ndarray  # parent offset in the parent body frame
    X_BM: np.ndarray  # child offset in the child body frame
    coordinates: list[OsimCoordinate]
    axes: list[_Axis]


class _Parser:
    def __init__(self, path):
        self.path = str(path)
        try:
            self.tree = ET.parse(self.path)
        except FileNotFoundError:
            raise OsimImportError(f"{self.path}: file not found") from None
        except ET.ParseError as e:
            raise OsimImportError(f"{self.path}: not valid XML ({e})") from None
        root = self.tree.getroot()
        if root.tag != "OpenSimDocument":
            raise OsimImportError(
                f"{self.path}: root element is <{root.tag}>, not <OpenSimDocument>"
            )
        try:
            self.version = int(root.get("Version", "0"))
        except ValueError:
            self.version = 0
        self.model_el = root.find("Model")
        if self.model_el is None:
            raise OsimImportError(f"{self.path}: no <Model> element")
        self.name = self.model_el.get("name", Path(self.path).stem)
        self.v4 = self.version >= 30500 or self.model_el.find("JointSet") is not None

    def where(self, what: str) -> str:
        return f"{self.path}: {what}"

    # ---- bodies ------------------------------------------------------------------------
    def bodies(self) -> dict[str, dict]:
        out = {}
        bs = self.model_el.find("BodySet")
        objs = [] if bs is None or bs.find("objects") is None else list(bs.find("objects"))
        for b in objs:
            if b.tag != "Body":
                raise OsimImportError(self.where(f"body element <{b.tag}> is not supported"))
            name = b.get("name")
            if name == "ground":
                continue
            w = self.where(f"Body {name!r}")
            mass = _vec(b, "mass", 1, w)[0]
            com = _vec(b, "mass_center", 3, w, default=(0, 0, 0))
            if b.find("inertia") is not None:
                i6 = _vec(b, "inertia", 6, w)
            else:
                i6 = np.array(
                    [
                        _vec(b, f"inertia_{k}", 1, w, default=(0.0,))[0]
                        for k in ("xx", "yy", "zz", "xy", "xz", "yz")
                    ]
                )
            xx, yy, zz, xy, xz, yz = i6
            inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            if mass < 0:
                raise OsimImportError(f"{w}: negative mass {mass}")
            if mass == 0:
                # Simbody stores inertia per unit mass: a massless body has no inertia in OpenSim
                inertia = np.zeros((3, 3))
            ev = np.linalg.eigvalsh(inertia)
            scale = max(np.abs(inertia).max(), 1e-300)
            if ev.min() < -1e-12 * scale:
                raise OsimImportError(f"{w}: inertia has a negative principal moment {ev.tolist()}")
            out[name] = dict(mass=mass, com=com, inertia=inertia, el=b)
        return out

    # ---- coordinates -------------------------------------------------------------------
    def _coordinate(self, c: ET.Element, joint: str, rotational: bool | None) -> OsimCoordinate:
        name = c.get("name")
        w = self.where(f"Coordinate {name!r} of joint {joint!r}")
        mt = _text(c, "motion_type")
        if mt is not None:
            rotational = mt.strip().lower() == "rotational"
        rng = _vec(c, "range", 2, w, default=(-np.pi, np.pi))
        if c.find("prescribed_function") is not None and len(c.find("prescribed_function")):
            if _bool(c, "prescribed", default=self.v4):
                raise OsimImportError(f"{w}: prescribed coordinates are not supported")
        return OsimCoordinate(
            name=name,
            joint=joint,
            rotational=bool(rotational) if rotational is not None else True,
            default_value=float(_vec(c, "default_value", 1, w, default=(0.0,))[0]),
            range=(float(rng[0]), float(rng[1])),
            locked=_bool(c, "locked"),
            clamped=_bool(c, "clamped"),
        )

    # ---- frames (4.x) --------------------------------------------------------------------
    def _collect_frames(self):
        """Component path -> (parent path, X_parent_frame) of every PhysicalOffsetFrame."""
        frames: dict[str, tuple[str, np.ndarray]] = {}

        def visit(el: ET.Element, owner: str):
            for child in el:
                if child.tag == "PhysicalOffsetFrame":
                    name = child.get("name")
                    fpath = posixpath.join(owner, name)
                    w = self.where(f"PhysicalOffsetFrame {fpath!r}")
                    sp = _socket(child, "parent")
                    if sp is None:
                        raise OsimImportError(f"{w}: missing <socket_parent>")
                    ppath = self._resolve(sp, fpath)
                    T = _transform(
                        body_fixed_xyz(_vec(child, "orientation", 3, w, default=(0, 0, 0))),
                        _vec(child, "translation", 3, w, default=(0, 0, 0)),
                    )
                    frames[fpath] = (ppath, T)
                    visit(child, fpath)
                elif child.tag in ("frames", "components", "objects"):
                    visit(child, owner)
                elif child.get("name") is not None:
                    visit(child, posixpath.join(owner, child.get("name")))

        for setname in ("BodySet", "JointSet", "Ground", "components"):
            for el in self.model_el.findall(setname):
                if setname == "BodySet":
                    visit(el, "/bodyset")
                elif setname == "JointSet":
                    visit(el, "/jointset")
                elif setname == "Ground":
                    visit(el, "/ground")
                else:
                    visit(el, "/")
        return frames

    @staticmethod
    def _resolve(p: str, relative_to: str) -> str:
        p = p.strip()
        if p.startswith("/"):
            return posixpath.normpath(p)
        return posixpath.normpath(posixpath.join(relative_to, p))

    def _frame_to_body(self, fpath: str, frames, body_names, what: str):
        T = np.eye(4)
        seen = set()
        while True:
            if fpath in ("/ground", "/ground/ground"):
                return "ground", T
            if fpath.startswith("/bodyset/") and fpath.count("/") == 2:
                b = fpath.split("/")[2]
                if b not in body_names:
                    raise OsimImportError(self.where(f"{what}: unknown body {b!r}"))
                return b, T
            if fpath not in frames or fpath in seen:
                raise OsimImportError(self.where(f"{what}: cannot resolve frame {fpath!r}"))
            seen.add(fpath)
            parent, X = frames[fpath]
            T = X @ T
            fpath = parent

    # ---- joints ----------------------------------------------------------------------------
    def _axes(self, st: ET.Element | None, jname: str, coords: dict[str, OsimCoordinate]):
        axes = []
        if st is None:
            raise OsimImportError(self.where(f"CustomJoint {jname!r}: missing <SpatialTransform>"))
        tas = {ta.get("name"): ta for ta in st.findall("TransformAxis")}
        order = ["translation1", "translation2", "translation3"]
        order += ["rotation1", "rotation2", "rotation3"]
        for an in order:
            ta = tas.get(an)
            if ta is None:
                continue
            w = f"{self.path}: CustomJoint {jname!r} TransformAxis {an!r}"
            cnames = (_text(ta, "coordinates") or "").split()
            axis = _vec(ta, "axis", 3, w)
            fel = None
            for child in ta:
                if child.tag in ("function",) or child.get("name") == "function":
                    fel = child
            if fel is None:
                fel = next((c for c in ta if c.tag not in ("coordinates", "axis")), None)
            if fel is None:
                func: AbstractFunction = (
                    LinearFunction(1.0, 0.0) if len(cnames) == 1 else Constant(0.0)
                )
            else:
                try:
                    func = parse_function(fel, w)
                except UnsupportedFunctionError as e:
                    raise OsimImportError(str(e)) from None
            if len(cnames) > 1:
                raise OsimImportError(
                    f"{w}: a function of {len(cnames)} coordinates {cnames} is not supported"
                    " (only functions of one coordinate)"
                )
            cname = cnames[0] if cnames else None
            if cname is not None and cname not in coords:
                raise OsimImportError(f"{w}: unknown coordinate {cname!r}")
            if cname is None and not func.is_constant:
                # OpenSim evaluates a function with no coordinates at x = 0
                func = Constant(float(func(jnp.zeros(()))))
            kind = "rotation" if an.startswith("rotation") else "translation"
            axes.append(_Axis(kind, _unit_axis(axis, w), cname, func, an))
        return axes

    def joints(self, body_names: set[str]) -> list[_Joint]:
        joints: list[_Joint] = []
        if self.v4:
            frames = self._collect_frames()
            js = self.model_el.find("JointSet")
            objs = [] if js is None or js.find("objects") is None else list(js.find("objects"))
            for j in objs:
                joints.append(self._joint4(j, frames, body_names))
        else:
            bs = self.model_el.find("BodySet")
            for b in list(bs.find("objects")) if bs is not None else []:
                jw = b.find("Joint")
                if jw is None or len(jw) == 0:
                    continue
                if b.get("name") == "ground":
                    continue
                for j in jw:
                    joints.append(self._joint3(j, b.get("name"), body_names))
        return joints

    def _check_type(self, j: ET.Element):
        if j.tag not in SUPPORTED_JOINTS:
            raise OsimImportError(
                self.where(
                    f"joint {j.get('name')!r} has unsupported type {j.tag!r}"
                    f" (supported: {', '.join(SUPPORTED_JOINTS)})"
                )
            )
        if _bool(j, "reverse"):
            raise OsimImportError(self.where(f"{j.tag} {j.get('name')!r}: reverse joints"))

    def _joint_body(self, jname, jtype, coords, st):
        """Axes of a joint type in the order they act."""
        cmap = {c.name: c for c in coords}
        if jtype == "CustomJoint":
            axes = self._axes(st, jname, cmap)
            used_rot = {a.coordinate for a in axes if a.kind == "rotation" and a.coordinate}
            coords = [
                dataclasses.replace(c, rotational=c.name in used_rot) if not self._has_mt else c
                for c in coords
            ]
            return axes, coords
        if jtype == "WeldJoint":
            if coords:
                raise OsimImportError(self.where(f"WeldJoint {jname!r} has coordinates"))
            return [], coords
        if len(coords) != 1:
            raise OsimImportError(self.where(f"{jtype} {jname!r} needs exactly one coordinate"))
        c = coords[0]
        if jtype == "PinJoint":
            coords = [dataclasses.replace(c, rotational=True)]
            return [
                _Axis("rotation", np.array([0.0, 0, 1]), c.name, LinearFunction(1.0), "rz")
            ], coords
        coords = [dataclasses.replace(c, rotational=False)]
        return [
            _Axis("translation", np.array([1.0, 0, 0]), c.name, LinearFunction(1.0), "tx")
        ], coords

    def _joint4(self, j, frames, body_names) -> _Joint:
        self._check_type(j)
        jname = j.get("name")
        jpath = f"/jointset/{jname}"
        sp, sc = _socket(j, "parent_frame"), _socket(j, "child_frame")
        if sp is None or sc is None:
            raise OsimImportError(self.where(f"{j.tag} {jname!r}: missing parent or child frame"))
        parent, X_PF = self._frame_to_body(
            self._resolve(sp, jpath), frames, body_names, f"{j.tag} {jname!r} parent frame"
        )
        child, X_BM = self._frame_to_body(
            self._resolve(sc, jpath), frames, body_names, f"{j.tag} {jname!r} child frame"
        )
        self._has_mt = False
        coords = [self._coordinate(c, jname, None) for c in j.findall("coordinates/Coordinate")]
        axes, coords = self._joint_body(jname, j.tag, coords, j.find("SpatialTransform"))
        return _Joint(jname, j.tag, parent, child, X_PF, X_BM, coords, axes)

    def _joint3(self, j, child, body_names) -> _Joint:
        self._check_type(j)
        jname = j.get("name")
        w = self.where(f"{j.tag} {jname!r}")
        parent = _text(j, "parent_body")
        if parent is None or (parent not in body_names and parent != "ground"):
            raise OsimImportError(f"{w}: unknown parent body {parent!r}")
        X_PF = _transform(
            body_fixed_xyz(_vec(j, "orientation_in_parent", 3, w, default=(0, 0, 0))),
            _vec(j, "location_in_parent", 3, w, default=(0, 0, 0)),
        )
        X_BM = _transform(
            body_fixed_xyz(_vec(j, "orientation", 3, w, default=(0, 0, 0))),
            _vec(j, "location", 3, w, default=(0, 0, 0)),
        )
        self._has_mt = True
        coords = [
            self._coordinate(c, jname, None) for c in j.findall("CoordinateSet/objects/Coordinate")
        ]
        axes, coords = self._joint_body(jname, j.tag, coords, j.find("SpatialTransform"))
        return _Joint(jname, j.tag, parent, child, X_PF, X_BM, coords, axes)

    # ---- constraints -------------------------------------------------------------------------
    def couplings(self, coord_names: list[str]):
        out = []
        cs = self.model_el.find("ConstraintSet")
        objs = [] if cs is None or cs.find("objects") is None else list(cs.find("objects"))
        for c in objs:
            name = c.get("name")
            w = self.where(f"{c.tag} {name!r}")
            enforced = _bool(c, "isEnforced", True) and not _bool(c, "isDisabled", False)
            if not enforced:
                continue
            if c.tag != "CoordinateCouplerConstraint":
                raise OsimImportError(
                    f"{w}: constraint type {c.tag!r} is not supported"
                    " (supported: CoordinateCouplerConstraint)"
                )
            ind = (_text(c, "independent_coordinate_names") or "").split()
            dep = _text(c, "dependent_coordinate_name")
            if len(ind) != 1:
                raise OsimImportError(
                    f"{w}: couplings of {len(ind)} independent coordinates {ind} are not supported"
                )
            for n in ind + [dep]:
                if n not in coord_names:
                    raise OsimImportError(f"{w}: unknown coordinate {n!r}")
            fel = c.find("coupled_coordinates_function")
            if fel is None:
                raise OsimImportError(f"{w}: missing <coupled_coordinates_function>")
            try:
                g = parse_function(fel, w)
            except UnsupportedFunctionError as e:
                raise OsimImportError(str(e)) from None
            scale = float(_text(c, "scale_factor", "1"))
            out.append((name, dep, ind[0], g, scale))
        deps = [d for _, d, _, _, _ in out]
        for d in set(deps):
            if deps.count(d) > 1:
                raise OsimImportError(self.where(f"coordinate {d!r} is coupled by two constraints"))
        return out

    # ---- muscles -------------------------------------------------------------------------
    def muscles(self) -> tuple[MuscleSpec, ...]:
        fs = self.model_el.find("ForceSet")
        objs = [] if fs is None or fs.find("objects") is None else list(fs.find("objects"))
        out = []
        for m in objs:
            if "Muscle" not in m.tag:
                continue
            out.append(self._muscle(m))
        return tuple(out)

    def _muscle(self, m: ET.Element) -> MuscleSpec:
        name = m.get("name")
        w = self.where(f"{m.tag} {name!r}")
        kind = m.tag
        params = {}
        for tag in (
            "max_isometric_force",
            "optimal_fiber_length",
            "tendon_slack_length",
            "pennation_angle_at_optimal",
            "max_contraction_velocity",
            "activation_time_constant",
            "deactivation_time_constant",
            "FmaxTendonStrain",
            "FmaxMuscleStrain",
            "KshapeActive",
            "KshapePassive",
            "Af",
            "Flen",
            "fv_linear_damping",
            "default_activation",
            "passive_fiber_strain_at_one_norm_force",
            "tendon_strain_at_one_norm_force",
            "active_force_width_scale",
            "fiber_damping",
            "minimum_activation",
            "max_pennation_angle",
            "time_scale",
        ):
            t = _text(m, tag)
            if t is not None:
                try:
                    params[tag] = float(t)
                except ValueError:
                    pass
        gp = m.find("GeometryPath")
        if gp is None:
            raise OsimImportError(f"{w}: no <GeometryPath>")
        pts = gp.find("PathPointSet/objects")
        path = []
        for p in list(pts) if pts is not None else []:
            path.append(self._path_point(p, w))
        pws = []
        for pw in gp.findall("PathWrapSet/objects/PathWrap"):
            wname = _text(pw, "wrap_object") or _text(pw, "socket_wrap_object") or ""
            wname = posixpath.basename(wname.strip())
            if not wname:
                raise OsimImportError(f"{w}: PathWrap {pw.get('name')!r} names no wrap object")
            rng = _vec(pw, "range", 2, f"{w} PathWrap {wname!r}", default=(-1, -1))
            if np.any(rng != np.round(rng)):
                raise OsimImportError(f"{w} PathWrap {wname!r}: <range> must be integers: {rng}")
            method = (_text(pw, "method") or "hybrid").strip()
            pws.append(PathWrapSpec(wname, method, (int(rng[0]), int(rng[1]))))
        wraps = tuple(p.wrap for p in pws)
        applies = _bool(m, "appliesForce", True) and not _bool(m, "isDisabled", False)
        return MuscleSpec(name, kind, params, tuple(path), wraps, applies, tuple(pws))

    def wrap_objects(self) -> dict[str, WrapObjectSpec]:
        out = {}
        for holder, bname in [(self.model_el.find("Ground"), "ground")] + [
            (b, b.get("name")) for b in self.model_el.iter("Body")
        ]:
            if holder is None:
                continue
            for wo in holder.findall("WrapObjectSet/objects/*"):
                name = wo.get("name")
                w = self.where(f"{wo.tag} {name!r} on body {bname!r}")
                params: dict[str, Any] = {}
                for tag, n in (("radius", 1), ("length", 1), ("dimensions", 3)):
                    if wo.find(tag) is not None:
                        v = _vec(wo, tag, n, w)
                        params[tag] = float(v[0]) if n == 1 else tuple(v.tolist())
                for tag in ("inner_radius", "outer_radius"):
                    if wo.find(tag) is not None:
                        params[tag] = float(_vec(wo, tag, 1, w)[0])
                out[name] = WrapObjectSpec(
                    name=name,
                    kind=wo.tag,
                    body=bname,
                    translation=tuple(_vec(wo, "translation", 3, w, default=(0, 0, 0)).tolist()),
                    rotation=body_fixed_xyz(_vec(wo, "xyz_body_rotation", 3, w, default=(0, 0, 0))),
                    quadrant=(_text(wo, "quadrant") or "all").strip(),
                    active=_bool(wo, "active", True),
                    parameters=params,
                )
        return out

    def _body_of(self, p: ET.Element, w: str) -> str:
        b = _text(p, "body")
        if b is not None:
            return b
        sp = _text(p, "socket_parent_frame")
        if sp is None:
            raise OsimImportError(f"{w}: path point {p.get('name')!r} names no body")
        parts = posixpath.normpath(sp).strip("/").split("/")
        if parts[0] == "bodyset" and len(parts) == 2:
            return parts[1]
        if parts == ["ground"]:
            return "ground"
        raise OsimImportError(f"{w}: path point {p.get('name')!r} on frame {sp!r} (not a body)")

    def _coord_name(self, s: str | None) -> str | None:
        return None if not s else posixpath.basename(s.strip())

    def _path_point(self, p: ET.Element, w: str) -> PathPointSpec:
        pname = p.get("name")
        pw = f"{w} {p.tag} {pname!r}"
        body = self._body_of(p, w)
        if p.tag == "PathPoint":
            loc = _vec(p, "location", 3, pw)
            return PathPointSpec(pname, "PathPoint", body, tuple(loc))
        if p.tag == "ConditionalPathPoint":
            loc = _vec(p, "location", 3, pw)
            rng = _vec(p, "range", 2, pw)
            c = self._coord_name(_text(p, "socket_coordinate") or _text(p, "coordinate"))
            return PathPointSpec(
                pname, p.tag, body, tuple(loc), coordinate=c, range=(rng[0], rng[1])
            )
        if p.tag == "MovingPathPoint":
            loc = _vec(p, "location", 3, pw, default=(0, 0, 0))
            coords, funcs = [], []
            for ax in "xyz":
                c = self._coord_name(
                    _text(p, f"socket_{ax}_coordinate") or _text(p, f"{ax}_coordinate")
                )
                fel = p.find(f"{ax}_location")
                f = None
                if fel is not None and len(fel):
                    try:
                        f = parse_function(fel, pw)
                    except UnsupportedFunctionError as e:
                        raise OsimImportError(str(e)) from None
                coords.append(c)
                funcs.append(f)
            return PathPointSpec(
                pname, p.tag, body, tuple(loc), coordinates=tuple(coords), functions=tuple(funcs)
            )
        raise OsimImportError(f"{pw}: unsupported path point type {p.tag!r}")


# --------------------------------------------------------------------------------------------
# assembly
# --------------------------------------------------------------------------------------------


def read_osim(path: str | Path, *, zero_inertia: tuple[str, ...] = ()) -> OsimImport:
    """Read an OpenSim model (4.x or 3.0 ``.osim``) into a jaxmb model plus the import's details.

    Args:
        path: the ``.osim`` file.
        zero_inertia: OpenSim bodies whose rotational inertia is set to zero (e.g. MoBL-ARMS'
            phantom bodies, which carry a placeholder diag(1, 1, 1) kg·m²).

    Raises:
        OsimImportError: naming the unsupported or malformed element, its type and the file.
    """
    P = _Parser(path)
    bodies = P.bodies()
    for b in zero_inertia:
        if b not in bodies:
            raise OsimImportError(P.where(f"zero_inertia: unknown body {b!r}"))
        bodies[b]["inertia"] = np.zeros((3, 3))
    joints = P.joints(set(bodies))

    coords: list[OsimCoordinate] = [c for j in joints for c in j.coordinates]
    cnames = [c.name for c in coords]
    for n in set(cnames):
        if cnames.count(n) > 1:
            raise OsimImportError(P.where(f"coordinate name {n!r} is used by two joints"))

    # joints in tree order from the ground
    by_child: dict[str, _Joint] = {}
    for j in joints:
        if j.child == "ground":
            raise OsimImportError(P.where(f"{j.type} {j.name!r} moves the ground"))
        if j.child in by_child:
            raise OsimImportError(
                P.where(
                    f"body {j.child!r} is the child of two joints ({by_child[j.child].name!r},"
                    f" {j.name!r}); closed loops are not supported"
                )
            )
        by_child[j.child] = j
    for b in bodies:
        if b not in by_child:
            raise OsimImportError(P.where(f"body {b!r} has no joint connecting it to the model"))
    order: list[_Joint] = []
    placed = {"ground"}
    pending = list(joints)
    while pending:
        ready = [j for j in pending if j.parent in placed]
        if not ready:
            raise OsimImportError(
                P.where(f"joints {[j.name for j in pending]} are not connected to the ground")
            )
        for j in ready:
            order.append(j)
            placed.add(j.child)
            pending.remove(j)

    # couplings
    couplings = P.couplings(cnames)
    dep_names = {d for _, d, _, _, _ in couplings}
    independent = [i for i, n in enumerate(cnames) if n not in dep_names]
    resolved = {cnames[i] for i in independent}
    coupling_order = []
    todo = list(couplings)
    while todo:
        ready = [c for c in todo if c[2] in resolved]
        if not ready:
            raise OsimImportError(
                P.where(f"coupling constraints {[c[0] for c in todo]} form a cycle")
            )
        for c in ready:
            coupling_order.append(c)
            resolved.add(c[1])
            todo.remove(c)

    # bodies and joints of the jaxmb model
    jbodies: list[Body] = []
    funcs: list[AbstractFunction] = []
    sources: list[int] = []
    labels: list[str] = []
    body_frames: dict[str, tuple[int, np.ndarray]] = {"ground": (-1, np.eye(4))}
    inertias: list[np.ndarray] = []

    def add(name, parent, kind, axis, t, func, src, label, mass=0.0, com=(0, 0, 0), inertia=None):
        if kind == REVOLUTE:
            n = np.linalg.norm(t)
            jbodies.append(
                Body(
                    name,
                    parent=parent,
                    joint=REVOLUTE,
                    axis=tuple(axis),
                    offset_axis=tuple(t / n) if n > 0 else (1.0, 0.0, 0.0),
                    offset=float(n),
                    mass=float(mass),
                    com=tuple(com),
                    inertia=np.zeros((3, 3)) if mass == 0 else np.eye(3),
                )
            )
        else:
            jbodies.append(
                Body(
                    name,
                    parent=parent,
                    joint=PRISMATIC,
                    axis=tuple(axis),
                    offset_axis=tuple(axis),
                    mass=float(mass),
                    com=tuple(com),
                    inertia=np.zeros((3, 3)) if mass == 0 else np.eye(3),
                )
            )
        inertias.append(np.zeros((3, 3)) if inertia is None else inertia)
        funcs.append(func)
        sources.append(src)
        labels.append(label)
        return len(jbodies) - 1

    used_names = set(bodies)
    for j in order:
        pidx, T_parent = body_frames[j.parent]
        T = T_parent @ j.X_PF  # pending: OpenSim frame = jaxmb frame · T
        moving = [a for a in j.axes if not a.function.is_constant]
        body = bodies[j.child]
        last = moving[-1] if moving else None
        cur = pidx
        for a in j.axes:
            C, t = T[:3, :3], T[:3, 3]
            if a.function.is_constant:
                v = float(a.function(jnp.zeros(())))
                X = (
                    _transform(_rot(a.axis, v))
                    if a.kind == "rotation"
                    else _transform(p=v * a.axis)
                )
                T = T @ X
                continue
            src = cnames.index(a.coordinate)
            is_last = a is last
            name = j.child if is_last else f"{j.name}/{a.label}"
            if name in used_names and not is_last:
                raise OsimImportError(P.where(f"body name {name!r} clashes with a joint body"))
            used_names.add(name)
            parent_name = cur
            if a.kind == "rotation":
                axis = C @ a.axis
                idx = add(
                    name, parent_name, REVOLUTE, axis, t, a.function, src, f"{j.name}/{a.label}"
                )
                T = _transform(C)
            else:
                axis = C @ a.axis
                idx = add(
                    name, parent_name, PRISMATIC, axis, t, a.function, src, f"{j.name}/{a.label}"
                )
            cur = idx
        T = T @ _inv(j.X_BM)
        if not moving:
            # a joint without motion: one revolute joint held at a constant angle by the map
            C, t = T[:3, :3], T[:3, 3]
            axis, angle = _axis_angle(C)
            cur = add(j.child, pidx, REVOLUTE, axis, t, Constant(angle), -1, f"{j.name}/fixed")
            T = np.eye(4)
        # the child body's mass properties in its jaxmb frame
        C, t = T[:3, :3], T[:3, 3]
        jb = jbodies[cur]
        jbodies[cur] = dataclasses.replace(
            jb,
            mass=float(body["mass"]),
            com=tuple(C @ body["com"] + t),
            inertia=np.zeros((3, 3)) if body["mass"] == 0 else np.eye(3),
        )
        inertias[cur] = C @ body["inertia"] @ C.T
        body_frames[j.child] = (cur, T)

    indep_names = tuple(cnames[i] for i in independent)
    jmap = OsimJointMap(
        functions=tuple(funcs),
        coupling_functions=tuple(c[3] for c in coupling_order),
        coupling_scales=jnp.asarray([c[4] for c in coupling_order], dtype=float),
        sources=tuple(sources),
        coupled=tuple(cnames.index(c[1]) for c in coupling_order),
        coupling_sources=tuple(cnames.index(c[2]) for c in coupling_order),
        independent=tuple(independent),
        nfull=len(cnames),
        nq=len(independent),
        nj=len(jbodies),
    )
    gravity = _vec(P.model_el, "gravity", 3, P.where("Model"), default=(0, -9.80665, 0))
    markers = _markers(P, body_frames)
    try:
        model = build_model(
            jbodies,
            jmap,
            gravity=gravity,
            coordinate_names=indep_names,
            points=markers,
            name=P.name,
        )
    except ModelError as e:
        raise OsimImportError(P.where(str(e))) from None
    # build_model rejects point masses (mass > 0, zero inertia) which OpenSim allows: it validated
    # placeholders above; the bodies' real inertias (checked in _Parser.bodies) go in here.
    model = eqx.tree_at(lambda m: m.inertia, model, jnp.asarray(np.stack(inertias)))
    coupled = {c[1]: (c[0], c[2]) for c in coupling_order}
    return OsimImport(
        model=model,
        coordinates=tuple(coords),
        coupled=coupled,
        locked=tuple(c.name for c in coords if c.locked),
        body_frames={k: v for k, v in body_frames.items()},
        jaxmb_joints=tuple(labels),
        muscles=P.muscles(),
        version=P.version,
        path=P.path,
        wrap_objects=P.wrap_objects(),
    )


def _markers(P: _Parser, body_frames) -> dict:
    ms = P.model_el.find("MarkerSet")
    out = {}
    for m in list(ms.find("objects")) if ms is not None and ms.find("objects") is not None else []:
        name = m.get("name")
        w = P.where(f"Marker {name!r}")
        b = _text(m, "body")
        if b is None:
            sp = _text(m, "socket_parent_frame")
            parts = posixpath.normpath(sp or "").strip("/").split("/")
            if parts == ["ground"]:
                b = "ground"
            elif len(parts) == 2 and parts[0] == "bodyset":
                b = parts[1]
            else:
                raise OsimImportError(f"{w}: marker on frame {sp!r} (not a body)")
        if b not in body_frames:
            raise OsimImportError(f"{w}: unknown body {b!r}")
        idx, T = body_frames[b]
        loc = _vec(m, "location", 3, w)
        out[name] = (idx, T[:3, :3] @ loc + T[:3, 3])
    return out


def load_osim(
    path: str | Path, *, zero_inertia: tuple[str, ...] = (), muscles: str = "supported"
) -> Model:
    """Load an OpenSim model (4.x or 3.0 ``.osim``) as a jaxmb :class:`~jaxmb.model.Model`.

    ``model.coordinate_names`` are OpenSim's independent coordinates (coupled ones are folded into
    the joint map); ``model.points`` holds the model's markers. See :func:`read_osim` for the
    import's details (coupled and locked coordinates, body frames, muscle specifications).

    Args:
        path: the ``.osim`` file.
        zero_inertia: OpenSim bodies whose placeholder inertia is set to zero.
        muscles: ``"supported"`` (default) builds ``model.muscles`` from the muscles jaxmb can
            represent and warns naming those it leaves out and why; ``"all"`` raises
            :class:`OsimImportError` for the first muscle it cannot build; ``"none"`` imports no
            muscles.
    """
    if muscles not in ("supported", "all", "none"):
        raise ValueError(f"muscles must be 'supported', 'all' or 'none', got {muscles!r}")
    imp = read_osim(path, zero_inertia=zero_inertia)
    if muscles == "none" or not imp.muscles:
        return imp.model
    skipped: dict[str, str] = {}
    model = model_with_muscles(imp, skip_unsupported=muscles == "supported", skipped=skipped)
    if skipped:
        why = "; ".join(f"{k}: {v}" for k, v in skipped.items())
        warnings.warn(
            f"{imp.path}: {len(skipped)} of {len(imp.muscles)} muscles not imported: {why}",
            stacklevel=2,
        )
    return model


def osim_muscle_specs(path: str | Path) -> list[MuscleSpec]:
    """The muscles of an ``.osim`` file as plain data (type, parameters, path points, wraps)."""
    return list(_Parser(path).muscles())



def _wrap_object(imp: OsimImport, name: str, where: str):
    """A jaxmb wrap object for the OpenSim wrap object ``name`` (frame moved to the jaxmb body)."""
    from ...muscles import paths as jm

    spec = imp.wrap_objects.get(name)
    if spec is None:
        raise OsimImportError(f"{where}: unknown wrap object {name!r}")
    ww = f"{where}: {spec.kind} {name!r} on body {spec.body!r}"
    if spec.kind not in SUPPORTED_WRAPS:
        raise OsimImportError(
            f"{ww}: wrap type {spec.kind!r} is not supported (supported: {SUPPORTED_WRAPS})"
        )
    cls = getattr(jm, spec.kind, None)
    if cls is None:
        raise OsimImportError(f"{ww}: this jaxmb has no {spec.kind} (jaxmb.muscles.{spec.kind})")
    if spec.body not in imp.body_frames:
        raise OsimImportError(f"{ww}: unknown body {spec.body!r}")
    b, T = imp.body_frames[spec.body]
    C, t = T[:3, :3], T[:3, 3]
    trans = C @ np.asarray(spec.translation) + t
    rot = C @ spec.rotation
    quadrant = spec.quadrant
    known = getattr(jm, "_QUADRANTS", None)
    if known is not None and quadrant not in known:
        # OpenSim writes "x" and "+x" alike; use the spelling this jaxmb knows
        alt = quadrant[1:] if quadrant.startswith("+") else "+" + quadrant
        if alt in known:
            quadrant = alt
        else:
            raise OsimImportError(f"{ww}: unknown quadrant {spec.quadrant!r}")
    prm = spec.parameters

    def need(key):
        if key not in prm:
            raise OsimImportError(f"{ww}: missing <{key}>")
        return prm[key]

    if spec.kind == "WrapCylinder":
        # OpenSim's WrapCylinder length property defaults to 1 m
        return cls(b, trans, rot, need("radius"), prm.get("length", 1.0), quadrant, name)
    if spec.kind == "WrapEllipsoid":
        return cls(b, trans, rot, need("dimensions"), quadrant, name)
    if spec.kind == "WrapSphere":
        return cls(b, trans, rot, need("radius"), quadrant, name)
    return cls(b, trans, rot, need("inner_radius"), need("outer_radius"), quadrant, name)


def _path_wrap(wrap, pw: PathWrapSpec, npoints: int, where: str):
    """jaxmb ``PathWrap(wrap, start, end)`` from OpenSim's 1-based range (-1: first/last)."""
    from ...muscles import paths as jm

    r0, r1 = pw.range
    start = 0 if r0 < 1 else r0 - 1
    end = npoints - 1 if r1 < 1 else r1 - 1
    if not (0 <= start < end <= npoints - 1):
        raise OsimImportError(
            f"{where}: PathWrap {pw.wrap!r} range {list(pw.range)} does not span two of the"
            f" {npoints} path points"
        )
    fields = {f.name for f in dataclasses.fields(jm.PathWrap)}
    if "start" in fields:
        return jm.PathWrap(wrap, start=start, end=-1 if end == npoints - 1 else end)
    if end == start + 1:
        return jm.PathWrap(wrap, start)
    raise OsimImportError(
        f"{where}: PathWrap {pw.wrap!r} acts over path points {start}..{end}; this jaxmb's"
        " PathWrap takes one segment only (no start/end range)"
    )


def _muscle_parameters(spec: MuscleSpec, where: str):
    from ...muscles import MuscleParameters

    prm = spec.parameters
    for key in ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length"):
        if key not in prm:
            raise OsimImportError(f"{where}: missing <{key}>")
        if not prm[key] > 0:
            raise OsimImportError(f"{where}: <{key}> must be positive, got {prm[key]}")
    pen = prm.get("pennation_angle_at_optimal", prm.get("pennation_angle", 0.0))
    if not 0.0 <= pen < np.pi / 2:
        raise OsimImportError(f"{where}: pennation angle {pen} rad is not in [0, pi/2)")
    vmax = prm.get("max_contraction_velocity", 10.0)
    if not vmax > 0:
        if spec.kind != "Schutte1993Muscle_Deprecated":
            raise OsimImportError(f"{where}: <max_contraction_velocity> must be positive: {vmax}")
        # MoBL-ARMS' Schutte muscles write 0; the file value stays in MuscleSpec.parameters
        vmax = 10.0
    return MuscleParameters(
        prm["max_isometric_force"],
        prm["optimal_fiber_length"],
        prm["tendon_slack_length"],
        pen,
        vmax,
    )


def _build_muscle(imp: OsimImport, spec: MuscleSpec):
    from ...muscles import ConditionalPathPoint, Muscle, PathPoint

    w = f"{imp.path}: {spec.kind} {spec.name!r}"
    if spec.kind not in SUPPORTED_MUSCLES:
        raise OsimImportError(
            f"{w}: muscle type {spec.kind!r} is not supported (supported: {SUPPORTED_MUSCLES})"
        )
    names = [c.name for c in imp.coordinates]
    pts = []
    for p in spec.path:
        wp = f"{w} {p.kind} {p.name!r}"
        if p.body not in imp.body_frames:
            raise OsimImportError(f"{wp}: unknown body {p.body!r}")
        b, T = imp.body_frames[p.body]
        if p.kind == "PathPoint":
            pts.append(PathPoint(b, T[:3, :3] @ np.asarray(p.location) + T[:3, 3], p.name))
        elif p.kind == "ConditionalPathPoint":
            if p.coordinate not in names:
                raise OsimImportError(f"{wp}: unknown coordinate {p.coordinate!r}")
            if p.coordinate not in imp.model.coordinate_names:
                raise OsimImportError(
                    f"{wp}: conditional on {p.coordinate!r}, a coupled coordinate (only"
                    " independent ones are supported)"
                )
            x = T[:3, :3] @ np.asarray(p.location) + T[:3, 3]
            pts.append(ConditionalPathPoint(b, x, p.coordinate, p.range, p.name))
        else:
            funcs, srcs = [], []
            for a in range(3):
                f, c = p.functions[a], p.coordinates[a]
                if f is None:
                    funcs.append(Constant(p.location[a]))
                    srcs.append(-1)
                    continue
                if c is not None and c not in names:
                    raise OsimImportError(f"{wp}: unknown coordinate {c!r}")
                funcs.append(f)
                srcs.append(-1 if c is None else names.index(c))
            pts.append(
                OsimMovingPathPoint(
                    b, funcs, srcs, imp.model.joint_map, T[:3, :3], T[:3, 3], p.name
                )
            )
    wraps = []
    for pw in spec.path_wraps:
        if pw.method not in SUPPORTED_WRAP_METHODS and (
            imp.wrap_objects.get(pw.wrap) is not None
            and imp.wrap_objects[pw.wrap].kind == "WrapEllipsoid"
        ):
            raise OsimImportError(
                f"{w}: PathWrap {pw.wrap!r} uses method {pw.method!r}"
                f" (supported: {SUPPORTED_WRAP_METHODS})"
            )
        ws = imp.wrap_objects.get(pw.wrap)
        if ws is not None and not ws.active:
            continue  # OpenSim skips inactive wrap objects
        wraps.append(_path_wrap(_wrap_object(imp, pw.wrap, w), pw, len(pts), w))
    return Muscle(spec.name, tuple(pts), tuple(wraps), _muscle_parameters(spec, w))


def osim_muscles(
    imp: OsimImport, *, skip_unsupported: bool = False, skipped: dict | None = None
) -> list:
    """jaxmb musculotendon units (:class:`jaxmb.muscles.Muscle`) for an imported model's muscles.

    Path points and wrap frames are moved into the jaxmb body frames; a ConditionalPathPoint reads
    its coordinate (which must be independent); a MovingPathPoint becomes an
    :class:`OsimMovingPathPoint`; each PathWrap becomes ``PathWrap(wrap, start, end)``. A muscle
    that cannot be built raises :class:`OsimImportError` naming it and the element, or with
    ``skip_unsupported=True`` is left out (its reason stored in ``skipped[name]`` if given).
    """
    out = []
    for spec in imp.muscles:
        try:
            out.append(_build_muscle(imp, spec))
        except OsimImportError as e:
            if not skip_unsupported:
                raise
            if skipped is not None:
                skipped[spec.name] = str(e).removeprefix(f"{imp.path}: ")
    return out


def _attach(model: Model, muscles: list) -> Model:
    """``with_muscles`` validation, with each OsimMovingPathPoint standing in as a PathPoint.

    ``with_muscles`` rebuilds MovingPathPoints from spline knots; these points carry OpenSim
    functions instead, so they are validated as fixed points and put back afterwards.
    """
    from ...muscles import Muscle, MuscleSet, PathPoint, with_muscles

    stand_in = [
        Muscle(
            m.name,
            tuple(
                PathPoint(p.body, p.offset, p.name)  # any finite point: only checked
                if isinstance(p, OsimMovingPathPoint)
                else p
                for p in m.points
            ),
            m.wraps,
            m.params,
        )
        for m in muscles
    ]
    checked = with_muscles(model, stand_in).muscles.muscles
    final = [
        Muscle(
            c.name,
            tuple(
                o if isinstance(o, OsimMovingPathPoint) else v
                for o, v in zip(m.points, c.points, strict=True)
            ),
            c.wraps,
            c.params,
        )
        for m, c in zip(muscles, checked, strict=True)
    ]
    return eqx.tree_at(lambda mm: mm.muscles, model, MuscleSet(final), is_leaf=lambda x: x is None)


def model_with_muscles(
    imp: OsimImport,
    *,
    skip_unsupported: bool = False,
    skipped: dict | None = None,
    only: tuple[str, ...] | None = None,
) -> Model:
    """The imported model carrying the muscles :func:`osim_muscles` can build.

    jaxmb's own checks (``with_muscles``) run on every muscle; with ``skip_unsupported`` a muscle
    they reject is left out too (reason in ``skipped``), otherwise :class:`OsimImportError`.
    ``only`` keeps just the named muscles (in the file's order); an unknown name raises.
    """
    why: dict[str, str] = {} if skipped is None else skipped
    if only is not None:
        every = [m.name for m in imp.muscles]
        unknown = [n for n in only if n not in every]
        if unknown:
            raise OsimImportError(f"{imp.path}: unknown muscles {unknown}")
        imp = dataclasses.replace(imp, muscles=tuple(m for m in imp.muscles if m.name in only))
    muscles = osim_muscles(imp, skip_unsupported=skip_unsupported, skipped=why)
    kept = []
    for m in muscles:
        try:
            _attach(imp.model, [m])
        except ModelError as e:
            if not skip_unsupported:
                raise OsimImportError(f"{imp.path}: {e}") from None
            why[m.name] = str(e)
            continue
        kept.append(m)
    return _attach(imp.model, kept)
