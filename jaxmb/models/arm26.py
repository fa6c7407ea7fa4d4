"""OpenSim's arm26: two hinge joints (shoulder elevation, elbow flexion) and six muscles.

Built by hand from ``jaxmb/data/arm26.osim`` (a copy of ``Arm26/arm26.osim`` from
opensim-org/opensim-models, Apache-2.0) with a small local XML reader that understands exactly the
elements this file uses and raises on anything else, so no feature is dropped silently.

Mapping to jaxmb. The ``base`` body is welded to the ground, so it is folded into the ground frame
(its points and wrap objects are shifted by the weld offset). Each ``CustomJoint`` has one rotation
driven linearly by its coordinate (coefficients 1, 0) about a fixed axis, with every other transform
axis constant zero and an identity child offset; it becomes a revolute ``Body`` at the parent
offset. Each ``PathWrap`` keeps OpenSim's point range (``range`` 1-based, ``-1`` = all, converted
to 0-based ``start``/``end``) and the order of the PathWrapSet, so that jaxmb picks the wrapped
segment per pose and iterates over several wrap objects as OpenSim's ``applyWrapObjects`` does.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..model import Body, ModelError, build_model
from ..muscles import (
    ConditionalPathPoint,
    Muscle,
    MuscleParameters,
    PathPoint,
    PathWrap,
    WrapCylinder,
    WrapEllipsoid,
    WrapSphere,
    with_muscles,
)

__all__ = ["arm26", "body_fixed_xyz"]


def _vec(el, tag, n=3):
    node = el.find(tag)
    if node is None or node.text is None:
        raise ModelError(f"arm26.osim: <{el.tag} name={el.get('name')!r}> has no <{tag}>")
    v = np.array([float(x) for x in node.text.split()])
    if v.shape != (n,):
        raise ModelError(
            f"arm26.osim: <{tag}> of {el.get('name')!r} has {v.size} numbers, want {n}"
        )
    return v


def body_fixed_xyz(angles) -> np.ndarray:
    """OpenSim's ``xyz_body_rotation``: body-fixed X, then Y, then Z, ``R = Rx(a) Ry(b) Rz(c)``."""
    a, b, c = angles
    ca, sa, cb, sb, cc, sc = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(c), np.sin(c)
    Rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    Ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    Rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return Rx @ Ry @ Rz


def _read(path=None):
    if path is None:
        path = Path(__file__).resolve().parent.parent / "data" / "arm26.osim"
    with open(path, "rb") as fh:
        return ET.parse(fh).getroot().find("Model")


