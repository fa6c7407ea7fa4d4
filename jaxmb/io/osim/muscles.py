"""OpenSim muscle specs to jaxmb musculotendon units: the one "path spec → jaxmb path" builder.

Every muscle jaxmb reads from OpenSim's data, from an ``.osim`` file (:func:`osim_muscles`,
:func:`model_with_muscles`) or from an extract of one (``jaxmb.models.shoulder_muscles``), is built
by the functions here:

- :func:`path_point`: a PathPoint / ConditionalPathPoint / MovingPathPoint spec, moved into its
  jaxmb body frame (``x_jaxmb = C x + t`` of the body it sits on, merged or renamed bodies
  included); a MovingPathPoint becomes an :class:`~jaxmb.muscles.OsimMovingPathPoint` (any supported
  function of any OpenSim coordinate, coupled ones through the joint map);
- :func:`wrap_object`: a WrapObjectSpec as jaxmb's WrapCylinder / WrapEllipsoid / WrapSphere /
  WrapTorus, its frame moved the same way;
- :func:`path_wrap`: OpenSim's PathWrap range (1-based, ``-1`` = first/last) as ``PathWrap(wrap,
  start, end)``;
- :func:`muscle_parameters`: the Hill parameters of a Thelen2003, Millard2012, DeGroote–Fregly or
  Schutte1993 muscle.

``body_frames`` is ``{OpenSim body: (jaxmb body index or name, T (4, 4))}`` with
``x_jaxmb = T x_osim`` (m), as in :attr:`OsimImport.body_frames`.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import numpy as np

from ... import muscles as muscle_package
from ...math import Constant
from ...model import Model, ModelError
from ...muscles import (
    ConditionalPathPoint,
    Muscle,
    MuscleParameters,
    MuscleSet,
    OsimConditionalPathPoint,
    OsimMovingPathPoint,
    PathPoint,
    PathWrap,
    with_muscles,
)
from .xml import (
    SUPPORTED_MUSCLES,
    SUPPORTED_WRAP_METHODS,
    SUPPORTED_WRAPS,
    MuscleSpec,
    OsimImport,
    OsimImportError,
    PathPointSpec,
    PathWrapSpec,
    WrapObjectSpec,
)

__all__ = [
    "path_point",
    "wrap_object",
    "path_wrap",
    "muscle_parameters",
    "build_muscle",
    "osim_muscles",
    "model_with_muscles",
    "path_set",
]


def _body_frame(body_frames: dict, body: str, where: str):
    if body not in body_frames:
        raise OsimImportError(f"{where}: unknown body {body!r}")
    b, T = body_frames[body]
    return b, np.asarray(T, dtype=float)


def wrap_object(spec: WrapObjectSpec, body_frames: dict, where: str):
    """The jaxmb wrap object of an OpenSim wrap object, its frame moved to the jaxmb body.

    Args:
        spec: the wrap object (OpenSim body frame, m).
        body_frames: ``{OpenSim body: (jaxmb body, T (4, 4))}``, ``x_jaxmb = T x_osim``.
        where: the owner, for error messages.

    Raises:
        OsimImportError: an unsupported wrap type, an unknown body, a missing dimension.
    """
    ww = f"{where}: {spec.kind} {spec.name!r} on body {spec.body!r}"
    if spec.kind not in SUPPORTED_WRAPS:
        raise OsimImportError(
            f"{ww}: wrap type {spec.kind!r} is not supported (supported: {SUPPORTED_WRAPS})"
        )
    # jaxmb's wrap shape of the same name as OpenSim's, looked up in the muscle package's face
    cls = getattr(muscle_package, spec.kind, None)
    if cls is None:
        raise OsimImportError(f"{ww}: this jaxmb has no {spec.kind} (jaxmb.muscles.{spec.kind})")
    b, T = _body_frame(body_frames, spec.body, ww)
    C, t = T[:3, :3], T[:3, 3]
    trans = C @ np.asarray(spec.translation, dtype=float) + t
    rot = C @ np.asarray(spec.rotation, dtype=float)
    prm = spec.parameters

    def need(key):
        if key not in prm:
            raise OsimImportError(f"{ww}: missing <{key}>")
        return prm[key]

    q, name = spec.quadrant, spec.name
    if spec.kind == "WrapCylinder":
        # OpenSim's WrapCylinder length property defaults to 1 m
        return cls(b, trans, rot, need("radius"), prm.get("length", 1.0), q, name)
    if spec.kind == "WrapEllipsoid":
        return cls(b, trans, rot, need("dimensions"), q, name)
    if spec.kind == "WrapSphere":
        return cls(b, trans, rot, need("radius"), q, name)
    return cls(b, trans, rot, need("inner_radius"), need("outer_radius"), q, name)


def path_wrap(wrap, pw: PathWrapSpec, npoints: int, where: str) -> PathWrap:
    """jaxmb ``PathWrap(wrap, start, end)`` from OpenSim's 1-based range (-1: first/last) over a
    path of ``npoints`` points."""
    r0, r1 = pw.range
    start = 0 if r0 < 1 else r0 - 1
    end = npoints - 1 if r1 < 1 else r1 - 1
    if not (0 <= start < end <= npoints - 1):
        raise OsimImportError(
            f"{where}: PathWrap {pw.wrap!r} range {list(pw.range)} does not span two of the"
            f" {npoints} path points"
        )
    return PathWrap(wrap, start=start, end=-1 if end == npoints - 1 else end)


def muscle_parameters(spec: MuscleSpec, where: str) -> MuscleParameters:
    """Hill parameters (N, m, m, rad, optimal lengths/s) of a muscle spec.

    Raises :class:`OsimImportError` for a missing or non-positive force or length, a pennation
    angle outside [0, π/2) or a non-positive maximum contraction velocity (a Schutte1993 muscle's 0,
    as MoBL-ARMS writes, falls back to jaxmb's default 10 l_opt/s).
    """
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


def path_point(
    p: PathPointSpec,
    body_frames: dict,
    where: str,
    *,
    coordinates: tuple[str, ...] = (),
    independent: tuple[str, ...] = (),
    joint_map=None,
):
    """A jaxmb path point for an OpenSim one, moved to its jaxmb body frame.

    Args:
        p: the point spec (OpenSim body frame, m).
        body_frames: ``{OpenSim body: (jaxmb body, T (4, 4))}``.
        where: the owner, for error messages.
        coordinates: every OpenSim coordinate name in OpenSim's order (the joint map's full
            coordinate vector); needed by conditional and moving points.
        independent: the model's coordinate names (q); a ConditionalPathPoint must read one.
        joint_map: the imported model's ``OsimJointMap``, needed by a MovingPathPoint.
    """
    wp = f"{where} {p.kind} {p.name!r}"
    b, T = _body_frame(body_frames, p.body, wp)
    C, t = T[:3, :3], T[:3, 3]
    if p.kind == "PathPoint":
        return PathPoint(b, C @ np.asarray(p.location) + t, p.name)
    if p.kind == "ConditionalPathPoint":
        if p.coordinate not in coordinates:
            raise OsimImportError(f"{wp}: unknown coordinate {p.coordinate!r}")
        x = C @ np.asarray(p.location) + t
        if p.coordinate in independent:
            return ConditionalPathPoint(b, x, p.coordinate, p.range, p.name)
        if joint_map is None:
            raise OsimImportError(
                f"{wp}: conditional on {p.coordinate!r}, not a model coordinate (coupled or"
                " locked): it needs the model's joint map"
            )
        return OsimConditionalPathPoint(
            b, x, coordinates.index(p.coordinate), p.range, joint_map, p.name
        )
    if joint_map is None:
        raise OsimImportError(f"{wp}: a moving point needs the model's joint map")
    funcs, srcs = [], []
    for a in range(3):
        f, c = p.functions[a], p.coordinates[a]
        if f is None:
            funcs.append(Constant(p.location[a]))
            srcs.append(-1)
            continue
        if c is not None and c not in coordinates:
            raise OsimImportError(f"{wp}: unknown coordinate {c!r}")
        funcs.append(f)
        srcs.append(-1 if c is None else coordinates.index(c))
    return OsimMovingPathPoint(b, funcs, srcs, joint_map, C, t, p.name)


def path_set(imp: OsimImport, spec: MuscleSpec) -> MuscleSet:
    """The one-path :class:`MuscleSet` of a path force element (PathActuator, PathSpring): its
    points and wraps built as a muscle's, checked by ``with_muscles``; the Hill parameters are
    placeholders (a path force reads only the length and moment arms)."""
    w = f"{imp.path}: {spec.kind} {spec.name!r}"
    placeholder = dataclasses.replace(
        spec,
        kind=SUPPORTED_MUSCLES[0],
        parameters=dict(max_isometric_force=1.0, optimal_fiber_length=1.0,
                        tendon_slack_length=1.0),
    )
    try:
        return _attach(imp.model, [build_muscle(imp, placeholder)]).muscles
    except ModelError as e:
        raise OsimImportError(f"{w}: {e}") from None


def build_muscle(imp: OsimImport, spec: MuscleSpec) -> Muscle:
    """One jaxmb :class:`~jaxmb.muscles.Muscle` of an imported model from its spec: path points,
    active wrap objects in PathWrapSet order, Hill parameters; :class:`OsimImportError` naming
    the muscle and the element it cannot build."""
    w = f"{imp.path}: {spec.kind} {spec.name!r}"
    if spec.kind not in SUPPORTED_MUSCLES:
        raise OsimImportError(
            f"{w}: muscle type {spec.kind!r} is not supported (supported: {SUPPORTED_MUSCLES})"
        )
    names = tuple(c.name for c in imp.coordinates)
    pts = [
        path_point(
            p,
            imp.body_frames,
            w,
            coordinates=names,
            independent=imp.model.coordinate_names,
            joint_map=imp.model.joint_map,
        )
        for p in spec.path
    ]
    wraps = []
    for pw in spec.path_wraps:
        ws = imp.wrap_objects.get(pw.wrap)
        if ws is None:
            raise OsimImportError(f"{w}: unknown wrap object {pw.wrap!r}")
        if pw.method not in SUPPORTED_WRAP_METHODS and ws.kind == "WrapEllipsoid":
            raise OsimImportError(
                f"{w}: PathWrap {pw.wrap!r} uses method {pw.method!r}"
                f" (supported: {SUPPORTED_WRAP_METHODS})"
            )
        if not ws.active:
            continue  # OpenSim skips inactive wrap objects
        wraps.append(path_wrap(wrap_object(ws, imp.body_frames, w), pw, len(pts), w))
    return Muscle(spec.name, tuple(pts), tuple(wraps), muscle_parameters(spec, w))


def osim_muscles(
    imp: OsimImport, *, skip_unsupported: bool = False, skipped: dict | None = None
) -> list[Muscle]:
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
            out.append(build_muscle(imp, spec))
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
    stand_in = [
        Muscle(
            m.name,
            tuple(
                PathPoint(p.body, np.zeros(3), p.name)  # any finite point: only checked
                if isinstance(p, (OsimMovingPathPoint, OsimConditionalPathPoint))
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
                o if isinstance(o, (OsimMovingPathPoint, OsimConditionalPathPoint)) else v
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
    try:  # one validation of all; muscle by muscle only to find and leave out a rejected one
        return _attach(imp.model, muscles)
    except ModelError as e:
        if not skip_unsupported:
            raise OsimImportError(f"{imp.path}: {e}") from None
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
