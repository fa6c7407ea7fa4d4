"""Muscle lengths L(q) and the moment-arm matrix R(q) of all the muscles of a model (seed 001 §4
2-4, Eqs. 149–195).

Evaluation is vectorized so that the compiled program does not grow with the number of muscles:
the points of each muscle are evaluated (cheap, per muscle), then the muscles are split into
groups (without and with wrap objects, OpenSim's single-object case a traced flag of the second;
the reverse-mode kernel keeps the one-object muscles in a third) and each group is
padded to common point and wrap-slot counts and runs ONE kernel
(:func:`~jaxmb.muscles.path_kernel.path_kernel`) mapped over its muscles (``vmap`` without wrap
objects, ``lax.map`` with them). The GMLAV gradient is mapped the same way.

Batching over poses: ``jax.jit(jax.vmap(...))`` is the route. Paths without wrap objects vectorize
over the batch. Wrapped paths branch (OpenSim's wrap choices, early-exit loops); how they batch is
:data:`~jaxmb.muscles.wrapped_kernels.WRAPPED_BATCHING`: on a CPU they run pose by pose inside the
batched program (``jax.custom_batching.sequential_vmap``: under a plain vmap every branch would
run for every pose and every loop until the slowest pose converged), on an accelerator they
vectorize (branches and loops over the whole batch: sequential poses would leave the device idle).
Either way their first and second derivatives, forward and reverse mode, come from custom JVP
rules that contract the kernel's own gradient and Hessian with the tangents.

Moment arms (the seed's closed form). Every straight segment between consecutive active points on
*different* bodies pulls its first point along the unit vector e and its last point along −e. The
sum of these per body, in body axes, is the GMLAV ``E_ki`` and its moment ``Ê_ki`` (Definitions
3–5, Eqs. 153–160). With γ_i (Eq. 176) and β_i (Eqs. 179–184) from the closed-form kinematics,

    R = Σ_i ( γ_i E_iᵀ + Jᵀ ϑ β_i Ê_iᵀ )                                 (Eq. 193, (nq, nm))

and column k is ``Σ_{i ∈ Γ_k} (γ_i E_ki + Jᵀ ϑ β_i Ê_ki)`` (Eq. 195, ``method="sparse"``). The
pull on each point is computed as f = −∂L/∂x of the path length with respect to the point's ground
position (the unit vector of a straight segment between body-fixed points, as in the seed); it
also covers OpenSim's wrap constructions, whose tangent points are not stationary, and each wrap
object's body takes the reaction (−∂L/∂ of its frame origin and axes). A moving path point adds
``(∂r/∂q)ᵀ F`` (its motion in its body, as OpenSim's ``GeometryPath::addInEquivalentForces``).
``R F_mt`` is the generalized force of the muscle tensions, and ``R = −∂L/∂q``.

Wrapped muscles of a model with few coordinates (:data:`FORWARD_MOMENT_ARMS_MAX_COORDINATES`)
take their moment arms from forward mode instead: the points' and wrap frames' derivatives with
respect to each coordinate (closed-form kinematics) are pushed through OpenSim's wrapping beside
the primal, one tangent lane per coordinate. That pass is cheaper than the primal plus a reverse
pass when the lanes are few, and its compiled program is smaller (arm26: 57k HLO instructions
instead of 83k, compile 21 s instead of 28 s).
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..kinematics import kinematics
from ..math.batching import chunked_vmap
from ..model import Model, ModelError
from .path_kernel import WrapSlots, sorted_path, wrap_kinds, wrap_slots, wrapped_path
from .paths import Muscle, MuscleSet
from .points import full_coordinates_and_jacobian
from .wrapped_kernels import path_length, wrapped_lengths, wrapped_pulls, wrapped_pushforward

__all__ = [
    "muscle_lengths",
    "muscle_velocities",
    "moment_arms",
    "lengths_and_moment_arms",
    "moment_arm_terms",
    "path_geometry",
    "path_inputs",
]


def _homog(A, x):
    return A[:3, :3] @ x + A[:3, 3]


def _poses_ext(model: Model, A):
    eye = jnp.eye(4, dtype=A.dtype)[None]
    return jnp.concatenate([A, eye], axis=0)


def _muscle_set(model: Model) -> MuscleSet:
    if model.muscles is None or not isinstance(model.muscles, MuscleSet):
        raise ModelError(f"model {model.name!r} has no muscles; attach them with with_muscles()")
    return model.muscles


def _moving(mus: Muscle) -> tuple[int, ...]:
    """The indices of the points of ``mus`` that can move in their body (``moves_in_body``; a
    point type that does not say is taken to move)."""
    return tuple(k for k, p in enumerate(mus.points) if getattr(p, "moves_in_body", True))


def _path_inputs(mus: Muscle, A_ext, q, nq, full=None):
    """Body-frame and ground positions of the points, ∂location/∂q of the points that move in
    their body (:func:`_moving`; (P, 3, nq)), active mask, wrap frames. ``full(joint_map)``: the
    shared (Q, ∂Q/∂q) of an OpenSim joint map (:func:`_full_coordinates_memo`), for the points that
    read them (``evaluate_from``)."""
    evals = [
        p.evaluate_from(*full(p.joint_map))
        if full is not None and hasattr(p, "evaluate_from")
        else p.evaluate(q, nq)
        for p in mus.points
    ]
    local = jnp.stack([e[0] for e in evals])
    moving = _moving(mus)
    dlocal = (
        jnp.stack([evals[k][1] for k in moving]) if moving else jnp.zeros((0, 3, nq), local.dtype)
    )
    active = jnp.stack([e[2] for e in evals])
    Ab = A_ext[np.asarray([p.body for p in mus.points])]  # body -1: the ground's identity, last
    X = jnp.einsum("nab,nb->na", Ab[:, :3, :3], local) + Ab[:, :3, 3]
    frames = []
    for pw in mus.wraps:
        Ab = A_ext[pw.wrap.body]
        frames.append((Ab[:3, :3] @ pw.wrap.rotation, _homog(Ab, pw.wrap.translation)))
    return local, dlocal, active, X, tuple(frames)


def _full_coordinates_memo(model: Model, q):
    """``full(joint_map) -> (Q, ∂Q/∂q)`` at q. The OpenSim points of an imported model each carry
    a copy of the model's joint map (a pytree shares no objects, so no copy is recognizable by
    identity once traced): a copy of the same type and structure as ``model.joint_map`` reads the
    model's, computed once; any other map is evaluated on its own."""
    shared, cache = model.joint_map, []
    structure = jax.tree_util.tree_structure(shared)

    def full(joint_map):
        if type(joint_map) is not type(shared) or (
            jax.tree_util.tree_structure(joint_map) != structure
        ):
            return full_coordinates_and_jacobian(joint_map, q)
        if not cache:
            cache.append(full_coordinates_and_jacobian(shared, q))
        return cache[0]

    return full


