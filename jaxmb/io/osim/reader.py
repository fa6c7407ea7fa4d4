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
order, with OpenSim's names. Weld, Point, PointOnLine and ConstantDistance constraints close loops:
:func:`~jaxmb.io.osim.loops.closed_loops` makes as many coordinates dependent as they have
equations, solved by Newton inside JAX (an :class:`~jaxmb.joint_maps.ImplicitMap`). Locked
coordinates are held at their values by the joint map and listed in :attr:`OsimImport.locked`.
Prescribed coordinates (``prescribed_function``) stay coordinates whose motion follows their
function of time in ``forward_dynamics`` and ``simulate`` (``model.prescribed``, listed in
:attr:`OsimImport.prescribed`). Anything else (another joint type, a function type jaxmb cannot
evaluate, another constraint type) raises :class:`OsimImportError` naming the element and its
type.

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
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from ...dynamics.prescribed import PrescribedCoordinates
from ...joint_maps import OsimJointMap
from ...math import AbstractFunction, Constant
from ...math.functions import as_array
from ...model import PRISMATIC, REVOLUTE, Body, Model, ModelError, build_model
from .document import JointSpec, OsimDocument
from .forces import osim_forces
from .loops import closed_loops, frame_constraint_specs
from .muscles import model_with_muscles, path_set
from .xml import (
    EULER_SPEED_JOINTS,
    MuscleSpec,
    OsimCoordinate,
    OsimImport,
    OsimImportError,
    axis_angle,
    axis_rotation,
    child_flag,
    child_text,
    child_vector,
    homogeneous,
    inverse_transform,
)

__all__ = ["read_osim", "load_osim", "osim_muscle_specs"]


