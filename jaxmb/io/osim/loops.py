"""OpenSim's closed-loop constraints as an implicit joint map (seed §3-3), not a DAE.

A Weld (6 equations), Point (3), PointOnLine (2) or ConstantDistance (1) constraint between two
body frames fixes as many OpenSim coordinates as it has equations. :func:`closed_loops` chooses
them, builds :class:`~jaxmb.kinematics.FrameConstraints` (the residual, with every
CoordinateCouplerConstraint as one more equation) and an :class:`~jaxmb.joint_maps.ImplicitMap`
``q ↦ Q`` over the full coordinate vector, solved by a fixed number of Newton steps inside JAX and
differentiated by the implicit function theorem. The model's coordinates q are then the remaining
independent coordinates: the constrained system's M, forces and accelerations are those of OpenSim
restricted to them (holonomic constraints do no work along the motions they allow).

Which coordinates become dependent. OpenSim keeps all its coordinates and projects; a joint map
needs a choice. The constraint Jacobian ∂g/∂Q is taken at the default pose and coordinates are
added greedily, deepest first (the last coordinates of OpenSim's order, which are usually those
nearest the loop's end), each one only if it raises the rank; the rotations of ball and free joints
come last, so that their Euler-angle speeds stay whole where possible. The solve follows the
default pose's assembly branch by continuation along the straight line from the default
independent coordinates to q (a fixed number of steps); a q with no assembly on that path raises
rather than returning a wrong one.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ...joint_maps import ImplicitMap, OsimJointMap
from ...joint_maps.coordinate_functions import GivenCoordinates
from ...kinematics import FrameConstraints
from ...model import Model
from .xml import (
    EULER_SPEED_JOINTS,
    FRAME_CONSTRAINTS,
    FrameConstraintSpec,
    OsimCoordinate,
    OsimImportError,
    body_fixed_xyz,
    child_flag,
    child_text,
    child_vector,
    homogeneous,
    socket_path,
)

__all__ = ["closed_loops", "frame_constraint_specs", "LOOP_ITERATIONS", "LOOP_TOL"]

#: Newton steps of a loop's solve after the continuation (quadratic convergence: 2–4 suffice).
LOOP_ITERATIONS = 6
#: Continuation steps from the default pose (each 2 Newton steps): the assembly follows the
#: default pose's branch, as OpenSim's assembler, which starts there too.
LOOP_CONTINUATION = 8
#: Residual tolerance (m, or rad for weld rotations and couplings) of a loop's solve.
LOOP_TOL = 1e-10


def closed_loops(
    P,
    model: Model,
    frames: list[FrameConstraintSpec],
    couplings: list,
    cnames: list[str],
    coords: list[OsimCoordinate],
    body_frames: dict,
) -> tuple[Model, dict[str, str]]:
    """The model with its joint map's full coordinates solved through the loops.

    Args:
        P: the :class:`~jaxmb.io.osim.document.OsimDocument` (for messages).
        model: the imported tree, its joint map an :class:`OsimJointMap` without loops.
        frames: the frame constraints.
        couplings: ``(name, dependent, independent, g, scale)`` per CoordinateCouplerConstraint.
        cnames, coords: every OpenSim coordinate.
        body_frames: ``{OpenSim body: (jaxmb index, T)}`` (``x_jaxmb = T x_osim``).

    Returns:
        The model (q: the independent coordinates left) and ``{dependent coordinate: constraint
        names}`` of the coordinates the frame constraints made dependent.
    """
    jm: OsimJointMap = model.joint_map
    bodies, X1, X2 = [], [], []
    for c in frames:
        (i1, T1), (i2, T2) = body_frames[c.body1], body_frames[c.body2]
        bodies.append((i1, i2))
        X1.append(T1 @ c.X1)
        X2.append(T2 @ c.X2)
    fc = FrameConstraints(
        kinds=tuple(c.kind for c in frames),
        bodies=tuple(bodies),
        coupled=tuple(cnames.index(c[1]) for c in couplings),
        coupling_sources=tuple(
            cnames.index(c[2]) if isinstance(c[2], str) else tuple(map(cnames.index, c[2]))
            for c in couplings
        ),
    )
    params = dict(
        tree=model,
        X1=jnp.asarray(np.stack(X1)),
        X2=jnp.asarray(np.stack(X2)),
        value=jnp.asarray([c.value for c in frames], dtype=float),
        couplings=tuple(c[3] for c in couplings),
        scales=jnp.asarray([c[4] for c in couplings], dtype=float),
    )
    Q0 = jnp.asarray([c.default_value for c in coords], dtype=float)
    G = np.asarray(jax.jacfwd(lambda Q: fc(Q, None, params))(Q0))
    if not np.all(np.isfinite(G)):
        raise OsimImportError(
            P.where("the constraints' Jacobian at the default pose is not finite")
        )
    coupled = list(fc.coupled)
    free = [i for i in jm.independent if i not in coupled]
    euler = {c.name for c in coords if c.name in _euler_names(P)}
    order = [i for i in reversed(free) if cnames[i] not in euler]
    order += [i for i in reversed(free) if cnames[i] in euler]
    tol = 1e-9 * max(np.abs(G).max(), 1.0)
    dep = list(coupled)
    rank = _rank(G[:, dep], tol)
    chosen = []
    for i in order:
        if rank == fc.rows:
            break
        r = _rank(G[:, dep + [i]], tol)
        if r > rank:
            dep.append(i)
            chosen.append(i)
            rank = r
    if rank < fc.rows:
        names = ", ".join(f"{c.type} {c.name!r}" for c in frames)
        raise OsimImportError(
            P.where(
                f"constraints {names}: {fc.rows} equations, but only {rank} are independent at the"
                " default pose (redundant constraints, or a default pose at a singular"
                " configuration); jaxmb needs one dependent coordinate per equation"
            )
        )
    dep_sorted = tuple(sorted(dep))
    independent = tuple(i for i in jm.independent if i not in dep)
    given = OsimJointMap(
        functions=jm.functions,
        coupling_functions=(),
        coupling_scales=jnp.zeros((0,)),
        sources=jm.sources,
        coupled=(),
        coupling_sources=(),
        independent=independent,
        nfull=jm.nfull,
        nq=len(independent),
        nj=jm.nj,
        held=jm.held,
        held_values=jm.held_values,
    )
    params["given"] = given
    loop = ImplicitMap(
        fc,
        nq=len(independent),
        nj=jm.nfull,
        dependent=dep_sorted,
        reference=Q0[np.asarray(dep_sorted)],
        params=params,
        independent=GivenCoordinates(tuple(i for i in range(jm.nfull) if i not in dep)),
        iterations=LOOP_ITERATIONS,
        tol=LOOP_TOL,
        reference_q=Q0[np.asarray(independent, dtype=int)],
        continuation=LOOP_CONTINUATION,
    )
    new = dataclasses.replace(given, loop=loop)
    model = dataclasses.replace(
        model, joint_map=new, coordinate_names=tuple(cnames[i] for i in independent)
    )
    names = ", ".join(c.name for c in frames)
    return model, {cnames[i]: names for i in sorted(chosen)}


def frame_constraint_specs(P) -> list[FrameConstraintSpec]:
    """The enforced Weld, Point, PointOnLine and ConstantDistance constraints (4.x sockets,
    3.x body names) of an :class:`~jaxmb.io.osim.document.OsimDocument`, frames resolved to
    OpenSim bodies."""
    cs = P.model_el.find("ConstraintSet")
    objs = [] if cs is None or cs.find("objects") is None else list(cs.find("objects"))
    out = []
    for c in objs:
        if c.tag not in FRAME_CONSTRAINTS:
            continue
        if not child_flag(c, "isEnforced", True) or child_flag(c, "isDisabled", False):
            continue
        name = c.get("name")
        w = P.where(f"{c.tag} {name!r}")
        here = f"/constraintset/{name}"

        def frame(sock, w=w, c=c, here=here):
            p = socket_path(c, sock) if P.v4 else child_text(c, sock)
            if p is None:
                raise OsimImportError(f"{w}: missing <socket_{sock}>")
            return P.frame_in_body(p, w, relative_to=here)

        def located(sock, loc, orient=None, w=w, c=c):
            b, X = frame(sock)
            R = (
                None
                if orient is None
                else body_fixed_xyz(child_vector(c, orient, 3, w, default=(0, 0, 0)))
            )
            return b, X @ homogeneous(R, child_vector(c, loc, 3, w, default=(0, 0, 0)))

        kind = FRAME_CONSTRAINTS[c.tag]
        value = 0.0
        if kind == "weld":
            if P.v4:
                (b1, X1), (b2, X2) = frame("frame1"), frame("frame2")
            else:
                b1, X1 = located("body_1", "location_body_1", "orientation_body_1")
                b2, X2 = located("body_2", "location_body_2", "orientation_body_2")
        elif kind == "point_on_line":
            b1, X1 = located("line_body", "point_on_line")
            d = child_vector(c, "line_direction_vec", 3, w)
            if not np.linalg.norm(d) > 0:
                raise OsimImportError(f"{w}: line_direction_vec is zero")
            X1 = X1 @ homogeneous(_frame_with_x(d / np.linalg.norm(d)))
            b2, X2 = located("follower_body", "point_on_follower")
        else:
            b1, X1 = located("body_1", "location_body_1")
            b2, X2 = located("body_2", "location_body_2")
            if kind == "distance":
                value = float(child_vector(c, "constant_distance", 1, w)[0])
                if not value > 0:
                    raise OsimImportError(
                        f"{w}: constant_distance {value} must be positive (a zero distance is"
                        " a PointConstraint)"
                    )
        if b1 == b2:
            raise OsimImportError(f"{w}: both frames are on body {b1!r}")
        out.append(FrameConstraintSpec(name, c.tag, kind, b1, X1, b2, X2, value))
    return out


def _frame_with_x(d: np.ndarray) -> np.ndarray:
    """A rotation whose first column is the unit vector d (the other two complete it)."""
    e = np.eye(3)[int(np.argmin(np.abs(d)))]
    y = np.cross(d, e)
    y /= np.linalg.norm(y)
    return np.stack([d, y, np.cross(d, y)], axis=1)


def _rank(A: np.ndarray, tol: float) -> int:
    if A.shape[1] == 0:
        return 0
    return int(np.sum(np.linalg.svd(A, compute_uv=False) > tol))


def _euler_names(P) -> set[str]:
    return {
        c.name
        for j in P.joints(set(P.bodies()))
        if j.type in EULER_SPEED_JOINTS
        for c in j.coordinates[:3]
    }
