"""An ``.osim`` document: OpenSim's bodies, joints, coordinates, constraints and muscles as specs.

:class:`OsimDocument` parses the file once and answers per element set: :meth:`~OsimDocument.bodies`
(mass, centre of mass, inertia), :meth:`~OsimDocument.joints` (4.x JointSet with its offset frames
resolved to bodies, or 3.0 joints inside bodies; each joint's TransformAxis entries in the order
they act), :meth:`~OsimDocument.couplings` (CoordinateCouplerConstraints),
:meth:`~OsimDocument.muscles` and :meth:`~OsimDocument.wrap_objects`. Everything is plain data in
OpenSim's terms; :func:`jaxmb.io.osim.read_osim` assembles the jaxmb model from it. Any element it
cannot represent raises :class:`~jaxmb.io.osim.OsimImportError` naming the element and the file."""

from __future__ import annotations

import dataclasses
import posixpath
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from ...math import AbstractFunction, Constant, LinearFunction, UnsupportedFunctionError
from ...math.functions import EllipsoidSurfacePoint, MultiplierFunction
from .functions import parse_function
from .xml import (
    FRAME_CONSTRAINTS,
    JOINT_AXES,
    SUPPORTED_JOINTS,
    MuscleSpec,
    OsimCoordinate,
    OsimImportError,
    PathPointSpec,
    PathWrapSpec,
    WrapObjectSpec,
    body_fixed_xyz,
    child_flag,
    child_text,
    child_vector,
    homogeneous,
    osim_xml,
    socket_path,
    unit_axis,
)

__all__ = ["OsimDocument", "JointSpec", "TransformAxisSpec"]


@dataclasses.dataclass
class TransformAxisSpec:
    """One moving or constant axis of a joint: rotation about / translation along ``axis`` (3,),
    unit, in the joint's frame left by the axes before it, by ``function`` of ``coordinate`` (a
    tuple of names for a function of several coordinates)."""

    kind: str  # "rotation" | "translation"
    axis: np.ndarray
    coordinate: str | tuple[str, ...] | None
    function: AbstractFunction
    label: str


@dataclasses.dataclass
class JointSpec:
    """An OpenSim joint: ``X_GB = X_GP · X_PF · X_FM(q) · X_BM⁻¹`` with ``X_FM`` from ``axes``;
    ``reversed``: the mobilizer runs from the child to the parent, ``X_GB = X_GP · X_PF ·
    X_FM(q)⁻¹ · X_BM⁻¹`` (a 3.x ``<reverse>true</reverse>``, which OpenSim 4.6 upgrades by
    swapping the joint's parent and child frames, so Simbody builds the mobilizer reversed)."""

    name: str
    type: str
    parent: str  # OpenSim body name, "ground" for the ground
    child: str
    X_PF: np.ndarray  # parent offset in the parent body frame
    X_BM: np.ndarray  # child offset in the child body frame
    coordinates: list[OsimCoordinate]
    axes: list[TransformAxisSpec]
    reversed: bool = False

    def mobilizer_axes(self) -> list[TransformAxisSpec]:
        """The axes in the order they act from the parent: ``axes``, or for a reversed joint
        ``X_FM⁻¹``'s: the axes in reverse order, each by minus its function."""
        if not self.reversed:
            return list(self.axes)
        return [
            dataclasses.replace(a, function=MultiplierFunction(a.function, -1.0))
            for a in reversed(self.axes)
        ]

    def flipped(self) -> JointSpec:
        """The same joint seen from its child (a 4.x joint whose child frame is nearer the
        ground: OpenSim's tree runs through it reversed)."""
        return dataclasses.replace(
            self, parent=self.child, child=self.parent, X_PF=self.X_BM, X_BM=self.X_PF,
            reversed=not self.reversed,
        )  # fmt: skip