class _Group(eqx.Module):
    """The muscles of one kernel call, padded to N points and W wrap slots (leading axis: muscle).

    X, local (G, N, 3) m; dlocal (P, 3, nq): ∂location/∂q of the P points of the group that move in
    their body, at (muscle, point) ``moving`` (static; every other point's is zero, and a dense
    (G, N, 3, nq) array of them cost gait2354 most of its moment-arm time); active (G, N); slots:
    :class:`WrapSlots` with a leading G axis. Static: the muscles' indices, the kernel's type table,
    the bodies (``nb`` = ground) of the points (G, N) and wraps (G, W), the wraps'
    translations (G, W, 3).
    """

    X: Array
    local: Array
    dlocal: Array
    active: Array
    slots: WrapSlots
    wrap_translation: Array
    index: tuple = eqx.field(static=True)
    moving: tuple = eqx.field(static=True)
    types: tuple = eqx.field(static=True)
    body: tuple = eqx.field(static=True)
    wrap_body: tuple = eqx.field(static=True)

    @property
    def wrapped(self) -> bool:
        return self.slots.R.shape[1] > 0

    def lengths(self):
        """Path lengths (G,) m of the group's muscles at this pose."""
        if self.wrapped:
            return wrapped_lengths(self.types, self.X, self.active, self.slots)
        return jax.vmap(partial(path_length, self.types))(self.X, self.active, self.slots)

    def pulls(self):
        """Path lengths (G,) m and their gradients with respect to the points' ground positions
        (G, N, 3), the wrap frames' axes (G, W, 3, 3) and origins (G, W, 3)."""
        if self.wrapped:
            L, (gX, gR, gp, _) = wrapped_pulls(self.types, self.X, self.active, self.slots)
            return L, gX, gR, gp
        L, gX = jax.vmap(jax.value_and_grad(partial(path_length, self.types)))(
            self.X, self.active, self.slots
        )
        return L, gX, self.slots.R, self.slots.p


