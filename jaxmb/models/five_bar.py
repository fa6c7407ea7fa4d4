"""The planar five-bar linkage of seed 001 §4-3 B (Eq. 123, Table 2): two degrees of freedom.

Geometry (Table 2, metres): ground link l0 = 3, links l1 = 1, l2 = 1, l3 = 3, l4 = 3, and the
point p at lp = 2 along link 3. Four moving bodies form a serial chain from the ground pivot O at
the origin; the far end of link 4 is pinned to the ground at (l0, 0, 0). All joints are revolute
about z; the mechanism moves in the x–y plane and gravity is −9.81 m/s² along y.

Joint variables: θ1 (absolute angle of link 1 from the x axis) and the relative angles θ2, θ3, θ4.
Generalized coordinates (seed): q = (θ1, θ2). The loop-closure constraints (Eq. 123)

    l1 S1 + l2 S12 + l3 S123 + l4 S1234 = 0,
    l1 C1 + l2 C12 + l3 C123 + l4 C1234 = l0,

make θ3, θ4 implicit functions of q. Because |P2| ≤ l1 + l2 = 2 < l0 = 3 the distance D from joint 3
to the ground pivot stays in [1, 5] ⊂ (|l3 − l4|, l3 + l4) = (0, 6): the loop assembles for every q
and ∂g/∂(θ3, θ4) is never singular.

Assembly branch ("elbow left"): joint 4 lies to the LEFT of the directed line from joint 3 to the
ground pivot (θ4 ∈ (−π, 0)). The warm start of the Newton solve is the closed-form circle
intersection on that branch, so the same branch is found at every q.

Point p (Fig. 7 was lost): on link 3, lp = 2 m from joint 3 along the link.

Masses (the seed gives none): uniform steel flat bars 25 mm × 10 mm (1.9625 kg/m): m1 = m2 =
1.9625 kg, m3 = m4 = 5.8875 kg, centre of mass mid-link, rectangular-bar inertias.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..joint_maps import ImplicitMap
from ..math import serialisable
from ..model import Model, build_model
from ._planar import bar_body, wrap_near

LENGTHS = {"l0": 3.0, "l1": 1.0, "l2": 1.0, "l3": 3.0, "l4": 3.0}
LP = 2.0
#: Reference configuration (rad) used to pick the 2π representative of θ3, θ4.
Q_REF = (np.pi / 2, -np.pi / 2)


@serialisable
def loop_constraints(f, q, p):
    """Eq. 123: (y, x) closure of the chain at the ground pivot (l0, 0), in metres."""
    a1 = f[0]
    a12 = a1 + f[1]
    a123 = a12 + f[2]
    a1234 = a123 + f[3]
    return jnp.stack(
        [
            p["l1"] * jnp.sin(a1)
            + p["l2"] * jnp.sin(a12)
            + p["l3"] * jnp.sin(a123)
            + p["l4"] * jnp.sin(a1234),
            p["l1"] * jnp.cos(a1)
            + p["l2"] * jnp.cos(a12)
            + p["l3"] * jnp.cos(a123)
            + p["l4"] * jnp.cos(a1234)
            - p["l0"],
        ]
    )


def _branch(q, p, ref):
    """Closed-form (θ3, θ4) on the elbow-left branch: circle intersection at joint 4."""
    a12 = q[0] + q[1]
    x2 = p["l1"] * jnp.cos(q[0]) + p["l2"] * jnp.cos(a12)
    y2 = p["l1"] * jnp.sin(q[0]) + p["l2"] * jnp.sin(a12)
    dx, dy = p["l0"] - x2, -y2
    D = jnp.sqrt(dx * dx + dy * dy)
    c = jnp.clip((p["l3"] ** 2 + D * D - p["l4"] ** 2) / (2 * p["l3"] * D), -1.0, 1.0)
    phi3 = jnp.arctan2(dy, dx) + jnp.arccos(c)
    x3, y3 = x2 + p["l3"] * jnp.cos(phi3), y2 + p["l3"] * jnp.sin(phi3)
    phi4 = jnp.arctan2(-y3, p["l0"] - x3)
    return jnp.stack([wrap_near(phi3 - a12, ref[0]), wrap_near(phi4 - phi3, ref[1])])


@serialisable
def _guess(q, p):
    return _branch(q, p, p["ref"])


def five_bar(iterations: int = 3) -> Model:
    """The five-bar linkage of Eq. 123 / Table 2 (see the module docstring), q = (θ1, θ2).

    Args:
        iterations: Newton iterations polishing the closed-form warm start (3 reach round-off).
    """
    params = {k: jnp.asarray(v) for k, v in LENGTHS.items()}
    ref_angles = np.asarray(_branch(jnp.asarray(Q_REF), params, jnp.zeros(2)), dtype=float)
    params["ref"] = jnp.asarray(ref_angles)
    jm = ImplicitMap(
        loop_constraints,
        nq=2,
        nj=4,
        dependent=(2, 3),
        reference=ref_angles,
        params=params,
        initial_guess=_guess,
        iterations=iterations,
    )
    L = LENGTHS
    bodies = [
        bar_body("link1", None, 0.0, L["l1"]),
        bar_body("link2", "link1", L["l1"], L["l2"]),
        bar_body("link3", "link2", L["l2"], L["l3"]),
        bar_body("link4", "link3", L["l3"], L["l4"]),
    ]
    return build_model(
        bodies,
        jm,
        gravity=(0.0, -9.81, 0.0),
        coordinate_names=("theta1", "theta2"),
        points={"p": ("link3", (LP, 0.0, 0.0)), "pivot": ("link4", (L["l4"], 0.0, 0.0))},
        name="five_bar",
    )
