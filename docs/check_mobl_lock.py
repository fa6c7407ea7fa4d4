"""OpenSim 4.6's forward dynamics of MoBL-ARMS violate its own lock on ``r_z``.

At one pose (independent coordinates 0.3, 0.4, …; coupled ones from OpenSim's coupling functions;
zero speeds; every force off, so gravity alone), this prints OpenSim's ``u̇`` next to the two
reduced solutions ``B (BᵀMB)⁻¹ Bᵀg`` (``B = ∂u/∂q̇`` of the couplers, ``r_z`` held, and ``r_z``
free), all from OpenSim's own ``calcM``, ``calcG`` and ``Jᵀ m g``, and the constraint residual
``G u̇``. OpenSim's ``u̇`` satisfies ``Bᵀ(M u̇ − g) = 0`` but not ``G u̇ = 0``: its locked
coordinate accelerates (77 rad/s² here), so it is neither solution, and jaxmb's forward dynamics
(the held one) cannot match it (``docs/osim_import.md``, MoBL-ARMS row). Run from the repository
root: ``python docs/check_mobl_lock.py``.
"""

from __future__ import annotations

import numpy as np
import opensim as osim

PATH = "tests/data/osim/MoBL_ARMS_module6_7_CMC.osim"
PHANTOMS = ("clavphant", "scapphant", "humphant", "humphant1")


def main():
    osim.Logger.setLevelString("error")
    m = osim.Model(PATH)
    for b in PHANTOMS:
        m.updBodySet().get(b).setInertia(osim.Inertia(0, 0, 0, 0, 0, 0))
    for k in range(m.updForceSet().getSize()):
        m.updForceSet().get(k).set_appliesForce(False)
    s = m.initSystem()
    cs = m.getCoordinateSet()
    names = [cs.get(i).getName() for i in range(cs.getSize())]
    nu = s.getNU()
    uidx = {}
    for n in names:
        for k in names:
            cs.get(k).setSpeedValue(s, 0.0)
        cs.get(n).setSpeedValue(s, 1.0)
        uidx[n] = [i for i in range(nu) if s.getU().get(i) != 0][0]
    for k in names:
        cs.get(k).setSpeedValue(s, 0.0)
    cons = m.getConstraintSet()
    coup = {}
    for i in range(cons.getSize()):
        c = osim.CoordinateCouplerConstraint.safeDownCast(cons.get(i))
        scale = osim.PropertyHelper.getValueDouble(c.getPropertyByName("scale_factor"))
        coup[c.getDependentCoordinateName()] = (
            c.getIndependentCoordinateNames().get(0), c.getFunction(), scale
        )
    locked = [n for n in names if cs.get(n).getLocked(s)]
    indep = [n for n in names if n not in coup and n not in locked]
    Q = {n: cs.get(n).getValue(s) for n in locked}
    for k, n in enumerate(indep):
        Q[n] = 0.3 + 0.1 * k
    for d, (i, f, sc) in coup.items():
        Q[d] = sc * f.calcValue(osim.Vector(1, Q[i]))
    for n in names:
        if n not in locked:
            cs.get(n).setValue(s, Q[n], False)
    m.realizeAcceleration(s)
    B = np.zeros((nu, len(indep)))
    for k, n in enumerate(indep):
        B[uidx[n], k] = 1.0
    for d, (i, f, sc) in coup.items():
        x = osim.Vector(1, Q[i])
        B[uidx[d]] = sc * f.calcDerivative(osim.StdVectorInt([0]), x) * B[uidx[i]]
    mat = m.getMatterSubsystem()
    G = osim.Matrix()
    mat.calcG(s, G)
    G = np.array([[G.get(i, j) for j in range(G.ncol())] for i in range(G.nrow())])
    M = osim.Matrix()
    mat.calcM(s, M)
    M = np.array([[M.get(i, j) for j in range(nu)] for i in range(nu)])
    grav = m.getGravity()
    g = np.zeros(nu)
    for i in range(m.getBodySet().getSize()):
        b = m.getBodySet().get(i)
        v = osim.Vector()
        f = osim.Vec3(*[b.getMass() * grav.get(k) for k in range(3)])
        index, com = b.getMobilizedBodyIndex(), b.getMassCenter()
        mat.multiplyByStationJacobianTranspose(s, index, com, f, v)
        g += np.array([v.get(k) for k in range(nu)])
    ud = np.array([s.getUDot().get(i) for i in range(nu)])
    rows = [uidx[n] for n in locked + indep]
    held = B @ np.linalg.solve(B.T @ M @ B, B.T @ g)
    B2 = np.hstack([np.eye(nu)[:, [uidx[n] for n in locked]], B])
    free = B2 @ np.linalg.solve(B2.T @ M @ B2, B2.T @ g)
    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    print("coordinates      ", locked + indep)
    print("OpenSim u̇        ", ud[rows])
    print("reduced, r_z held", held[rows])
    print("reduced, r_z free", free[rows])
    print("|G B|", np.abs(G @ B).max(), " |G u̇| (OpenSim)", np.abs(G @ ud).max(),
          " |Bᵀ(M u̇ − g)|", np.abs(B.T @ (M @ ud - g)).max())


if __name__ == "__main__":
    main()