def read_osim(
    path: str | Path,
    *,
    zero_inertia: tuple[str, ...] = (),
    unsupported: str = "raise",
    locked: str = "hold",
    inertia: str = "opensim",
    constraints: str = "apply",
) -> OsimImport:
    """Read an OpenSim model (4.x or 3.0 ``.osim``) into a jaxmb model plus the import's details.

    Args:
        path: the ``.osim`` file.
        zero_inertia: OpenSim bodies whose rotational inertia is set to zero (e.g. MoBL-ARMS'
            phantom bodies, which carry a placeholder diag(1, 1, 1) kg·m²).
        unsupported: ``"raise"`` (default): an element jaxmb cannot represent (a force,
            constraint, controller or probe type) raises :class:`OsimImportError` naming it, its
            type and the file; ``"warn"``: the rest is imported and one warning lists every
            element left out (also in :attr:`OsimImport.left_out`).
        locked: ``"hold"`` (default, OpenSim's meaning): a locked coordinate is held at its
            default value by the joint map and is not one of the model's coordinates;
            ``"free"``: locked coordinates stay coordinates (the lock is ignored).
        constraints: ``"apply"`` (default): CoordinateCouplerConstraints and loop constraints
            make coordinates dependent (the model's q are the independent ones); ``"ignore"``:
            the ConstraintSet is not read, every OpenSim coordinate is a coordinate of the model
            (a locked one too with ``locked="free"``), as OpenSim's InverseDynamicsTool sees the
            model (it reports each coordinate's residual force ignoring the constraints).
        inertia: ``"opensim"`` (default): a 3.x file's ``inertia_xx`` … values and its joints'
            locations and orientations (in parent and child) rounded to 6 significant digits, as
            OpenSim 4.6's upgrade of the file does (so M and the poses are OpenSim's);
            ``"file"``: the numbers as written.

    Raises:
        OsimImportError: naming the unsupported or malformed element, its type and the file;
            also for a name used twice in one set (OpenSim would keep only one of them).
    """
    if unsupported not in ("raise", "warn"):
        raise ValueError(f"unsupported must be 'raise' or 'warn', got {unsupported!r}")
    if locked not in ("hold", "free"):
        raise ValueError(f"locked must be 'hold' or 'free', got {locked!r}")
    if inertia not in ("opensim", "file"):
        raise ValueError(f"inertia must be 'opensim' or 'file', got {inertia!r}")
    if constraints not in ("apply", "ignore"):
        raise ValueError(f"constraints must be 'apply' or 'ignore', got {constraints!r}")
    P = OsimDocument(path, opensim_inertia_digits=inertia == "opensim")
    left_out: list[str] = []

    def refuse(message: str):
        if unsupported == "raise":
            raise OsimImportError(message)
        left_out.append(message.removeprefix(f"{P.path}: "))

    dups = P.duplicate_names()
    if dups:
        raise OsimImportError(P.where(f"names used twice: {'; '.join(dups)}"))
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

    # joints in tree order from the ground; a joint reached from its child's side (a 4.x
    # document, e.g. OpenSim's upgrade of a reversed 3.x joint) runs reversed, as in OpenSim
    order: list[JointSpec] = []
    placed = {"ground"}
    pending = list(joints)
    while pending:
        ready = [
            j if j.parent in placed else j.flipped()
            for j in pending
            if j.parent in placed or j.child in placed
        ]
        if not ready:
            raise OsimImportError(
                P.where(f"joints {[j.name for j in pending]} are not connected to the ground")
            )
        names = {j.name for j in ready}
        pending = [j for j in pending if j.name not in names]
        order += ready
        placed |= {j.child for j in ready}
    by_child: dict[str, JointSpec] = {}
    for j in order:
        if j.child == "ground":
            raise OsimImportError(P.where(f"{j.type} {j.name!r} moves the ground"))
        if j.child in by_child:
            raise OsimImportError(
                P.where(
                    f"body {j.child!r} is the child of two joints ({by_child[j.child].name!r},"
                    f" {j.name!r}); closed loops are not supported"
                )
            )
        if j.reversed and j.type in EULER_SPEED_JOINTS:
            raise OsimImportError(
                P.where(
                    f"{j.type} {j.name!r} is reversed: not supported (OpenSim's speeds of a"
                    " reversed ball, free or ellipsoid joint are not its angles' rates)"
                )
            )
        by_child[j.child] = j
    for b in bodies:
        if b not in by_child:
            raise OsimImportError(P.where(f"body {b!r} has no joint connecting it to the model"))

    # couplings
    couplings = P.couplings(cnames, refuse) if constraints == "apply" else []
    dep_names = {d for _, d, _, _, _ in couplings}
    held = [
        i
        for i, c in enumerate(coords)
        if locked == "hold" and c.locked and c.name not in dep_names
    ]
    independent = [i for i, n in enumerate(cnames) if n not in dep_names and i not in held]
    resolved = {cnames[i] for i in independent + held}
    coupling_order = []
    todo = list(couplings)
    frames = frame_constraint_specs(P) if constraints == "apply" else []
    if frames:  # every coupling is one more equation of the loops' implicit map
        coupling_order, todo = todo, []
    while todo:
        ready = [c for c in todo if set(_names(c[2])) <= resolved]
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
        axes = j.mobilizer_axes()
        moving = [a for a in axes if not a.function.is_constant]
        body = bodies[j.child]
        last = moving[-1] if moving else None
        cur = pidx
        for a in axes:
            C, t = T[:3, :3], T[:3, 3]
            if a.function.is_constant:
                # evaluated in numpy (its arrays as numpy): an eager JAX call compiles each time
                v = float(jax.tree_util.tree_map(np.asarray, a.function)(np.zeros(())))
                X = (
                    homogeneous(axis_rotation(a.axis, v))
                    if a.kind == "rotation"
                    else homogeneous(p=v * a.axis)
                )
                T = T @ X
                continue
            src = _source_index(cnames, a.coordinate)
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
                T = homogeneous(C)
            else:
                axis = C @ a.axis
                idx = add(
                    name, parent_name, PRISMATIC, axis, t, a.function, src, f"{j.name}/{a.label}"
                )
            cur = idx
        T = T @ inverse_transform(j.X_BM)
        if not moving:
            # a joint without motion: one revolute joint held at a constant angle by the map
            C, t = T[:3, :3], T[:3, 3]
            axis, angle = axis_angle(C)
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
        coupling_scales=as_array([c[4] for c in coupling_order]),
        sources=tuple(sources),
        coupled=tuple(cnames.index(c[1]) for c in coupling_order),
        coupling_sources=tuple(_source_index(cnames, c[2]) for c in coupling_order),
        independent=tuple(independent),
        nfull=len(cnames),
        nq=len(independent),
        nj=len(jbodies),
        held=tuple(held),
        held_values=tuple(float(coords[i].default_value) for i in held),
    )
    gravity = child_vector(P.model_el, "gravity", 3, P.where("Model"), default=(0, -9.80665, 0))
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
    # placeholders above; the bodies' real inertias (checked in OsimDocument.bodies) go in here.
    model = eqx.tree_at(lambda m: m.inertia, model, as_array(np.stack(inertias), None))
    loop_dependent: dict[str, str] = {}
    if frames:
        model, loop_dependent = closed_loops(
            P, model, frames, coupling_order, cnames, coords, body_frames
        )
    euler = {
        c.name
        for j in joints
        if j.type in EULER_SPEED_JOINTS
        for c in j.coordinates[:3]
    }
    coupled = {c[1]: (c[0], c[2]) for c in coupling_order}
    model, prescribed = _prescribed(
        P, model, coords, refuse, held=[cnames[i] for i in held], dependent=dep_names,
        loop_dependent=loop_dependent, euler=euler,
    )  # fmt: skip
    imp = OsimImport(
        model=model,
        coordinates=tuple(coords),
        coupled=coupled,
        locked=tuple(c.name for c in coords if c.locked),
        prescribed=prescribed,
        tree_order=tuple(c.name for j in order for c in j.coordinates),
        left_out=tuple(left_out),
        euler_rotations=tuple(c.name for c in coords if c.name in euler),
        constrained=loop_dependent,
        body_frames={k: v for k, v in body_frames.items()},
        jaxmb_joints=tuple(labels),
        muscles=P.muscles(),
        version=P.version,
        path=P.path,
        wrap_objects=P.wrap_objects(),
    )
    forces = osim_forces(P, imp, euler, refuse, lambda spec: path_set(imp, spec))
    if forces:
        model = eqx.tree_at(lambda m: m.forces, model, tuple(model.forces) + tuple(forces))
    notes = _controllers_and_probes(P, refuse)
    left_out += notes
    if left_out:
        warnings.warn(
            f"{P.path}: {len(left_out)} elements not imported: " + "; ".join(left_out),
            stacklevel=2,
        )
    return dataclasses.replace(imp, model=model, left_out=tuple(left_out))