def _opensim_rotational(axes: list[TransformAxisSpec]):
    """OpenSim 4.6's motion type of a CustomJoint's coordinate (``CustomJoint::
    constructCoordinates``), as ``name -> rotational``: over rotation1–3 then translation1–3, an
    axis the coordinate drives through a LinearFunction of slope ±1 makes it Rotational or
    Translational (the last such axis decides); any other function makes it Coupled unless an
    axis already decided. Only a Rotational coordinate is in degrees in OpenSim's motion files and
    reports a ``_moment``; a Coupled one (e.g. a patella's, through splines) is neither."""
    order = ("rotation1", "rotation2", "rotation3", "translation1", "translation2", "translation3")
    kinds: dict[str, str] = {}
    for a in sorted((a for a in axes if a.coordinate), key=lambda a: order.index(a.label)):
        f = a.function  # (an axis without a function element is read as LinearFunction(1, 0))
        pure = isinstance(f, LinearFunction) and float(f.slope) in (1.0, -1.0)
        for n in (a.coordinate,) if isinstance(a.coordinate, str) else a.coordinate:
            if pure:
                kinds[n] = "rotational" if a.kind == "rotation" else "translational"
            else:
                kinds.setdefault(n, "coupled")
    return lambda name: kinds.get(name) == "rotational"


