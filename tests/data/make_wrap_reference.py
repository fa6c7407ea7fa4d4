"""Record OpenSim 4.6 path lengths over single wrap objects on random geometry (needs ``opensim``).

For each wrap type (WrapCylinder, WrapSphere, WrapEllipsoid, WrapTorus) and quadrant, a tiny model
is built with the OpenSim Python API: a PathActuator with two path points on the ground and one
wrap object on the ground at a random position and orientation (``xyz_body_rotation``). With
``extra`` the path has a second PathWrap over a small sphere far away, which never wraps but makes
OpenSim take its multi-wrap branch (8 passes; the cylinder's tangent-point sliding iteration).
Points are sampled on roughly opposite sides of the object so that most segments wrap. Further
ellipsoid configurations (``ELLIPSOID_CONFIGS``: quadrants, multi-object, slender and equal-axis
shapes) follow from a separate random stream. Every case gets a fresh model and state, so OpenSim's
per-PathWrap "previous wrap" memory starts empty each time. Writes ``wrap_opensim_reference.json``
next to this script, and ``wrap_ellipsoid_in_plane_reference.json``: ellipsoid segments that lie in
a coordinate plane of the wrap frame (``IN_PLANE_CONFIGS``), where OpenSim solves every fan
point's nearest surface point in that plane.

    python tests/data/make_wrap_reference.py                  # both files
    python tests/data/make_wrap_reference.py --in-plane-only  # the second alone
"""

import datetime
import json
import pathlib
import sys

import numpy as np
import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent
N_CASES = 24


def body_fixed_xyz(a):
    c, s = np.cos(a), np.sin(a)
    rx = np.array([[1, 0, 0], [0, c[0], -s[0]], [0, s[0], c[0]]])
    ry = np.array([[c[1], 0, s[1]], [0, 1, 0], [-s[1], 0, c[1]]])
    rz = np.array([[c[2], -s[2], 0], [s[2], c[2], 0], [0, 0, 1]])
    return rx @ ry @ rz


def build(kind, size, quadrant, extra, xyz, trans):
    model = osim.Model()
    ground = model.getGround()
    if kind == "cylinder":
        w = osim.WrapCylinder()
        w.set_radius(size["radius"])
        w.set_length(size["length"])
    elif kind == "sphere":
        w = osim.WrapSphere()
        w.set_radius(size["radius"])
    elif kind == "ellipsoid":
        w = osim.WrapEllipsoid()
        w.set_dimensions(osim.Vec3(*size["dimensions"]))
    else:
        w = osim.WrapTorus()
        w.set_inner_radius(size["inner_radius"])
        w.set_outer_radius(size["outer_radius"])
    w.setName("w")
    w.set_quadrant(quadrant)
    w.set_xyz_body_rotation(osim.Vec3(*xyz))
    w.set_translation(osim.Vec3(*trans))
    ground.addWrapObject(w)
    far = None
    if extra:
        far = osim.WrapSphere()
        far.set_radius(0.01)
        far.setName("far")
        far.set_translation(osim.Vec3(50.0, 50.0, 50.0))
        ground.addWrapObject(far)
    act = osim.PathActuator()
    act.setName("act")
    act.addNewPathPoint("p1", ground, osim.Vec3(1, 0, 0))
    act.addNewPathPoint("p2", ground, osim.Vec3(-1, 0, 0))
    path = act.updGeometryPath()
    path.addPathWrap(w)
    if extra:
        path.addPathWrap(far)
    for i in range(path.getWrapSet().getSize()):
        path.getWrapSet().get(i).setName(f"pw{i}")
    model.addForce(act)
    model.finalizeConnections()
    return model, act


def length(model, act, p1, p2):
    pps = act.updGeometryPath().updPathPointSet()
    osim.PathPoint.safeDownCast(pps.get(0)).set_location(osim.Vec3(*p1))
    osim.PathPoint.safeDownCast(pps.get(1)).set_location(osim.Vec3(*p2))
    state = model.initSystem()
    model.realizePosition(state)
    return act.getLength(state)


