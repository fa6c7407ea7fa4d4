"""Andrews' squeezing mechanism (seed 001 §4-4 B; Hairer & Wanner II VII.7; IVP test set 'andrews').

Seven planar bodies (axes z), three kinematic loops closing at the common point E, one degree of
freedom q = β (the crank angle, the seed's θ1). As a jaxmb tree::

    ground ─ K1 (β, pivot O) ─ K2 (Θ, relative to K1)            E at K2's tip
    ground ─ K3 (γ, pivot B)                                       E and spring point D on K3
    ground ─ K5 (δ, pivot A) ─ K4 (Φ, relative to K5)             E on K4
    ground ─ K7 (ε, pivot A) ─ K6 (Ω, relative to K7)             E on K6

Bodies are numbered K1, K2, K3, K5, K4, K7, K6 (parents first), so the joint variables are
``f = (β, Θ, γ, δ, Φ, ε, Ω)``; :data:`TEST_SET_ORDER` permutes them to the test set's
``(β, Θ, γ, Φ, δ, Ω, ε)``.

The six loop-closure constraints are embedded in :class:`AndrewsJointMap`, which solves each loop
in closed form: E is the intersection of the circle of radius d about K1's tip with the circle of
radius ss about B; K5's and K7's joints are the intersections of circles about A and E. Each
intersection takes a fixed side (a static sign), so the same assembly branch is found at every q
and f is a pure, smooth, 2π-periodic-in-β function plus β itself (Θ = ψ₂ − β with K2's bounded
absolute angle ψ₂: Θ grows with β without any unwrapping). Its derivatives are exact: forward-mode
Taylor propagation through the same closed form.

The test set's own 7-coordinate index-3 DAE (M, f, g, G and g_qq of
``jaxmb/data/andrews_squeezer.json``'s README) is here too, as ``dae_*`` functions: the tests use it
to check the tree model and the benchmark integrates it as the DAE alternative.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..forces import CoordinateForce, PointToPointSpring
from ..joint_maps import AbstractJointMap
from ..model import Body, Model, build_model

__all__ = [
    "andrews_squeezer",
    "andrews_data",
    "AndrewsJointMap",
    "TEST_SET_ORDER",
    "BETA0",
    "to_test_set",
    "from_test_set",
    "reference_solution",
    "dae_mass_matrix",
    "dae_forces",
    "dae_constraints",
    "dae_constraint_jacobian",
    "dae_gqq",
    "dae_acceleration",
]

#: f (tree order β, Θ, γ, δ, Φ, ε, Ω) → test-set order (β, Θ, γ, Φ, δ, Ω, ε); an involution.
TEST_SET_ORDER = (0, 1, 2, 4, 3, 6, 5)
BODY_NAMES = ("K1", "K2", "K3", "K5", "K4", "K7", "K6")


@functools.cache
def _data_text() -> str:
    return resources.files("jaxmb").joinpath("data/andrews_squeezer.json").read_text()


def andrews_data() -> dict:
    """The parameters, initial values and published reference of the test set (a fresh dict).

    Keys as in ``jaxmb/data/andrews_squeezer.json``; plus ``"p"``: a flat dict of every named
    parameter (m1..m7, I1..I7, xa, ya, xb, yb, xc, yc, lengths, c0, l0, mom), SI units.
    """
    data = json.loads(_data_text())
    p = {}
    for k, (m, i) in enumerate(zip(data["masses"], data["inertias"], strict=True)):
        p[f"m{k + 1}"] = float(m)
        p[f"I{k + 1}"] = float(i)
    p.update({k: float(v) for k, v in data["fixed_points"].items()})
    p.update({k: float(v) for k, v in data["lengths"].items()})
    p.update({k: float(v) for k, v in data["spring"].items()})
    p["mom"] = float(data["driving_torque_mom"])
    data["p"] = p
    return data


#: Sides of the three circle intersections (E; K5's and K7's joints) of the test set's assembly.
ASSEMBLY_SIDES = (1, 1, -1)

#: β(0) of the test set's consistent initial values (rad).
BETA0 = -0.0617138900142764496358948458001


def to_test_set(f: Float[Array, "... 7"]) -> Float[Array, "... 7"]:
    """Joint variables in tree order → the test set's (β, Θ, γ, Φ, δ, Ω, ε)."""
    return f[..., jnp.asarray(TEST_SET_ORDER)]


