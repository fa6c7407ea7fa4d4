"""An ``.osim`` file's ForceSet (other than muscles) as jaxmb force elements.

:func:`osim_forces` reads each element and builds the :mod:`jaxmb.forces` element that computes
what OpenSim 4.6 computes, in the imported model's frames (``x_jaxmb = T x_osim`` of
:attr:`OsimImport.body_frames`):

============================== =============================================================
OpenSim                        jaxmb
============================== =============================================================
``CoordinateLimitForce``       :class:`jaxmb.forces.CoordinateLimitForce` (degrees converted)
``SpringGeneralizedForce``     :class:`jaxmb.forces.SpringGeneralizedForce`
``CoordinateActuator``         :class:`jaxmb.forces.CoordinateActuator` (control 0)
``PointToPointSpring``         :class:`jaxmb.forces.PointToPointSpring` (no damping)
``BushingForce``               :class:`jaxmb.forces.BushingForce`
``HuntCrossleyForce``          :class:`jaxmb.forces.HuntCrossleyForce` (spheres, half-spaces)
``PathActuator``               :class:`jaxmb.muscles.PathActuator` (control 0)
``PathSpring``                 :class:`jaxmb.muscles.PathSpring`
``Ligament``                   :class:`jaxmb.muscles.Ligament`
``ExpressionBasedCoordinate…`` :class:`jaxmb.forces.ExpressionCoordinateForce`
``TorqueActuator``             :class:`jaxmb.forces.TorqueActuator` (control 0)
``PointActuator``              :class:`jaxmb.forces.PointActuator` (control 0)
``SmoothSphereHalfSpaceForce`` :class:`jaxmb.forces.SmoothSphereHalfSpaceForce`
============================== =============================================================

An element with ``appliesForce`` false (``isDisabled`` true in 3.x) applies no force in OpenSim and
is not built. Any other force type, or a supported one jaxmb cannot represent (contact geometry
other than spheres and half-spaces, a limit on a ball or free joint's rotation), is handed to
``refuse``, which raises :class:`OsimImportError` or records it (``unsupported="warn"``).
"""

from __future__ import annotations

import re

import numpy as np

from ...forces import (
    BushingForce,
    CoordinateActuator,
    CoordinateLimitForce,
    ExpressionCoordinateForce,
    HuntCrossleyForce,
    PointActuator,
    PointToPointSpring,
    SmoothSphereHalfSpaceForce,
    SpringGeneralizedForce,
    TorqueActuator,
)
from ...math.expressions import ExpressionError, Expressions
from ...forces.contact import HALF_SPACE, SPHERE
from ...math import SimmSpline, UnsupportedFunctionError
from ...muscles import Ligament, PathActuator, PathSpring
from .document import OsimDocument
from .functions import parse_function
from .xml import (
    OsimImportError,
    body_fixed_xyz,
    child_flag,
    child_text,
    child_vector,
    homogeneous,
    socket_path,
)

__all__ = ["SUPPORTED_FORCES", "osim_forces", "applies_force"]

SUPPORTED_FORCES = (
    "CoordinateLimitForce",
    "SpringGeneralizedForce",
    "CoordinateActuator",
    "PointToPointSpring",
    "BushingForce",
    "HuntCrossleyForce",
    "PathActuator",
    "PathSpring",
    "Ligament",
    "ExpressionBasedCoordinateForce",
    "TorqueActuator",
    "PointActuator",
    "SmoothSphereHalfSpaceForce",
)


# OpenSim's default Ligament force-length curve (Ligament::constructProperties), a SimmSpline
LIGAMENT_CURVE_X = (-5.0, 0.998, 0.999, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.601, 1.602, 5.0)
LIGAMENT_CURVE_Y = (0.0, 0.0, 0.0, 0.0, 0.035, 0.12, 0.26, 0.55, 1.17, 2.0, 2.0, 2.0, 2.0)


def applies_force(el) -> bool:
    """OpenSim's ``appliesForce`` (4.x) and ``isDisabled`` (3.x) of a force element."""
    return child_flag(el, "appliesForce", True) and not child_flag(el, "isDisabled", False)


def _number(el, tag, w, default=None) -> float:
    return float(child_vector(el, tag, 1, w, default=None if default is None else (default,))[0])


