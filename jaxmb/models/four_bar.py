"""The planar four-bar linkage of seed 001 §4-3 A (Eq. 121): one degree of freedom.

Three moving links in a serial chain from the ground pivot O at the origin: the crank (link 1,
length l1), the coupler (link 2, length l2, centre of mass lcm2 from its first joint) and the rocker
(link 3, length l3), whose far end is pinned to the ground at (l0, 0, 0). All joints are revolute
about z; the mechanism moves in the x–y plane and gravity is −9.81 m/s² along y.

Joint variables θ1 (absolute crank angle), θ2, θ3 (relative angles). The generalized coordinate is
the height of the coupler's centre of mass, q = y_cm2 (m), and the constraints of Eq. 121

    l1 S1 + lcm2 S12 − q = 0,
    (l2 − lcm2) S12 + l3 S123 + q = 0,
    l1 C1 + l2 C12 + l3 C123 − l0 = 0

make all three joint variables implicit functions of q (m = 3 dependent, none independent).

Lengths (Table 1 of the seed was lost, so these are a choice): a Grashof crank-rocker of bench
size, l0 = 1.0, l1 = 0.4, l2 = 1.0, l3 = 0.8 m, lcm2 = l2/2 = 0.5 m. On the chosen branch the
coupler's centre of mass moves between y = 0.0534 m and y = 0.5986 m as the crank turns, so q is a
valid coordinate inside ``Q_RANGE`` = (0.06, 0.59) m (at the ends ∂θ/∂q → ∞).

Assembly branch: the coupler "above" (joint 3 to the left of the directed line from joint 2 to the
ground pivot) with the crank on the half-turn where q increases with θ1,
θ1 ∈ (−1.78, 1.50) rad. The warm start of the Newton solve is a cubic spline of this branch
sampled in closed form (crank angle → circle intersection) at build time, so the same branch is
found at every q; four Newton iterations polish it to round-off.

Point p (Fig. 3 was lost): a coupler point 0.5 m along link 2 and 0.25 m to its left.

Masses (none in the seed): uniform steel flat bars 25 mm × 10 mm (1.9625 kg/m): m1 = 0.785 kg,
m2 = 1.9625 kg, m3 = 1.57 kg, centre of mass mid-link, rectangular-bar inertias.
"""

from __future__ import annotations

import functools

import interpax
import jax.numpy as jnp
import numpy as np

from ..joint_maps import ImplicitMap, PremodelMap
from ..math import serialisable
from ..model import Model, build_model
from ._planar import bar_body

LENGTHS = {"l0": 1.0, "l1": 0.4, "l2": 1.0, "l3": 0.8, "lcm2": 0.5}
#: Range (m) of q on which the map is smooth (inside the extreme heights 0.0534 and 0.5986 m).
Q_RANGE = (0.06, 0.59)
#: Reference assembly: q (m) of the reference configuration.
Q_REF = 0.3
P_COUPLER = (0.5, 0.25, 0.0)


@serialisable
def loop_constraints(f, q, p):
    """Eq. 121 in metres: the coupler's centre-of-mass height and the loop closure."""
    a1 = f[0]
    a12 = a1 + f[1]
    a123 = a12 + f[2]
    return jnp.stack(
        [
            p["l1"] * jnp.sin(a1) + p["lcm2"] * jnp.sin(a12) - q[0],
            (p["l2"] - p["lcm2"]) * jnp.sin(a12) + p["l3"] * jnp.sin(a123) + q[0],
            p["l1"] * jnp.cos(a1) + p["l2"] * jnp.cos(a12) + p["l3"] * jnp.cos(a123) - p["l0"],
        ]
    )


def branch_by_crank(theta1: np.ndarray, L: dict = LENGTHS):
    """Closed form on the chosen branch, by crank angle: (q, θ1, θ2, θ3), numpy."""
    theta1 = np.asarray(theta1, dtype=float)
    x1, y1 = L["l1"] * np.cos(theta1), L["l1"] * np.sin(theta1)
    dx, dy = L["l0"] - x1, -y1
    D = np.hypot(dx, dy)
    phi2 = np.arctan2(dy, dx) + np.arccos((L["l2"] ** 2 + D**2 - L["l3"] ** 2) / (2 * L["l2"] * D))
    x2, y2 = x1 + L["l2"] * np.cos(phi2), y1 + L["l2"] * np.sin(phi2)
    phi3 = np.arctan2(-y2, L["l0"] - x2)
    q = y1 + L["lcm2"] * np.sin(phi2)
    th2 = np.mod(phi2 - theta1 + np.pi, 2 * np.pi) - np.pi
    th3 = np.mod(phi3 - phi2 + np.pi, 2 * np.pi) - np.pi
    return q, theta1, th2, th3


@functools.lru_cache(maxsize=4)
def _warm_table(n: int = 257):
    """The branch on a uniform q grid over Q_RANGE, by inverting q(θ1) on the rising half-turn."""
    crank = np.linspace(-1.78, 1.50, 40001)
    qc, *_ = branch_by_crank(crank)
    if not np.all(np.diff(qc) > 0):
        raise RuntimeError("four_bar: q(θ1) is not monotone on the chosen crank interval")
    qs = np.linspace(Q_RANGE[0] - 0.005, Q_RANGE[1] + 0.003, n)
    th1 = np.interp(qs, qc, crank)
    _, a, b, c = branch_by_crank(th1)
    return qs, np.stack([a, b, c], -1)


def four_bar(iterations: int = 4) -> Model:
    """The four-bar linkage of Eq. 121 (see the module docstring), q = height of the coupler CoM.

    Args:
        iterations: Newton iterations polishing the spline warm start (4 reach round-off).
    """
    qs, F = _warm_table()
    warm = PremodelMap(
        interpax.CubicSpline(jnp.asarray(qs), jnp.asarray(F), axis=0, extrapolate=True),
        [qs[0]],
        [qs[-1]],
        3,
        extrapolate=True,
    )
    params = {k: jnp.asarray(v) for k, v in LENGTHS.items()}
    jm = ImplicitMap(
        loop_constraints,
        nq=1,
        nj=3,
        dependent=(0, 1, 2),
        reference=np.asarray(warm(jnp.asarray([Q_REF]))),
        params=params,
        warm_start=warm,
        iterations=iterations,
    )
    L = LENGTHS
    bodies = [
        bar_body("crank", None, 0.0, L["l1"]),
        bar_body("coupler", "crank", L["l1"], L["l2"]),
        bar_body("rocker", "coupler", L["l2"], L["l3"]),
    ]
    return build_model(
        bodies,
        jm,
        gravity=(0.0, -9.81, 0.0),
        coordinate_names=("y_cm2",),
        points={
            "p": ("coupler", P_COUPLER),
            "cm2": ("coupler", (L["lcm2"], 0.0, 0.0)),
            "pivot": ("rocker", (L["l3"], 0.0, 0.0)),
        },
        name="four_bar",
    )