def _no_slots(G: int, dtype) -> WrapSlots:
    """The (G, 0, …) wrap slots of a group of muscles without wrap objects."""
    z = lambda *shape, dt=dtype: jnp.zeros((G, 0) + shape, dt)  # noqa: E731
    i32 = jnp.int32
    return WrapSlots(z(3, 3), z(3), z(3), z(dt=i32), z(dt=i32), z(), z(dt=i32), z(dt=i32),
                     z(dt=bool))  # fmt: skip


def _groups(
    model: Model, A_ext, q, wrapped: bool | None = None, one_object_apart: bool = False
) -> list[_Group]:
    """The muscles split into those without and those with wrap objects, each group padded for
    one mapped kernel; the compiled program does not grow with the muscles. ``wrapped``: only the
    group with (True) or without (False) wrap objects; None: both. OpenSim's single-object case
    is a traced flag of the kernel (one valid slot, :class:`WrapSlots`): one copy of each wrap
    algorithm, serves both (arm26's batched paths program: 57,928 optimized HLO instructions in
    two groups, 33,453 in one). ``one_object_apart``: the muscles with one wrap object in a group
    of their own (for the reverse-mode kernel, whose passes and slots are scans that a one-object
    muscle among several-object ones would run forward and backward: MoBL-ARMS 1.20x the time
    per pose)."""
    ms = _muscle_set(model)
    nb, nq = model.nb, model.nq
    cats: dict[int, list[int]] = {}
    for m, mus in enumerate(ms.muscles):
        cats.setdefault(min(len(mus.wraps), 2 if one_object_apart else 1), []).append(m)
    out = []
    full = _full_coordinates_memo(model, q)
    for cat, idx in sorted(cats.items()):
        if wrapped is not None and (cat > 0) != wrapped:
            continue
        muscles = [ms.muscles[m] for m in idx]
        N = max(len(mus.points) for mus in muscles)
        W = max(len(mus.wraps) for mus in muscles)
        kinds = wrap_kinds(muscles)
        cols = {k: [] for k in ("X", "local", "dlocal", "active", "slots", "wt")}
        body, wbody, moving = [], [], []
        for g, mus in enumerate(muscles):
            local, dlocal, active, X, frames = _path_inputs(mus, A_ext, q, nq, full)
            n, pad = X.shape[0], N - X.shape[0]
            cols["X"].append(jnp.concatenate([X, jnp.zeros((pad, 3), X.dtype)]))
            cols["local"].append(jnp.concatenate([local, jnp.zeros((pad, 3), X.dtype)]))
            cols["dlocal"].append(dlocal)
            moving.extend((g, k) for k in _moving(mus))
            cols["active"].append(jnp.concatenate([active, jnp.zeros(pad, bool)]))
            if W:  # (a group without wraps gets its empty slots at once, below)
                cols["slots"].append(wrap_slots(mus, frames, W, kinds, n))
                wt = [pw.wrap.translation for pw in mus.wraps]
                cols["wt"].append(
                    jnp.asarray(wt + [jnp.zeros(3, X.dtype)] * (W - len(wt)), X.dtype)
                )
            body.append(tuple(nb if p.body < 0 else p.body for p in mus.points) + (nb,) * pad)
            wb = [nb if pw.wrap.body < 0 else pw.wrap.body for pw in mus.wraps]
            wbody.append(tuple(wb) + (nb,) * (W - len(wb)))
        if W and cols["X"][0].dtype != jnp.float64:
            raise ModelError(
                f"muscles {[mus.name for mus in muscles]} wrap over "
                f"{sorted({k.__name__ for k in kinds})}: OpenSim's wrap algorithms iterate to "
                f"float64 tolerances and in {cols['X'][0].dtype} their lengths and moment arms "
                "are wrong (arm26: off by up to 76 % of the largest value); evaluate wrapped "
                "paths with a float64 model and coordinates"
            )
        stack = lambda xs: jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)  # noqa: E731
        out.append(
            _Group(
                stack(cols["X"]),
                stack(cols["local"]),
                jnp.concatenate(cols["dlocal"]),
                stack(cols["active"]),
                stack(cols["slots"]) if W else _no_slots(len(muscles), cols["X"][0].dtype),
                stack(cols["wt"]) if W else jnp.zeros((len(muscles), 0, 3), cols["X"][0].dtype),
                tuple(idx),
                tuple(moving),
                kinds,
                tuple(body),
                tuple(wbody),
            )
        )
    return out