def osim_forces(P: OsimDocument, imp, euler_rotations, refuse, build_path) -> list:
    """jaxmb force elements for the ForceSet's non-muscle forces.

    Args:
        P: the document. imp: the :class:`OsimImport` so far (body frames, coordinates in
            OpenSim's order = the joint map's full vector, wrap objects).
        euler_rotations: names of ball/free joint rotation coordinates (OpenSim's speed there is an
            angular velocity, not the coordinate's rate).
        refuse: ``refuse(message)`` for an element jaxmb cannot represent.
        build_path: ``build_path(MuscleSpec) -> MuscleSet`` of one path (PathActuator, PathSpring).
    """
    body_frames, coordinates = imp.body_frames, imp.coordinates
    fs = P.model_el.find("ForceSet/objects")
    names = [c.name for c in coordinates]
    out = []
    for el in [] if fs is None else list(fs):
        kind, name = el.tag, el.get("name")
        w = P.where(f"{kind} {name!r}")
        if "Muscle" in kind:
            continue
        if kind not in SUPPORTED_FORCES:
            refuse(f"{w}: force type {kind!r} is not supported (supported: "
                   f"{', '.join(SUPPORTED_FORCES)} and muscles)")
            continue
        if not applies_force(el):
            continue
        try:
            if kind in ("PathActuator", "PathSpring", "Ligament"):
                out.append(_path_force(P, el, kind, name, w, build_path))
            else:
                out.append(_build(P, el, kind, name, w, body_frames, coordinates, names,
                                  euler_rotations))
        except OsimImportError as e:
            refuse(str(e))
    return out


def _path_force(P, el, kind, name, w, build_path):
    paths = build_path(P.path_spec(el))
    if kind == "PathActuator":
        return PathActuator(name, paths, _number(el, "optimal_force", w, 1.0))
    if kind == "Ligament":
        fel = el.find("force_length_curve")
        if fel is None or len(fel) == 0:  # OpenSim's default curve (Ligament.cpp), not written
            curve = SimmSpline(LIGAMENT_CURVE_X, LIGAMENT_CURVE_Y)
        else:
            try:
                curve = parse_function(list(fel)[0], w)
            except UnsupportedFunctionError as e:
                raise OsimImportError(str(e)) from None
        return Ligament(paths, _number(el, "resting_length", w), _number(el, "pcsa_force", w), curve)
    return PathSpring(
        paths,
        _number(el, "stiffness", w),
        _number(el, "resting_length", w),
        _number(el, "dissipation", w, 0.0),
    )


def _coordinate(el, w, names, coordinates, euler_rotations, what):
    c = child_text(el, "coordinate")
    if c is None or c not in names:
        raise OsimImportError(f"{w}: unknown coordinate {c!r}")
    if c in euler_rotations:
        raise OsimImportError(
            f"{w}: a {what} on {c!r}, a ball or free joint rotation (OpenSim applies it to an"
            " angular velocity component, not the coordinate), is not supported"
        )
    k = names.index(c)
    return k, coordinates[k]


def _body_path(name):
    """A body given by name (PointActuator's ``body``, 3.x ``bodyA``) as a component path."""
    if name is None or "/" in name.strip():
        return name
    return "/ground" if name.strip() == "ground" else f"/bodyset/{name.strip()}"


def _frame(P, path, w, body_frames, relative_to):
    """(jaxmb body, X (4, 4) of the frame in the jaxmb body frame)."""
    if path is None:
        raise OsimImportError(f"{w}: missing frame socket")
    body, X = P.frame_in_body(path, w.removeprefix(f"{P.path}: "), relative_to)
    b, T = body_frames[body]
    return b, T @ X


