"""Build ``tests/data/osim/joints_and_forces.osim`` with OpenSim 4.6's own API (``pip install opensim``).

A small model that uses what the opensim-models collection does not: every joint type jaxmb reads
(Universal, Gimbal, Ball, Planar, Free, Slider, Pin, Weld; Ellipsoid in its own small model,
``ellipsoid_joint.osim``) with offset frames that are rotated and
translated, and the force elements (SpringGeneralizedForce, CoordinateLimitForce, CoordinateActuator,
PointToPointSpring, BushingForce between offset frames, PathSpring, PathActuator, Ligament,
ExpressionBasedCoordinateForce, TorqueActuator, PointActuator, HuntCrossleyForce with
sphere/half-space and sphere/sphere pairs, SmoothSphereHalfSpaceForce). OpenSim writes the file, so its spelling is
OpenSim's. Run from the repository root: ``python tests/data/make_osim_joints_model.py``.
"""

from __future__ import annotations

from pathlib import Path

import opensim as osim

OUT = Path(__file__).parent / "osim" / "joints_and_forces.osim"
OUT_ELLIPSOID = Path(__file__).parent / "osim" / "ellipsoid_joint.osim"


def body(model, name, mass, com, inertia):
    b = osim.Body(name, mass, osim.Vec3(*com), osim.Inertia(*inertia))
    model.addBody(b)
    return b