def sample_size(kind, rng):
    if kind == "cylinder":
        return {"radius": rng.uniform(0.01, 0.05), "length": rng.uniform(0.05, 0.3)}
    if kind == "sphere":
        return {"radius": rng.uniform(0.01, 0.05)}
    if kind == "ellipsoid":
        return {"dimensions": rng.uniform(0.01, 0.05, 3).tolist()}
    inner = rng.uniform(0.005, 0.02)
    return {"inner_radius": inner, "outer_radius": inner + rng.uniform(0.01, 0.05)}


CONFIGS = [
    ("cylinder", "all", False),
    ("cylinder", "+x", False),
    ("cylinder", "-y", False),
    ("cylinder", "all", True),
    ("cylinder", "+x", True),
    ("sphere", "all", False),
    ("sphere", "+x", False),
    ("sphere", "-z", False),
    ("ellipsoid", "all", False),
    ("ellipsoid", "-y", False),
    ("torus", "all", False),
]


# Appended ellipsoid configurations (kind, quadrant, extra, shape), drawn from their own RNG stream
# so that the cases above stay bit-identical. Shapes: "random" (three independent semi-axes),
# "slender" (two equal short semi-axes and a long one, like MoBL-ARMS's delt3hum, Elbow_BIC_BRD,
# _2ndmcp), "equal" (three equal semi-axes, like SUPSP and ANC: ties in OpenSim's axis choices).
ELLIPSOID_CONFIGS = [
    ("ellipsoid", "+x", False, "random"),
    ("ellipsoid", "z", False, "random"),
    ("ellipsoid", "all", True, "random"),
    ("ellipsoid", "-y", True, "random"),
    ("ellipsoid", "all", False, "slender"),
    ("ellipsoid", "x", False, "slender"),
    ("ellipsoid", "-z", False, "slender"),
    ("ellipsoid", "all", False, "equal"),
    ("ellipsoid", "-x", False, "equal"),
]


def sample_ellipsoid(shape, rng):
    if shape == "random":
        return {"dimensions": rng.uniform(0.01, 0.05, 3).tolist()}
    if shape == "equal":
        return {"dimensions": [float(rng.uniform(0.01, 0.05))] * 3}
    r = rng.uniform(0.005, 0.02)
    dims = [r, r, r * rng.uniform(3.0, 7.0)]
    k = int(rng.integers(3))
    dims[k], dims[2] = dims[2], dims[k]
    return {"dimensions": [float(d) for d in dims]}


def sample_case(kind, quadrant, extra, size, rng):
    scale = max(v if np.isscalar(v) else max(v) for v in size.values())
    scale = min(scale, 0.06)
    xyz = rng.uniform(-np.pi, np.pi, 3)
    trans = rng.uniform(-0.1, 0.1, 3)
    d = rng.normal(size=3)
    d /= np.linalg.norm(d)
    p1w = d * rng.uniform(2.0, 5.0) * scale
    p2w = -d * rng.uniform(2.0, 5.0) * scale + rng.normal(size=3) * scale
    rot = body_fixed_xyz(xyz)
    p1, p2 = trans + rot @ p1w, trans + rot @ p2w
    # one fresh model and state per case: OpenSim's PathWrap keeps the previous wrap's result
    model, act = build(kind, size, quadrant, extra, xyz, trans)
    return {
        "kind": kind,
        "quadrant": quadrant,
        "extra": extra,
        "size": size,
        "xyz_body_rotation": xyz.tolist(),
        "translation": trans.tolist(),
        "p1": p1.tolist(),
        "p2": p2.tolist(),
        "straight_m": float(np.linalg.norm(p2 - p1)),
        "length_m": length(model, act, p1, p2),
    }