def _build(P, el, kind, name, w, body_frames, coordinates, names, euler_rotations):
    if kind == "CoordinateLimitForce":
        k, c = _coordinate(el, w, names, coordinates, euler_rotations, kind)
        s = np.pi / 180 if c.rotational else 1.0
        ku, kl = _number(el, "upper_stiffness", w), _number(el, "lower_stiffness", w)
        tr = _number(el, "transition", w)
        if ku <= 0 or kl <= 0 or tr <= 0:
            raise OsimImportError(f"{w}: stiffnesses and transition must be positive")
        return CoordinateLimitForce(
            k,
            upper_stiffness=ku / s,
            upper_limit=_number(el, "upper_limit", w) * s,
            lower_stiffness=kl / s,
            lower_limit=_number(el, "lower_limit", w) * s,
            damping=_number(el, "damping", w, 0.001) / s,
            transition=tr * s,
        )
    if kind == "SpringGeneralizedForce":
        k, _ = _coordinate(el, w, names, coordinates, euler_rotations, kind)
        return SpringGeneralizedForce(
            k,
            _number(el, "stiffness", w, 0.0),
            _number(el, "rest_length", w, 0.0),
            _number(el, "viscosity", w, 0.0),
        )
    if kind == "CoordinateActuator":
        k, _ = _coordinate(el, w, names, coordinates, euler_rotations, kind)
        return CoordinateActuator(name, k, _number(el, "optimal_force", w, 1.0))
    if kind == "ExpressionBasedCoordinateForce":
        k, _ = _coordinate(el, w, names, coordinates, euler_rotations, kind)
        text = "".join((child_text(el, "expression") or "0.0").split())
        py = re.sub(r"\bqdot\b", "rate", re.sub(r"\bq\b(?!dot)", "value", text.replace("^", "**")))
        try:
            expr = Expressions((py,), ("value", "rate"))
        except ExpressionError as e:
            raise OsimImportError(f"{w}: expression {text!r} is not supported ({e})") from None
        return ExpressionCoordinateForce(k, expr, text)
    if kind == "TorqueActuator":
        ba = socket_path(el, "bodyA") or _body_path(child_text(el, "bodyA"))
        bb = socket_path(el, "bodyB") or _body_path(child_text(el, "bodyB"))
        owner = f"/forceset/{name}"
        a, Xa = _frame(P, ba, w, body_frames, owner)
        b, _ = _frame(P, bb, w, body_frames, owner) if bb else (-1, None)
        return TorqueActuator(
            name, a, b, child_vector(el, "axis", 3, w, (0, 0, 1)),
            child_flag(el, "torque_is_global", True), _number(el, "optimal_force", w, 1.0),
            rotation_a=Xa[:3, :3],
        )
    if kind == "PointActuator":
        bname = _body_path(child_text(el, "body"))
        b, X = _frame(P, bname, w, body_frames, f"/forceset/{name}")
        return PointActuator(
            name, b, child_vector(el, "point", 3, w, (0, 0, 0)),
            child_vector(el, "direction", 3, w, (1, 0, 0)), child_flag(el, "force_is_global"),
            child_flag(el, "point_is_global"), _number(el, "optimal_force", w, 1.0), transform=X,
        )
    owner = f"/forceset/{name}"
    if kind == "PointToPointSpring":
        ba, Xa = _frame(P, socket_path(el, "body1") or child_text(el, "body1"), w, body_frames,
                        owner)
        bb, Xb = _frame(P, socket_path(el, "body2") or child_text(el, "body2"), w, body_frames,
                        owner)
        pa = Xa[:3, :3] @ child_vector(el, "point1", 3, w) + Xa[:3, 3]
        pb = Xb[:3, :3] @ child_vector(el, "point2", 3, w) + Xb[:3, 3]
        return PointToPointSpring(
            ba, pa, bb, pb, _number(el, "stiffness", w), _number(el, "rest_length", w, 0.0)
        )
    if kind == "BushingForce":
        if socket_path(el, "frame1") is None:
            raise OsimImportError(f"{w}: a 3.x BushingForce (body_1/body_2) is not supported")
        b1, X1 = _frame(P, socket_path(el, "frame1"), w, body_frames, owner)
        b2, X2 = _frame(P, socket_path(el, "frame2"), w, body_frames, owner)
        z = (0.0, 0.0, 0.0)
        k = np.concatenate([child_vector(el, "rotational_stiffness", 3, w, z),
                            child_vector(el, "translational_stiffness", 3, w, z)])
        c = np.concatenate([child_vector(el, "rotational_damping", 3, w, z),
                            child_vector(el, "translational_damping", 3, w, z)])
        return BushingForce(b1, X1, b2, X2, k, c)
    if kind == "SmoothSphereHalfSpaceForce":
        return _smooth_contact(P, el, w, body_frames)
    return _hunt_crossley(P, el, w, body_frames)