class OsimDocument:
    """A parsed ``.osim`` file (4.x or 3.0); ``where(what)`` prefixes messages with the file."""

    def __init__(self, path, opensim_inertia_digits: bool = True):
        self.path = str(path)
        self.opensim_inertia_digits = bool(opensim_inertia_digits)
        try:
            text = Path(self.path).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            raise OsimImportError(f"{self.path}: file not found") from None
        try:
            root = ET.fromstring(osim_xml(text))
        except ET.ParseError as e:
            raise OsimImportError(f"{self.path}: not valid XML ({e})") from None
        except (LookupError, UnicodeError) as e:  # the XML declaration names a bad encoding
            raise OsimImportError(f"{self.path}: not valid XML ({e})") from None
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
            mass = child_vector(b, "mass", 1, w)[0]
            com = child_vector(b, "mass_center", 3, w, default=(0, 0, 0))
            if b.find("inertia") is not None:
                i6 = child_vector(b, "inertia", 6, w)
            else:
                i6 = np.array(
                    [
                        child_vector(b, f"inertia_{k}", 1, w, default=(0.0,))[0]
                        for k in ("xx", "yy", "zz", "xy", "xz", "yz")
                    ]
                )
                if self.opensim_inertia_digits:
                    # OpenSim's 3.x -> 4.x upgrade writes the six inertia_* values into one
                    # <inertia> string with 6 significant digits (MoBL-ARMS' humerus 0.01227763
                    # becomes 0.0122776, a 6e-8 change of M that near-singular models amplify)
                    i6 = np.array([float(f"{x:.6g}") for x in i6])
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
        mt = child_text(c, "motion_type")
        if mt is not None:
            rotational = mt.strip().lower() == "rotational"
        rng = child_vector(c, "range", 2, w, default=(-np.pi, np.pi))
        # OpenSim 4.6 prescribes a coordinate when <prescribed> is true (default false, 3.x and
        # 4.x alike) and <prescribed_function> holds a function; otherwise the function is unused
        prescribed = None
        pf = c.find("prescribed_function")
        if pf is not None and len(pf) and child_flag(c, "prescribed", default=False):
            inner = [e for e in pf if isinstance(e.tag, str)]
            if len(inner) != 1:
                raise OsimImportError(f"{w}: <prescribed_function> must hold one function")
            try:
                prescribed = parse_function(inner[0], f"{w} prescribed_function")
            except UnsupportedFunctionError as e:
                raise OsimImportError(str(e)) from None
        return OsimCoordinate(
            name=name,
            joint=joint,
            rotational=bool(rotational) if rotational is not None else True,
            default_value=float(child_vector(c, "default_value", 1, w, default=(0.0,))[0]),
            range=(float(rng[0]), float(rng[1])),
            locked=child_flag(c, "locked"),
            clamped=child_flag(c, "clamped"),
            prescribed=prescribed,
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
                    sp = socket_path(child, "parent")
                    if sp is None:
                        raise OsimImportError(f"{w}: missing <socket_parent>")
                    ppath = self._resolve(sp, fpath)
                    T = homogeneous(
                        body_fixed_xyz(child_vector(child, "orientation", 3, w, default=(0, 0, 0))),
                        child_vector(child, "translation", 3, w, default=(0, 0, 0)),
                    )
                    frames[fpath] = (ppath, T)
                    visit(child, fpath)
                elif child.tag in ("frames", "components", "objects"):
                    visit(child, owner)
                elif child.get("name") is not None:
                    visit(child, posixpath.join(owner, child.get("name")))

        sets = ("BodySet", "JointSet", "Ground", "components", "ForceSet", "ConstraintSet")
        for setname in sets:
            for el in self.model_el.findall(setname):
                if setname == "BodySet":
                    visit(el, "/bodyset")
                elif setname == "ForceSet":
                    visit(el, "/forceset")
                elif setname == "JointSet":
                    visit(el, "/jointset")
                elif setname == "ConstraintSet":
                    visit(el, "/constraintset")
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

    def frame_in_body(self, path: str, what: str, relative_to: str = "/"):
        """``(OpenSim body or "ground", X (4, 4))``: a frame given by its component path, as a
        pose in its body's frame (4.x offset frames resolved)."""
        if not hasattr(self, "_frames"):
            self._frames = self._collect_frames() if self.v4 else {}
        p = path.strip()
        if not self.v4:  # a 3.x body name
            p = "/ground" if p == "ground" else f"/bodyset/{p}"
        return self._frame_to_body(
            self._resolve(p, relative_to), self._frames, set(self.bodies()), what
        )

    def duplicate_names(self) -> list[str]:
        """``"<set>: <name>"`` of every name used twice in one of the model's sets (OpenSim keeps
        one of them; jaxmb raises)."""
        out = []
        sets = ["BodySet", "JointSet", "ForceSet", "ConstraintSet", "MarkerSet",
                "ContactGeometrySet", "ControllerSet", "ProbeSet"]
        for setname in sets:
            el = self.model_el.find(f"{setname}/objects")
            names = [] if el is None else [c.get("name") for c in el]
            out += [f"{setname}: {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
        coords = [c.get("name") for c in self.model_el.iter("Coordinate")]
        out += [f"coordinates: {n!r}" for n in sorted({n for n in coords if coords.count(n) > 1})]
        if not self.v4:
            bodies = [b.get("name") for b in self.model_el.iter("Body")]
            out += [f"bodies: {n!r}" for n in sorted({n for n in bodies if bodies.count(n) > 1})]
        return out

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
            cnames = (child_text(ta, "coordinates") or "").split()
            axis = child_vector(ta, "axis", 3, w)
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
                    func = parse_function(fel, w, dimension=max(len(cnames), 1))
                except UnsupportedFunctionError as e:
                    raise OsimImportError(str(e)) from None
            for n in cnames:
                if n not in coords:
                    raise OsimImportError(f"{w}: unknown coordinate {n!r}")
            # a function of several coordinates (a MultivariatePolynomialFunction) reads a tuple
            cname = (cnames[0] if len(cnames) == 1 else tuple(cnames)) if cnames else None
            if cname is None and not func.is_constant:
                # OpenSim evaluates a function with no coordinates at x = 0
                func = Constant(float(func(jnp.zeros(()))))
            kind = "rotation" if an.startswith("rotation") else "translation"
            axes.append(TransformAxisSpec(kind, unit_axis(axis, w), cname, func, an))
        return axes

    def joints(self, body_names: set[str]) -> list[JointSpec]:
        joints: list[JointSpec] = []
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
        if self.v4 and child_flag(j, "reverse"):  # OpenSim 4.6 has no such property
            raise OsimImportError(
                self.where(f"{j.tag} {j.get('name')!r}: <reverse> in a 4.x document")
            )

    def _joint_body(self, jname, jtype, coords, st, j=None):
        """Axes of a joint type in the order they act (``j``: the joint's element, for an
        EllipsoidJoint's radii)."""
        cmap = {c.name: c for c in coords}
        if jtype == "CustomJoint":
            axes = self._axes(st, jname, cmap)
            # OpenSim 4.6 decides from the transform axes, a 3.x <motion_type> notwithstanding
            # (MoBL-ARMS' wrist deviation and flexion, written rotational, are Coupled)
            rotational = _opensim_rotational(axes)
            coords = [dataclasses.replace(c, rotational=rotational(c.name)) for c in coords]
            return axes, coords
        spec = JOINT_AXES[jtype]
        n = 1 + max((k for _, _, k in spec), default=-1)
        if len(coords) != n:
            raise OsimImportError(
                self.where(f"{jtype} {jname!r} needs {n} coordinates, has {len(coords)}")
            )
        coords = list(coords)
        axes = []
        for kind, axis, k in spec:
            c = coords[k]
            coords[k] = dataclasses.replace(c, rotational=kind == "rotation")
            label = f"{'r' if kind == 'rotation' else 't'}{'xyz'[int(np.argmax(axis))]}"
            axes.append(
                TransformAxisSpec(kind, np.asarray(axis), c.name, LinearFunction(1.0), label)
            )
        if jtype == "EllipsoidJoint":
            # Simbody's Ellipsoid mobilizer: the child origin on the ellipsoid where its normal,
            # scaled by the radii, is the child's z axis; a function of the X and Y rotations
            radii = child_vector(j, "radii_x_y_z", 3, self.where(f"{jtype} {jname!r}"))
            if not np.all(radii >= 0.0):
                raise OsimImportError(
                    self.where(f"{jtype} {jname!r}: radii_x_y_z must be >= 0, got {radii}")
                )
            both = (coords[0].name, coords[1].name)
            for k in range(3):
                axes[k] = dataclasses.replace(
                    axes[k], coordinate=both, function=EllipsoidSurfacePoint(radii[k], k)
                )
        return axes, coords

    def _joint4(self, j, frames, body_names) -> JointSpec:
        self._check_type(j)
        jname = j.get("name")
        jpath = f"/jointset/{jname}"
        sp, sc = socket_path(j, "parent_frame"), socket_path(j, "child_frame")
        if sp is None or sc is None:
            raise OsimImportError(self.where(f"{j.tag} {jname!r}: missing parent or child frame"))
        parent, X_PF = self._frame_to_body(
            self._resolve(sp, jpath), frames, body_names, f"{j.tag} {jname!r} parent frame"
        )
        child, X_BM = self._frame_to_body(
            self._resolve(sc, jpath), frames, body_names, f"{j.tag} {jname!r} child frame"
        )
        coords = [self._coordinate(c, jname, None) for c in j.findall("coordinates/Coordinate")]
        axes, coords = self._joint_body(jname, j.tag, coords, j.find("SpatialTransform"), j)
        return JointSpec(jname, j.tag, parent, child, X_PF, X_BM, coords, axes)

    def _joint3(self, j, child, body_names) -> JointSpec:
        self._check_type(j)
        jname = j.get("name")
        w = self.where(f"{j.tag} {jname!r}")
        parent = child_text(j, "parent_body")
        if parent is None or (parent not in body_names and parent != "ground"):
            raise OsimImportError(f"{w}: unknown parent body {parent!r}")

        def vec(tag):
            v = child_vector(j, tag, 3, w, default=(0, 0, 0))
            # OpenSim 4.6's upgrade turns these into offset frames written with 6 significant
            # digits, as it does the inertia (measured: 0.07805411987 becomes 0.0780541)
            return np.array([float(f"{x:.6g}") for x in v]) if self.opensim_inertia_digits else v

        X_PF = homogeneous(body_fixed_xyz(vec("orientation_in_parent")), vec("location_in_parent"))
        X_BM = homogeneous(body_fixed_xyz(vec("orientation")), vec("location"))
        coords = [
            self._coordinate(c, jname, None) for c in j.findall("CoordinateSet/objects/Coordinate")
        ]
        axes, coords = self._joint_body(jname, j.tag, coords, j.find("SpatialTransform"), j)
        return JointSpec(
            jname, j.tag, parent, child, X_PF, X_BM, coords, axes, child_flag(j, "reverse")
        )

    # ---- constraints -------------------------------------------------------------------------
    def couplings(self, coord_names: list[str], refuse=None):
        """The CoordinateCouplerConstraints as ``(name, dependent, independent, g, scale)``; the
        frame constraints are read by :meth:`frame_constraints`, any other type is refused."""
        out = []
        cs = self.model_el.find("ConstraintSet")
        objs = [] if cs is None or cs.find("objects") is None else list(cs.find("objects"))
        for c in objs:
            name = c.get("name")
            w = self.where(f"{c.tag} {name!r}")
            enforced = child_flag(c, "isEnforced", True) and not child_flag(c, "isDisabled", False)
            if not enforced:
                continue
            if c.tag in FRAME_CONSTRAINTS:  # read by loops.frame_constraint_specs
                continue
            if c.tag != "CoordinateCouplerConstraint":
                msg = (
                    f"{w}: constraint type {c.tag!r} is not supported (supported:"
                    f" CoordinateCouplerConstraint, {', '.join(sorted(FRAME_CONSTRAINTS))})"
                )
                if refuse is None:
                    raise OsimImportError(msg)
                refuse(msg)
                continue
            ind = (child_text(c, "independent_coordinate_names") or "").split()
            dep = child_text(c, "dependent_coordinate_name")
            if not ind:
                raise OsimImportError(f"{w}: no <independent_coordinate_names>")
            for n in ind + [dep]:
                if n not in coord_names:
                    raise OsimImportError(f"{w}: unknown coordinate {n!r}")
            fel = c.find("coupled_coordinates_function")
            if fel is None:
                raise OsimImportError(f"{w}: missing <coupled_coordinates_function>")
            try:
                g = parse_function(fel, w, dimension=len(ind))
            except UnsupportedFunctionError as e:
                raise OsimImportError(str(e)) from None
            scale = float(child_text(c, "scale_factor", "1"))
            out.append((name, dep, ind[0] if len(ind) == 1 else tuple(ind), g, scale))
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

    def path_spec(self, el: ET.Element) -> MuscleSpec:
        """A path force element (PathActuator, PathSpring, Ligament) read like a muscle: its
        GeometryPath as path points and wraps (``kind`` is its type)."""
        return self._muscle(el)

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
            t = child_text(m, tag)
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
            wname = child_text(pw, "wrap_object") or child_text(pw, "socket_wrap_object") or ""
            wname = posixpath.basename(wname.strip())
            if not wname:
                raise OsimImportError(f"{w}: PathWrap {pw.get('name')!r} names no wrap object")
            rng = child_vector(pw, "range", 2, f"{w} PathWrap {wname!r}", default=(-1, -1))
            if np.any(rng != np.round(rng)):
                raise OsimImportError(f"{w} PathWrap {wname!r}: <range> must be integers: {rng}")
            method = (child_text(pw, "method") or "hybrid").strip()
            pws.append(PathWrapSpec(wname, method, (int(rng[0]), int(rng[1]))))
        wraps = tuple(p.wrap for p in pws)
        applies = child_flag(m, "appliesForce", True) and not child_flag(m, "isDisabled", False)
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
                        v = child_vector(wo, tag, n, w)
                        params[tag] = float(v[0]) if n == 1 else tuple(v.tolist())
                for tag in ("inner_radius", "outer_radius"):
                    if wo.find(tag) is not None:
                        params[tag] = float(child_vector(wo, tag, 1, w)[0])
                out[name] = WrapObjectSpec(
                    name=name,
                    kind=wo.tag,
                    body=bname,
                    translation=tuple(
                        child_vector(wo, "translation", 3, w, default=(0, 0, 0)).tolist()
                    ),
                    rotation=body_fixed_xyz(
                        child_vector(wo, "xyz_body_rotation", 3, w, default=(0, 0, 0))
                    ),
                    quadrant=(child_text(wo, "quadrant") or "all").strip(),
                    active=child_flag(wo, "active", True),
                    parameters=params,
                )
        return out

    def _body_of(self, p: ET.Element, w: str) -> str:
        b = child_text(p, "body")
        if b is not None:
            return b
        sp = child_text(p, "socket_parent_frame")
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
            loc = child_vector(p, "location", 3, pw)
            return PathPointSpec(pname, "PathPoint", body, tuple(loc))
        if p.tag == "ConditionalPathPoint":
            loc = child_vector(p, "location", 3, pw)
            rng = child_vector(p, "range", 2, pw)
            c = self._coord_name(child_text(p, "socket_coordinate") or child_text(p, "coordinate"))
            return PathPointSpec(
                pname, p.tag, body, tuple(loc), coordinate=c, range=(rng[0], rng[1])
            )
        if p.tag == "MovingPathPoint":
            loc = child_vector(p, "location", 3, pw, default=(0, 0, 0))
            coords, funcs = [], []
            for ax in "xyz":
                c = self._coord_name(
                    child_text(p, f"socket_{ax}_coordinate") or child_text(p, f"{ax}_coordinate")
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
