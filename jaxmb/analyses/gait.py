"""Gait data to Newton–Euler inputs: filtering, derivatives, segment frames and motion, and the
pipelines from Winter's tables and BMClab trials to :func:`jaxmb.newton_euler.joint_loads`.

* Noisy marker data (100–1000 Hz) is low-pass filtered with a zero-lag Butterworth filter: a
  2nd-order filter run forward and backward (4th order, no phase lag), its (pre-warped) cutoff
  raised by Winter's correction ``1 / (2^{1/2} − 1)^{1/4} = 1/0.802`` so that the *two-pass*
  response is −3 dB at the requested cutoff (Winter 2009, §3.4.4.3). The cutoff is a parameter
  (6 Hz is the usual choice for walking). Edges are padded by odd reflection, as
  ``scipy.signal.filtfilt`` does.
  Derivatives are second-order central differences (one-sided second order at the ends); filtering
  before differencing is what keeps them usable — differencing amplifies noise by ~1/Δt per order.
* Segment kinematics from markers: orthonormal frames from three points or a least-squares rigid fit
  of three or more markers (SVD), angular velocity in the segment frame from ``ω̃ = Rᵀ Ṙ``, angular
  acceleration as its time derivative, centre-of-mass accelerations by differencing twice.

The pipelines :func:`winter_inputs` and :func:`bmc3d_inputs` return ``(chain, motion, load)`` for
:func:`jaxmb.newton_euler.joint_loads`. The data readers live in :mod:`jaxmb.analyses.gait_data`
and are re-exported here, so ``jaxmb.gait`` offers the whole route; the ``jaxmb
inverse-dynamics`` command is :mod:`jaxmb.cli.inverse_dynamics`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..math import unskew
from . import newton_euler as ne
from .checks import check_positive, check_shape
from .gait_data import (
    BMC3D_MARKERS,
    DATA_DIR,
    WINTER_INERTIA,
    WINTER_MASS,
    Bmc3dTrial,
    GaitDataError,
    SegmentParameters,
    WinterData,
    read_bmc3d,
    read_bsp_table,
    read_winter,
    segment_parameters,
    xyz_from_xy,
)

__all__ = [
    "DATA_DIR",
    "GaitDataError",
    "WinterData",
    "Bmc3dTrial",
    "SegmentParameters",
    "read_winter",
    "read_bmc3d",
    "read_bsp_table",
    "segment_parameters",
    "butterworth_coefficients",
    "lowpass",
    "derivative",
    "frame_from_markers",
    "rigid_fit",
    "angular_velocity",
    "angular_acceleration",
    "segment_motion",
    "winter_chain",
    "winter_inputs",
    "winter_reference",
    "WINTER_MASS",
    "WINTER_INERTIA",
    "BMC3D_MARKERS",
    "bmc3d_inputs",
]


# ---------------------------------------------------------------------------------------------
# filtering and differentiation


def butterworth_coefficients(cutoff: float, fs: float, passes: int = 2) -> tuple[np.ndarray, ...]:
    """2nd-order low-pass Butterworth ``(b, a)`` (bilinear transform), designed so that ``passes``
    passes (forward/backward) together are exactly −3 dB at ``cutoff`` Hz: Winter's correction
    ``C = (2^{1/passes} − 1)^{1/4}`` applied to the pre-warped frequency, ``K = tan(π f_c/f_s) / C``
    (Winter 2009, §3.4.4.3).

    Raises:
        GaitDataError: a sampling frequency that is not positive and finite, ``passes`` not a
            positive integer, a cutoff that is not in (0, fs/2).
    """
    where = "butterworth_coefficients"
    check_positive(fs, where, "fs", "Hz", error=GaitDataError)
    check_positive(passes, where, "passes", integer=True, error=GaitDataError)
    if not (0 < cutoff < fs / 2):
        raise GaitDataError(
            f"cutoff {cutoff} Hz must lie in (0, {fs / 2:g}) for sampling at {fs:g} Hz"
        )
    C = (2.0 ** (1.0 / passes) - 1.0) ** 0.25
    K = np.tan(np.pi * cutoff / fs) / C
    n = 1.0 / (1.0 + np.sqrt(2.0) * K + K * K)
    b0 = K * K * n
    b = np.array([b0, 2 * b0, b0])
    a = np.array([1.0, 2 * (K * K - 1) * n, (1 - np.sqrt(2.0) * K + K * K) * n])
    return b, a


def _lfilter(b, a, x, zi):
    """Direct-form-II-transposed IIR filter along axis 0 (as ``scipy.signal.lfilter``)."""

    def step(z, xk):
        y = b[0] * xk + z[0]
        z = jnp.stack([b[1] * xk - a[1] * y + z[1], b[2] * xk - a[2] * y])
        return z, y

    return jax.lax.scan(step, zi, x)[1]


def lowpass(
    x: Float[Array, "nt ..."],
    fs: float,
    cutoff: float,
    passes: int = 2,
    padlen: int | None = None,
) -> Float[Array, "nt ..."]:
    """Zero-lag Butterworth low-pass along the time axis (axis 0): 2nd-order filter forward then
    backward (``passes=2``), odd-reflection padding of ``padlen`` samples (default 9, as
    ``scipy.signal.filtfilt``), steady-state initial conditions. JAX code (jit/vmap/grad-able).

    Args:
        x: (nt, ...) signals sampled at ``fs`` Hz. cutoff: Hz (−3 dB of the zero-lag filter).
        padlen: samples of padding at each end (≥ 0; 0: none).
    """
    if passes != 2:
        raise GaitDataError(
            f"lowpass is zero-lag forward-backward filtering: passes must be 2, got {passes}"
        )
    b, a = butterworth_coefficients(cutoff, fs, passes)
    x = jnp.asarray(x, dtype=float)
    if x.ndim == 0:
        raise GaitDataError("lowpass: x must have a time axis (nt, ...), got a scalar")
    nt = x.shape[0]
    edge = 9 if padlen is None else int(padlen)
    if edge < 0:
        raise GaitDataError(f"lowpass: padlen must be >= 0 samples, got {padlen!r}")
    if nt <= edge:
        raise GaitDataError(f"lowpass needs more than padlen={edge} samples, got {nt}")
    # steady-state state of the filter for a unit step (scipy.signal.lfilter_zi)
    A = np.eye(2) - np.array([[-a[1], 1.0], [-a[2], 0.0]])
    zi = np.linalg.solve(A, b[1:] - a[1:] * b[0])
    return _filtfilt(jnp.asarray(b), jnp.asarray(a), jnp.asarray(zi), x, edge)


@functools.partial(jax.jit, static_argnums=4)
def _filtfilt(b, a, zi, x, edge: int):
    nt = x.shape[0]
    if edge > 0:
        x = jnp.concatenate(
            [2 * x[:1] - x[edge:0:-1], x, 2 * x[-1:] - x[-2 : -edge - 2 : -1]], axis=0
        )
    zs = lambda v: zi.reshape((2,) + (1,) * (x.ndim - 1)) * v[None]
    y = _lfilter(b, a, x, zs(x[0]))
    y = _lfilter(b, a, y[::-1], zs(y[-1]))[::-1]
    return y[edge : edge + nt] if edge > 0 else y


def derivative(x: Float[Array, "nt ..."], dt: float) -> Float[Array, "nt ..."]:
    """Time derivative along axis 0 by second-order central differences (second-order one-sided
    differences at the two ends, as ``numpy.gradient(..., edge_order=2)``). ``dt``: the sample
    interval (s), positive."""
    x = jnp.asarray(x, dtype=float)
    check_positive(dt, "derivative", "dt", "s", error=GaitDataError)
    if x.ndim == 0:
        raise GaitDataError("derivative: x must have a time axis (nt, ...), got a scalar")
    if x.shape[0] < 3:
        raise GaitDataError(f"derivative needs at least 3 samples, got {x.shape[0]}")
    return _derivative(x, dt)


@jax.jit
def _derivative(x, dt):
    mid = (x[2:] - x[:-2]) / (2 * dt)
    first = (-3 * x[0] + 4 * x[1] - x[2]) / (2 * dt)
    last = (3 * x[-1] - 4 * x[-2] + x[-3]) / (2 * dt)
    return jnp.concatenate([first[None], mid, last[None]], axis=0)


# ---------------------------------------------------------------------------------------------
# segment kinematics


_AXES = {"x": 0, "y": 1, "z": 2}


def frame_from_markers(
    origin: Float[Array, "... 3"],
    axis_point: Float[Array, "... 3"],
    plane_point: Float[Array, "... 3"],
    axes: str = "yz",
) -> Float[Array, "... 3 3"]:
    """Orthonormal right-handed segment frame from three markers (world-from-segment rotation,
    columns = segment axes in ground coordinates).

    Axis ``axes[0]`` points from ``origin`` to ``axis_point``; axis ``axes[1]`` is the part of
    ``plane_point − origin`` orthogonal to it; the third completes a right-handed frame.

    Raises:
        GaitDataError: ``axes`` not two distinct letters of ``xyz``; coincident or collinear
            markers (frame index named) when the inputs are concrete.
    """
    if len(axes) != 2 or axes[0] == axes[1] or any(c not in _AXES for c in axes):
        raise GaitDataError(f"axes must be two distinct letters of 'xyz', got {axes!r}")
    origin, axis_point, plane_point = (
        jnp.asarray(v, dtype=float) for v in (origin, axis_point, plane_point)
    )
    if not isinstance(origin, jax.core.Tracer):
        u = np.asarray(axis_point) - np.asarray(origin)
        w = np.asarray(plane_point) - np.asarray(origin)
        nu = np.linalg.norm(u, axis=-1, keepdims=True)
        e = u / np.maximum(nu, 1e-300)
        nv = np.linalg.norm(w - np.sum(w * e, -1, keepdims=True) * e, axis=-1, keepdims=True)
        scale = np.maximum(np.linalg.norm(w, axis=-1, keepdims=True), 1e-300)
        bad = (nu < 1e-9) | (nv < 1e-6 * scale)
        if np.any(bad):
            idx = np.argwhere(bad[..., 0])
            where = f" (frame {tuple(int(i) for i in idx[0])})" if idx.size else ""
            raise GaitDataError(f"markers are coincident or collinear{where}: no frame defined")
    return _frame(origin, axis_point, plane_point, axes)


@functools.partial(jax.jit, static_argnums=3)
def _frame(origin, axis_point, plane_point, axes: str):
    u = axis_point - origin
    w = plane_point - origin
    e1 = u / jnp.linalg.norm(u, axis=-1, keepdims=True)
    v = w - jnp.sum(w * e1, -1, keepdims=True) * e1
    e2 = v / jnp.linalg.norm(v, axis=-1, keepdims=True)
    i, j = _AXES[axes[0]], _AXES[axes[1]]
    k = 3 - i - j
    e3 = jnp.cross(e1, e2) if (j - i) % 3 == 1 else jnp.cross(e2, e1)
    cols = [None, None, None]
    cols[i], cols[j], cols[k] = e1, e2, e3
    return jnp.stack(cols, axis=-1)


def rigid_fit(
    reference: Float[Array, "k 3"], markers: Float[Array, "nt k 3"]
) -> tuple[Float[Array, "nt 3 3"], Float[Array, "nt 3"]]:
    """Least-squares rigid motion of k ≥ 3 markers (Söderkvist & Wedin 1993, SVD):
    ``markers[t] ≈ R[t] @ reference + p[t]``. Returns the world-from-segment ``R`` (nt, 3, 3) and
    ``p`` (nt, 3) (m) for a segment frame in which the markers sit at ``reference``.

    Raises:
        GaitDataError: fewer than 3 markers, mismatched shapes or collinear reference markers.
    """
    ref = jnp.asarray(reference, dtype=float)
    mk = jnp.asarray(markers, dtype=float)
    if ref.ndim != 2 or ref.shape[1] != 3 or ref.shape[0] < 3:
        raise GaitDataError(f"rigid_fit needs a (k>=3, 3) reference, got shape {ref.shape}")
    if mk.ndim != 3 or mk.shape[1:] != ref.shape:
        raise GaitDataError(f"markers have shape {mk.shape}, expected (nt, {ref.shape[0]}, 3)")
    rc = ref - ref.mean(0)
    if np.linalg.matrix_rank(np.asarray(rc), tol=1e-9) < 2:
        raise GaitDataError("rigid_fit: the reference markers are collinear")
    mc = mk - mk.mean(1, keepdims=True)
    H = jnp.einsum("ka,tkb->tab", rc, mc)
    U, _, Vt = jnp.linalg.svd(H)
    d = jnp.sign(jnp.linalg.det(jnp.einsum("tab,tbc->tac", U, Vt)))
    D = jnp.ones((mk.shape[0], 3)).at[:, 2].set(d)
    R = jnp.einsum("tba,tb,tcb->tac", Vt, D, U)
    p = mk.mean(1) - jnp.einsum("tab,b->ta", R, ref.mean(0))
    return R, p


def angular_velocity(R: Float[Array, "nt 3 3"], dt: float) -> Float[Array, "nt 3"]:
    """Angular velocity (rad/s) in the segment frame from world-from-segment rotations sampled at
    ``dt``: ``ω̃ = Rᵀ Ṙ`` with ``Ṙ`` by :func:`derivative` (its skew part is taken).
    R (nt ≥ 3, 3, 3); dt (s) positive."""
    R = jnp.asarray(R, dtype=float)
    check_shape(R, ("nt", 3, 3), "angular_velocity", "R", error=GaitDataError)
    check_positive(dt, "angular_velocity", "dt", "s", error=GaitDataError)
    if R.shape[0] < 3:
        raise GaitDataError(f"angular_velocity needs at least 3 samples, got {R.shape[0]}")
    return _angular_velocity(R, dt)


@jax.jit
def _angular_velocity(R, dt):
    return unskew(jnp.einsum("tba,tbc->tac", R, _derivative(R, dt)))


def angular_acceleration(omega: Float[Array, "nt 3"], dt: float) -> Float[Array, "nt 3"]:
    """Angular acceleration (rad/s²) in the segment frame: ``d/dt`` of the segment-frame ω (equal
    to the segment-frame components of the ground-frame α, since ``Ṙ ω_b = R ω̃_b ω_b = 0``)."""
    return derivative(omega, dt)


def segment_motion(
    R: Float[Array, "nt 3 3"],
    com: Float[Array, "nt 3"],
    joint: Float[Array, "nt 3"],
    dt: float,
) -> ne.SegmentMotion:
    """Newton–Euler inputs of one segment from its pose history by differentiation.

    Args:
        R: world-from-segment rotations (columns = axes); the seed's R is its transpose.
        com: centre of mass (m), joint: proximal joint centre (m), ground frame.
        dt: sample interval (s). Filter the markers first (:func:`lowpass`) for noisy data.
    """
    R = jnp.asarray(R, dtype=float)
    com, joint = jnp.asarray(com, dtype=float), jnp.asarray(joint, dtype=float)
    if R.ndim != 3 or R.shape[1:] != (3, 3) or R.shape[0] < 3:
        raise GaitDataError(f"segment_motion: R has shape {R.shape}, expected (nt >= 3, 3, 3)")
    nt = R.shape[0]
    for name, x in (("com", com), ("joint", joint)):
        check_shape(x, (nt, 3), "segment_motion", f"{name} (per sample of R)", GaitDataError)
    check_positive(dt, "segment_motion", "dt", "s", error=GaitDataError)
    return _segment_motion(R, com, joint, dt)


@jax.jit
def _segment_motion(R, com, joint, dt):
    w = _angular_velocity(R, dt)
    return ne.SegmentMotion(
        R=jnp.swapaxes(R, -1, -2),
        com=com,
        acc=_derivative(_derivative(com, dt), dt),
        omega=w,
        alpha=_derivative(w, dt),
        joint=joint,
    )


def _rot_z(theta):
    c, s = jnp.cos(theta), jnp.sin(theta)
    o, z = jnp.ones_like(theta), jnp.zeros_like(theta)
    return jnp.stack(
        [jnp.stack([c, -s, z], -1), jnp.stack([s, c, z], -1), jnp.stack([z, z, o], -1)], -2
    )


# ---------------------------------------------------------------------------------------------
# pipelines


def winter_chain(data: WinterData, segments: Sequence[str] = ("foot", "leg", "thigh")):
    """:class:`~jaxmb.newton_euler.SegmentChain` with :data:`WINTER_INERTIA` (isotropic I_cm; in
    plane motion only the out-of-plane component acts). The thigh I_cm is Dempster's 0.323 of the
    mean hip–knee distance, squared, times its mass."""
    masses, inertias = [], []
    for s in segments:
        if s not in WINTER_INERTIA:
            raise GaitDataError(f"no Winter inertial parameters for segment {s!r}")
        m, I = WINTER_INERTIA[s]
        if I is None:
            L = np.mean(np.linalg.norm(data.markers["hip"] - data.markers["knee"], axis=-1))
            I = m * (0.323 * L) ** 2
        masses.append(m)
        inertias.append(I)
    return ne.segment_chain(segments, masses, inertias)


_WINTER_PROXIMAL = {"foot": "ankle", "leg": "knee", "thigh": "hip"}
_WINTER_DISTAL = {"foot": "heel", "leg": "ankle", "thigh": "knee"}
_DEMPSTER_PROXIMAL = {"leg": 0.433, "thigh": 0.433}


def winter_inputs(
    data: WinterData | None = None,
    source: str = "tables",
    segments: Sequence[str] = ("foot", "leg", "thigh"),
    cutoff: float | None = None,
):
    """Newton–Euler inputs for Winter's stride, planar data embedded in 3D (z out of the page).

    Args:
        data: :func:`read_winter` output (default: the bundled tables).
        source: ``"tables"``: segment angles, ω, α, centres of mass and their accelerations from
            Table A.3; ``"markers"``: only the A.2 marker positions, differentiated here
            (:func:`segment_motion`), optionally low-pass filtered at ``cutoff`` Hz first.
            Leg and thigh centres of mass are Dempster's (0.433 from the proximal joint). Table A.2
            has no toe or MT5 marker, so the foot frame is the heel→ankle line and the foot centre
            of mass is a constant point in that frame, calibrated as the mean over frames of Table
            A.3's foot centre expressed in it (a "static calibration").
        segments: distal-first chain, a prefix of ``("foot", "leg", "thigh")``.
        cutoff: Hz, for ``source="markers"`` (None: no extra filtering; A.2 is already filtered).

    Returns:
        ``(chain, motion, load)`` for :func:`jaxmb.newton_euler.joint_loads`; the joints are the
        lateral malleolus (ankle), femoral epicondyle (knee), greater trochanter (hip) of A.2.
    """
    data = read_winter() if data is None else data
    segments = tuple(segments)
    if segments != ("foot", "leg", "thigh")[: len(segments)] or not segments:
        raise GaitDataError(
            f"segments must be a prefix of ('foot', 'leg', 'thigh'), got {segments}"
        )
    chain = winter_chain(data, segments)
    mk = {k: jnp.asarray(v) for k, v in data.markers.items()}
    if source == "markers" and cutoff is not None:
        mk = {k: lowpass(v, 1.0 / data.dt, cutoff) for k, v in mk.items()}
    motions = {}
    for s in segments:
        joint = mk[_WINTER_PROXIMAL[s]]
        if source == "tables":
            t = data.segments[s]
            th = jnp.asarray(t["theta"])
            z3 = lambda v: jnp.stack([jnp.zeros_like(v), jnp.zeros_like(v), jnp.asarray(v)], -1)
            motions[s] = ne.SegmentMotion(
                R=jnp.swapaxes(_rot_z(th), -1, -2),
                com=jnp.asarray(t["com"]),
                acc=jnp.asarray(t["acc"]),
                omega=z3(t["omega"]),
                alpha=z3(t["alpha"]),
                joint=joint,
            )
        elif source == "markers":
            prox, dist = joint, mk[_WINTER_DISTAL[s]]
            e = jnp.broadcast_to(jnp.array([0.0, 0.0, 1.0]), prox.shape)
            R = frame_from_markers(dist, prox, dist + e, axes="xz")
            if s == "foot":
                c3 = jnp.asarray(data.segments["foot"]["com"])
                local = jnp.mean(jnp.einsum("tba,tb->ta", R, c3 - prox), axis=0)
                com = prox + jnp.einsum("tab,b->ta", R, local)
            else:
                com = prox + _DEMPSTER_PROXIMAL[s] * (dist - prox)
            motions[s] = segment_motion(R, com, joint, data.dt)
        else:
            raise GaitDataError(f"source must be 'tables' or 'markers', got {source!r}")
    r = data.reactions
    grf = xyz_from_xy(r["grf_rx_N"], r["grf_ry_N"])
    cop = xyz_from_xy(r["cop_x_m"], np.zeros_like(r["cop_x_m"]))
    return chain, ne.chain_motion(chain, motions), ne.ground_load(grf, cop)


def winter_reference(data: WinterData) -> dict[str, np.ndarray]:
    """Table A.5's loads in the :class:`~jaxmb.newton_euler.JointLoads` layout: ``force``
    (nt, 3, 2) N and ``moment`` (nt, 3) N·m (z) on foot (ankle), leg (knee), thigh (hip)."""
    r = data.reactions
    force = np.stack(
        [
            np.stack([r["ankle_on_foot_rx_N"], r["ankle_on_foot_ry_N"]], -1),
            np.stack([r["knee_on_leg_rx_N"], r["knee_on_leg_ry_N"]], -1),
            np.stack([r["hip_on_thigh_rx_N"], r["hip_on_thigh_ry_N"]], -1),
        ],
        1,
    )
    moment = np.stack(
        [r["ankle_moment_on_foot_Nm"], r["knee_moment_on_leg_Nm"], r["hip_moment_on_thigh_Nm"]], 1
    )
    return {"force": force, "moment": moment}


def bmc3d_inputs(
    trial: Bmc3dTrial,
    body_mass: float = 70.0,
    cutoff: float = 6.0,
    threshold: float = 20.0,
):
    """Foot + shank Newton–Euler inputs for a BMClab 3D trial over its stance phase.

    Segment frames (x anterior, y longitudinal/up, z lateral for the right leg):
    shank: origin ankle centre ``AJC = (LM + MM)/2``, y toward the knee centre
    ``KJC = (LE + ME)/2``,
    z along ``LM − MM`` made orthogonal; foot: origin calcaneus, x toward the metatarsal midpoint
    ``(FM + VM)/2``, y toward ``AJC`` made orthogonal. Centres of mass and inertias: shank from
    Zatsiorsky–de Leva (male, KJC–AJC: 0.4395 from the knee), foot from Dempster (0.5 of the
    ankle–metatarsal length, single radius of gyration 0.475 used for all axes). Markers are
    low-pass filtered (:func:`lowpass`, ``cutoff`` Hz) over the whole trial before differentiation;
    the force-plate signals are used as recorded.

    Args:
        trial: :func:`read_bmc3d` output. body_mass: kg (not in the files; an assumption).
        cutoff: Hz. threshold: N, vertical force defining stance.

    Returns:
        ``(chain, motion, load, stance)``: inputs restricted to the stance frames and the
        :class:`slice` of those frames in the trial.
    """
    fs = 1.0 / trial.dt
    mk = {k: lowpass(jnp.asarray(v), fs, cutoff) for k, v in trial.markers.items()}
    ajc = 0.5 * (mk["LM"] + mk["MM"])
    kjc = 0.5 * (mk["LE"] + mk["ME"])
    mt = 0.5 * (mk["FM"] + mk["VM"])
    R_shank = frame_from_markers(ajc, kjc, ajc + (mk["LM"] - mk["MM"]), axes="yz")
    R_foot = frame_from_markers(mk["CA"], mt, ajc, axes="xy")
    L_shank = float(jnp.mean(jnp.linalg.norm(kjc - ajc, axis=-1)))
    L_foot = float(jnp.mean(jnp.linalg.norm(mt - ajc, axis=-1)))
    m_s, c_s, I_s = segment_parameters("deleva_male", "shank", body_mass, L_shank)
    m_f, c_f, I_f = segment_parameters("dempster", "foot", body_mass, L_foot)
    com_shank = kjc + c_s * (ajc - kjc)
    com_foot = ajc + c_f * (mt - ajc)
    chain = ne.segment_chain(("foot", "shank"), [m_f, m_s], [I_f, I_s])
    st = trial.stance(threshold)
    foot = segment_motion(R_foot, com_foot, ajc, trial.dt)
    shank = segment_motion(R_shank, com_shank, kjc, trial.dt)
    cut = lambda m: jax.tree_util.tree_map(lambda a: a[st], m)
    motion = ne.chain_motion(chain, {"foot": cut(foot), "shank": cut(shank)})
    load = ne.ground_load(trial.grf[st], trial.cop[st], trial.free_moment[st])
    return chain, motion, load, st