# Ellipsoid segments that lie in a coordinate plane of the wrap frame (the frame is the ground's, so
# that the plane coordinate is exactly 0): every fan point is then within ROUNDOFF_ERROR of that
# plane, and findClosestPoint takes its planar special case for all of them. (quadrant, plane).
IN_PLANE_CONFIGS = [("all", 0), ("all", 1), ("all", 2), ("+x", 2), ("-y", 0), ("z", 1)]
N_IN_PLANE = 8


def in_plane_cases():
    rng = np.random.default_rng(20261127)
    cases = []
    for quadrant, k in IN_PLANE_CONFIGS:
        for _ in range(N_IN_PLANE):
            size = sample_ellipsoid("random", rng)
            scale = max(size["dimensions"])
            d = rng.normal(size=3)
            d[k] = 0.0
            d /= np.linalg.norm(d)
            off = rng.normal(size=3) * scale
            off[k] = 0.0
            p1 = d * rng.uniform(2.0, 5.0) * scale
            p2 = -d * rng.uniform(2.0, 5.0) * scale + off
            model, act = build("ellipsoid", size, quadrant, False, np.zeros(3), np.zeros(3))
            cases.append(
                {
                    "quadrant": quadrant,
                    "plane": k,
                    "size": size,
                    "p1": p1.tolist(),
                    "p2": p2.tolist(),
                    "straight_m": float(np.linalg.norm(p2 - p1)),
                    "length_m": length(model, act, p1, p2),
                }
            )
    return cases


def main():
    out = {
        "source": "OpenSim " + osim.__version__ + " PathActuator.getLength, models built in Python",
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "script": "tests/data/make_wrap_reference.py",
        "frame": "the wrap ellipsoid at the ground origin, unrotated",
        "cases": in_plane_cases(),
    }
    (HERE / "wrap_ellipsoid_in_plane_reference.json").write_text(json.dumps(out, indent=1))
    if "--in-plane-only" in sys.argv:
        return
    rng = np.random.default_rng(20261121)
    cases = []
    for kind, quadrant, extra in CONFIGS:
        for _ in range(N_CASES):
            size = sample_size(kind, rng)
            scale = max(v if np.isscalar(v) else max(v) for v in size.values())
            scale = min(scale, 0.06)
            xyz = rng.uniform(-np.pi, np.pi, 3)
            trans = rng.uniform(-0.1, 0.1, 3)
            d = rng.normal(size=3)
            d /= np.linalg.norm(d)
            p1w = d * rng.uniform(2.0, 5.0) * scale
            p2w = -d * rng.uniform(2.0, 5.0) * scale + rng.normal(size=3) * scale
            rot = body_fixed_xyz(xyz)
            p1, p2 = trans + rot @ p1w, trans + rot @ p2w
            model, act = build(kind, size, quadrant, extra, xyz, trans)
            cases.append(
                {
                    "kind": kind,
                    "quadrant": quadrant,
                    "extra": extra,
                    "size": size,
                    "xyz_body_rotation": xyz.tolist(),
                    "translation": trans.tolist(),
                    "p1": p1.tolist(),
                    "p2": p2.tolist(),
                    "straight_m": float(np.linalg.norm(p2 - p1)),
                    "length_m": length(model, act, p1, p2),
                }
            )
    rng_e = np.random.default_rng(20261122)
    for kind, quadrant, extra, shape in ELLIPSOID_CONFIGS:
        for _ in range(N_CASES):
            size = sample_ellipsoid(shape, rng_e)
            case = sample_case(kind, quadrant, extra, size, rng_e)
            case["shape"] = shape
            cases.append(case)
    out = {
        "source": "OpenSim " + osim.__version__ + " PathActuator.getLength, models built in Python",
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "script": "tests/data/make_wrap_reference.py",
        "far_sphere": {"radius": 0.01, "translation": [50.0, 50.0, 50.0]},
        "cases": cases,
    }
    (HERE / "wrap_opensim_reference.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