def from_test_set(y: Float[Array, "... 7"]) -> Float[Array, "... 7"]:
    """The test set's (β, Θ, γ, Φ, δ, Ω, ε) → joint variables in tree order."""
    return y[..., jnp.asarray(TEST_SET_ORDER)]


def reference_solution() -> tuple[np.ndarray, np.ndarray]:
    """The published reference at t = 0.03 s: angles and velocities (7,), test-set order."""
    ref = andrews_data()["published_reference_t_0.03"]
    return np.asarray(ref["angles"]), np.asarray(ref["velocities"])


def _circle_intersection(c1, r1, c2, r2, side):
    """The point at distances r1 from c1 and r2 from c2 on the ``side`` (±1) of the ray c1 → c2.

    NaN where the circles do not meet (the loop cannot be assembled):
    :meth:`AndrewsJointMap.__call__` raises on it once, not per intersection and derivative order.
    """
    dv = c2 - c1
    L2 = dv @ dv
    a = 0.5 * (r1 * r1 - r2 * r2 + L2) / L2  # along dv, as a fraction of |dv|
    h2 = r1 * r1 / L2 - a * a  # (height / |dv|)²
    h = jnp.sqrt(jnp.where(h2 > 0.0, h2, jnp.nan))
    perp = jnp.stack([-dv[1], dv[0]])
    return c1 + a * dv + side * h * perp


def _assembled(f):
    """f, raising (``equinox.error_if``) where the loops could not be closed (f not finite)."""
    return eqx.error_if(
        f, ~jnp.all(jnp.isfinite(f)), "Andrews' squeezer: a loop cannot be closed at this q"
    )


def _angle(v):
    return jnp.arctan2(v[1], v[0])


class AndrewsJointMap(AbstractJointMap):
    """β ↦ f = (β, Θ, γ, δ, Φ, ε, Ω), the loop closures of Andrews' squeezer in closed form.

    Attributes:
        lengths: (7,) rr, d, ss, e, zt, u, zf (m).
        A, B: (2,) the fixed pivots A and B (m); the crank pivot O is the origin.
        sides: static signs (±1) of the three circle intersections (the assembly branch).
    """

    lengths: Float[Array, " 7"]
    A: Float[Array, " 2"]
    B: Float[Array, " 2"]
    sides: tuple[int, int, int] = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nj: int = eqx.field(static=True)

    def __init__(self, lengths, A, B, sides):
        self.lengths = jnp.asarray(lengths, dtype=float)
        self.A = jnp.asarray(A, dtype=float)
        self.B = jnp.asarray(B, dtype=float)
        self.sides = tuple(int(s) for s in sides)
        if self.lengths.shape != (7,) or self.A.shape != (2,) or self.B.shape != (2,):
            raise ValueError("AndrewsJointMap: lengths must be (7,), A and B (2,)")
        if any(s not in (-1, 1) for s in self.sides) or len(self.sides) != 3:
            raise ValueError(f"AndrewsJointMap: sides must be three signs ±1, got {sides}")
        self.nq, self.nj = 1, 7

    def _solve(self, beta):
        rr, d, ss, e, zt, u, zf = (self.lengths[k] for k in range(7))
        A, B = self.A, self.B
        s1, s2, s3 = self.sides
        c, s = jnp.cos(beta), jnp.sin(beta)
        P = rr * jnp.stack([c, s])  # K1's tip, the joint to K2
        E = _circle_intersection(P, d, B, ss, s1)
        J5 = _circle_intersection(A, zt, E, e, s2)  # K5's joint to K4
        J7 = _circle_intersection(A, u, E, zf, s3)  # K7's joint to K6
        # absolute angles stay within (−π, π) over the whole cycle (checked in the tests), so
        # differences of atan2 are smooth; Θ inherits β's unbounded growth as it should.
        psi2 = _angle(P - E)  # K2 points from E to P: E = P − d (cos ψ2, sin ψ2)
        gamma = _angle(jnp.stack([-(E[1] - B[1]), E[0] - B[0]]))  # E − B = ss (sin γ, −cos γ)
        delta = _angle(J5 - A)
        psi4 = _angle(jnp.stack([-(E[1] - J5[1]), E[0] - J5[0]]))  # E − J5 = e (sin ψ4, −cos ψ4)
        eps = _angle(jnp.stack([-(J7[1] - A[1]), J7[0] - A[0]]))  # J7 − A = u (sin ε, −cos ε)
        psi6 = _angle(E - J7)  # E − J7 = zf (cos ψ6, sin ψ6)
        return jnp.stack([beta, psi2 - beta, gamma, delta, psi4 - delta, eps, psi6 - eps])

    def __call__(self, q: Float[Array, " 1"]) -> Float[Array, " 7"]:
        """Joint variables f(q) (rad), shape (7,), tree order. Raises
        (``equinox.EquinoxRuntimeError``) where a loop cannot be closed."""
        return _assembled(self._solve(q[0]))

    def derivatives(self, q: Float[Array, " 1"]):
        """``(f (7,), J (7, 1), H (7, 1, 1))``, exact: forward-mode through the closed form.

        NaN, not an error, where a loop cannot be closed: the equations of motion that use these
        report a non-finite q̈ themselves (``forward_dynamics`` raises, the ODE driver names the
        state), and a right-hand side free of host callbacks runs several times faster as a
        stand-alone XLA:CPU program (the premodel's run-time check, a single evaluation).
        """
        one = jnp.ones_like(q[0])
        first = lambda b: jax.jvp(self._solve, (b,), (one,))
        (f, df), (_, d2f) = jax.jvp(first, (q[0],), (one,))
        return f, df[:, None], d2f[:, None, None]

    def jacobian(self, q):
        return self.derivatives(q)[1]

    def hessian(self, q):
        return self.derivatives(q)[2]

    def periods(self) -> tuple[float]:
        """β is a crank angle: after a turn every body is back (Θ changes by −2π)."""
        return (2.0 * np.pi,)

    def constraint_residual(self, f: Float[Array, " 7"]) -> Float[Array, " 6"]:
        """The test set's g (six loop closures, m) at joint variables f in tree order."""
        return dae_constraints(_geometry_dict(self), to_test_set(f))


