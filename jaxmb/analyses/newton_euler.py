"""Inverse dynamics of a segment chain by the matrix formalism of the Newton–Euler equations.

Source: R. N. Watanabe, "Matrix formalism of the Newton–Euler equations" (BMClab notes; seed 000).
For a chain of rigid segments in contact with the ground (foot, shank, thigh, ...), the Newton–Euler
equations of every segment are stacked into one linear system

    M · [a_cm; α] = C + G + B · x + E,        x = [F_0; M_0; F_1; M_1; ...],

and all joint forces and moments are obtained by ONE linear solve per frame,
``x = B⁻¹ (M [a; α] − C − G − E)``, vmapped over frames. ``B`` is unit lower (block) triangular,
so the solve is a forward substitution by default (a general LU solve on request). The seed's
conventions, kept literally:

* forces are written in the ground (global) frame; the moment equation of segment ``i`` and its
  unknown joint moment are written in segment ``i``'s own frame;
* ``R_i`` is the seed's rotation matrix of segment ``i``: its rows are the segment's axes in ground
  coordinates, so ``v^i = R_i v^G`` (it is the *transpose* of the world-from-body rotation that
  :func:`jaxmb.body_transforms` returns);
* cross products are skew matrices, ``r × F = S(r) F`` (:func:`jaxmb.matcalc.skew`);
* a joint moment known in segment ``i−1``'s frame enters segment ``i``'s equation through the
  transfer ``R_i R_{i−1}⁻¹`` (``R⁻¹ = Rᵀ`` once the matrices are checked orthonormal).

Unknowns: ``F_i`` (ground frame, N) and ``M_i`` (segment ``i`` frame, N·m) are the force and the
moment that segment ``i+1`` (for the last segment: the rest of the body) applies ON segment ``i``
at segment ``i``'s proximal joint ``J_i``; segment ``i+1`` receives ``−F_i`` and ``−M_i`` there.
The moment is the couple that accompanies ``F_i`` placed at the joint centre. For a foot–shank–thigh
chain, ``(F_0, M_0)`` is the ankle load on the foot, ``(F_1, M_1)`` the knee load on the shank,
``(F_2, M_2)`` the hip load on the thigh (Winter's "acting on the named segment" convention).

Segment ``i`` obeys (ω and α in its own frame, Euler's equations about its centre of mass)::

    F_i − F_{i−1} + m_i g + E_i^F = m_i a_i
    M_i − R_i R_{i−1}ᵀ M_{i−1} + R_i S(J_i − c_i) F_i − R_i S(J_{i−1} − c_i) F_{i−1}
        + E_i^M = I_i α_i + ω_i × (I_i ω_i)

with ``E_0^F = GRF``, ``E_0^M = R_0 (S(cop − c_0) GRF + T_free)`` (ground reaction force at the
centre of pressure plus the free moment, both in the ground frame) and ``E_i = 0`` for ``i > 0``.

Two typos of the seed's text are not carried over: ω is called an angular *acceleration* in its list
of symbols (it is the angular velocity; ω̇ is the acceleration), and ``M_A`` is listed twice where
the knee moment ``M_K`` is meant. The seed also has no free moment; it is added to ``E`` above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jaxtyping import Array, Float

from ..math import skew

__all__ = [
    "GRAVITY_Y_UP",
    "NewtonEulerError",
    "SegmentChain",
    "SegmentMotion",
    "ChainMotion",
    "GroundLoad",
    "JointLoads",
    "NewtonEulerSystem",
    "segment_chain",
    "chain_motion",
    "ground_load",
    "newton_euler_system",
    "joint_loads",
    "joint_loads_frame",
    "residual",
]

GRAVITY_Y_UP = (0.0, -9.81, 0.0)
"""Gravity (m/s²) for the gait data's axes (y up), the default of :func:`joint_loads`."""

_ORTHO_TOL = 1e-6


class NewtonEulerError(ValueError):
    """Invalid Newton–Euler input, with the offending segment/frame/array named."""


