"""OpenSim's wrapping of one musculotendon path at one pose, as fixed-size arrays.

OpenSim 4.6 (``GeometryPath::applyWrapObjects``): each :class:`~jaxmb.muscles.PathWrap` acts on a
range of path points; at every pose the object wraps every segment of that range (between the
points active then, tangent points of other objects included), and the first segment the straight
line crosses ("mandatory") or else the wrap that lengthens its segment least is kept, its two
tangent points inserted into the path on the object's body. With two or more wrap objects this is
repeated up to 8 times until the length changes by < 0.5 mm. The per-shape algorithms are
OpenSim's own (:mod:`jaxmb.muscles.wrap`); the discrete choices are ``jnp.where`` selections, so
lengths are differentiable wherever OpenSim's path is smooth.

So that one compiled program serves every muscle, the path is a fixed-size :class:`Path` (points,
then two tangent-point slots per wrap, ordered by a key), the wraps of a muscle are padded
:class:`WrapSlots` (padded slots are no-ops), :func:`path_kernel` scans the slots (``lax.scan``)
and picks each slot's shape with a ``lax.switch`` over the wrap classes present (through
:class:`~jaxmb.muscles.wrap.AbstractWrapObject`, so a new shape needs no change here), the
quadrant a traced ``(axis, sign)`` (sign 0 = "all").
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .paths import Muscle
from .wrap import INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP, QUADRANTS, WRAPPED
from .wrap.common import is_forward_only, rotate, safe_norm

__all__ = [
    "Path",
    "WrapSlots",
    "initial_path",
    "path_length",
    "sorted_path",
    "stable_order",
    "apply_wrap",
    "iterate_wraps",
    "path_kernel",
    "wrap_slots",
    "wrap_kinds",
    "wrapped_path",
]

# wrap-frame stand-ins for segments outside a wrap's range, far from any object of unit-ish
# size, so the (discarded) wrap computation there stays finite and has finite gradients
_SAFE_P1 = np.array([7.1, 3.3, 1.7])
_SAFE_P2 = np.array([5.3, -4.1, 2.9])


class Path(eqx.Module):
    """A current path during OpenSim's wrapping iteration (fixed-size, order by ``key``).

    Slots 0..N-1 are the muscle's points, slots N+2w and N+2w+1 wrap w's tangent points; a slot
    is in the path when its key is finite, and the path runs in increasing key.
    """

    key: Array  # (N+2W,)
    pos: Array  # (N+2W, 3) ground positions (m)
    wlen: Array  # (W,) surface length of each wrap (m)
    # OpenSim 4.6's Point::getLocationInGround cache of each slot (gval: valid). For a wrap point
    # it is filled on first use and never refreshed within a pose: PathWrapPoint::setLocation
    # updates the local location but does not invalidate the inherited ground-position cache, so
    # calcPathLength and calcPathLengthChange see the tangent point of the pass that first asked.
    gpos: Array  # (N+2W, 3)
    gval: Array  # (N+2W,) bool


def _ground(path):
    """Positions as Point::getLocationInGround returns them (cached where the cache is valid)."""
    return jnp.where(path.gval[:, None], path.gpos, path.pos)


def _touch(path, used):
    """Fill the ground-position cache of the slots ``used`` (N+2W,) bool that lack one."""
    fill = used & ~path.gval
    gpos = jnp.where(fill[:, None], path.pos, path.gpos)
    return Path(path.key, path.pos, path.wlen, gpos, path.gval | used)


def stable_order(key):
    """``jnp.argsort(key)`` (stable; +inf last, in index order) by pairwise comparisons: m is a
    path's few slots, and a sort or scatter inside a loop keeps XLA:CPU from compiling the loop
    as one function (see :mod:`jaxmb.xla_options`)."""
    i = jnp.arange(key.shape[0])
    ki, kj = key[:, None], key[None, :]
    rank = jnp.sum((kj < ki) | ((kj == ki) & (i[None, :] < i[:, None])), axis=1)
    return jnp.argmax(rank[None, :] == i[:, None], axis=1)


def sorted_path(path, owner):
    perm = stable_order(path.key)
    return perm, path.key[perm], path.pos[perm], jnp.asarray(owner)[perm]


def path_length(path, owner):
    """GeometryPath::calcPathLength: straight segments, plus the stored surface length between the
    two tangent points of one wrap object."""
    perm, skey, _, sown = sorted_path(path, owner)
    spos = _ground(path)[perm]
    valid = jnp.isfinite(skey[1:])
    same = (sown[:-1] >= 0) & (sown[:-1] == sown[1:])
    wl = path.wlen[jnp.maximum(sown[:-1], 0)] if path.wlen.shape[0] else jnp.zeros_like(skey[1:])
    seg = jnp.where(same, wl, safe_norm(spos[1:] - spos[:-1]))
    return jnp.sum(jnp.where(valid, seg, 0.0))


def apply_wrap(path, w, wrap_line, Rg, pg, start, end, active, owner, n, screen_line=None):
    """GeometryPath::applyWrapObjects for wrap slot ``w`` (may be traced) with ``wrap_line(p1, p2)``
    in the wrap frame (Rg (3, 3), pg (3,) in ground) over the points ``start`` … ``end``.

    ``screen_line`` (default ``wrap_line``) wraps the candidate segments to choose one: it must
    give ``wrap_line``'s code, and its tangent points and length wherever the code is WRAPPED
    (only those enter the choice); the kept segment is wrapped by ``wrap_line``."""
    key = path.key.at[n + 2 * w].set(jnp.inf).at[n + 2 * w + 1].set(jnp.inf)
    path = Path(key, path.pos, path.wlen, path.gpos, path.gval)
    m = key.shape[0]
    idx = jnp.arange(n)
    in_rng = active & (idx >= start) & (idx <= end)
    has = jnp.any(in_rng)
    smp = jnp.argmax(in_rng)
    emp = n - 1 - jnp.argmax(in_rng[::-1])
    j_start = jnp.sum(key < key[smp])
    j_end = jnp.sum(key < key[emp])
    perm, skey, spos, sown = sorted_path(path, owner)
    gs = _ground(path)[perm]  # calcPathLengthChange measures from the cached ground positions
    j = jnp.arange(m - 1)
    same = (sown[:-1] >= 0) & (sown[:-1] == sown[1:])
    cand = has & (j >= j_start) & (j < j_end) & ~same
    a, b = spos[:-1], spos[1:]
    to_w = jax.vmap(lambda x: rotate(Rg.T, x - pg))
    aw = jnp.where(cand[:, None], to_w(a), jnp.asarray(_SAFE_P1, a.dtype))
    bw = jnp.where(cand[:, None], to_w(b), jnp.asarray(_SAFE_P2, b.dtype))
    # the candidates are wrapped only to choose (codes, lengthening: discrete): without derivatives
    code, r1, r2, wl = _screen_candidates(
        screen_line or wrap_line, cand, jax.lax.stop_gradient(aw), jax.lax.stop_gradient(bw)
    )
    T1 = rotate(Rg, r1) + pg
    T2 = rotate(Rg, r2) + pg
    mand = cand & (code == MANDATORY_WRAP)
    wrapped = cand & (code == WRAPPED)
    ga, gb = gs[:-1], gs[1:]
    change = safe_norm(ga - T1) + wl + safe_norm(gb - T2) - safe_norm(gb - ga)
    change = jnp.where(wrapped, change, jnp.inf)
    any_mand = jnp.any(mand)
    best = jnp.where(any_mand, jnp.argmax(mand), jnp.argmin(change))
    # segments scanned before the first mandatory wrap: their ends' caches fill when "wrapped"
    measured = wrapped & (~any_mand | (j < jnp.argmax(mand)))
    slot = jnp.arange(m)[:, None]
    used = jnp.any(((perm[:-1] == slot) | (perm[1:] == slot)) & measured, axis=1)
    path = _touch(path, used)
    found = any_mand | jnp.any(wrapped)
    last = (m - 2) - jnp.argmax(cand[::-1])
    result = jnp.where(any_mand, MANDATORY_WRAP, jnp.where(jnp.any(cand), code[last], 0))
    # the kept wrap once more, differentiably: the same inputs give the same values, and the
    # derivatives (forward and reverse) flow through this one wrap per slot and pass only
    _, r1b, r2b, wlb = _kept_wrap(wrap_line, found, aw[best], bw[best])
    k0, k1 = skey[best], skey[best + 1]
    i1, i2 = n + 2 * w, n + 2 * w + 1
    key = path.key.at[i1].set(jnp.where(found, k0 + (k1 - k0) / 3.0, jnp.inf))
    key = key.at[i2].set(jnp.where(found, k0 + 2.0 * (k1 - k0) / 3.0, jnp.inf))
    pos = path.pos.at[i1].set(rotate(Rg, r1b) + pg).at[i2].set(rotate(Rg, r2b) + pg)
    wlen = path.wlen.at[w].set(jnp.where(found, wlb, 0.0))
    return Path(key, pos, wlen, path.gpos, path.gval), result


def _no_wrap(line, a, b):
    """What ``line`` returns for a segment it does not wrap: (NO_WRAP, a, b, 0), its dtypes."""
    code, r1, r2, wl = jax.eval_shape(line, a, b)
    return (
        jnp.full(code.shape, NO_WRAP, code.dtype),
        a.astype(r1.dtype),
        b.astype(r2.dtype),
        jnp.zeros(wl.shape, wl.dtype),
    )


def _screen_candidates(screen_line, cand, aw, bw):
    """``screen_line`` on the candidate segments in path order (cand (m,), ends aw, bw (m, 3)) up
    to and including the first MANDATORY_WRAP, where OpenSim's segment loop breaks; the segments
    not wrapped return (NO_WRAP, a, b, 0). Nothing after that segment is read: the choice takes
    the first mandatory wrap, and the result code is the last wrapped segment's. A
    ``while_loop`` from the first candidate to the last: one pose runs only those (side by side
    under ``vmap`` over the segments, fewer but larger operations, it ran 1.2x slower on arm26);
    under ``vmap`` over poses it runs until every pose has stopped. Not differentiable (the
    caller stops the gradients)."""
    m = cand.shape[0]
    stop = jnp.where(jnp.any(cand), m - jnp.argmax(cand[::-1]), 0)  # one past the last candidate
    init = (jnp.argmax(cand), *jax.vmap(lambda a, b: _no_wrap(screen_line, a, b))(aw, bw), False)

    def body(state):
        j, code, r1, r2, wl, _ = state
        # (between candidates a segment joining two tangent points of one object is skipped)
        new = jax.lax.cond(
            cand[j], screen_line, lambda a, b: _no_wrap(screen_line, a, b), aw[j], bw[j]
        )
        code, r1, r2, wl = (x.at[j].set(v) for x, v in zip((code, r1, r2, wl), new, strict=True))
        return j + 1, code, r1, r2, wl, cand[j] & (new[0] == MANDATORY_WRAP)

    def go_on(state):
        j, *_, mandatory = state
        return (j < stop) & ~mandatory

    _, code, r1, r2, wl, _ = jax.lax.while_loop(go_on, body, init)
    return code, r1, r2, wl


def _kept_wrap(wrap_line, found, a, b):
    """``wrap_line`` on the kept segment a → b (wrap frame), differentiably; (NO_WRAP, a, b, 0)
    when no segment was kept (``found`` False)."""
    # remat: reverse mode keeps only the segment ends, not the residuals of every step of the
    # wrap algorithms' inner iterations (tens of MB per pose, batched over passes and slots)
    line = jax.checkpoint(wrap_line)
    return jax.lax.cond(found, line, lambda a, b: _no_wrap(line, a, b), a, b)


def initial_path(X, active, nw):
    n = X.shape[0]
    owner = np.concatenate([-np.ones(n, int), np.repeat(np.arange(nw), 2)])
    key = jnp.concatenate(
        [
            jnp.where(active, jnp.arange(n, dtype=X.dtype), jnp.inf),
            jnp.full(2 * nw, jnp.inf, X.dtype),
        ]
    )
    pos = jnp.concatenate([X, jnp.zeros((2 * nw, 3), X.dtype)])
    return Path(key, pos, jnp.zeros(nw, X.dtype), pos, jnp.arange(n + 2 * nw) < n), owner


def iterate_wraps(path, apply, nw, owner, length_fn, once=False):
    """OpenSim's multi-object loop: up to 8 passes over the wraps until the length changes by
    < 0.5 mm; the first two wraps are swapped once when the first misses and the second has a
    point inside. ``apply(path, i, swapped)`` applies the wrap in position i of a pass. ``once``
    (bool, may be traced): stop after the first pass (OpenSim's path with one wrap object, which
    wraps once).

    Traced under :func:`~jaxmb.muscles.wrap.common.forward_only`, the passes are a ``while_loop``
    that stops at convergence; otherwise (reverse mode must pass) a ``scan`` of 8 whose converged
    passes are branches not taken, each still a few µs per muscle (arm26's one-object muscles
    among three slots, forward mode: 1.35x the time of their own one-slot kernel with the scan,
    1.19x with the loop)."""
    n = path.key.shape[0] - 2 * nw

    def one_pass(state, kk):
        # a converged path skips the pass (a real branch for one pose; a select under vmap)
        return jax.lax.cond(state[2], lambda s: s, lambda s: next_pass(s, kk), state), None

    def next_pass(state, kk):
        path, last, done, swapped = state
        new, results = apply(path, swapped)
        length = length_fn(new, owner)
        new = _touch(new, jnp.isfinite(new.key))  # calcPathLength asked every point in the path
        conv = jnp.abs(length - last) < 0.0005
        swap = (kk == 0) & ~conv & (results[0] == NO_WRAP) & (results[1] == INSIDE_RADIUS)
        k_sw = new.key.at[n].set(jnp.inf).at[n + 1].set(jnp.inf)
        new = Path(jnp.where(swap, k_sw, new.key), new.pos, new.wlen, new.gpos, new.gval)
        keep = jax.tree_util.tree_map(lambda x, y: jnp.where(done, x, y), path, new)
        state = (
            keep,
            jnp.where(done | conv, last, length),
            done | conv | once,
            swapped | (swap & ~done),
        )
        return state

    dtype = path.pos.dtype
    init = (path, jnp.asarray(jnp.inf, dtype), jnp.asarray(False), jnp.asarray(False))
    if is_forward_only():
        _, (path, _, _, _) = jax.lax.while_loop(
            lambda s: (s[0] < 8) & ~s[1][2], lambda s: (s[0] + 1, next_pass(s[1], s[0])), (0, init)
        )
        return path
    (path, _, _, _), _ = jax.lax.scan(one_pass, init, jnp.arange(8))
    return path


class WrapSlots(eqx.Module):
    """The wrap objects of one muscle as padded arrays (W slots).

    R (W, 3, 3), p (W, 3): wrap frames in ground; size (W, 3); kind (W,) index into the kernel's
    type table; axis (W,), sign (W,): quadrant (sign 0 = "all"); start, end (W,): point range
    (0-based, inclusive, resolved); valid (W,): slot holds a wrap object (the muscle's own
    wraps first, then the padding).
    """

    R: Array
    p: Array
    size: Array
    kind: Array
    axis: Array
    sign: Array
    start: Array
    end: Array
    valid: Array


def path_kernel(X, active, slots: WrapSlots, types: tuple):
    """OpenSim's GeometryPath::applyWrapObjects for one muscle with padded wrap slots, the loop over
    slots a ``lax.scan`` and the wrap shape a ``lax.switch`` over ``types`` (the
    :class:`~jaxmb.muscles.wrap.AbstractWrapObject` classes present, :func:`wrap_kinds`), so that
    one program serves every muscle: padded slots are no-ops, and a muscle with one wrap object
    among W > 1 slots makes one pass without the multi-object refinements (OpenSim's
    single-object case, a traced flag: one program serves both cases).

    X: (N, 3) ground positions (m); active: (N,). Returns (length, path) as
    :func:`wrapped_path`; path slots N + 2w, N + 2w + 1 are slot w's tangent points.
    """
    n, nw = X.shape[0], slots.R.shape[0]
    path, owner = initial_path(X, active, nw)
    if nw == 0:
        return path_length(path, owner), path

    n_wraps = jnp.sum(slots.valid)  # the muscle's own wraps
    # W = 1: every muscle has one object (static); else each muscle's flag, traced
    single = True if nw == 1 else n_wraps == 1

    def switch(fs, w):
        branches = [(lambda f: lambda *a: f(*a, single))(f) for f in fs]

        def line(a, b):
            args = (a, b, slots.size[w], slots.axis[w], slots.sign[w])
            if len(branches) == 1:
                return branches[0](*args)
            return jax.lax.switch(slots.kind[w], branches, *args)

        return line

    def wrap(path, w):
        line = switch([cls.wrap_segment for cls in types], w)
        screen = switch([cls.screen_segment for cls in types], w)
        new, result = apply_wrap(
            path,
            w,
            line,
            slots.R[w],
            slots.p[w],
            slots.start[w],
            slots.end[w],
            active,
            owner,
            n,
            screen,
        )
        return new, result.astype(jnp.int32)

    def apply(path, w):
        # a padded slot is a real branch not taken: its wrap's loops and branches (no iteration)
        # cost about what a wrap that misses does
        skip = lambda path, w: (path, jnp.asarray(NO_WRAP, jnp.int32))  # noqa: E731
        return jax.lax.cond(slots.valid[w], wrap, skip, path, w)

    if nw == 1:
        path, _ = wrap(path, 0)
        return path_length(path, owner), path

    def one_pass(path, swapped):
        def order(i):
            return jnp.where(swapped & (i < 2), 1 - i, i)

        if is_forward_only():  # the muscle's own wraps only (a loop reverse mode cannot pass)

            def body(i, state):
                p, results = state
                p, r = wrap(p, order(i))
                return p, results.at[i].set(r)

            init = (path, jnp.full(nw, NO_WRAP, jnp.int32))
            return jax.lax.fori_loop(0, n_wraps, body, init)
        return jax.lax.scan(lambda p, i: apply(p, order(i)), path, jnp.arange(nw))

    path = iterate_wraps(path, one_pass, nw, owner, path_length, once=single)
    return path_length(path, owner), path


def wrap_slots(mus: Muscle, frames, W: int, kinds: tuple, n: int) -> WrapSlots:
    """Pad one muscle's wraps to W slots; ``kinds``: the wrap classes present, in branch order
    (:func:`wrap_kinds`)."""
    nw = len(mus.wraps)
    dtype = frames[0][0].dtype if nw else jnp.zeros(()).dtype
    R = jnp.asarray([f[0] for f in frames] + [jnp.eye(3, dtype=dtype)] * (W - nw), dtype)
    p = jnp.asarray([f[1] for f in frames] + [jnp.zeros(3, dtype)] * (W - nw), dtype)
    size, kind, axis, sign, start, end = [], [], [], [], [], []
    for pw in mus.wraps:
        size.append(jnp.asarray(pw.wrap.size_parameters(), dtype).reshape(3))
        kind.append(kinds.index(type(pw.wrap)))
        q = QUADRANTS[pw.wrap.quadrant]
        axis.append(0 if q is None else q[0])
        sign.append(0.0 if q is None else q[1])
        start.append(pw.start)
        end.append(n - 1 if pw.end == -1 else pw.end)
    pad = W - nw
    size = jnp.stack(size + [jnp.ones(3, dtype)] * pad) if W else jnp.zeros((0, 3), dtype)
    return WrapSlots(
        R.reshape(W, 3, 3),
        p.reshape(W, 3),
        size,
        jnp.asarray(kind + [0] * pad, jnp.int32),
        jnp.asarray(axis + [0] * pad, jnp.int32),
        jnp.asarray(sign + [0.0] * pad, dtype),
        jnp.asarray(start + [0] * pad, jnp.int32),
        jnp.asarray(end + [-1] * pad, jnp.int32),
        jnp.asarray([True] * nw + [False] * pad),
    )


def wrap_kinds(muscles) -> tuple[type, ...]:
    """The wrap-object classes of ``muscles``, in a fixed order: the kernel's ``lax.switch``
    branches (a static argument, so the order must not depend on the muscles' order)."""
    return tuple(
        sorted(
            {type(pw.wrap) for mus in muscles for pw in mus.wraps},
            key=lambda cls: (cls.__module__, cls.__qualname__),
        )
    )


def wrapped_path(mus: Muscle, X, active, frames):
    """OpenSim's GeometryPath::applyWrapObjects for one muscle at one pose (the kernel, unpadded).

    X: (N, 3) ground positions of the path points; active: (N,) bool; frames: per PathWrap the
    wrap frame's ground pose (R (3, 3), p (3,)). With two or more wrap objects the wraps are
    re-applied up to 8 times until the length changes by less than 0.5 mm, and the first two are
    swapped once when the first misses and the second has a point inside. Returns (length, path).
    """
    kinds = wrap_kinds([mus])
    slots = wrap_slots(mus, frames, len(mus.wraps), kinds, X.shape[0])
    return path_kernel(X, active, slots, kinds)