def _geometry_dict(jm: AndrewsJointMap) -> dict:
    rr, d, ss, e, zt, u, zf = (jm.lengths[k] for k in range(7))
    return dict(
        rr=rr, d=d, ss=ss, e=e, zt=zt, u=u, zf=zf, xa=jm.A[0], ya=jm.A[1], xb=jm.B[0], yb=jm.B[1]
    )


@eqx.filter_jit
def _initial_angles(jmap, beta):
    return to_test_set(jmap(jnp.reshape(beta, (1,))))


def andrews_squeezer(*, forces: bool = True) -> Model:
    """Andrews' squeezer as a 7-body jaxmb tree with its loops embedded: q = (β,), nq = 1.

    All parameters are those of the IVP test set / Hairer & Wanner (no gravity). The spring between
    K3's point D and the ground point C (stiffness c0, rest length l0) and the driving torque
    ``mom`` on β are the model's own force elements (``forces=False`` leaves them out). Named
    points: ``E_K2, E_K3, E_K4, E_K6`` (the loop-closure point on each body), ``D`` (on K3),
    ``C`` (ground), ``O``, ``A``, ``B`` (ground pivots). Consistent initial state: q = (BETA0,),
    q̇ = 0.

    Returns:
        The :class:`~jaxmb.model.Model`; ``model.joint_map`` is an :class:`AndrewsJointMap`.
    """
    data = andrews_data()
    p = data["p"]
    lengths = jnp.asarray([p[k] for k in ("rr", "d", "ss", "e", "zt", "u", "zf")])
    A = jnp.asarray([p["xa"], p["ya"]])
    B = jnp.asarray([p["xb"], p["yb"]])
    y0 = np.asarray(data["initial_values_t0"]["angles"])
    jmap = AndrewsJointMap(lengths=lengths, A=A, B=B, sides=ASSEMBLY_SIDES)
    err = np.max(np.abs(np.asarray(_initial_angles(jmap, y0[0])) - y0))
    if not err < 1e-10:  # the data and the closed form disagree: never build a wrong mechanism
        raise ValueError(f"andrews_squeezer: the assembly branch misses the initial angles ({err})")

    z = lambda x, y: (x, y, 0.0)
    Izz = lambda k: np.diag([p[f"I{k}"], p[f"I{k}"], p[f"I{k}"]])
    e_, ea, zf, fa = p["e"], p["ea"], p["zf"], p["fa"]
    bodies = [
        Body("K1", None, axis=(0, 0, 1), position=(0.0, 0.0, 0.0), mass=p["m1"],
             com=z(p["ra"], 0.0), inertia=Izz(1)),
        Body("K2", "K1", axis=(0, 0, 1), position=z(p["rr"], 0.0), mass=p["m2"],
             com=z(-p["da"], 0.0), inertia=Izz(2)),
        Body("K3", None, axis=(0, 0, 1), position=z(p["xb"], p["yb"]), mass=p["m3"],
             com=z(p["sb"], -p["sa"]), inertia=Izz(3)),
        Body("K5", None, axis=(0, 0, 1), position=z(p["xa"], p["ya"]), mass=p["m5"],
             com=z(p["ta"], p["tb"]), inertia=Izz(5)),
        # K4 and K6 have their frames at the joint to K5/K7 here (PyMbs puts them at E)
        Body("K4", "K5", axis=(0, 0, 1), position=z(p["zt"], 0.0), mass=p["m4"],
             com=z(0.0, ea - e_), inertia=Izz(4)),
        Body("K7", None, axis=(0, 0, 1), position=z(p["xa"], p["ya"]), mass=p["m7"],
             com=z(-p["ua"], -p["ub"]), inertia=Izz(7)),
        Body("K6", "K7", axis=(0, 0, 1), position=z(0.0, -p["u"]), mass=p["m6"],
             com=z(zf - fa, 0.0), inertia=Izz(6)),
    ]  # fmt: skip
    points = {
        "O": ("ground", (0.0, 0.0, 0.0)),
        "A": ("ground", z(p["xa"], p["ya"])),
        "B": ("ground", z(p["xb"], p["yb"])),
        "C": ("ground", z(p["xc"], p["yc"])),
        "D": ("K3", z(p["sd"], -p["sc"])),
        "E_K2": ("K2", z(-p["d"], 0.0)),
        "E_K3": ("K3", z(0.0, -p["ss"])),
        "E_K4": ("K4", z(0.0, -e_)),
        "E_K6": ("K6", z(zf, 0.0)),
    }
    force_elements = ()
    if forces:
        force_elements = (
            PointToPointSpring(
                2, jnp.asarray(z(p["sd"], -p["sc"])), -1, jnp.asarray(z(p["xc"], p["yc"])),
                stiffness=p["c0"], rest_length=p["l0"],
            ),
            CoordinateForce(0, p["mom"]),
        )  # fmt: skip
    return build_model(
        bodies,
        jmap,
        gravity=(0.0, 0.0, 0.0),
        coordinate_names=("beta",),
        forces=force_elements,
        points=points,
        name="andrews_squeezer",
    )