def main():
    m = osim.Model()
    m.setName("joints_and_forces")
    m.setGravity(osim.Vec3(0.3, -9.81, 0.1))
    g = m.getGround()
    b1 = body(m, "b1", 2.0, (0.1, -0.2, 0.05), (0.05, 0.04, 0.03, 0.001, -0.002, 0.003))
    b2 = body(m, "b2", 1.5, (0.0, -0.15, 0.02), (0.03, 0.02, 0.025, 0.0, 0.001, 0.0))
    b3 = body(m, "b3", 1.0, (0.05, -0.1, 0.0), (0.01, 0.012, 0.015, 0.0005, 0.0, -0.0004))
    b4 = body(m, "b4", 0.8, (0.02, 0.03, -0.01), (0.008, 0.009, 0.007, 0.0, 0.0, 0.0))
    b5 = body(m, "b5", 3.0, (0.0, 0.0, 0.0), (0.06, 0.05, 0.04, 0.0, 0.0, 0.0))
    b6 = body(m, "b6", 0.5, (0.1, 0.0, 0.0), (0.002, 0.003, 0.004, 0.0, 0.0, 0.0))
    b7 = body(m, "b7", 0.4, (0.0, -0.1, 0.0), (0.002, 0.001, 0.002, 0.0, 0.0, 0.0))
    b8 = body(m, "b8", 0.3, (0.02, 0.0, 0.01), (0.001, 0.001, 0.001, 0.0, 0.0, 0.0))

    def v(*x):
        return osim.Vec3(*x)

    joints = [
        osim.UniversalJoint("universal", g, v(0.1, 1.5, -0.2), v(0.3, -0.2, 0.1),
                            b1, v(0.0, 0.2, 0.01), v(-0.1, 0.2, 0.0)),
        osim.GimbalJoint("gimbal", b1, v(0.05, -0.4, 0.0), v(0.0, 0.3, -0.2),
                         b2, v(0.0, 0.1, 0.0), v(0.1, 0.0, 0.2)),
        osim.BallJoint("ball", b2, v(0.0, -0.3, 0.05), v(0.2, 0.0, 0.1),
                       b3, v(0.01, 0.1, 0.0), v(0.0, -0.3, 0.0)),
        osim.PlanarJoint("planar", b3, v(0.0, -0.2, 0.0), v(0.1, 0.2, 0.3),
                         b4, v(0.0, 0.05, 0.0), v(0.0, 0.0, -0.2)),
        osim.FreeJoint("free", g, v(0.5, 1.0, 0.2), v(0.1, -0.2, 0.3),
                       b5, v(0.0, 0.0, 0.0), v(0.0, 0.1, 0.0)),
        osim.SliderJoint("slider", b4, v(0.1, 0.0, 0.0), v(0.0, 0.0, 0.4),
                         b6, v(0.0, 0.0, 0.0), v(0.0, 0.2, 0.0)),
        osim.PinJoint("pin", b6, v(0.2, 0.0, 0.0), v(0.3, 0.1, 0.0),
                      b7, v(0.0, 0.1, 0.0), v(0.0, 0.0, 0.1)),
        osim.WeldJoint("weld", b7, v(0.0, -0.2, 0.0), v(0.1, 0.2, 0.3),
                       b8, v(0.01, 0.0, 0.0), v(0.0, 0.0, 0.0)),
    ]
    for j in joints:
        m.addJoint(j)
    cs = m.updCoordinateSet()
    for c in (cs.get(i) for i in range(cs.getSize())):
        if c.getMotionType() == 1:
            c.setRangeMin(-1.2)
            c.setRangeMax(1.2)
        else:
            c.setRangeMin(-0.3)
            c.setRangeMax(0.3)

    spring = osim.SpringGeneralizedForce("planar_coord_1")
    spring.setName("generalized_spring")
    spring.setStiffness(40.0)
    spring.setRestLength(0.05)
    spring.setViscosity(1.5)
    m.addForce(spring)
    limit = osim.CoordinateLimitForce("gimbal_coord_1", 20.0, 80.0, -20.0, 60.0, 0.4, 10.0)
    limit.setName("gimbal_limit")
    m.addForce(limit)
    slimit = osim.CoordinateLimitForce("slider_coord_0", 0.1, 900.0, -0.1, 700.0, 5.0, 0.05)
    slimit.setName("slider_limit")
    m.addForce(slimit)
    act = osim.CoordinateActuator("pin_coord_0")
    act.setName("pin_motor")
    act.setOptimalForce(30.0)
    m.addForce(act)
    p2p = osim.PointToPointSpring(b2, v(0.02, -0.1, 0.03), b5, v(0.1, 0.05, 0.0), 150.0, 0.4)
    p2p.setName("p2p")
    m.addForce(p2p)
    f1 = osim.PhysicalOffsetFrame("bushing_on_b1", b1, osim.Transform(osim.Rotation(
        osim.BodyRotationSequence, 0.2, osim.CoordinateAxis(0), -0.1, osim.CoordinateAxis(1),
        0.3, osim.CoordinateAxis(2)), v(0.05, 0.0, 0.02)))
    f5 = osim.PhysicalOffsetFrame("bushing_on_b5", b5, osim.Transform(v(0.0, 0.1, -0.05)))
    b1.addComponent(f1)
    b5.addComponent(f5)
    bushing = osim.BushingForce("bushing", f1, f5, v(30, 40, 50), v(500, 600, 700),
                                v(0.5, 0.6, 0.7), v(5, 6, 7))
    m.addForce(bushing)
    ps = osim.PathSpring("path_spring", 0.3, 200.0, 0.2)
    ps.updGeometryPath().appendNewPathPoint("o", b1, v(0.03, 0.0, 0.0))
    ps.updGeometryPath().appendNewPathPoint("via", b2, v(0.02, -0.05, 0.01))
    ps.updGeometryPath().appendNewPathPoint("i", b3, v(0.0, -0.05, 0.02))
    m.addForce(ps)
    pa = osim.PathActuator()
    pa.setName("path_actuator")
    pa.setOptimalForce(25.0)
    pa.updGeometryPath().appendNewPathPoint("o", b2, v(0.0, 0.0, 0.03))
    pa.updGeometryPath().appendNewPathPoint("i", b4, v(0.01, 0.02, 0.0))
    m.addForce(pa)

    lig = osim.Ligament()
    lig.setName("ligament")
    lig.set_resting_length(0.2)
    lig.set_pcsa_force(300.0)
    lig.updGeometryPath().appendNewPathPoint("o", b1, v(-0.02, 0.0, 0.03))
    lig.updGeometryPath().appendNewPathPoint("i", b2, v(0.0, 0.05, -0.02))
    m.addForce(lig)
    ebf = osim.ExpressionBasedCoordinateForce("universal_coord_1", "-10*q-0.5*qdot+2*q^3")
    ebf.setName("expression_force")
    m.addForce(ebf)
    ta = osim.TorqueActuator(b1, b3, v(0.2, 0.5, -0.3), False)
    ta.setName("torque_actuator")
    ta.setOptimalForce(12.0)
    m.addForce(ta)
    pt = osim.PointActuator("b4")
    pt.setName("point_actuator")
    pt.set_point(v(0.05, 0.02, -0.01))
    pt.set_direction(v(0.3, 1.0, 0.2))
    pt.set_force_is_global(False)
    pt.setOptimalForce(40.0)
    m.addForce(pt)

    floor = osim.ContactHalfSpace(v(0.0, 0.85, 0.0), v(0.0, 0.0, -1.5707963267949), g, "floor")
    s5 = osim.ContactSphere(0.25, v(0.0, 0.0, 0.0), b5, "ball5")
    s3 = osim.ContactSphere(0.15, v(0.0, -0.1, 0.0), b3, "ball3")
    post = osim.ContactSphere(0.12, v(0.6, 1.0, 0.2), g, "post")
    for geom in (floor, s5, s3, post):
        m.addContactGeometry(geom)
    hc = osim.HuntCrossleyForce()
    hc.setName("contact")
    hc.addGeometry("floor")
    hc.addGeometry("ball5")
    hc.addGeometry("ball3")
    hc.addGeometry("post")
    hc.setStiffness(2.0e6)
    hc.setDissipation(0.8)
    hc.setStaticFriction(0.8)
    hc.setDynamicFriction(0.5)
    hc.setViscousFriction(0.2)
    hc.setTransitionVelocity(0.05)
    m.addForce(hc)
    smooth = osim.SmoothSphereHalfSpaceForce("smooth_contact", s5, floor)
    smooth.set_stiffness(1.0e6)
    smooth.set_dissipation(2.0)
    smooth.set_static_friction(0.9)
    smooth.set_dynamic_friction(0.6)
    smooth.set_viscous_friction(0.3)
    smooth.set_transition_velocity(0.2)
    m.addForce(smooth)
    m.finalizeConnections()
    m.initSystem()
    m.printToXML(str(OUT))
    print(f"wrote {OUT}")


