"""The human shoulder: thorax, clavicle, scapula, humerus with the de Groot & Brand rhythm (§4-4).

Geometry and inertia are those of the MoBL-ARMS model (Saul et al. 2015; joint axes of Holzbaur,
Murray & Delp 2005), read from ``jaxmb/data/shoulder/mobl_arms_shoulder_extract.json``. The
thorax is the ground (OpenSim's ``groundthorax`` tilt ``r_z`` is held at 0); gravity is −9.80665
m/s² along the thorax y axis (superior).

Three generalized coordinates, in rad, with MoBL-ARMS's names and order:
``elv_angle`` (plane of elevation), ``shoulder_elv`` (elevation), ``shoulder_rot`` (axial
rotation).

Each MoBL-ARMS CustomJoint is a sequence of body-fixed rotations (each about its axis in the frame
left by the previous one); in jaxmb every non-constant rotation is one revolute joint, joined
through massless bodies. The last body of each OpenSim joint carries that joint's OpenSim body name
(``clavicle``, ``clavphant``, ``scapula``, ``scapphant``, ``humphant``, ``humphant1``,
``humerus``) so muscle path points attach by name; the intermediate bodies are named after the
OpenSim coordinate of their joint. The 14 joint variables, in body order, are::

    sternoclavicular_r2, sternoclavicular_r3      -> clavicle
    unrotscap_r3, unrotscap_r2                    -> clavphant (undoes the clavicle rotation)
    acromioclavicular_r2, _r3, _r1                -> scapula
    unrothum_r1, _r3, _r2                         -> scapphant (undoes the scapula rotation)
    elv_angle                                     -> humphant
    shoulder_elv, shoulder1_r2 (= -elv_angle)     -> humphant1
    shoulder_rot                                  -> humerus

The phantom bodies (``clavphant``, ``scapphant``, ``humphant``, ``humphant1``) keep their 1e-4 kg
mass at their origin; their placeholder unit inertia diag(1, 1, 1) kg·m² of the .osim is zeroed
(the data README's trap).

Rhythms (the map q ↦ f(q)):

* ``"degroot"`` — the FULL de Groot & Brand (2001) regression: each clavicle/scapula angle is
  ``a + b·Hy + c·Hz + d·rest`` (degrees) with Hy the plane of elevation and Hz the elevation, both
  in degrees. MoBL-ARMS's zero pose is the rest posture (C0, S0), so the joint variable is the
  regressed angle minus the rest angle (``zero`` in :class:`DeGrootBrandCoefficients`). Angle →
  joint: clavicle Y → sternoclavicular_r2, clavicle Z → _r3, scapula Y → acromioclavicular_r2,
  scapula Z → _r3, scapula X → _r1 (the pairing MoBL-ARMS uses for its elevation slopes).
  Hy is taken as ``elv_angle`` and Hz as ``shoulder_elv``.
* ``"mobl"`` — the MoBL-ARMS CoordinateCouplerConstraints exactly as written in the .osim: every
  coupled coordinate is a two-knot SimmSpline (a straight line) of ``shoulder_elv`` (or of
  ``elv_angle`` for ``shoulder1_r2``), including the sternoclavicular elevation slope
  0.322013/3.14159 = 0.1025 (the regression's is 0.123), no plane-of-elevation terms, no
  intercepts.

Both maps are :class:`~jaxmb.coupling.ExplicitMap` with their coefficients as traced leaves, so
they can be identified by gradient descent (:mod:`jaxmb.identify`).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from functools import cache
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..joint_maps import ExplicitMap
from ..model import Body, Model, ModelError, build_model

__all__ = [
    "COORDINATES",
    "JOINT_VARIABLES",
    "RHYTHM_ANGLES",
    "DeGrootBrandCoefficients",
    "MoblCouplings",
    "degroot_brand_coefficients",
    "degroot_brand_rhythm",
    "mobl_couplings",
    "mobl_rhythm",
    "rhythm_angles",
    "shoulder",
]

DATA = Path(__file__).resolve().parent.parent / "data" / "shoulder"
GRAVITY = (0.0, -9.80665, 0.0)
COORDINATES = ("elv_angle", "shoulder_elv", "shoulder_rot")
# OpenSim joint -> (OpenSim child body, its non-constant rotation coordinates in transform order)
_OSIM_JOINTS = (
    ("sternoclavicular", "clavicle"),
    ("unrotscap", "clavphant"),
    ("acromioclavicular", "scapula"),
    ("unrothum", "scapphant"),
    ("shoulder0", "humphant"),
    ("shoulder1", "humphant1"),
    ("shoulder2", "humerus"),
)
JOINT_VARIABLES = (
    "sternoclavicular_r2",
    "sternoclavicular_r3",
    "unrotscap_r3",
    "unrotscap_r2",
    "acromioclavicular_r2",
    "acromioclavicular_r3",
    "acromioclavicular_r1",
    "unrothum_r1",
    "unrothum_r3",
    "unrothum_r2",
    "elv_angle",
    "shoulder_elv",
    "shoulder1_r2",
    "shoulder_rot",
)
# the regressed angles, in the order of DeGrootBrandCoefficients' rows
RHYTHM_ANGLES = ("clavicle_Y", "clavicle_Z", "scapula_Y", "scapula_Z", "scapula_X")
_REST_INDEX = {"C0[0]": ("C0_clavicle_YZX", 0), "C0[1]": ("C0_clavicle_YZX", 1),
               "S0[0]": ("S0_scapula_YZX", 0), "S0[1]": ("S0_scapula_YZX", 1),
               "S0[2]": ("S0_scapula_YZX", 2)}  # fmt: skip
PHANTOMS = ("clavphant", "scapphant", "humphant", "humphant1")


@cache
def _load(name: str) -> dict:
    path = DATA / name
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelError(f"shoulder data file missing: {path}") from None


# ----------------------------------------------------------------------------------------------
# The de Groot & Brand (2001) regression
# ----------------------------------------------------------------------------------------------


class DeGrootBrandCoefficients(eqx.Module):
    """Coefficients of ``angle = a + b·Hy + c·Hz + d·rest − zero`` (all in degrees or deg/deg).

    One row per regressed angle, in the order of :data:`RHYTHM_ANGLES` (clavicle Y, clavicle Z,
    scapula Y, scapula Z, scapula X). Every field is a traced (5,) leaf.

    Attributes:
        a: intercepts (deg).
        b: plane-of-elevation slopes (deg/deg).
        c: elevation slopes (deg/deg).
        d: rest-posture weights (1).
        rest: the rest-posture angles C0, S0 (deg).
        zero: the angle at which the model's joint variable is zero (deg); MoBL-ARMS's bone
            geometry is in the rest posture, so ``zero = rest``.
    """

    a: Float[Array, " 5"]
    b: Float[Array, " 5"]
    c: Float[Array, " 5"]
    d: Float[Array, " 5"]
    rest: Float[Array, " 5"]
    zero: Float[Array, " 5"]


def degroot_brand_coefficients() -> DeGrootBrandCoefficients:
    """The published regression (``jaxmb/data/shoulder/degroot_brand_2001.json``), zero = rest."""
    data = _load("degroot_brand_2001.json")
    rows = [data["regressions"][k] for k in RHYTHM_ANGLES]
    rest = []
    for r in rows:
        key, i = _REST_INDEX[r["rest"]]
        rest.append(data["rest_posture"][key][i])
    col = lambda k: jnp.asarray([float(r[k]) for r in rows])  # noqa: E731
    rest = jnp.asarray(rest)
    return DeGrootBrandCoefficients(col("a"), col("b"), col("c"), col("d"), rest, rest)


def rhythm_angles(
    q: Float[Array, "... nq"], coefficients: DeGrootBrandCoefficients
) -> Float[Array, "... 5"]:
    """The five regressed clavicle/scapula angles (rad, relative to the model's zero pose).

    Args:
        q: (..., 2 or 3) coordinates: q[..., 0] plane of elevation, q[..., 1] elevation (rad).
        coefficients: the regression.

    Returns:
        (..., 5) angles in the order of :data:`RHYTHM_ANGLES`, rad.
    """
    k = coefficients
    hy = jnp.rad2deg(q[..., 0:1])
    hz = jnp.rad2deg(q[..., 1:2])
    return jnp.deg2rad(k.a + k.b * hy + k.c * hz + k.d * k.rest - k.zero)


# joint variable k = sign_k · (ang ‖ q)[source_k]: the clavicle/scapula angles, their negatives on
# the phantom joints that undo them, and q (shoulder1_r2 = −elv_angle). One gather: the stack of
# 14 negated slices it replaces was 14 separate XLA:CPU kernels per evaluation, and the joint map
# is evaluated in every right-hand side (ODE and DAE alike; shoulder Eq. 200 right-hand side,
# benchmark loop, load 5: 19.4 → 11.5 µs, DAE 34.9 → 22.7 µs)
_RHYTHM_SOURCE = np.array([0, 1, 1, 0, 2, 3, 4, 4, 3, 2, 5, 6, 5, 7])  # cy cz sy sz sx | e elv r
_RHYTHM_SIGN = np.array([1, 1, -1, -1, 1, 1, 1, -1, -1, -1, 1, 1, -1, 1], dtype=float)


def _rhythm_joints(ang, q):
    v = jnp.concatenate([ang, q], axis=-1)
    return jnp.take(v, _RHYTHM_SOURCE, axis=-1) * _RHYTHM_SIGN.astype(v.dtype)


def degroot_brand_rhythm(
    q: Float[Array, "... 3"], coefficients: DeGrootBrandCoefficients
) -> Float[Array, "... 14"]:
    """Joint variables f(q) of :func:`shoulder` under the full de Groot & Brand regression.

    Args:
        q: (..., 3) ``(elv_angle, shoulder_elv, shoulder_rot)`` in rad.
        coefficients: the regression (traced).

    Returns:
        (..., 14) joint variables in the order of :data:`JOINT_VARIABLES`, rad.
    """
    return _rhythm_joints(rhythm_angles(q, coefficients), q)


# ----------------------------------------------------------------------------------------------
# The MoBL-ARMS couplings (two-knot SimmSplines = straight lines)
# ----------------------------------------------------------------------------------------------

# dependent joint variable -> its index in JOINT_VARIABLES
_MOBL_DEPENDENT = (
    "sternoclavicular_r2",
    "sternoclavicular_r3",
    "unrotscap_r3",
    "unrotscap_r2",
    "acromioclavicular_r2",
    "acromioclavicular_r3",
    "acromioclavicular_r1",
    "unrothum_r1",
    "unrothum_r3",
    "unrothum_r2",
    "shoulder1_r2",
)


class MoblCouplings(eqx.Module):
    """The MoBL-ARMS couplers ``dep = y0 + (y1 − y0)/(x1 − x0)·(indep − x0)`` (traced knots).

    Attributes:
        x: (11, 2) the splines' knots (rad of the independent coordinate).
        y: (11, 2) the splines' values (rad), rows in the order of the dependent joint variables
            (``sternoclavicular_r2`` … ``unrothum_r2``, ``shoulder1_r2``).
        independent: (11,) static index of each coupler's independent coordinate in q.
    """

    x: Float[Array, "11 2"]
    y: Float[Array, "11 2"]
    independent: tuple[int, ...] = eqx.field(static=True)


def mobl_couplings() -> MoblCouplings:
    """The coupler splines of ``MoBL_ARMS_module6_7_CMC.osim`` (via the extract JSON)."""
    cons = {c["dependent"]: c for c in _load("mobl_arms_shoulder_extract.json")["constraints"]}
    x, y, ind = [], [], []
    for dep in _MOBL_DEPENDENT:
        c = cons[dep]
        f = c["function"]
        if f["type"] != "SimmSpline" or len(f["x"]) != 2 or float(c["scale_factor"]) != 1.0:
            raise ModelError(f"MoBL coupler {c['name']!r}: expected a two-knot SimmSpline")
        x.append(f["x"])
        y.append(f["y"])
        ind.append(COORDINATES.index(c["independent"]))
    return MoblCouplings(jnp.asarray(x), jnp.asarray(y), tuple(ind))


def mobl_rhythm(q: Float[Array, "... 3"], couplings: MoblCouplings) -> Float[Array, "... 14"]:
    """Joint variables f(q) of :func:`shoulder` under MoBL-ARMS's elevation-only couplings.

    Args:
        q: (..., 3) ``(elv_angle, shoulder_elv, shoulder_rot)`` in rad.
        couplings: the coupler splines (traced).

    Returns:
        (..., 14) joint variables in the order of :data:`JOINT_VARIABLES`, rad.
    """
    k = couplings
    qi = q[..., list(k.independent)]
    slope = (k.y[:, 1] - k.y[:, 0]) / (k.x[:, 1] - k.x[:, 0])
    dep = k.y[:, 0] + slope * (qi - k.x[:, 0])
    return jnp.concatenate(
        [dep[..., :10], q[..., 0:1], q[..., 1:2], dep[..., 10:11], q[..., 2:3]], axis=-1
    )


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------


def _inertia(v) -> np.ndarray:
    xx, yy, zz, xy, xz, yz = v
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]], dtype=float)


def shoulder_bodies() -> list[Body]:
    """The 14 :class:`~jaxmb.Body` specifications (thorax = ground), MoBL-ARMS geometry."""
    ex = _load("mobl_arms_shoulder_extract.json")
    bodies: list[Body] = []
    parent = None  # thorax = ground
    parents = {"thorax": None}
    for jname, child in _OSIM_JOINTS:
        j = ex["joints"][jname]
        if any(j["orientation_in_parent"]) or j["child"] != child:
            raise ModelError(f"MoBL joint {jname!r}: unexpected orientation or child")
        parent = parents[j["parent"]]
        rots = [
            t for t in j["transform_axes"] if t["name"].startswith("rotation") and t["coordinates"]
        ]
        for t in j["transform_axes"]:
            const = t["function"]["type"] == "Constant"
            if const and float(t["function"]["value"][0]) != 0.0:
                raise ModelError(f"MoBL joint {jname!r}: non-zero constant {t['name']}")
        position = j["location_in_parent"]
        for k, t in enumerate(rots):
            f = t["function"]
            if f["type"] != "LinearFunction" or list(map(float, f["coefficients"])) != [1.0, 0.0]:
                raise ModelError(f"MoBL joint {jname!r}: {t['name']} is not the identity")
            last = k == len(rots) - 1
            name = child if last else t["coordinates"][0]
            axis = np.asarray(t["axis"], dtype=float)
            b = ex["bodies"][child]
            inertia = np.zeros((3, 3))
            if last and child not in PHANTOMS:
                inertia = _inertia(b["inertia_xx_yy_zz_xy_xz_yz"])
            bodies.append(
                Body(
                    name=name,
                    parent=parent,
                    axis=tuple(axis / np.linalg.norm(axis)),
                    position=tuple(position) if k == 0 else (0.0, 0.0, 0.0),
                    mass=float(b["mass"]) if last else 0.0,
                    com=tuple(b["com"]) if last else (0.0, 0.0, 0.0),
                    inertia=inertia,
                )
            )
            parent = name
        parents[child] = child
    names = tuple(b.name for b in bodies)
    expected = ("sternoclavicular_r2", "clavicle", "unrotscap_r3", "clavphant",
                "acromioclavicular_r2", "acromioclavicular_r3", "scapula", "unrothum_r1",
                "unrothum_r3", "scapphant", "humphant", "shoulder_elv", "humphant1",
                "humerus")  # fmt: skip
    if names != expected:
        raise ModelError(f"MoBL extract gave bodies {names}, expected {expected}")
    return bodies


def shoulder(
    rhythm: str = "degroot",
    muscles: bool = True,
    coefficients: DeGrootBrandCoefficients | MoblCouplings | None = None,
) -> Model:
    """The shoulder model: thorax (ground), clavicle, scapula, humerus; q = (elv_angle,
    shoulder_elv, shoulder_rot) in rad.

    Args:
        rhythm: ``"degroot"`` (full de Groot & Brand 2001 regression) or ``"mobl"`` (MoBL-ARMS's
            elevation-only couplers, as in the .osim).
        muscles: add the 14 shoulder muscles with
            ``jaxmb.models.shoulder_muscles.add_shoulder_muscles``.
        coefficients: the rhythm's coefficients (default: published / .osim values).

    Raises:
        ModelError: unknown rhythm, coefficients of the wrong kind, or ``muscles=True`` while the
            muscle module is not installed.
    """
    if rhythm == "degroot":
        k = degroot_brand_coefficients() if coefficients is None else coefficients
        if not isinstance(k, DeGrootBrandCoefficients):
            raise ModelError(
                f"rhythm 'degroot' needs DeGrootBrandCoefficients, got {type(k).__name__}"
            )
        jmap = ExplicitMap(degroot_brand_rhythm, 3, len(JOINT_VARIABLES), k)
    elif rhythm == "mobl":
        k = mobl_couplings() if coefficients is None else coefficients
        if not isinstance(k, MoblCouplings):
            raise ModelError(f"rhythm 'mobl' needs MoblCouplings, got {type(k).__name__}")
        jmap = ExplicitMap(mobl_rhythm, 3, len(JOINT_VARIABLES), k)
    else:
        raise ModelError(f"unknown shoulder rhythm {rhythm!r}; use 'degroot' or 'mobl'")
    bodies = shoulder_bodies()
    # MoBL-ARMS's clavicle and scapula inertias are positive definite but their principal moments
    # violate the triangle inequality (clavicle 1.35e-5 + 2.31e-4 < 2.98e-4 kg·m²), which
    # build_model rejects; OpenSim takes them as written, so all inertias are set after
    # validation to keep the model identical to the .osim.
    inertias = np.stack([np.asarray(b.inertia, dtype=float) for b in bodies])
    for b, inertia in zip(bodies, inertias, strict=True):
        if b.mass > 0 and np.any(inertia) and np.linalg.eigvalsh(inertia).min() <= 0:
            raise ModelError(f"MoBL body {b.name!r}: inertia is not positive definite")
    bodies = [dataclasses.replace(b, inertia=np.zeros((3, 3))) for b in bodies]
    model = build_model(
        bodies,
        jmap,
        gravity=GRAVITY,
        coordinate_names=COORDINATES,
        name=f"shoulder_{rhythm}",
    )
    model = eqx.tree_at(lambda m: m.inertia, model, jnp.asarray(inertias))
    if muscles:
        try:
            mod = importlib.import_module(".shoulder_muscles", __package__)
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.shoulder_muscles":
                raise
            raise ModelError(
                "shoulder(muscles=True) needs jaxmb.models.shoulder_muscles (the 14 MoBL-ARMS "
                "muscles), which is not installed; call shoulder(muscles=False)"
            ) from None
        model = mod.add_shoulder_muscles(model)
    return model