# --- the test set's 7-coordinate DAE (README §3), y = (β, Θ, γ, Φ, δ, Ω, ε) -----------------------


def dae_mass_matrix(p: dict, y: Float[Array, " 7"]) -> Float[Array, "7 7"]:
    """M(y) of the test set (§3.3), symmetric, kg·m²."""
    _, th, _, ph, _, om, _ = (y[k] for k in range(7))
    m1, m2, m3, m4, m5, m6, m7 = (p[f"m{k}"] for k in range(1, 8))
    I1, I2, I3, I4, I5, I6, I7 = (p[f"I{k}"] for k in range(1, 8))
    ra, rr, da, sa, sb, e, ea = p["ra"], p["rr"], p["da"], p["sa"], p["sb"], p["e"], p["ea"]
    zt, ta, tb, zf, fa, u, ua, ub = (p[k] for k in ("zt", "ta", "tb", "zf", "fa", "u", "ua", "ub"))
    coth, siph, siom = jnp.cos(th), jnp.sin(ph), jnp.sin(om)
    M11 = m1 * ra**2 + m2 * (rr**2 - 2 * da * rr * coth + da**2) + I1 + I2
    M21 = m2 * (da**2 - da * rr * coth) + I2
    M22 = m2 * da**2 + I2
    M33 = m3 * (sa**2 + sb**2) + I3
    M44 = m4 * (e - ea) ** 2 + I4
    M54 = m4 * ((e - ea) ** 2 + zt * (e - ea) * siph) + I4
    M55 = m4 * (zt**2 + 2 * zt * (e - ea) * siph + (e - ea) ** 2) + m5 * (ta**2 + tb**2) + I4 + I5
    M66 = m6 * (zf - fa) ** 2 + I6
    M76 = m6 * ((zf - fa) ** 2 - u * (zf - fa) * siom) + I6
    M77 = m6 * ((zf - fa) ** 2 - 2 * u * (zf - fa) * siom + u**2) + m7 * (ua**2 + ub**2) + I6 + I7
    zero = jnp.zeros_like(M11)
    rows = [
        [M11, M21, zero, zero, zero, zero, zero],
        [M21, M22, zero, zero, zero, zero, zero],
        [zero, zero, M33, zero, zero, zero, zero],
        [zero, zero, zero, M44, M54, zero, zero],
        [zero, zero, zero, M54, M55, zero, zero],
        [zero, zero, zero, zero, zero, M66, M76],
        [zero, zero, zero, zero, zero, M76, M77],
    ]
    return jnp.stack([jnp.stack(r) for r in rows])


