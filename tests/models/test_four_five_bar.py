"""Four-bar and five-bar against a classical absolute-coordinate kinematic analysis (seed §4-3).

The reference below does not use jaxmb. It is the textbook method (Shabana, *Dynamics of Multibody
Systems*, ch. 3): each body has absolute coordinates (x, y, φ) of its centre of mass; revolute
joints give C = r_i + A_i s_i − r_j − A_j s_j = 0, driving constraints fix the generalized
coordinates; the position problem is solved by Newton–Raphson (continuation along the trajectory),
velocities from C_q q̇ = −C_t and accelerations from C_q q̈ = Q_d with
Q_d = A_i s_i φ̇_i² − A_j s_j φ̇_j² for a revolute joint and q̈_driver for a driving constraint.
Both mechanisms follow piecewise-Hermite q(t); the velocity and acceleration of point p must agree
with jaxmb's closed-form kinematics (joint map by Newton + implicit function theorem) to 1e-10
relative over the whole trajectory.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline

import jaxmb as mb
from jaxmb.models.five_bar import five_bar
from jaxmb.models.four_bar import four_bar

RTOL = 1e-10

# the mechanisms' data, restated here (not imported) for the classical analysis
FOUR = dict(l0=1.0, lengths=[0.4, 1.0, 0.8], p_body=1, p_local=(0.5, 0.25))
FIVE = dict(l0=3.0, lengths=[1.0, 1.0, 3.0, 3.0], p_body=2, p_local=(2.0, 0.0))


def rot(phi):
    c, s = np.cos(phi), np.sin(phi)
    return np.array([[c, -s], [s, c]])


def drot(phi):
    c, s = np.cos(phi), np.sin(phi)
    return np.array([[-s, -c], [c, -s]])


class ClassicalChain:
    """A planar serial chain of bars pinned to the ground at both ends, in absolute coordinates.

    Body i: centre of mass r_i (middle of the bar), angle φ_i; its joints sit at s = (∓l_i/2, 0).
    ``drivers(x)`` gives the driving-constraint functions' rows; ``kind`` selects them.
    """

    def __init__(self, l0, lengths, kind):
        self.l0, self.L, self.kind = l0, np.asarray(lengths, float), kind
        self.nb = len(lengths)

    def pins(self):
        """(body_i, s_i, body_j, s_j) with body −1 the ground (s = the ground point)."""
        out = [(-1, np.zeros(2), 0, np.array([-self.L[0] / 2, 0.0]))]
        for i in range(self.nb - 1):
            out.append(
                (i, np.array([self.L[i] / 2, 0.0]), i + 1, np.array([-self.L[i + 1] / 2, 0.0]))
            )
        out.append((self.nb - 1, np.array([self.L[-1] / 2, 0.0]), -1, np.array([self.l0, 0.0])))
        return out

    def C(self, x, qdrv):
        r = x.reshape(self.nb, 3)
        rows = []
        for i, si, j, sj in self.pins():
            a = si if i < 0 else r[i, :2] + rot(r[i, 2]) @ si
            b = sj if j < 0 else r[j, :2] + rot(r[j, 2]) @ sj
            rows.extend(a - b)
        if self.kind == "four":  # the height of the coupler's centre of mass
            rows.append(r[1, 1] - qdrv[0])
        else:  # the first absolute angle and the second relative angle
            rows.extend([r[0, 2] - qdrv[0], r[1, 2] - r[0, 2] - qdrv[1]])
        return np.asarray(rows)

    def Cq(self, x):
        r = x.reshape(self.nb, 3)
        n = 3 * self.nb
        rows = []
        for i, si, j, sj in self.pins():
            blk = np.zeros((2, n))
            if i >= 0:
                blk[:, 3 * i : 3 * i + 2] = np.eye(2)
                blk[:, 3 * i + 2] = drot(r[i, 2]) @ si
            if j >= 0:
                blk[:, 3 * j : 3 * j + 2] -= np.eye(2)
                blk[:, 3 * j + 2] -= drot(r[j, 2]) @ sj
            rows.extend(blk)
        if self.kind == "four":
            e = np.zeros(n)
            e[4] = 1.0
            rows.append(e)
        else:
            e1, e2 = np.zeros(n), np.zeros(n)
            e1[2] = 1.0
            e2[5], e2[2] = 1.0, -1.0
            rows.extend([e1, e2])
        return np.asarray(rows)

    def Qd(self, x, xd, qdd):
        r, rd = x.reshape(self.nb, 3), xd.reshape(self.nb, 3)
        rows = []
        for i, si, j, sj in self.pins():
            a = np.zeros(2) if i < 0 else rot(r[i, 2]) @ si * rd[i, 2] ** 2
            b = np.zeros(2) if j < 0 else rot(r[j, 2]) @ sj * rd[j, 2] ** 2
            rows.extend(a - b)
        rows.extend(np.atleast_1d(qdd))
        return np.asarray(rows)

    def solve_position(self, x0, qdrv, iters=30):
        x = np.array(x0, float)
        for _ in range(iters):
            dx = np.linalg.solve(self.Cq(x), -self.C(x, qdrv))
            x += dx
            if np.max(np.abs(dx)) < 1e-15:
                break
        assert np.max(np.abs(self.C(x, qdrv))) < 1e-13
        return x

    def analyse(self, x0, q, qd, qdd, p_body, p_local):
        """Along samples of q(t): position, velocity, acceleration of point p (ground frame)."""
        x = x0
        out = []
        s = np.asarray(p_local, float) - np.array([self.L[p_body] / 2, 0.0])
        for k in range(len(q)):
            x = self.solve_position(x, q[k])
            Cq = self.Cq(x)
            xd = np.linalg.solve(Cq, np.concatenate([np.zeros(2 * (self.nb + 1)), qd[k]]))
            xdd = np.linalg.solve(Cq, self.Qd(x, xd, qdd[k]))
            r, rd, rdd = (
                x.reshape(-1, 3)[p_body],
                xd.reshape(-1, 3)[p_body],
                xdd.reshape(-1, 3)[p_body],
            )
            A, At = rot(r[2]), drot(r[2])
            pos = r[:2] + A @ s
            vel = rd[:2] + At @ s * rd[2]
            acc = rdd[:2] + At @ s * rdd[2] - A @ s * rd[2] ** 2
            out.append((pos, vel, acc, x.copy()))
        return [np.asarray(v) for v in zip(*out, strict=True)]


def initial_chain(lengths, angles):
    """Absolute coordinates of a chain from its absolute link angles (a rough sketch is enough)."""
    x, p = [], np.zeros(2)
    for L, phi in zip(lengths, angles, strict=True):
        u = np.array([np.cos(phi), np.sin(phi)])
        x.extend([*(p + u * L / 2), phi])
        p = p + u * L
    return np.asarray(x)


def hermite(ts, values, slopes, t):
    sp = CubicHermiteSpline(ts, values, slopes, axis=0)
    return sp(t), sp.derivative(1)(t), sp.derivative(2)(t)


def jaxmb_point_kinematics(model, q, qd, qdd):
    fn = jax.jit(
        jax.vmap(
            lambda q, qd, qdd: (
                mb.point_position(model, "p", None, q),
                mb.point_velocity(model, "p", None, q, qd),
                mb.point_acceleration(model, "p", None, q, qd, qdd),
            )
        )
    )
    return [np.asarray(a)[:, :2] for a in fn(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd))]


def agreement(a, b):
    """Max over samples of |a − b|, relative to the trajectory's largest |b|."""
    scale = np.max(np.linalg.norm(b, axis=1))
    return np.max(np.linalg.norm(a - b, axis=1)) / scale