def _prescribed(P, model, coords, refuse, *, held, dependent, loop_dependent, euler):
    """The model with its prescribed coordinates (OpenSim's ``prescribed_function``) as
    :class:`~jaxmb.dynamics.PrescribedCoordinates`, and their names. A prescribed coordinate
    that is held by a lock (OpenSim cannot assemble that), coupled, made dependent by a loop, or
    a ball/free/ellipsoid rotation (whose OpenSim speed is an angular velocity, not the rate
    its function gives) is refused, naming it."""
    names, indices, functions = [], [], []
    for c in coords:
        if c.prescribed is None:
            continue
        what = f"Coordinate {c.name!r} of joint {c.joint!r} (prescribed)"
        why = (
            "it is also locked" if c.name in held
            else "it is coupled by a CoordinateCouplerConstraint" if c.name in dependent
            else f"closed loops make it dependent ({loop_dependent[c.name]})"
            if c.name in loop_dependent
            else "it is a ball, free or ellipsoid joint's rotation (OpenSim's speed there is an"
            " angular velocity)" if c.name in euler
            else None
        )  # fmt: skip
        if why is not None:
            refuse(P.where(f"{what}: not supported: {why}"))
            continue
        names.append(c.name)
        indices.append(model.coordinate_names.index(c.name))
        functions.append(c.prescribed)
    if not names:
        return model, ()
    order = np.argsort(indices)
    pc = PrescribedCoordinates([indices[k] for k in order], [functions[k] for k in order])
    model = eqx.tree_at(lambda m: m.prescribed, model, pc, is_leaf=lambda x: x is None)
    return model, tuple(names)