def arm26(path=None):
    """The arm26 model with its six muscles (``model.muscles``), coordinates
    ``("r_shoulder_elev", "r_elbow_flex")``; gravity −9.8066 m/s² along y."""
    root = _read(path)
    gravity = _vec(root, "gravity")
    bodies = {b.get("name"): b for b in root.find("BodySet/objects")}
    joints = list(root.find("JointSet/objects"))

    # ground -> base weld
    weld = [j for j in joints if j.tag == "WeldJoint"]
    if len(weld) != 1:
        raise ModelError("arm26.osim: expected one WeldJoint (ground to base)")
    frames = {f.get("name"): f for f in weld[0].find("frames")}
    base_offset = np.zeros(3)
    for f in frames.values():
        if np.any(_vec(f, "orientation") != 0):
            raise ModelError(f"arm26.osim: weld frame {f.get('name')!r} is rotated; unsupported")
        sign = 1.0 if f.find("socket_parent").text.strip() == "/ground" else -1.0
        base_offset = base_offset + sign * _vec(f, "translation")

    jm_bodies, coords = [], []
    frame_of = {"base": ("ground", base_offset)}  # body -> (jaxmb parent, origin offset)
    for j in joints:
        if j.tag == "WeldJoint":
            continue
        if j.tag != "CustomJoint":
            raise ModelError(f"arm26.osim: joint {j.get('name')!r} of type {j.tag} unsupported")
        name = j.get("name")
        fr = {f.get("name"): f for f in j.find("frames")}
        parent_f = fr[j.find("socket_parent_frame").text.strip()]
        child_f = fr[j.find("socket_child_frame").text.strip()]
        for f in (parent_f, child_f):
            if np.any(_vec(f, "orientation") != 0):
                raise ModelError(f"arm26.osim: joint {name!r} frame {f.get('name')!r} is rotated")
        if np.any(_vec(child_f, "translation") != 0):
            raise ModelError(f"arm26.osim: joint {name!r} child frame is offset; unsupported")
        parent_body = parent_f.find("socket_parent").text.strip().split("/")[-1]
        child_body = child_f.find("socket_parent").text.strip().split("/")[-1]
        axes = j.findall("SpatialTransform/TransformAxis")
        driven = []
        for ax in axes:
            c = (ax.find("coordinates").text or "").strip()
            fn = ax[-1] if ax.find("LinearFunction") is None else ax.find("LinearFunction")
            if c:
                coef = [float(x) for x in fn.find("coefficients").text.split()]
                if fn.tag != "LinearFunction" or coef != [1.0, 0.0]:
                    raise ModelError(
                        f"arm26.osim: joint {name!r} axis {ax.get('name')!r}: only "
                        "f(q) = q is supported"
                    )
                if not ax.get("name").startswith("rotation"):
                    raise ModelError(f"arm26.osim: joint {name!r}: driven translation unsupported")
                driven.append((c, _vec(ax, "axis")))
            else:
                const = ax.find("Constant")
                if const is None or float(const.find("value").text) != 0.0:
                    raise ModelError(
                        f"arm26.osim: joint {name!r} axis {ax.get('name')!r} is not "
                        "constant zero; unsupported"
                    )
        if len(driven) != 1:
            raise ModelError(f"arm26.osim: joint {name!r} must have exactly one driven rotation")
        cname, axis = driven[0]
        par, off = frame_of[parent_body]
        if par != "ground" or parent_body != "base":
            par, off = parent_body, np.zeros(3)
        position = off + _vec(parent_f, "translation")
        b = bodies[child_body]
        inertia6 = _vec(b, "inertia", 6)
        I = np.array(
            [
                [inertia6[0], inertia6[3], inertia6[4]],
                [inertia6[3], inertia6[1], inertia6[5]],
                [inertia6[4], inertia6[5], inertia6[2]],
            ]
        )
        jm_bodies.append(
            Body(
                name=child_body,
                parent=None if par == "ground" else par,
                joint="revolute",
                axis=tuple(axis / np.linalg.norm(axis)),
                position=tuple(position),
                mass=float(b.find("mass").text),
                com=tuple(_vec(b, "mass_center")),
                inertia=I,
            )
        )
        coords.append(cname)
        frame_of[child_body] = (child_body, np.zeros(3))

    def where(body_name):
        """jaxmb body (name or 'ground') and the offset of its frame in that body."""
        if body_name == "base":
            return "ground", base_offset
        return body_name, np.zeros(3)

    wraps = {}
    for bname, b in bodies.items():
        ws = b.find("WrapObjectSet/objects")
        for w in [] if ws is None else list(ws):
            if (w.find("active") is not None) and w.find("active").text.strip() != "true":
                continue
            jb, off = where(bname)
            R = body_fixed_xyz(_vec(w, "xyz_body_rotation"))
            t = _vec(w, "translation") + off
            quad = w.find("quadrant").text.strip()
            nm = w.get("name")
            if w.tag == "WrapCylinder":
                obj = WrapCylinder(
                    jb, t, R, float(w.find("radius").text), float(w.find("length").text), quad, nm
                )
            elif w.tag == "WrapEllipsoid":
                obj = WrapEllipsoid(jb, t, R, _vec(w, "dimensions"), quad, nm)
            elif w.tag == "WrapSphere":
                obj = WrapSphere(jb, t, R, float(w.find("radius").text), quad, nm)
            else:
                raise ModelError(f"arm26.osim: wrap object {nm!r} of type {w.tag} unsupported")
            wraps[nm] = obj

    muscles = []
    for m in root.find("ForceSet/objects"):
        if not m.tag.endswith("Muscle"):
            raise ModelError(f"arm26.osim: force {m.get('name')!r} of type {m.tag} unsupported")
        name = m.get("name")
        pts = []
        for p in m.find("GeometryPath/PathPointSet/objects"):
            body = p.find("socket_parent_frame").text.strip().split("/")[-1]
            jb, off = where(body)
            loc = _vec(p, "location") + off
            if p.tag == "PathPoint":
                pts.append(PathPoint(jb, loc, p.get("name")))
            elif p.tag == "ConditionalPathPoint":
                rng = [float(x) for x in p.find("range").text.split()]
                pts.append(
                    ConditionalPathPoint(
                        jb,
                        loc,
                        p.find("socket_coordinate").text.strip().split("/")[-1],
                        rng,
                        p.get("name"),
                    )
                )
            else:
                raise ModelError(
                    f"arm26.osim: muscle {name!r} point {p.get('name')!r} of type "
                    f"{p.tag} unsupported"
                )
        pws = []
        wrap_set = m.find("GeometryPath/PathWrapSet/objects")
        for pw in [] if wrap_set is None else list(wrap_set):
            obj = pw.find("wrap_object").text.strip()
            if obj not in wraps:
                raise ModelError(f"arm26.osim: muscle {name!r} wraps over unknown {obj!r}")
            rng = pw.find("range")
            lo, hi = (-1, -1) if rng is None else (int(v) for v in rng.text.split())
            pws.append(PathWrap(wraps[obj], lo - 1 if lo >= 1 else 0, hi - 1 if hi >= 1 else -1))
        params = MuscleParameters(
            float(m.find("max_isometric_force").text),
            float(m.find("optimal_fiber_length").text),
            float(m.find("tendon_slack_length").text),
            float(m.find("pennation_angle_at_optimal").text),
            float(m.find("max_contraction_velocity").text),
        )
        muscles.append(Muscle(name, tuple(pts), tuple(pws), params))

    model = build_model(jm_bodies, gravity=tuple(gravity), coordinate_names=coords, name="arm26")
    return with_muscles(model, muscles)