def four_bar_trajectory(n=301):
    t = np.linspace(0.0, 4.0, n)
    q, qd, qdd = hermite(
        [0.0, 1.0, 2.0, 3.0, 4.0],
        [0.15, 0.45, 0.25, 0.52, 0.12],
        [0.0, 0.2, -0.3, 0.0, 0.0],
        t,
    )
    return t, q[:, None], qd[:, None], qdd[:, None]


def five_bar_trajectory(n=301):
    t = np.linspace(0.0, 4.0, n)
    q, qd, qdd = hermite(
        [0.0, 1.0, 2.0, 3.0, 4.0],
        np.array([[0.0, -0.5], [1.2, 0.8], [2.5, -1.5], [1.0, 0.3], [-0.6, 2.0]]),
        np.array([[0.0, 0.0], [1.5, -0.5], [0.0, 1.0], [-2.0, 0.5], [0.0, 0.0]]),
        t,
    )
    return t, q, qd, qdd


def test_four_bar_matches_classical_analysis():
    model = four_bar()
    t, q, qd, qdd = four_bar_trajectory()
    chain = ClassicalChain(FOUR["l0"], FOUR["lengths"], "four")
    # the branch: coupler above the ground line, crank in its rising half-turn (sketched)
    x0 = chain.solve_position(initial_chain(FOUR["lengths"], [0.5, 0.3, -1.2]), q[0])
    pos, vel, acc, X = chain.analyse(x0, q, qd, qdd, FOUR["p_body"], FOUR["p_local"])
    mpos, mvel, macc = jaxmb_point_kinematics(model, q, qd, qdd)
    e = (agreement(mpos, pos), agreement(mvel, vel), agreement(macc, acc))
    assert max(e) < RTOL, e
    # same branch: joint angles equal the absolute-angle differences
    f = np.asarray(jax.vmap(model.joint_map)(jnp.asarray(q)))
    phi = X.reshape(len(t), 3, 3)[:, :, 2]
    rel_angles = np.stack([phi[:, 0], phi[:, 1] - phi[:, 0], phi[:, 2] - phi[:, 1]], -1)
    d = np.mod(f - rel_angles + np.pi, 2 * np.pi) - np.pi
    assert np.max(np.abs(d)) < 1e-11


