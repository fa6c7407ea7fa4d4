"""The 14 shoulder muscles of MoBL-ARMS on a jaxmb shoulder model (seed 001 §4-4 C, Table 5).

DELT1–3, SUPSP, INFSP, SUBSC, TMIN, TMAJ, PECM1–3, LAT1–3 with the paths and parameters of the
MoBL-ARMS model (Saul et al. 2015, ``MoBL_ARMS_module6_7_CMC.osim``; geometry of Holzbaur, Murray
& Delp 2005), read from ``jaxmb/data/shoulder/mobl_arms_shoulder_extract.json`` (the .osim's
muscles in machine-readable form; source in that folder's README):

- fixed path points on the clavicle, scapula, humerus and thorax (the ground of
  :func:`jaxmb.models.shoulder.shoulder`), in each OpenSim body's frame;
- MoBL-ARMS's moving path points (PECM1–3, LAT1–3 and DELT2): each of x, y, z is an OpenSim
  ``PiecewiseLinearFunction`` or ``SimmSpline`` of ``shoulder_elv`` (:class:`FunctionPathPoint`,
  evaluated with :mod:`jaxmb.math.functions`, differentiated by forward-mode autodiff);
- the wrap objects (cylinders, ellipsoids, spheres, tori) with each PathWrap's point range
  (OpenSim's 1-based ``range``, −1 = whole path, converted to 0-based inclusive ``start``/``end``);
- Hill parameters from the Schutte (1993) muscles of the .osim: F_max, l_opt, l_s, α_opt and
  v_max = 1/``time_scale`` optimal lengths per second (Schutte normalises fibre velocity by
  l_opt/time_scale; time_scale is 0.1 s for all 14, so v_max = 10 l_opt/s).

:func:`add_shoulder_muscles` attaches them to any model whose bodies carry the OpenSim body names
(``clavicle``, ``scapula``, ``humerus``; ``thorax`` or the ground) and whose coordinates include
``shoulder_elv``; ``frames`` maps OpenSim bodies onto other body frames (e.g. the
``body_frames`` of :func:`jaxmb.io.read_osim`).

:func:`share_shoulder_forces` distributes required shoulder torques among the 14 muscles with
:func:`jaxmb.sharing.share_forces` (rigid-tendon Hill model of :mod:`jaxmb.hill`) and
:func:`jaxmb.plots.plot_muscle_forces` draws the forces over time (the seed's Fig. 21).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..io.osim import (
    MuscleSpec,
    PathPointSpec,
    PathWrapSpec,
    WrapObjectSpec,
    body_fixed_xyz,
    muscle_parameters,
    path_point,
    path_wrap,
    wrap_object,
)
from ..math import LinearCombination, PiecewiseLinearFunction, SimmSpline
from ..model import Model, ModelError
from ..muscles import (
    FunctionPathPoint,
    Muscle,
    MuscleParameters,
    MuscleSet,
    share_forces,
    with_muscles,
)

__all__ = [
    "MUSCLES",
    "GROUP_LEADERS",
    "SHOULDER_COORDINATES",
    "shoulder_muscles",
    "add_shoulder_muscles",
    "shoulder_muscle_parameters",
    "share_shoulder_forces",
    "tracking_muscle_forces",
]

DATA = Path(__file__).resolve().parent.parent / "data" / "shoulder"
DATA = DATA / "mobl_arms_shoulder_extract.json"

MUSCLES = (
    "DELT1", "DELT2", "DELT3", "SUPSP", "INFSP", "SUBSC", "TMIN", "TMAJ",
    "PECM1", "PECM2", "PECM3", "LAT1", "LAT2", "LAT3",
)  # fmt: skip
#: the six group leaders of the seed's Table 5, in its order
GROUP_LEADERS = ("LAT1", "PECM3", "DELT1", "PECM1", "SUBSC", "DELT2")
SHOULDER_COORDINATES = ("elv_angle", "shoulder_elv", "shoulder_rot")
_FUNCTIONS = {
    "PiecewiseLinearFunction": PiecewiseLinearFunction,
    "SimmSpline": SimmSpline,
    "NaturalCubicSpline": SimmSpline,
}
_WRAP_SCALARS = ("radius", "length", "inner_radius", "outer_radius")


# ----------------------------------------------------------------------------- data
@lru_cache(maxsize=1)
def _extract() -> dict:
    if not DATA.is_file():
        raise ModelError(f"shoulder muscles: data file {DATA} is missing")
    return json.loads(DATA.read_text())


def _spec(name: str) -> dict:
    ex = _extract()
    if name not in ex["muscles"]:
        raise ModelError(f"shoulder muscles: {name!r} is not in {DATA.name}; use {list(MUSCLES)}")
    return ex["muscles"][name]


def shoulder_muscle_parameters(name: str) -> MuscleParameters:
    """Hill parameters of one muscle from its Schutte (1993) parameters in the .osim.

    Schutte normalises fibre velocity by l_opt/time_scale, so v_max = 1/time_scale optimal lengths
    per second (the .osim's ``max_contraction_velocity`` is 0 for these muscles).
    """
    s = _spec(name)
    ts = float(s["time_scale"])
    if not ts > 0:
        raise ModelError(f"muscle {name!r}: time_scale must be positive, got {ts}")
    keys = ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length")
    keys += ("pennation_angle_at_optimal",)
    params = {k: float(s[k]) for k in keys} | {"max_contraction_velocity": 1.0 / ts}
    return muscle_parameters(MuscleSpec(name, s["type"], params, (), ()), f"muscle {name!r}")


def _coordinate_range(name: str, where: str) -> tuple[float, float]:
    for j in _extract()["joints"].values():
        if name in j.get("coordinates", {}):
            lo, hi = j["coordinates"][name]["range"]
            return float(lo), float(hi)
    raise ModelError(f"{where}: coordinate {name!r} is not in {DATA.name}")


def _default_frames(model: Model) -> dict:
    out = {}
    for b in ("thorax", "clavicle", "scapula", "humerus"):
        if b in model.body_names:
            out[b] = (b, np.eye(4))
        elif b == "thorax":
            out[b] = ("ground", np.eye(4))
    return out


def _frame(frames: dict, body: str, where: str):
    if body not in frames:
        raise ModelError(
            f"{where}: OpenSim body {body!r} has no body in the model; give it in frames= "
            f"(known: {sorted(frames)})"
        )
    b, T = frames[body]
    T = np.asarray(T, dtype=float)
    if T.shape != (4, 4):
        raise ModelError(f"{where}: frames[{body!r}] transform must be 4x4, got {T.shape}")
    return b, T


def _wrap_object(name: str, frames: dict, where: str):
    """The extract's wrap object ``name`` as a spec, built by the OpenSim reader's builder."""
    w = _extract()["wrap_objects"][name]
    ww = f"{where}, wrap object {name!r}"
    b, T = _frame(frames, w["body"], ww)
    # the extract stores every scalar as a one-element list, as the .osim's text does
    params = {k: float(w[k][0]) for k in _WRAP_SCALARS if k in w}
    if "dimensions" in w:
        params["dimensions"] = tuple(float(v) for v in w["dimensions"])
    spec = WrapObjectSpec(
        name=name,
        kind=w["type"],
        body=w["body"],
        translation=tuple(float(v) for v in w["translation"]),
        rotation=body_fixed_xyz(np.asarray(w["xyz_body_rotation"], dtype=float)),
        quadrant=w["quadrant"].strip(),
        active=True,
        parameters=params,
    )
    return wrap_object(spec, {w["body"]: (b, T)}, where)


def _point(p: dict, frames: dict, where: str):
    wp = f"{where}, point {p['name']!r}"
    b, T = _frame(frames, p["body"], wp)
    if p["type"] == "PathPoint":
        spec = PathPointSpec(p["name"], "PathPoint", p["body"], tuple(p["location"]))
        return path_point(spec, {p["body"]: (b, T)}, where)
    if p["type"] != "MovingPathPoint":
        raise ModelError(f"{wp}: unsupported path point type {p['type']!r}")
    # a function of a coordinate *name*, resolved by with_muscles on any model that has it (the
    # reader's OsimMovingPathPoint reads an imported model's full OpenSim coordinates instead)
    fs, cs = [], []
    for a in "xyz":
        f = p[f"{a}_location"]
        if f["type"] not in _FUNCTIONS:
            raise ModelError(f"{wp}: {a}_location is a {f['type']}, not one of {list(_FUNCTIONS)}")
        fs.append(_FUNCTIONS[f["type"]](f["x"], f["y"]))
        cs.append(p[f"{a}_coordinate"])
    if len(set(cs)) != 1:
        raise ModelError(f"{wp}: x, y, z read different coordinates {cs}")
    if not np.allclose(T, np.eye(4)):
        fs = [
            LinearCombination(tuple(fs), jnp.asarray(T[a, :3]), jnp.asarray(T[a, 3]))
            for a in range(3)
        ]
    return FunctionPathPoint(b, cs, fs, [_coordinate_range(c, wp) for c in cs], p["name"])


def shoulder_muscles(
    names=MUSCLES, *, frames: dict | None = None, wrapping: bool = True
) -> list[Muscle]:
    """The muscles ``names`` as :class:`~jaxmb.muscles.Muscle` objects (bodies by name).

    Args:
        names: muscle names as in the .osim (default: all 14).
        frames: ``{OpenSim body: (body name or index, T (4, 4))}`` with ``x_model = T x_osim``;
            required (see :func:`add_shoulder_muscles` for the default).
        wrapping: include the wrap objects.
    """
    if frames is None:
        raise ModelError("shoulder_muscles: give frames= (see add_shoulder_muscles)")
    out = []
    for name in names:
        s = _spec(name)
        w = f"muscle {name!r}"
        pts = tuple(_point(p, frames, w) for p in s["path_points"])
        wraps = []
        if wrapping:
            for pw in s["path_wraps"]:
                spec = PathWrapSpec(pw["wrap_object"], "hybrid", tuple(int(v) for v in pw["range"]))
                wo = _wrap_object(pw["wrap_object"], frames, w)
                wraps.append(path_wrap(wo, spec, len(pts), w))
        out.append(Muscle(name, pts, tuple(wraps), shoulder_muscle_parameters(name)))
    return out


def add_shoulder_muscles(
    model: Model,
    *,
    names=MUSCLES,
    frames: dict | None = None,
    wrapping: bool = True,
) -> Model:
    """``model`` with the MoBL-ARMS shoulder muscles attached (``model.muscle_names == names``).

    Args:
        model: a shoulder model whose bodies are named ``clavicle``, ``scapula``, ``humerus``
            (and ``thorax``, else points on the thorax go to the ground) with OpenSim's body
            frames, and a coordinate ``shoulder_elv`` (e.g. :func:`jaxmb.models.shoulder.shoulder`).
        names: which muscles (default the 14 of the seed).
        frames: ``{OpenSim body: (model body name or index, T (4, 4))}`` with
            ``x_model = T x_osim`` (m), for models whose frames differ from OpenSim's, e.g.
            ``read_osim(...).body_frames``.
        wrapping: include the wrap objects.

    Raises:
        ModelError: a body or coordinate the model lacks, bad data (named by muscle and element).
    """
    frames = _default_frames(model) if frames is None else dict(frames)
    mus = shoulder_muscles(names, frames=frames, wrapping=wrapping)
    out = with_muscles(model, mus)
    # with_muscles rebuilds moving points from their spline knots; put the function points back
    # with the body and coordinate indices it resolved
    fixed = []
    for m_in, m_out in zip(mus, out.muscles.muscles, strict=True):
        pts = []
        for p_in, p_out in zip(m_in.points, m_out.points, strict=True):
            if isinstance(p_in, FunctionPathPoint):
                p_out = FunctionPathPoint(
                    p_out.body, p_out.coordinates, p_in.functions, p_in.ranges, p_in.name
                )
            pts.append(p_out)
        fixed.append(eqx.tree_at(lambda m: m.points, m_out, tuple(pts)))
    return eqx.tree_at(lambda m: m.muscles, out, MuscleSet(fixed))


# ----------------------------------------------------------------------------- force sharing
def share_shoulder_forces(
    model: Model,
    q: Float[Array, "nt nq"],
    qd: Float[Array, "nt nq"],
    tau: Float[Array, "nt nq"],
    *,
    tol: float = 1e-6,
    **kwargs,
):
    """Share required generalized forces among the model's muscles (minimum Σa², rigid tendon).

    A thin wrapper over :func:`jaxmb.sharing.share_forces` for a model built by
    :func:`add_shoulder_muscles`: (nt, nq) poses, velocities and torques (N·m) → a
    :class:`jaxmb.sharing.SharingResult` (activations, forces in N, residual R F − τ in N·m,
    infeasible frames with ‖residual‖_∞ > ``tol``).
    """
    return share_forces(model, q, qd, tau, tol=tol, **kwargs)


def tracking_muscle_forces(model: Model, tracking, *, tol: float = 1e-6, **kwargs):
    """The computed-torque torques of a tracking run shared among the muscles (seed Fig. 21).

    Args:
        model: the tracked model with muscles (e.g. ``shoulder("mobl")``).
        tracking: a :class:`jaxmb.control.TrackingResult` (``q``, ``qd``, ``tau``: (nt, nq)), or
            any object with those attributes (e.g. inverse dynamics of the desired trajectory).
        tol: residual tolerance (N·m) that declares a frame infeasible.

    Returns:
        :class:`jaxmb.sharing.SharingResult`; plot with
        ``plot_muscle_forces(tracking.ts, result.forces, model.muscle_names,
        infeasible=result.infeasible_frames)``.
    """
    return share_shoulder_forces(model, tracking.q, tracking.qd, tracking.tau, tol=tol, **kwargs)