def muscle_lengths(model: Model, q: Float[Array, " nq"]) -> Float[Array, " nm"]:
    """Musculotendon path lengths L(q) (m), shape (nm,), as OpenSim 4.6 computes them.

    Batch over poses with ``jax.jit(jax.vmap(...))``: wrapped paths (OpenSim's segment choice, its
    multi-object passes, early-exit iterations) then run pose by pose inside the program, paths
    without wrap objects vectorize (module docstring). Differentiable in forward and reverse mode.
    A model from :func:`~jaxmb.muscles.fit_paths` evaluates its polynomial paths instead.
    """
    ms = _muscle_set(model)
    if ms.fit is not None:
        return _nan_unless_finite(q, ms.fit.lengths(q))
    k = kinematics(model, q, second_order=False)
    A_ext = _poses_ext(model, k.A)
    L = jnp.zeros(len(ms.muscles), A_ext.dtype)
    for g in _groups(model, A_ext, q):
        L = L.at[np.asarray(g.index)].set(g.lengths())
    return _nan_unless_finite(q, L)


def _nan_unless_finite(q, *xs):
    """``xs`` unchanged where q is finite, else NaN: the path kernel's discrete choices
    (``where``/``argmin`` over wrap candidates) would turn a NaN pose into plausible numbers."""
    ok = jnp.all(jnp.isfinite(q))
    out = tuple(jnp.where(ok, x, jnp.nan) for x in xs)
    return out[0] if len(xs) == 1 else out


def path_inputs(model: Model, q, muscle: int | str):
    """What :func:`~jaxmb.muscles.path_kernel.wrapped_path` takes for one muscle at q: (the
    :class:`~jaxmb.muscles.Muscle`, ground positions of its points X (N, 3) m, their active mask
    (N,), the ground pose (R (3, 3), p (3,) m) of each of its wrap frames)."""
    ms = _muscle_set(model)
    i = ms.names.index(muscle) if isinstance(muscle, str) else int(muscle)
    mus = ms.muscles[i]
    k = kinematics(model, q, second_order=False)
    _, _, active, X, frames = _path_inputs(mus, _poses_ext(model, k.A), q, model.nq)
    return mus, X, active, frames


def path_geometry(model: Model, q, muscle: int | str):
    """One muscle's current path at q: ground positions (n, 3), body indices (n,) and a mask (n,)
    of the entries in the path, in path order (wrap tangent points included where a wrap is on;
    entries not in the path come last), n = points + 2 × wrap objects."""
    mus, X, active, frames = path_inputs(model, q, muscle)
    _, path = wrapped_path(mus, X, active, frames)
    n, nw = len(mus.points), len(mus.wraps)
    bodies = np.asarray(
        [p.body for p in mus.points] + [pw.wrap.body for pw in mus.wraps for _ in (0, 1)], int
    )
    owner = np.concatenate([-np.ones(n, int), np.repeat(np.arange(nw), 2)])
    perm, skey, spos, _ = sorted_path(path, owner)
    return spos, jnp.asarray(bodies)[perm], jnp.isfinite(skey)