def ellipsoid_joint():
    """``ellipsoid_joint.osim``: an EllipsoidJoint (a scapula gliding on the thorax, say) between
    rotated and translated offset frames, and a pin joint below it, under oblique gravity."""
    m = osim.Model()
    m.setName("ellipsoid_joint")
    m.setGravity(osim.Vec3(0.4, -9.81, -0.2))
    g = m.getGround()
    e1 = body(m, "e1", 1.2, (0.03, -0.05, 0.02), (0.02, 0.015, 0.01, 0.001, -0.0005, 0.0008))
    e2 = body(m, "e2", 0.7, (0.0, -0.12, 0.01), (0.006, 0.002, 0.005, 0.0, 0.0003, 0.0))
    v = osim.Vec3
    m.addJoint(osim.EllipsoidJoint("ellipsoid", g, v(0.05, 1.2, -0.1), v(0.2, -0.3, 0.1),
                                   e1, v(0.01, 0.02, -0.03), v(0.0, 0.1, -0.2),
                                   v(0.12, 0.08, 0.05)))  # fmt: skip
    m.addJoint(osim.PinJoint("elbow", e1, v(0.0, -0.15, 0.02), v(0.1, 0.0, 0.3),
                             e2, v(0.0, 0.05, 0.0), v(0.0, 0.2, 0.0)))  # fmt: skip
    m.finalizeConnections()
    m.printToXML(str(OUT_ELLIPSOID))


if __name__ == "__main__":
    main()
    ellipsoid_joint()