def dae_forces(p: dict, y: Float[Array, " 7"], yd: Float[Array, " 7"]) -> Float[Array, " 7"]:
    """f(y, ẏ) of the test set (§3.4): spring, motor and velocity-dependent terms (N·m)."""
    be, th, ga, ph, de, om, ep = (y[k] for k in range(7))
    bep, thp, _, php, dep, omp, epp = (yd[k] for k in range(7))
    m2, m4, m6 = p["m2"], p["m4"], p["m6"]
    rr, da, e, ea, zt, zf, fa, u = (p[k] for k in ("rr", "da", "e", "ea", "zt", "zf", "fa", "u"))
    sc, sd, xb, yb, xc, yc = (p[k] for k in ("sc", "sd", "xb", "yb", "xc", "yc"))
    xd = sd * jnp.cos(ga) + sc * jnp.sin(ga) + xb
    yd_ = sd * jnp.sin(ga) - sc * jnp.cos(ga) + yb
    lang = jnp.sqrt((xd - xc) ** 2 + (yd_ - yc) ** 2)
    force = -p["c0"] * (lang - p["l0"]) / lang
    fx, fy = force * (xd - xc), force * (yd_ - yc)
    return jnp.stack(
        [
            p["mom"] - m2 * da * rr * thp * (thp + 2 * bep) * jnp.sin(th),
            m2 * da * rr * bep**2 * jnp.sin(th),
            fx * (sc * jnp.cos(ga) - sd * jnp.sin(ga)) + fy * (sd * jnp.cos(ga) + sc * jnp.sin(ga)),
            m4 * zt * (e - ea) * dep**2 * jnp.cos(ph),
            -m4 * zt * (e - ea) * php * (php + 2 * dep) * jnp.cos(ph),
            -m6 * u * (zf - fa) * epp**2 * jnp.cos(om),
            m6 * u * (zf - fa) * omp * (omp + 2 * epp) * jnp.cos(om),
        ]
    )


def dae_constraints(p: dict, y: Float[Array, " 7"]) -> Float[Array, " 6"]:
    """g(y) of the test set (§3.5): the three loops closed at E (m)."""
    be, th, ga, ph, de, om, ep = (y[k] for k in range(7))
    rr, d, ss, e, zt, zf, u = (p[k] for k in ("rr", "d", "ss", "e", "zt", "zf", "u"))
    xa, ya, xb, yb = p["xa"], p["ya"], p["xb"], p["yb"]
    Ex = rr * jnp.cos(be) - d * jnp.cos(be + th)
    Ey = rr * jnp.sin(be) - d * jnp.sin(be + th)
    return jnp.stack(
        [
            Ex - ss * jnp.sin(ga) - xb,
            Ey + ss * jnp.cos(ga) - yb,
            Ex - e * jnp.sin(ph + de) - zt * jnp.cos(de) - xa,
            Ey + e * jnp.cos(ph + de) - zt * jnp.sin(de) - ya,
            Ex - zf * jnp.cos(om + ep) - u * jnp.sin(ep) - xa,
            Ey - zf * jnp.sin(om + ep) + u * jnp.cos(ep) - ya,
        ]
    )


def dae_constraint_jacobian(p: dict, y: Float[Array, " 7"]) -> Float[Array, "6 7"]:
    """G = ∂g/∂y of the test set (§3.6), (6, 7)."""
    be, th, ga, ph, de, om, ep = (y[k] for k in range(7))
    rr, d, ss, e, zt, zf, u = (p[k] for k in ("rr", "d", "ss", "e", "zt", "zf", "u"))
    sibe, cobe = jnp.sin(be), jnp.cos(be)
    sibeth, cobeth = jnp.sin(be + th), jnp.cos(be + th)
    siphde, cophde = jnp.sin(ph + de), jnp.cos(ph + de)
    siomep, coomep = jnp.sin(om + ep), jnp.cos(om + ep)
    G11 = -rr * sibe + d * sibeth
    G21 = rr * cobe - d * cobeth
    G12, G22 = d * sibeth, -d * cobeth
    z = jnp.zeros_like(G11)
    rows = [
        [G11, G12, -ss * jnp.cos(ga), z, z, z, z],
        [G21, G22, -ss * jnp.sin(ga), z, z, z, z],
        [G11, G12, z, -e * cophde, -e * cophde + zt * jnp.sin(de), z, z],
        [G21, G22, z, -e * siphde, -e * siphde - zt * jnp.cos(de), z, z],
        [G11, G12, z, z, z, zf * siomep, zf * siomep - u * jnp.cos(ep)],
        [G21, G22, z, z, z, -zf * coomep, -zf * coomep - u * jnp.sin(ep)],
    ]
    return jnp.stack([jnp.stack(r) for r in rows])