class SegmentChain(eqx.Module):
    """Inertial parameters of a chain of segments ordered from the ground contact upwards.

    Attributes:
        names: (ns,) segment names, distal (ground contact) first (static).
        mass: (ns,) kg.
        inertia: (ns, 3, 3) kg·m², about each centre of mass, in the segment's own axes.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    mass: Float[Array, " ns"]
    inertia: Float[Array, "ns 3 3"]

    @property
    def ns(self) -> int:
        """Number of segments."""
        return len(self.names)


class SegmentMotion(eqx.Module):
    """Kinematics of one segment over ``nt`` frames (all arrays have the frame axis first).

    Attributes:
        R: (nt, 3, 3) the seed's rotation matrix, rows = segment axes in ground coordinates.
        com: (nt, 3) centre of mass, ground frame (m).
        acc: (nt, 3) acceleration of the centre of mass, ground frame (m/s²).
        omega: (nt, 3) angular velocity in the segment's frame (rad/s).
        alpha: (nt, 3) angular acceleration (time derivative of ``omega``), segment frame (rad/s²).
        joint: (nt, 3) the segment's proximal joint centre, ground frame (m).
    """

    R: Float[Array, "nt 3 3"]
    com: Float[Array, "nt 3"]
    acc: Float[Array, "nt 3"]
    omega: Float[Array, "nt 3"]
    alpha: Float[Array, "nt 3"]
    joint: Float[Array, "nt 3"]


class ChainMotion(eqx.Module):
    """Kinematics of all segments of a chain: the fields of :class:`SegmentMotion` with an extra
    segment axis after the frame axis, e.g. ``R`` (nt, ns, 3, 3), ``com`` (nt, ns, 3)."""

    R: Float[Array, "nt ns 3 3"]
    com: Float[Array, "nt ns 3"]
    acc: Float[Array, "nt ns 3"]
    omega: Float[Array, "nt ns 3"]
    alpha: Float[Array, "nt ns 3"]
    joint: Float[Array, "nt ns 3"]

    @property
    def nt(self) -> int:
        return self.R.shape[0]


class GroundLoad(eqx.Module):
    """External load on the ground-contact segment (segment 0), ground frame, per frame.

    Attributes:
        force: (nt, 3) ground reaction force on the segment (N).
        cop: (nt, 3) centre of pressure, its point of application (m).
        free_moment: (nt, 3) free moment (N·m), usually only its vertical component is non-zero.
    """

    force: Float[Array, "nt 3"]
    cop: Float[Array, "nt 3"]
    free_moment: Float[Array, "nt 3"]


class JointLoads(eqx.Module):
    """Solution of the Newton–Euler system.

    Attributes:
        names: (ns,) segment names (static); entry ``i`` is the load ON segment ``i`` at its
            proximal joint.
        force: (nt, ns, 3) joint force on segment i, ground frame (N).
        moment: (nt, ns, 3) joint moment on segment i, in segment i's frame (N·m).
        moment_ground: (nt, ns, 3) the same moment in the ground frame (N·m).
    """

    names: tuple[str, ...] = eqx.field(static=True)
    force: Float[Array, "nt ns 3"]
    moment: Float[Array, "nt ns 3"]
    moment_ground: Float[Array, "nt ns 3"]


class NewtonEulerSystem(eqx.Module):
    """The seed's matrices for one frame, ``M·acc = C + G + B·x + E`` (each of size 6·ns).

    Attributes:
        M: (6ns, 6ns) block-diagonal ``diag(m_0 I_3, I_0, m_1 I_3, I_1, ...)``.
        acc: (6ns,) ``[a_cm_0; α_0; a_cm_1; α_1; ...]``.
        C: (6ns,) ``[0; −ω_0 × I_0 ω_0; ...]``.
        G: (6ns,) ``[m_0 g; 0; ...]``.
        B: (6ns, 6ns) the matrix multiplying the unknown loads ``x`` (block lower bidiagonal).
        E: (6ns,) external loads ``[GRF; R_0 (S(r_cop/cm_0) GRF + T_free); 0; ...]``.
    """

    M: Float[Array, "n n"]
    acc: Float[Array, " n"]
    C: Float[Array, " n"]
    G: Float[Array, " n"]
    B: Float[Array, "n n"]
    E: Float[Array, " n"]


def segment_chain(
    names: Sequence[str], mass: Sequence[float], inertia: Sequence | np.ndarray
) -> SegmentChain:
    """Validate and assemble a :class:`SegmentChain` (distal, ground-contact segment first).

    Args:
        names: segment names.
        mass: (ns,) kg, each positive.
        inertia: (ns, 3, 3) kg·m² about the centre of mass in segment axes, or (ns,) scalars
            (isotropic ``I·1``, enough for planar motion about any axis).

    Raises:
        NewtonEulerError: naming the segment with an invalid parameter.
    """
    names = tuple(str(n) for n in names)
    if not names:
        raise NewtonEulerError("a segment chain needs at least one segment")
    if len(set(names)) != len(names):
        raise NewtonEulerError(f"segment names are not unique: {names}")
    mass = np.asarray(mass, dtype=float)
    if mass.shape != (len(names),):
        raise NewtonEulerError(f"mass has shape {mass.shape}, expected ({len(names)},)")
    inertia = np.asarray(inertia, dtype=float)
    if inertia.shape == (len(names),):
        inertia = inertia[:, None, None] * np.eye(3)
    if inertia.shape != (len(names), 3, 3):
        raise NewtonEulerError(
            f"inertia has shape {inertia.shape}, expected ({len(names)}, 3, 3) or ({len(names)},)"
        )
    for i, n in enumerate(names):
        if not np.isfinite(mass[i]) or mass[i] <= 0:
            raise NewtonEulerError(
                f"segment {n!r}: mass must be positive and finite, got {mass[i]}"
            )
        I = inertia[i]
        if not np.all(np.isfinite(I)) or np.max(np.abs(I - I.T)) > 1e-12 * max(
            1.0, np.abs(I).max()
        ):
            raise NewtonEulerError(f"segment {n!r}: inertia must be a finite symmetric matrix")
        if np.min(np.linalg.eigvalsh(I)) < -1e-12 * max(1.0, np.abs(I).max()):
            raise NewtonEulerError(f"segment {n!r}: inertia is not positive semi-definite")
    return SegmentChain(names, jnp.asarray(mass), jnp.asarray(inertia))


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _check_rotations(R, names: Sequence[str], what: str = "R") -> None:
    """Eager check (numpy) of (nt, ns, 3, 3) rotations, naming segment and frame of a failure."""
    R = np.asarray(R)
    if not np.all(np.isfinite(R)):
        t, s = np.argwhere(~np.isfinite(R).all(axis=(-1, -2)))[0]
        raise NewtonEulerError(f"segment {names[s]!r}, frame {t}: rotation matrix is not finite")
    err = np.abs(np.einsum("tsab,tscb->tsac", R, R) - np.eye(3)).max(axis=(-1, -2))
    det = np.linalg.det(R)
    bad = (err > _ORTHO_TOL) | (det <= 0)
    if np.any(bad):
        t, s = np.argwhere(bad)[0]
        raise NewtonEulerError(
            f"segment {names[s]!r}, frame {t}: {what} is not a proper orthonormal rotation "
            f"(max |R Rᵀ − I| = {err[t, s]:.3g}, det = {det[t, s]:.6g})"
        )


def chain_motion(chain: SegmentChain, motions: Mapping[str, SegmentMotion]) -> ChainMotion:
    """Stack per-segment kinematics in the chain's order, checking names and frame counts.

    Raises:
        NewtonEulerError: a segment of the chain missing from ``motions`` (or an unknown one given),
            a field with the wrong shape, or frame counts that differ between segments/fields.
    """
    missing = [n for n in chain.names if n not in motions]
    if missing:
        raise NewtonEulerError(f"missing segment(s) {missing}; the chain is {list(chain.names)}")
    extra = [n for n in motions if n not in chain.names]
    if extra:
        raise NewtonEulerError(f"unknown segment(s) {extra}; the chain is {list(chain.names)}")
    nt = None
    fields = {}
    for f in ("R", "com", "acc", "omega", "alpha", "joint"):
        shape = (3, 3) if f == "R" else (3,)
        arrs = []
        for n in chain.names:
            a = jnp.asarray(getattr(motions[n], f))
            if a.ndim != 1 + len(shape) or a.shape[1:] != shape:
                raise NewtonEulerError(
                    f"segment {n!r}: {f} has shape {a.shape}, expected (nt, *{shape})"
                )
            if nt is None:
                nt = a.shape[0]
            elif a.shape[0] != nt:
                raise NewtonEulerError(
                    f"segment {n!r}: {f} has {a.shape[0]} frames but {chain.names[0]!r}.R has {nt}"
                )
            arrs.append(a)
        fields[f] = jnp.stack(arrs, axis=1)
    return ChainMotion(**fields)


def ground_load(force, cop, free_moment=None) -> GroundLoad:
    """Assemble a :class:`GroundLoad` from (nt, 3) arrays; ``free_moment`` defaults to zero.

    A vertical-only free moment may be given as (nt,) (its y component, gait axes y up).
    """
    force = jnp.asarray(force, dtype=float)
    cop = jnp.asarray(cop, dtype=float)
    if free_moment is None:
        free_moment = jnp.zeros_like(force)
    free_moment = jnp.asarray(free_moment, dtype=float)
    if free_moment.ndim == 1:
        free_moment = jnp.zeros_like(force).at[:, 1].set(free_moment)
    for name, a in (("force", force), ("cop", cop), ("free_moment", free_moment)):
        if a.ndim != 2 or a.shape[1] != 3:
            raise NewtonEulerError(f"ground load {name} has shape {a.shape}, expected (nt, 3)")
    if not (force.shape[0] == cop.shape[0] == free_moment.shape[0]):
        raise NewtonEulerError(
            f"ground load frame counts differ: force {force.shape[0]}, cop {cop.shape[0]}, "
            f"free_moment {free_moment.shape[0]}"
        )
    return GroundLoad(force, cop, free_moment)


def newton_euler_system(
    chain: SegmentChain,
    R: Float[Array, "ns 3 3"],
    com: Float[Array, "ns 3"],
    acc: Float[Array, "ns 3"],
    omega: Float[Array, "ns 3"],
    alpha: Float[Array, "ns 3"],
    joint: Float[Array, "ns 3"],
    grf: Float[Array, " 3"],
    cop: Float[Array, " 3"],
    free_moment: Float[Array, " 3"],
    gravity: Float[Array, " 3"] = GRAVITY_Y_UP,
) -> NewtonEulerSystem:
    """Assemble the seed's matrices ``M, acc, C, G, B, E`` for one frame (see module docstring).

    Shapes and units as in :class:`SegmentMotion`/:class:`GroundLoad` without the frame axis;
    ``gravity`` (3,) m/s², ground frame.
    """
    ns = chain.ns
    dtype = jnp.result_type(R, com, grf, float)
    g = jnp.asarray(gravity, dtype=dtype)
    eye = jnp.eye(3, dtype=dtype)
    Iw = jnp.einsum("sab,sb->sa", chain.inertia, omega)

    Z3 = jnp.zeros((3, 3), dtype=dtype)
    z3 = jnp.zeros(3, dtype=dtype)
    # (2ns x 2ns) grids of 3x3 blocks, assembled in one concatenation (no scattered updates)
    Mb = [[Z3] * (2 * ns) for _ in range(2 * ns)]
    Bb = [[Z3] * (2 * ns) for _ in range(2 * ns)]
    accs, C, G, E = [], [], [], []
    for i in range(ns):
        f, m = 2 * i, 2 * i + 1  # block rows/columns of F_i (force) and M_i (moment)
        Mb[f][f] = chain.mass[i] * eye
        Mb[m][m] = chain.inertia[i]
        accs += [acc[i], alpha[i]]
        C += [z3, -jnp.cross(omega[i], Iw[i])]
        G += [chain.mass[i] * g, z3]
        # own proximal joint: the unknowns x_i = [F_i; M_i]
        Bb[f][f] = eye
        Bb[m][f] = R[i] @ skew(joint[i] - com[i])
        Bb[m][m] = eye
        if i > 0:
            # distal joint = proximal joint of segment i-1, loaded by -F_{i-1}, -M_{i-1}
            Bb[f][f - 2] = -eye
            Bb[m][f - 2] = -R[i] @ skew(joint[i - 1] - com[i])
            Bb[m][m - 2] = -R[i] @ R[i - 1].T
            E += [z3, z3]
        else:
            E += [grf, R[0] @ (skew(cop - com[0]) @ grf + free_moment)]
    return NewtonEulerSystem(
        M=jnp.block(Mb), acc=jnp.concatenate(accs), C=jnp.concatenate(C), G=jnp.concatenate(G),
        B=jnp.block(Bb), E=jnp.concatenate(E),
    )  # fmt: skip


def joint_loads_frame(
    chain: SegmentChain,
    R,
    com,
    acc,
    omega,
    alpha,
    joint,
    grf,
    cop,
    free_moment,
    gravity,
    method: str = "triangular",
) -> Float[Array, "ns 6"]:
    """One frame: ``x = B⁻¹ (M·acc − C − G − E)`` by one linear solve; rows ``[F_i, M_i]``.

    ``B`` has identity diagonal blocks and only the distal joint's unknowns below them, so it is
    unit lower triangular: ``method="triangular"`` (default) solves by forward substitution,
    ``method="lu"`` by a general LU solve (the seed's ``B⁻¹`` taken literally); both give the same
    x to rounding.
    """
    s = newton_euler_system(chain, R, com, acc, omega, alpha, joint, grf, cop, free_moment, gravity)
    rhs = s.M @ s.acc - s.C - s.G - s.E
    if method == "triangular":
        x = jsl.solve_triangular(s.B, rhs, lower=True, unit_diagonal=True)
    elif method == "lu":
        x = jnp.linalg.solve(s.B, rhs)
    else:
        raise NewtonEulerError(f"method must be 'triangular' or 'lu', got {method!r}")
    return x.reshape(chain.ns, 6)


@eqx.filter_jit
def _joint_loads(
    chain: SegmentChain, motion: ChainMotion, load: GroundLoad, gravity, method="triangular"
):
    R = motion.R
    err = jnp.max(jnp.abs(jnp.einsum("tsab,tscb->tsac", R, R) - jnp.eye(3)))
    R = eqx.error_if(
        R,
        ~(err <= _ORTHO_TOL),
        "Newton-Euler: a segment rotation matrix is not orthonormal (or is NaN)",
    )
    solve = jax.vmap(joint_loads_frame, in_axes=(None, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, None))
    x = solve(
        chain, R, motion.com, motion.acc, motion.omega, motion.alpha, motion.joint,
        load.force, load.cop, load.free_moment, gravity, method,
    )  # fmt: skip
    F, Mloc = x[..., :3], x[..., 3:]
    return F, Mloc, jnp.einsum("tsba,tsb->tsa", R, Mloc)


def joint_loads(
    chain: SegmentChain,
    motion: ChainMotion | Mapping[str, SegmentMotion],
    load: GroundLoad,
    gravity: Sequence[float] | Float[Array, " 3"] = GRAVITY_Y_UP,
    method: str = "triangular",
) -> JointLoads:
    """Joint forces and moments of every segment over all frames (one linear solve per frame).

    Args:
        chain: inertial parameters, ground-contact segment first.
        motion: a :class:`ChainMotion`, or ``{segment name: SegmentMotion}``.
        load: ground reaction on segment 0 (:class:`GroundLoad`, (nt, 3) arrays).
        gravity: (3,) m/s² in the ground frame (default y up, 9.81 m/s²).
        method: ``"triangular"`` (forward substitution, B is unit lower triangular) or ``"lu"``
            (general solve); see :func:`joint_loads_frame`.

    Returns:
        :class:`JointLoads` with ``force`` (nt, ns, 3) N in the ground frame and ``moment``
        (nt, ns, 3) N·m in each segment's frame (plus ``moment_ground``).

    Raises:
        NewtonEulerError: missing segments, mismatched frame counts, non-orthonormal rotation
            matrices (naming the segment and frame). Under ``jax.jit`` the eager checks are
            skipped and a non-orthonormal rotation raises through ``equinox.error_if``.
    """
    if isinstance(motion, Mapping):
        motion = chain_motion(chain, motion)
    if not isinstance(motion, ChainMotion):
        raise NewtonEulerError(f"motion must be a ChainMotion or a mapping, got {type(motion)}")
    nt, ns = motion.R.shape[:2]
    if ns != chain.ns:
        raise NewtonEulerError(
            f"motion has {ns} segments but the chain {chain.names} has {chain.ns}"
        )
    for f in ("com", "acc", "omega", "alpha", "joint"):
        if getattr(motion, f).shape != (nt, ns, 3):
            raise NewtonEulerError(
                f"motion.{f} has shape {getattr(motion, f).shape}, expected ({nt}, {ns}, 3)"
            )
    for f in ("force", "cop", "free_moment"):
        a = getattr(load, f)
        if a.shape != (nt, 3):
            raise NewtonEulerError(
                f"ground load {f} has shape {a.shape} but the motion has {nt} frames (expected "
                f"({nt}, 3))"
            )
    if _concrete(motion.R):
        _check_rotations(motion.R, chain.names)
        for f in ("com", "acc", "omega", "alpha", "joint"):
            a = np.asarray(getattr(motion, f))
            if not np.all(np.isfinite(a)):
                t, s = np.argwhere(~np.isfinite(a).all(-1))[0]
                raise NewtonEulerError(f"segment {chain.names[s]!r}, frame {t}: {f} is not finite")
    if _concrete(load.force):
        for f in ("force", "cop", "free_moment"):
            a = np.asarray(getattr(load, f))
            if not np.all(np.isfinite(a)):
                t = int(np.argwhere(~np.isfinite(a).all(-1))[0, 0])
                raise NewtonEulerError(f"ground load {f}, frame {t}: not finite")
    if method not in ("triangular", "lu"):
        raise NewtonEulerError(f"method must be 'triangular' or 'lu', got {method!r}")
    g = jnp.asarray(gravity, dtype=float)
    F, Mloc, Mg = _joint_loads(chain, motion, load, g, method)
    return JointLoads(chain.names, F, Mloc, Mg)


def residual(
    chain: SegmentChain,
    motion: ChainMotion,
    load: GroundLoad,
    loads: JointLoads,
    gravity=GRAVITY_Y_UP,
) -> Float[Array, "nt ns 6"]:
    """Newton–Euler residual of every segment written without matrices (an independent check).

    Per segment: force balance ``ΣF − m a`` (ground frame) and moment balance about the centre of
    mass ``ΣM − (I α + ω × I ω)`` (segment frame), with each cross product written as ``jnp.cross``.
    Zero (to rounding) for the output of :func:`joint_loads`.
    """
    g = jnp.asarray(gravity, dtype=float)
    R, c, J = motion.R, motion.com, motion.joint
    F, Mg = loads.force, loads.moment_ground
    ns = chain.ns
    out = []
    for i in range(ns):
        Fi = F[:, i] + chain.mass[i] * g - chain.mass[i] * motion.acc[:, i]
        Mi = Mg[:, i] + jnp.cross(J[:, i] - c[:, i], F[:, i])
        if i > 0:
            Fi = Fi - F[:, i - 1]
            Mi = Mi - Mg[:, i - 1] - jnp.cross(J[:, i - 1] - c[:, i], F[:, i - 1])
        else:
            Fi = Fi + load.force
            Mi = Mi + jnp.cross(load.cop - c[:, 0], load.force) + load.free_moment
        Mi_loc = jnp.einsum("tab,tb->ta", R[:, i], Mi)
        Iw = jnp.einsum("ab,tb->ta", chain.inertia[i], motion.omega[:, i])
        Ia = jnp.einsum("ab,tb->ta", chain.inertia[i], motion.alpha[:, i])
        out.append(jnp.concatenate([Fi, Mi_loc - Ia - jnp.cross(motion.omega[:, i], Iw)], -1))
    return jnp.stack(out, 1)