def _names(source: str | tuple[str, ...]) -> tuple[str, ...]:
    """The independent coordinates of a coupling: one name, or a tuple of them."""
    return (source,) if isinstance(source, str) else tuple(source)


def _source_index(cnames: list[str], source: str | tuple[str, ...]) -> int | tuple[int, ...]:
    """Index in Q of a coupling's independent coordinate (a tuple of indices for several)."""
    return cnames.index(source) if isinstance(source, str) else tuple(map(cnames.index, source))


def _controllers_and_probes(P: OsimDocument, refuse) -> list[str]:
    """Controllers and probes are not mechanical elements: a probe (an output) and a controller
    of muscles only (whose forces jaxmb computes from excitations the user gives) are noted in the
    import's warning; a controller of any other actuator changes the free motion and is refused."""
    notes = []
    muscles = {m.get("name") for m in P.model_el.findall("ForceSet/objects/*") if "Muscle" in m.tag}
    for el in P.model_el.findall("ControllerSet/objects/*"):
        if not child_flag(el, "enabled", True) or child_flag(el, "isDisabled", False):
            continue
        acts = (child_text(el, "actuator_list") or "").split()
        acts += [
            t.split("/")[-1] for a in el.findall("socket_actuators") for t in (a.text or "").split()
        ]
        what = f"{el.tag} {el.get('name')!r}"
        if acts and set(acts) <= muscles:
            notes.append(f"{what}: a controller of muscles (jaxmb takes excitations as inputs)")
        else:
            refuse(
                P.where(
                    f"{what}: a controller of actuators {acts or 'all'} is not supported (set"
                    " the actuators' controls, or pass tau to forward_dynamics and simulate)"
                )
            )
    for el in P.model_el.findall("ProbeSet/objects/*"):
        if child_flag(el, "enabled", True) and not child_flag(el, "isDisabled", False):
            notes.append(f"{el.tag} {el.get('name')!r}: a probe (an output, no force)")
    return notes


def _markers(P: OsimDocument, body_frames) -> dict:
    ms = P.model_el.find("MarkerSet")
    out = {}
    for m in list(ms.find("objects")) if ms is not None and ms.find("objects") is not None else []:
        name = m.get("name")
        w = P.where(f"Marker {name!r}")
        b = child_text(m, "body")
        if b is None:
            sp = child_text(m, "socket_parent_frame")
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
        loc = child_vector(m, "location", 3, w)
        out[name] = (idx, T[:3, :3] @ loc + T[:3, 3])
    return out


def load_osim(
    path: str | Path,
    *,
    zero_inertia: tuple[str, ...] = (),
    muscles: str = "supported",
    unsupported: str = "raise",
    locked: str = "hold",
    inertia: str = "opensim",
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
            muscles. A muscle whose ``appliesForce`` is false is not a muscle of the model.
        unsupported, locked, inertia: as for :func:`read_osim`.
    """
    if muscles not in ("supported", "all", "none"):
        raise ValueError(f"muscles must be 'supported', 'all' or 'none', got {muscles!r}")
    imp = read_osim(
        path, zero_inertia=zero_inertia, unsupported=unsupported, locked=locked, inertia=inertia
    )
    imp = dataclasses.replace(imp, muscles=tuple(m for m in imp.muscles if m.applies_force))
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
    return list(OsimDocument(path).muscles())