def test_five_bar_matches_classical_analysis():
    model = five_bar()
    t, q, qd, qdd = five_bar_trajectory()
    chain = ClassicalChain(FIVE["l0"], FIVE["lengths"], "five")
    q0 = q[0]
    # sketch of the elbow-left branch at q0 = (0, −0.5): joint 4 well above the ground line
    x0 = chain.solve_position(initial_chain(FIVE["lengths"], [q0[0], q0[0] + q0[1], 0.9, -1.2]), q0)
    pos, vel, acc, X = chain.analyse(x0, q, qd, qdd, FIVE["p_body"], FIVE["p_local"])
    mpos, mvel, macc = jaxmb_point_kinematics(model, q, qd, qdd)
    e = (agreement(mpos, pos), agreement(mvel, vel), agreement(macc, acc))
    assert max(e) < RTOL, e
    f = np.asarray(jax.vmap(model.joint_map)(jnp.asarray(q)))
    phi = X.reshape(len(t), 4, 3)[:, :, 2]
    rel_angles = np.concatenate([phi[:, :1], np.diff(phi, axis=1)], -1)
    d = np.mod(f - rel_angles + np.pi, 2 * np.pi) - np.pi
    assert np.max(np.abs(d)) < 1e-11


@pytest.mark.slow
@pytest.mark.parametrize("method", ["projection", "molecule"])
def test_five_bar_velocity_by_other_backends(method):
    """v_p = Σ_i (∂p/∂f_i) ∇f_iᵀ q̇ with ∇f by the projection method (exact) or the molecule."""
    model = five_bar()
    _, q, qd, _ = five_bar_trajectory(41)

    def vel(q, qd):
        J = mb.joint_gradients(model, q, method, h=1e-5)
        fdot = J @ qd
        p_of_f = lambda f: _p_from_f(model, f)
        return jax.jvp(p_of_f, (model.joint_map(q),), (fdot,))[1]

    v = np.asarray(jax.jit(jax.vmap(vel))(jnp.asarray(q), jnp.asarray(qd)))[:, :2]
    mv = jaxmb_point_kinematics(model, q, qd, np.zeros_like(q))[1]
    tol = RTOL if method == "projection" else 1e-8
    assert agreement(v, mv) < tol


def _p_from_f(model, f):
    from jaxmb.kinematics import compose_transforms, local_transforms

    A = compose_transforms(model.parent, local_transforms(model, f))
    b, r = model.points["p"]
    return A[b, :3, :3] @ r + A[b, :3, 3]