# ----------------------------------------------------------------------------- moment arms
def moment_arm_terms(model: Model, kin):
    """γ_i (Eq. 176), shape (nb, nq, 3), and β_i (Eq. 179), shape (nb, nb, 3), in body-i axes.

    ``γ_i[l]`` is ∂(origin of body i)/∂q_l in body-i axes; ``β_i[j]`` is joint j's rotation axis in
    body-i axes for j ∈ Anc(i) ∪ {i} (zero otherwise), so that the body's virtual rotation is
    ``β_iᵀ ϑ J δq``.
    """
    A = kin.A
    nb = model.nb
    Rm, p = A[:, :3, :3], A[:, :3, 3]
    par = np.where(np.asarray(model.parent) < 0, nb, model.parent)
    R_par = jnp.concatenate([Rm, jnp.eye(3, dtype=A.dtype)[None]], axis=0)[par]
    omega = jnp.einsum("jab,jb->ja", R_par, model.axis_theta)  # pr(j)A V_θj in ground axes
    slide = jnp.einsum("jab,jb->ja", R_par, model.axis_d)  # pr(j)A V_dj in ground axes
    rev = jnp.asarray(model.is_revolute)
    anc = jnp.asarray(model.ancestors, dtype=A.dtype)
    lever = p[:, None, :] - p[None, :, :]  # (i, j, 3): p_i - p_j
    u = jnp.where(rev[None, :, None], jnp.cross(omega[None, :, :], lever), slide[None, :, :])
    u_i = jnp.einsum("iba,ijb->ija", Rm, u)  # in body-i axes
    gamma = jnp.einsum("ij,jl,ija->ila", anc, kin.J, u_i)
    beta = anc[:, :, None] * jnp.einsum("iba,jb->ija", Rm, omega)
    return gamma, beta


def _gmlav(model: Model, q, kin, wrapped: bool | None = None):
    """Per muscle: the GMLAV E_ki and its moment Ê_ki of every body (Definitions 3–5), and the
    moving-point term. Returns E (nb, nm, 3), Ê (nb, nm, 3), R_moving (nq, nm) and the path
    lengths L (nm,) (the same pass: one evaluation of the paths gives both).

    The pull of the path on each of its points is f = −∂L/∂x (ground), the derivative of the
    path length with respect to that point's ground position at fixed wrap objects; between two
    body-fixed points this is the unit vector of the straight segment, as in Eq. 153. A wrap
    object's body takes the reaction of its wrap: the force −∂L/∂p at its frame origin p and the
    couple −Σ_j R_j × ∂L/∂R_j of its frame axes R_j. ``wrapped``: only the groups with (True) or
    without (False) wrap objects (:func:`_groups`); the others' columns stay zero.
    """
    ms = _muscle_set(model)
    nb, nq = model.nb, model.nq
    A_ext = _poses_ext(model, kin.A)
    E = jnp.zeros((nb + 1, len(ms.muscles), 3), kin.A.dtype)
    Eh = jnp.zeros_like(E)
    R_mov = jnp.zeros((nq, len(ms.muscles)), kin.A.dtype)
    L = jnp.zeros(len(ms.muscles), kin.A.dtype)
    for g in _groups(model, A_ext, q, wrapped, one_object_apart=True):
        Lg, gX, gR, gp = g.pulls()
        m = np.asarray(g.index)
        L = L.at[m].set(Lg)
        slot = np.asarray(g.body)
        Rb = A_ext[slot, :3, :3]
        F = -jnp.einsum("gkba,gkb->gka", Rb, gX)  # body axes
        E = E.at[slot, m[:, None]].add(F)
        Eh = Eh.at[slot, m[:, None]].add(jnp.cross(g.local, F))
        if g.moving:  # a point's motion in its body, (∂r/∂q)ᵀ F, for the points that move
            gi, ki = (np.asarray(v) for v in zip(*g.moving, strict=True))
            R_mov = R_mov.at[:, m[gi]].add(jnp.einsum("pal,pa->lp", g.dlocal, F[gi, ki]))
        if gR.shape[1]:
            sb = np.asarray(g.wrap_body)
            Rwb = A_ext[sb, :3, :3]
            Fw = -jnp.einsum("gwba,gwb->gwa", Rwb, gp)
            axes = jnp.sum(jnp.cross(jnp.swapaxes(g.slots.R, -1, -2), jnp.swapaxes(gR, -1, -2)), -2)
            couple = -jnp.einsum("gwba,gwb->gwa", Rwb, axes)
            E = E.at[sb, m[:, None]].add(Fw)
            Eh = Eh.at[sb, m[:, None]].add(jnp.cross(g.wrap_translation, Fw) + couple)
    return E[:nb], Eh[:nb], R_mov, L