def dae_gqq(p: dict, y: Float[Array, " 7"], yd: Float[Array, " 7"]) -> Float[Array, " 6"]:
    """``g_qq(ẏ, ẏ) = d²g/dt² − G ÿ`` (§3.6), (6,) m/s²."""
    be, th, ga, ph, de, om, ep = (y[k] for k in range(7))
    bep, thp, gap, php, dep, omp, epp = (yd[k] for k in range(7))
    rr, d, ss, e, zt, zf, u = (p[k] for k in ("rr", "d", "ss", "e", "zt", "zf", "u"))
    a = -rr * jnp.cos(be) * bep**2 + d * jnp.cos(be + th) * (bep + thp) ** 2
    b = -rr * jnp.sin(be) * bep**2 + d * jnp.sin(be + th) * (bep + thp) ** 2
    return jnp.stack(
        [
            a + ss * jnp.sin(ga) * gap**2,
            b - ss * jnp.cos(ga) * gap**2,
            a + e * jnp.sin(ph + de) * (php + dep) ** 2 + zt * jnp.cos(de) * dep**2,
            b - e * jnp.cos(ph + de) * (php + dep) ** 2 + zt * jnp.sin(de) * dep**2,
            a + zf * jnp.cos(om + ep) * (omp + epp) ** 2 + u * jnp.sin(ep) * epp**2,
            b + zf * jnp.sin(om + ep) * (omp + epp) ** 2 - u * jnp.cos(ep) * epp**2,
        ]
    )


def dae_acceleration(
    p: dict,
    y: Float[Array, " 7"],
    yd: Float[Array, " 7"],
    baumgarte: tuple[float, float] | None = None,
) -> Float[Array, " 7"]:
    """ÿ (7,) rad/s² of the test set's index-1 DAE (README §3): one solve of the KKT system

        [M  Gᵀ] [ÿ]   [f(y, ẏ)                       ]
        [G  0 ] [λ] = [−g_qq(ẏ, ẏ) − 2α G ẏ − β² g(y)],

    the multipliers λ (6,) dropped. ``baumgarte = (α, β)`` (1/s) damps the drift off the position
    and velocity constraints; ``None`` (the default) is the plain index-1 system. This is the
    right-hand side the embedded 1-DOF ODE of :func:`andrews_squeezer` is compared with.
    """
    M = dae_mass_matrix(p, y)
    G = dae_constraint_jacobian(p, y)
    K = jnp.block([[M, G.T], [G, jnp.zeros((6, 6), M.dtype)]])
    c = -dae_gqq(p, y, yd)
    if baumgarte is not None:
        alpha, beta = baumgarte
        c = c - 2.0 * alpha * (G @ yd) - beta**2 * dae_constraints(p, y)
    return jnp.linalg.solve(K, jnp.concatenate([dae_forces(p, y, yd), c]))[:7]


def dae_projected_acceleration(
    p: dict, joint_map: AndrewsJointMap, q: Float[Array, " 1"], qd: Float[Array, " 1"]
) -> Float[Array, " 1"]:
    """q̈ of the test set's equations projected onto the joint map (an independent 1-DOF route).

    With y = P f(q) (test-set order), ẏ = Y q̇ and ÿ = Y q̈ + γ, γ = (q̇ᵀ H q̇): the constraint forces
    drop out of ``Yᵀ (M ÿ − f) = 0`` because G Y = 0, so ``(Yᵀ M Y) q̈ = Yᵀ (f − M γ)``.
    """
    f, J, H = joint_map.derivatives(q)
    y, Y = to_test_set(f), to_test_set(J.T).T
    gam = to_test_set(jnp.einsum("ikl,k,l->i", H, qd, qd))
    M = dae_mass_matrix(p, y)
    rhs = Y.T @ (dae_forces(p, y, Y @ qd) - M @ gam)
    return jnp.linalg.solve(Y.T @ M @ Y, rhs)