def _geometry(P, path, w, body_frames, kind):
    """(jaxmb body, pose (4, 4) in its jaxmb frame, element) of a contact geometry."""
    g = contact_geometry(P).get(posixpath_basename(path or ""))
    if g is None or g.tag != kind:
        raise OsimImportError(f"{w}: {path!r} is not a {kind}")
    gw = f"{w} {g.tag} {g.get('name')!r}"
    b, X = _frame(P, socket_path(g, "frame") or child_text(g, "body_name"), gw, body_frames,
                  f"/contactgeometryset/{g.get('name')}")
    X_FP = homogeneous(
        body_fixed_xyz(child_vector(g, "orientation", 3, gw, (0, 0, 0))),
        child_vector(g, "location", 3, gw, (0, 0, 0)),
    )
    return b, X @ X_FP, g


def _smooth_contact(P, el, w, body_frames):
    bs, Xs, gs = _geometry(P, socket_path(el, "sphere"), w, body_frames, "ContactSphere")
    bh, Xh, _ = _geometry(P, socket_path(el, "half_space"), w, body_frames, "ContactHalfSpace")
    prm = {t: _number(el, t, w, d) for t, d in (
        ("stiffness", 1.0), ("dissipation", 0.0), ("static_friction", 0.0),
        ("dynamic_friction", 0.0), ("viscous_friction", 0.0), ("transition_velocity", 0.01),
        ("constant_contact_force", 1e-5), ("hertz_smoothing", 300.0),
        ("hunt_crossley_smoothing", 50.0))}
    return SmoothSphereHalfSpaceForce(
        bs, Xs[:3, 3], _number(gs, "radius", w), bh, Xh, **prm
    )


def contact_geometry(P: OsimDocument) -> dict:
    """``{name: element}`` of the ContactGeometrySet."""
    cg = P.model_el.find("ContactGeometrySet/objects")
    return {} if cg is None else {g.get("name"): g for g in cg}


def _hunt_crossley(P, el, w, body_frames):
    geoms = contact_geometry(P)
    kinds, bodies, poses, radii, prm = [], [], [], [], []
    params = el.findall("ContactParametersSet/objects/ContactParameters")
    if el.find("contact_parameters") is not None:  # 3.x spelling
        params += el.findall("contact_parameters/objects/ContactParameters")
    for cp in params:
        row = [_number(cp, t, w, d) for t, d in (
            ("stiffness", 0.0), ("dissipation", 0.0), ("static_friction", 0.0),
            ("dynamic_friction", 0.0), ("viscous_friction", 0.0))]
        for gname in (child_text(cp, "geometry") or "").split():
            g = geoms.get(posixpath_basename(gname))
            if g is None:
                raise OsimImportError(f"{w}: unknown contact geometry {gname!r}")
            gw = f"{w} {g.tag} {gname!r}"
            if g.tag not in ("ContactSphere", "ContactHalfSpace"):
                raise OsimImportError(
                    f"{gw}: contact geometry {g.tag!r} is not supported (ContactSphere,"
                    " ContactHalfSpace)"
                )
            fpath = socket_path(g, "frame") or child_text(g, "body_name")
            b, X = _frame(P, fpath, gw, body_frames, f"/contactgeometryset/{gname}")
            X_FP = homogeneous(
                body_fixed_xyz(child_vector(g, "orientation", 3, gw, (0, 0, 0))),
                child_vector(g, "location", 3, gw, (0, 0, 0)),
            )
            kinds.append(SPHERE if g.tag == "ContactSphere" else HALF_SPACE)
            bodies.append(b)
            poses.append(X @ X_FP)
            radii.append(_number(g, "radius", gw) if g.tag == "ContactSphere" else 0.0)
            prm.append(row)
    if not kinds:
        raise OsimImportError(f"{w}: no contact geometry")
    prm = np.asarray(prm)
    return HuntCrossleyForce(
        kinds, bodies, np.stack(poses), radii, prm[:, 0], prm[:, 1], prm[:, 2], prm[:, 3],
        prm[:, 4], _number(el, "transition_velocity", w, 0.001),
    )


def posixpath_basename(p: str) -> str:
    """The last component of a component path (``/contactgeometryset/floor`` → ``floor``)."""
    return p.strip().rstrip("/").split("/")[-1]