def moment_arms(
    model: Model, q: Float[Array, " nq"], method: str = "dense"
) -> Float[Array, "nq nm"]:
    """The moment-arm matrix R(q) (m or m/m per coordinate unit), shape (nq, nm), closed form.

    ``method="dense"``: Eq. 193, ``R = Σ_i γ_i E_iᵀ + Jᵀ ϑ β_i Ê_iᵀ`` over all bodies.
    ``method="sparse"``: Eq. 195, column k summed over the bodies of its attachment sequence Γ_k.
    Both add the moving-path-point term. ``R = −∂L/∂q``; ``R F`` is the generalized muscle force.
    Batch over poses with ``jax.vmap`` (see :func:`muscle_lengths`).
    """
    return lengths_and_moment_arms(model, q, method)[1]


#: muscle-poses per chunk when ``jax.vmap`` of :func:`lengths_and_moment_arms` runs on a CPU
#: (:func:`~jaxmb.math.batching.chunked_vmap`): batch 4096, float64, gait2354 (54 muscles)
#: 167 µs per pose and 0.83 GB of temporaries as one vmap, 108 µs and 26 MB in chunks of 128
#: poses; Hamner 2010 (92 muscles) 388 µs and 2.0 GB, 243 µs and 32 MB in chunks of 64
CHUNK_MUSCLE_POSES = 8192

#: Wrapped muscles' moment arms: forward mode over the path kernel (one tangent lane per
#: coordinate, :func:`_wrapped_columns`) for models with at most this many coordinates, else the
#: GMLAV's reverse-mode pulls (one reverse pass whatever the coordinates). Measured against the
#: reverse route, ``jax.jit(jax.vmap(lengths_and_moment_arms))`` (``benchmarks/exact_paths.py
#: --base``, in turn in one process): arm26 (2 coordinates) 0.77× the time per pose at batch
#: 1024, lowering plus compile 31 s against 47 s (57k HLO instructions instead of 83k);
#: MoBL-ARMS (7) 1.10× the time per pose at batch 16, 97 s against 100 s; Rajagopal 2016 (29)
#: 1.56× (24.8 against 15.9 ms at batch 256, busy cores). The two ends cross near 5.
FORWARD_MOMENT_ARMS_MAX_COORDINATES = 5


def lengths_and_moment_arms(
    model: Model, q: Float[Array, " nq"], method: str = "dense"
) -> tuple[Float[Array, " nm"], Float[Array, "nq nm"]]:
    """Path lengths L(q) (nm,) m and the moment-arm matrix R(q) (nq, nm) from one evaluation of the
    paths (the GMLAV's derivative pass also gives the lengths): what :func:`muscle_lengths` and
    :func:`moment_arms` return, at about the cost, and the compile time, of the latter alone.
    A model from :func:`~jaxmb.muscles.fit_paths` evaluates its polynomial paths instead
    (``method`` is then unused).

    Under ``jax.vmap`` over poses on a CPU the batch runs in chunks of about
    :data:`CHUNK_MUSCLE_POSES` / nm poses (the same per-pose program; temporaries bounded by the
    chunk, not the batch).
    """
    ms = _muscle_set(model)
    if ms.fit is not None:
        return _nan_unless_finite(q, *ms.fit.lengths_and_moment_arms(q))
    if method not in ("dense", "sparse"):
        raise ValueError(f"moment_arms: unknown method {method!r}; use 'dense' or 'sparse'")
    dyn, static = eqx.partition(model, eqx.is_array)
    per_chunk = CHUNK_MUSCLE_POSES // max(1, len(ms.muscles))
    chunk = int(np.clip(1 << int(np.log2(max(per_chunk, 1))), 8, 256))
    one = lambda d, x: _lengths_and_moment_arms(eqx.combine(d, static), x, method)  # noqa: E731
    return chunked_vmap(one, chunk)(dyn, jnp.asarray(q))


