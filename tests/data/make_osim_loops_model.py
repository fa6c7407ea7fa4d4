"""Build ``tests/data/osim/closed_loops.osim`` with OpenSim 4.6's own API (``pip install opensim``).

Three closed loops, one per constraint type the opensim-models collection does not use, each
closed at the default pose (the constraint frames are placed where the bodies are then, so OpenSim
assembles without moving anything):

- a gimbal-and-pin arm (4 coordinates) whose tip is held at a ground point by a
  ``PointConstraint`` (3 equations);
- a two-link planar arm (2 coordinates) whose tip keeps its distance to a ground point, a
  ``ConstantDistanceConstraint`` (1 equation);
- a free body with a pinned link (7 coordinates) whose link is welded to a ground frame rotated
  and translated, a ``WeldConstraint`` between offset frames (6 equations).

It also writes ``tests/data/osim/coupler_of_two.osim``: a three-link arm whose third joint angle is
a ``MultivariatePolynomialFunction`` (dimension 2, order 2) of the first two, a
``CoordinateCouplerConstraint`` of several independent coordinates, and a ``CustomJoint`` whose
rotation is the same polynomial of both its coordinates (a TransformAxis of several coordinates);
``closed_loops.osim`` has a
coupler of one coordinate (a cubic) on an extra link, solved with the loops there. OpenSim 4.6's
MultivariatePolynomialFunction has no second derivatives (``getMaxDerivativeOrder()`` is 1, and
``calcDerivative([0, 1])`` returns the first derivative), so OpenSim's accelerations of
``coupler_of_two`` are right only at zero speeds, where the coupling's curvature does not enter.

Run from the repository root: ``python tests/data/make_osim_loops_model.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import opensim as osim

OUT = Path(__file__).parent / "osim" / "closed_loops.osim"
OUT_COUPLER = Path(__file__).parent / "osim" / "coupler_of_two.osim"
# 1, y, y², x, xy, x² for (x, y) = (first, second independent coordinate): OpenSim's term order
COUPLER_COEFFICIENTS = (0.1, 0.5, -0.2, 0.3, 0.25, 0.15)


def polynomial_of_two():
    f = osim.MultivariatePolynomialFunction()
    f.set_dimension(2)
    f.set_order(2)
    f.setCoefficients(osim.Vector(list(COUPLER_COEFFICIENTS)))
    return f


def add_coupled_link(m, parent, name, independent):
    """A link on a pin joint whose angle is a polynomial of the ``independent`` coordinates."""
    b = osim.Body(name, 0.4, v(0.1, 0.0, 0.0), osim.Inertia(0.001, 0.004, 0.004, 0, 0, 0))
    m.addBody(b)
    j = osim.PinJoint(f"{name}_pin", parent, v(0.2, 0.0, 0.0), v(0.0, 0.2, 0.0),
                      b, v(0.0, 0.0, 0.0), v(0.0, 0.0, 0.0))
    m.addJoint(j)
    if len(independent) == 1:  # a cubic of one coordinate
        f = osim.PolynomialFunction(osim.Vector([0.2, -0.3, 0.5, 0.1]))
    else:
        f = polynomial_of_two()
    c = osim.CoordinateCouplerConstraint()
    c.setName(f"{name}_coupler")
    names = osim.ArrayStr()
    for n in independent:
        names.append(n)
    c.setIndependentCoordinateNames(names)
    c.setDependentCoordinateName(f"{name}_pin_coord_0")
    c.setFunction(f)
    m.addConstraint(c)
    return j


def coupler_model():
    m = osim.Model()
    m.setName("coupler_of_two")
    g = m.getGround()
    prev = g
    for k in range(2):
        b = osim.Body(f"seg{k}", 1.0 - 0.2 * k, v(0.1, -0.05, 0.0),
                      osim.Inertia(0.003, 0.01, 0.01, 0.0, 0.0, 0.001))
        m.addBody(b)
        m.addJoint(osim.PinJoint(f"pin{k}", prev, v(0.3 * k, 0.5 * (k == 0), 0.0),
                                 v(0.1 * k, 0.0, 0.2), b, v(0.0, 0.0, 0.0), v(0.0, 0.0, 0.0)))
        prev = b
    add_coupled_link(m, prev, "tip", ["pin0_coord_0", "pin1_coord_0"])
    # a CustomJoint whose rotation is a function of both its coordinates, and a slide of one
    st = osim.SpatialTransform()
    names = osim.ArrayStr()
    names.append("swing_a")
    names.append("swing_b")
    rot = st.updTransformAxis(2)  # rotation3, about z
    rot.setCoordinateNames(names)
    rot.setAxis(v(0.0, 0.0, 1.0))
    rot.set_function(polynomial_of_two())
    one = osim.ArrayStr()
    one.append("swing_b")
    tr = st.updTransformAxis(3)
    tr.setCoordinateNames(one)
    tr.setAxis(v(1.0, 0.0, 0.0))
    tr.set_function(osim.LinearFunction(1.0, 0.0))
    sw = osim.Body("swinger", 0.6, v(0.05, -0.1, 0.0), osim.Inertia(0.002, 0.003, 0.002, 0, 0, 0))
    m.addBody(sw)
    m.addJoint(osim.CustomJoint("swing", prev, v(0.1, -0.2, 0.0), v(0.2, 0.0, 0.1),
                                sw, v(0.0, 0.05, 0.0), v(0.0, 0.0, 0.0), st))
    m.finalizeConnections()
    m.initSystem()
    m.printToXML(str(OUT_COUPLER))


def v(*x):
    return osim.Vec3(*x)


def main():
    m = osim.Model()
    m.setName("closed_loops")
    m.setGravity(v(0.2, -9.81, -0.1))
    g = m.getGround()

    def body(name, mass, com, inertia):
        b = osim.Body(name, mass, v(*com), osim.Inertia(*inertia))
        m.addBody(b)
        return b

    a1 = body("arm1", 1.2, (0.0, -0.2, 0.02), (0.02, 0.01, 0.02, 0.001, 0.0, -0.001))
    a2 = body("arm2", 0.9, (0.05, -0.15, 0.0), (0.01, 0.008, 0.012, 0.0, 0.0005, 0.0))
    l1 = body("link1", 1.0, (0.1, 0.0, 0.0), (0.002, 0.01, 0.01, 0.0, 0.0, 0.0))
    l2 = body("link2", 0.7, (0.12, 0.0, 0.01), (0.001, 0.008, 0.008, 0.0, 0.0, 0.0))
    fb = body("floater", 2.0, (0.0, 0.05, 0.0), (0.03, 0.04, 0.05, 0.002, 0.0, 0.001))
    fl = body("flap", 0.5, (0.0, -0.1, 0.0), (0.003, 0.001, 0.003, 0.0, 0.0, 0.0))
    joints = [
        osim.GimbalJoint(
            "shoulder",
            g,
            v(0.0, 1.0, 0.0),
            v(0.1, 0.0, 0.2),
            a1,
            v(0.0, 0.1, 0.0),
            v(0.0, 0.0, 0.0),
        ),
        osim.PinJoint(
            "elbow",
            a1,
            v(0.0, -0.4, 0.0),
            v(0.3, 0.1, 0.0),
            a2,
            v(0.0, 0.05, 0.0),
            v(0.0, 0.0, 0.0),
        ),
        osim.PinJoint(
            "hip", g, v(1.0, 0.5, 0.0), v(0.0, 0.0, 0.0), l1, v(0.0, 0.0, 0.0), v(0.0, 0.0, 0.0)
        ),
        osim.PinJoint(
            "knee", l1, v(0.3, 0.0, 0.0), v(0.0, 0.0, 0.0), l2, v(0.0, 0.0, 0.0), v(0.0, 0.0, 0.0)
        ),
        osim.FreeJoint(
            "float", g, v(-1.0, 0.8, 0.3), v(0.0, 0.0, 0.0), fb, v(0.0, 0.0, 0.0), v(0.0, 0.0, 0.0)
        ),
        osim.PinJoint(
            "hinge", fb, v(0.1, -0.1, 0.0), v(0.0, 0.3, 0.0), fl, v(0.0, 0.1, 0.0), v(0.0, 0.0, 0.0)
        ),
    ]
    for j in joints:
        m.addJoint(j)
    cs = m.updCoordinateSet()
    defaults = {
        "shoulder_coord_0": 0.3,
        "shoulder_coord_1": -0.2,
        "shoulder_coord_2": 0.4,
        "elbow_coord_0": 0.8,
        "hip_coord_0": -0.5,
        "knee_coord_0": 1.1,
        "float_coord_0": 0.2,
        "float_coord_1": -0.3,
        "float_coord_2": 0.1,
        "float_coord_3": 0.05,
        "float_coord_4": -0.02,
        "float_coord_5": 0.1,
        "hinge_coord_0": 0.6,
    }
    for i in range(cs.getSize()):
        c = cs.get(i)
        d = defaults[c.getName()]
        c.setDefaultValue(d)
        half = 0.4 if c.getMotionType() == 1 else 0.1
        c.setRangeMin(d - half)
        c.setRangeMax(d + half)
    s = m.initSystem()

    def station(b, p):
        x = b.findStationLocationInGround(s, v(*p))
        return [x.get(k) for k in range(3)]

    tip, foot, anchor = (0.1, -0.3, 0.05), (0.35, 0.02, 0.0), (1.2, 0.1, 0.0)
    tip_g = station(a2, tip)  # every pose is read before the first constraint is added
    d = float(np.linalg.norm(np.subtract(station(l2, foot), anchor)))
    X = fl.getTransformInGround(s)
    point = osim.PointConstraint(g, v(*tip_g), a2, v(*tip))
    point.setName("arm_tip_on_ground")
    m.addConstraint(point)
    dist = osim.ConstantDistanceConstraint(g, v(*anchor), l2, v(*foot), d)
    dist.setName("foot_tether")
    m.addConstraint(dist)
    ground_frame = osim.PhysicalOffsetFrame("weld_ground", g, osim.Transform(X.R(), X.p()))
    flap_frame = osim.PhysicalOffsetFrame(
        "weld_flap", fl, osim.Transform(osim.Rotation(), v(0.0, 0.0, 0.0))
    )
    weld = osim.WeldConstraint()
    weld.setName("flap_weld")
    weld.addComponent(ground_frame)
    weld.addComponent(flap_frame)
    weld.connectSocket_frame1(ground_frame)
    weld.connectSocket_frame2(flap_frame)
    m.addConstraint(weld)
    add_coupled_link(m, l2, "toe", ["hip_coord_0"])
    m.finalizeConnections()
    m.initSystem()
    m.printToXML(str(OUT))


if __name__ == "__main__":
    main()
    coupler_model()
