"""Scalar actuators for static optimization: the model's muscles' SO parameters (bounds and
curves, read from the ``.osim``) and the non-muscle actuators of the model and of
``force_set_files`` (CoordinateActuator, PointActuator, TorqueActuator), as jaxmb data."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from ...analyses import GROUND, ExternalLoad, Frame, MuscleCapacity, millard_curves
from ...math.functions import as_array
from ..osim import OsimImport
from .xml import SetupError, SetupXml

__all__ = ["ActuatorSpec", "read_force_set", "model_actuators", "muscle_capacity", "actuator_loads"]

_MUSCLES = ("Thelen2003Muscle", "Millard2012EquilibriumMuscle", "Millard2012AccelerationMuscle")
_DEFAULT_MIN = {
    "Thelen2003Muscle": 0.01,
    "Millard2012EquilibriumMuscle": 0.01,
    "Millard2012AccelerationMuscle": 0.0,
}


@dataclasses.dataclass(frozen=True)
class ActuatorSpec:
    """A non-muscle scalar actuator: ``kind`` CoordinateActuator, PointActuator or TorqueActuator;
    bounds on its control; ``optimal_force``; and its geometry (OpenSim's names)."""

    name: str
    kind: str
    optimal_force: float
    min_control: float
    max_control: float
    coordinate: str | None = None
    body: str | None = None
    point: tuple[float, float, float] = (0.0, 0.0, 0.0)
    point_is_global: bool = False
    direction: tuple[float, float, float] = (1.0, 0.0, 0.0)
    force_is_global: bool = False
    body_b: str | None = None
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    torque_is_global: bool = True
    where: str = ""


def _actuator(x: SetupXml, el) -> ActuatorSpec | None:
    if x.flag(el, "isDisabled", False) or not x.flag(el, "appliesForce", True):
        return None
    common = dict(
        name=el.get("name") or el.tag,
        kind=el.tag,
        optimal_force=x.number(el, "optimal_force", 1.0),
        min_control=x.number(el, "min_control", -math.inf),
        max_control=x.number(el, "max_control", math.inf),
        where=x.where(el),
    )
    if el.tag == "CoordinateActuator":
        c = x.text(el, "coordinate")
        if c is None:
            raise x.error(el, "<coordinate> is empty")
        return ActuatorSpec(coordinate=c, **common)
    if el.tag == "PointActuator":
        b = x.text(el, "body")
        if b is None:
            raise x.error(el, "<body> is empty")
        return ActuatorSpec(
            body=b,
            point=x.numbers(el, "point", 3, (0.0, 0.0, 0.0)),
            point_is_global=x.flag(el, "point_is_global", False),
            direction=x.numbers(el, "direction", 3, (1.0, 0.0, 0.0)),
            force_is_global=x.flag(el, "force_is_global", False),
            **common,
        )
    if el.tag == "TorqueActuator":
        a = x.text(el, "bodyA") or x.text(el, "socket_bodyA")
        if a is None:
            raise x.error(el, "<bodyA> is empty")
        b = x.text(el, "bodyB") or x.text(el, "socket_bodyB") or "ground"
        return ActuatorSpec(
            body=a.split("/")[-1],
            body_b=b.split("/")[-1],
            axis=x.numbers(el, "axis", 3, (0.0, 0.0, 1.0)),
            torque_is_global=x.flag(el, "torque_is_global", True),
            **common,
        )
    raise x.error(
        el,
        "unsupported actuator type for static optimization (CoordinateActuator, "
        "PointActuator, TorqueActuator)",
    )


def read_force_set(path: str | Path) -> tuple[ActuatorSpec, ...]:
    """The enabled actuators of a ``ForceSet`` file (``force_set_files``)."""
    x = SetupXml(path)
    fs = x.tool(("ForceSet",))
    objs = fs.find("objects")
    out = []
    for el in list(objs) if objs is not None else []:
        a = _actuator(x, el)
        if a is not None:
            out.append(a)
    return tuple(out)


def _model_forces(path: Path):
    x = SetupXml(path)
    model = x.tool(("Model",))
    fs = model.find("ForceSet/objects")
    return x, list(fs) if fs is not None else []


def model_actuators(path: str | Path) -> tuple[ActuatorSpec, ...]:
    """The non-muscle actuators of an ``.osim`` model's ForceSet (other force types ignored)."""
    x, els = _model_forces(Path(path))
    out = []
    for el in els:
        if el.tag in ("CoordinateActuator", "PointActuator", "TorqueActuator"):
            a = _actuator(x, el)
            if a is not None:
                out.append(a)
    return tuple(out)


def muscle_capacity(imp: OsimImport, names) -> tuple[MuscleCapacity, np.ndarray, np.ndarray]:
    """Per muscle (in ``names`` order): the :class:`MuscleCapacity` parameters and the control
    bounds (``min_control``/``max_control``; Thelen2003 and Millard2012 default the lower one to
    ``minimum_activation``, 0.01)."""
    x, els = _model_forces(Path(imp.path))
    by_name = {el.get("name"): el for el in els}
    rows = []
    fl_params, fv_params, kinds, lo, hi = [], [], [], [], []
    for n in names:
        el = by_name.get(n)
        if el is None:
            raise SetupError(f"{imp.path}: muscle {n!r} not found in the ForceSet")
        if el.tag not in _MUSCLES:
            raise x.error(el, f"static optimization with physiology supports {_MUSCLES}")
        num = lambda tag, d: x.number(el, tag, d)  # noqa: E731
        minact = num("minimum_activation", _DEFAULT_MIN[el.tag])
        lo.append(num("min_control", minact))
        hi.append(num("max_control", 1.0))
        rows.append(
            [
                num("max_isometric_force", None),
                num("optimal_fiber_length", None),
                num("tendon_slack_length", None),
                num("pennation_angle_at_optimal", 0.0),
                num("max_contraction_velocity", 10.0),
                num("maximum_pennation_angle", math.acos(0.1)),
                num("KshapeActive", 0.45),
                num("Af", 0.25),
                num("Flen", 1.4),
                num("fv_linear_extrap_threshold", 0.95),
            ]
        )
        if any(v is None for v in rows[-1][:3]):
            raise x.error(
                el, "missing max_isometric_force, optimal_fiber_length or tendon_slack_length"
            )
        kinds.append(0 if el.tag == "Thelen2003Muscle" else 1)

        def curve(tag):
            c = el.find(tag)
            if c is None:
                return {}
            return {ch.tag: x.number(c, ch.tag) for ch in c if ch.text and ch.text.strip()}

        fl_params.append(curve("ActiveForceLengthCurve"))
        fv_params.append(curve("ForceVelocityCurve"))
    R = np.asarray(rows, dtype=float).reshape(len(names), 10)
    cols = [as_array(R[:, i]) for i in range(10)]
    mill = millard_curves(fl_params, fv_params) if any(kinds) else None
    cap = MuscleCapacity(*cols, millard=mill, model=tuple(kinds))
    return cap, np.asarray(lo), np.asarray(hi)


def _frame(imp: OsimImport, body: str, where: str) -> Frame:
    if body == "ground":
        return GROUND
    if body not in imp.body_frames:
        raise SetupError(f"{where}: body {body!r} is not a body of {imp.path}")
    b, T = imp.body_frames[body]
    return Frame(b, T)


def actuator_loads(spec: ActuatorSpec, imp: OsimImport) -> tuple[ExternalLoad, ...]:
    """A point or torque actuator at unit control as loads (force/torque = optimal_force ×
    direction), one frame of data; the torque actuator's reaction on bodyB included."""
    one = lambda v: as_array(np.asarray(v, dtype=float)[None, :] * spec.optimal_force)  # noqa
    if spec.kind == "PointActuator":
        body = _frame(imp, spec.body, spec.where)
        return (
            ExternalLoad(
                body=body.body,
                body_frame=body,
                force=one(spec.direction),
                force_frame=GROUND if spec.force_is_global else body,
                point=as_array(np.asarray(spec.point, dtype=float)[None, :]),
                point_frame=GROUND if spec.point_is_global else body,
                torque=None,
                name=spec.name,
            ),
        )
    if spec.kind == "TorqueActuator":
        a = _frame(imp, spec.body, spec.where)
        b = _frame(imp, spec.body_b, spec.where)
        ax = np.asarray(spec.axis, dtype=float)
        ax = ax / max(np.linalg.norm(ax), 1e-300)
        frame = GROUND if spec.torque_is_global else a
        out = [
            ExternalLoad(
                body=a.body,
                body_frame=a,
                force=None,
                force_frame=frame,
                point=None,
                point_frame=GROUND,
                torque=one(ax),
                name=spec.name,
            )
        ]
        if b.body >= 0:
            out.append(
                ExternalLoad(
                    body=b.body,
                    body_frame=b,
                    force=None,
                    force_frame=frame,
                    point=None,
                    point_frame=GROUND,
                    torque=one(-ax),
                    name=spec.name,
                )
            )
        return tuple(out)
    raise SetupError(f"{spec.where}: not a point or torque actuator")