def _forward_moment_arms(model: Model) -> bool:
    """Whether the wrapped groups' moment arms come from forward mode (:func:`_wrapped_columns`)
    rather than the GMLAV's reverse-mode pulls: with few coordinates, see
    :data:`FORWARD_MOMENT_ARMS_MAX_COORDINATES`."""
    ms = _muscle_set(model)
    return model.nq <= FORWARD_MOMENT_ARMS_MAX_COORDINATES and any(m.wraps for m in ms.muscles)


def _wrapped_columns(model: Model, q):
    """Lengths L (nm,) and moment arms R = −∂L/∂q (nq, nm) of the muscles that wrap (the other
    entries zero), by forward mode over the path kernel: the points' and wrap frames' derivatives
    with respect to each coordinate (closed-form kinematics, one tangent lane per coordinate)
    pushed through OpenSim's wrapping in one pass."""
    nm = len(_muscle_set(model).muscles)

    def inputs(q):  # the kernels' differentiable inputs, and the groups themselves (aux)
        kin = kinematics(model, q, second_order=False)
        groups = _groups(model, _poses_ext(model, kin.A), q, wrapped=True)
        return [(g.X, g.slots.R, g.slots.p) for g in groups], groups

    lanes = jnp.eye(model.nq, dtype=q.dtype)
    push = lambda e: jax.jvp(inputs, (q,), (e,), has_aux=True)  # noqa: E731
    _, tangents, groups = jax.vmap(push, out_axes=(None, 0, None))(lanes)
    L = jnp.zeros(nm, q.dtype)
    R = jnp.zeros((model.nq, nm), q.dtype)
    for g, (TX, TR, Tp) in zip(groups, tangents, strict=True):
        lead = lambda a: jnp.swapaxes(a, 0, 1)  # noqa: E731  (nq, G, …) → (G, nq, …)
        Lg, D = wrapped_pushforward(g.types, g.X, g.active, g.slots, lead(TX), lead(TR), lead(Tp))
        m = np.asarray(g.index)
        L = L.at[m].set(Lg)
        R = R.at[:, m].set(-D.T)
    return L, R


def _lengths_and_moment_arms(model: Model, q, method: str):
    """One pose of :func:`lengths_and_moment_arms` (Eq. 193 or 195 with the GMLAV)."""
    ms = _muscle_set(model)
    kin = kinematics(model, q, second_order=False)
    gamma, beta = moment_arm_terms(model, kin)
    forward = _forward_moment_arms(model)
    E, Eh, R_mov, L = _gmlav(model, q, kin, wrapped=False if forward else None)
    rev = jnp.asarray(model.is_revolute, dtype=kin.J.dtype)
    if method == "dense":
        R = jnp.einsum("ila,ima->lm", gamma, E) + jnp.einsum(
            "jl,j,ija,ima->lm", kin.J, rev, beta, Eh
        )
    elif method == "sparse":
        cols = []
        for m, mus in enumerate(ms.muscles):
            gamma_seq = sorted(
                ({p.body for p in mus.points} | {pw.wrap.body for pw in mus.wraps}) - {-1}
            )
            col = jnp.zeros(model.nq, kin.J.dtype)
            for i in gamma_seq:
                if i < 0:
                    continue
                col = col + gamma[i] @ E[i, m] + kin.J.T @ (rev * (beta[i] @ Eh[i, m]))
            cols.append(col)
        R = jnp.stack(cols, axis=1)
    R = R + R_mov
    if forward:
        Lw, Rw = _wrapped_columns(model, q)
        L, R = L + Lw, R + Rw
    return _nan_unless_finite(q, L, R)


def muscle_velocities(model: Model, q, qd) -> Float[Array, " nm"]:
    """Musculotendon lengthening velocities dL/dt = −R(q)ᵀ q̇ (m/s), shape (nm,)."""
    return -moment_arms(model, q).T @ qd
