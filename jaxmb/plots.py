"""Every figure jaxmb draws, in one place; matplotlib is imported here only, and only when a figure
is drawn, so that nothing else in the package needs it. The setup commands' figure
(:func:`plot_trial_columns`) is drawn with Pillow: it is part of every run a user waits for, and
matplotlib's import alone took longer than the analysis.

* :func:`plot_trajectory`: q and q̇ against t, and for planar models :func:`draw_mechanism` (the
  ``jaxmb simulate`` PNG).
* :func:`plot_moment_arms`: moment arms and lengths of every muscle over a coordinate sweep (the
  ``jaxmb moment-arms`` PNG).
* :func:`plot_joint_loads`: joint forces and moments of a gait trial (the ``jaxmb
  inverse-dynamics`` PNG).
* :func:`plot_history`: loss and parameter paths of an identification.
* :func:`plot_muscle_forces`: musculotendon forces over time (the seed's Fig. 21).

Functions that write a file select the Agg backend (no display needed); those that draw on given
axes leave the backend to the caller (notebooks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .kinematics import body_transforms

__all__ = [
    "plot_trajectory",
    "draw_mechanism",
    "is_planar",
    "coordinate_units",
    "curve_styles",
    "plot_moment_arms",
    "plot_joint_loads",
    "plot_history",
    "plot_muscle_forces",
    "plot_trial_columns",
    "TrialPlot",
]


def _pyplot_for_files():
    """matplotlib.pyplot with the file-only Agg backend (the command line has no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def is_planar(model) -> bool:
    """True when every body moves in the x-y plane: revolute axes along z, offsets and prismatic
    axes and points without a z component."""
    z = np.array([0.0, 0.0, 1.0])
    ax = np.asarray(model.axis_theta)
    offs = np.asarray(model.axis_d) * np.asarray(model.d)[:, None]
    rev = model.is_revolute
    pts = [np.asarray(r) for _, r in model.points.values()]
    return bool(
        np.all(np.abs(np.abs(ax[rev] @ z) - 1.0) < 1e-12)
        and np.all(np.abs(offs[:, 2]) < 1e-12)
        and np.all(np.abs(np.asarray(model.axis_d)[~rev, 2]) < 1e-12)
        and all(abs(r[2]) < 1e-12 for r in pts)
    )


def coordinate_units(model, q=None) -> tuple[str, ...]:
    """``"rad"`` for each coordinate that turns a revolute joint (at q, default zeros), else
    ``"m"``."""
    q = jnp.zeros(model.nq) if q is None else jnp.asarray(q, dtype=float)
    J = np.asarray(model.joint_map.jacobian(q))
    rev = np.asarray(model.is_revolute)
    rot = np.any(np.abs(J[rev]) > 0, axis=0) if rev.any() else np.zeros(model.nq, bool)
    return tuple("rad" if r else "m" for r in rot)


def curve_styles(Y) -> tuple[list[dict], list[int | None]]:
    """Matplotlib styles that keep n curves (columns of Y, (ns, n)) apart when they coincide: a
    line style, a marker placed at staggered samples (so markers of equal curves do not hide each
    other), drawing order; and for each curve the index of an earlier curve it coincides with
    (None if none), for the legend."""
    Y = np.asarray(Y, dtype=float)
    ns, n = Y.shape
    lines, marks = ["-", "--", "-.", ":"], ["o", "s", "^", "v", "D", "x", "P", "*"]
    every = max(ns // 8, 1)
    styles, same = [], []
    for j in range(n):
        twin = next(
            (
                k
                for k in range(j)
                if np.allclose(
                    Y[:, j], Y[:, k], rtol=1e-3, atol=1e-3 * np.nanmax(np.abs(Y) + 1e-300)
                )
            ),
            None,
        )
        same.append(twin)
        styles.append(
            dict(
                ls=lines[j % len(lines)],
                marker=marks[j % len(marks)],
                markevery=(j * every // max(n, 1) % every, every),
                ms=4,
                lw=1.3 + 0.8 * (n - j) / max(n, 1),  # earlier curves wider, drawn under later ones
                zorder=2 + j,
            )
        )
    return styles, same


def _unit_label(units, rate: str = "") -> str:
    kinds = sorted(set(units))
    return ", ".join(f"{u}{rate}" for u in kinds)


def plot_trajectory(path, model, t, q, qd) -> None:
    """Write a PNG of q (nt, nq) and q̇ (nt, nq) against t (nt,) s, and for a planar model a
    drawing of the mechanism at a few instants; axes and legend entries carry units, coinciding
    curves are told apart by line style and marker."""
    plt = _pyplot_for_files()
    planar = is_planar(model)
    units = coordinate_units(model, q[0])
    fig, axes = plt.subplots(1, 3 if planar else 2, figsize=(15 if planar else 10, 4.2))
    styles, _ = curve_styles(q)
    for k, c in enumerate(model.coordinate_names):
        axes[0].plot(t, q[:, k], label=f"{c} ({units[k]})", **styles[k])
        axes[1].plot(t, qd[:, k], label=f"{c} ({units[k]}/s)", **styles[k])
    axes[0].set(
        xlabel="t (s)",
        ylabel=f"q ({_unit_label(units)})",
        title=f"{model.name}: generalized coordinates",
    )
    axes[1].set(
        xlabel="t (s)", ylabel=f"q̇ ({_unit_label(units, '/s')})", title="generalized speeds"
    )
    for a in axes[:2]:
        if model.nq <= 10:
            a.legend(fontsize=7)
    if planar:
        draw_mechanism(axes[2], model, t, q)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _colormap(n: int):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    return lambda k: cmap(k / max(n - 1, 1) * 0.85)


def _force_body(model, body) -> int:
    """Body index of a force element's body given by name or index (−1: ground)."""
    if isinstance(body, str):
        return -1 if body == "ground" else model.body_names.index(body)
    return int(body)


def draw_mechanism(ax, model, t, q, instants: int = 4) -> None:
    """Draw a planar mechanism on ``ax`` at ``instants`` times of t (nt,) s, q (nt, nq): bodies as
    lines from their joints to their points and children, two-point forces dotted, ground pivots ▲
    and ground points x (m)."""
    idx = np.unique(np.linspace(0, len(t) - 1, instants).round().astype(int))
    poses = np.asarray(jax.jit(jax.vmap(lambda x: body_transforms(model, x)))(jnp.asarray(q[idx])))
    by_body: dict[int, list] = {}
    for _, (b, r) in model.points.items():
        by_body.setdefault(b, []).append(np.asarray(r))
    springs = [e for e in model.forces if hasattr(e, "point_a") and hasattr(e, "body_a")]
    cmap = _colormap(len(idx))
    for n, (k, A) in enumerate(zip(idx, poses, strict=True)):
        color = cmap(n)
        world = lambda b, r: r[:2] if b < 0 else (A[b, :3, :3] @ r + A[b, :3, 3])[:2]
        for i in range(model.nb):
            o = A[i, :3, 3][:2]
            p = model.parent[i]
            start = poses[n][p, :3, 3][:2] if p >= 0 else o
            segs = [start] + [world(i, r) for r in by_body.get(i, [])]
            segs += [A[c, :3, 3][:2] for c in range(model.nb) if model.parent[c] == i]
            for s in segs[1:]:
                ax.plot([o[0], s[0]], [o[1], s[1]], "-", color=color, lw=1.5)
            if p >= 0:
                ax.plot([start[0], o[0]], [start[1], o[1]], "-", color=color, lw=1.5)
            ax.plot(*o, "o", color=color, ms=3)
        for e in springs:
            ba, bb = _force_body(model, e.body_a), _force_body(model, e.body_b)
            pa, pb = world(ba, np.asarray(e.point_a)), world(bb, np.asarray(e.point_b))
            ax.plot([pa[0], pb[0]], [pa[1], pb[1]], ":", color=color, lw=1)
        ax.plot([], [], "-", color=color, label=f"t = {t[k]:.4g} s")
    for i in range(model.nb):
        if model.parent[i] < 0:
            o = poses[0][i, :3, 3][:2]
            ax.plot(*o, "^", color="k", ms=7)
    for b, r in model.points.values():
        if b < 0:
            ax.plot(*np.asarray(r)[:2], "x", color="k", ms=6)
    ax.set_aspect("equal")
    ax.set(xlabel="x (m)", ylabel="y (m)", title="mechanism (▲ ground pivots, x ground points)")
    ax.legend(fontsize=7)


def plot_moment_arms(path, model, coordinate: str, xs, R, L) -> None:
    """Write a PNG of the moment arms R (ns, nm) m (drawn in mm) and lengths L (ns, nm) m of every
    muscle against the swept coordinate's values xs (ns,)."""
    plt = _pyplot_for_files()
    names = model.muscle_names
    unit = coordinate_units(model)[model.coordinate_index(coordinate)]
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.8))
    sr, same_r = curve_styles(R)
    sl, same_l = curve_styles(L)
    for j, m in enumerate(names):
        tag = f" (= {names[same_r[j]]})" if same_r[j] is not None else ""
        ax[0].plot(xs, R[:, j] * 1e3, label=m + tag, **sr[j])
        tag = f" (= {names[same_l[j]]})" if same_l[j] is not None else ""
        ax[1].plot(xs, L[:, j], label=m + tag, **sl[j])
    ax[0].axhline(0.0, color="k", lw=0.5)
    ax[0].set(
        xlabel=f"{coordinate} ({unit})",
        ylabel="moment arm R = −∂L/∂q " + ("(mm)" if unit == "rad" else "(mm/m)"),
        title=f"{model.name}: moment arms about {coordinate}",
    )
    ax[1].set(xlabel=f"{coordinate} ({unit})", ylabel="musculotendon length L (m)", title="lengths")
    if len(names) <= 20:
        ax[0].legend(fontsize=7, ncol=2)
        ax[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_joint_loads(
    path, time, segments: Sequence[str], joints: Sequence[str], loads, reference=None
) -> None:
    """Write a PNG of the joint forces (N) and moments (N·m, ground axes) of a gait trial: one
    column per segment, ``loads`` a :class:`jaxmb.newton_euler.JointLoads` over time (nt,) s,
    ``joints[i]`` the name of the proximal joint of ``segments[i]``. Coinciding components (the
    zero x and y moments of planar data) are kept apart by style and marked in the legend.
    ``reference``: Winter's Table A.5 as :func:`jaxmb.gait.winter_reference` gives it, drawn in
    black (moment z, force x and y)."""
    plt = _pyplot_for_files()
    ns = len(segments)
    fig, ax = plt.subplots(2, ns, figsize=(4 * ns, 6.5), squeeze=False)
    for i, (s, j) in enumerate(zip(segments, joints, strict=True)):
        for row, arr in ((0, loads.force), (1, loads.moment_ground)):
            Y = np.asarray(arr[:, i, :])
            styles, same = curve_styles(Y)
            for k, axn in enumerate("xyz"):
                tag = f" (= {'xyz'[same[k]]})" if same[k] is not None else ""
                ax[row, i].plot(time, Y[:, k], label=axn + tag, **styles[k])
        if reference is not None:
            for k in range(2):
                ax[0, i].plot(time, reference["force"][:, i, k], "k:", lw=1,
                              label="Winter A.5" if k == 0 else None)  # fmt: skip
            ax[1, i].plot(time, reference["moment"][:, i], "k:", lw=1, label="Winter A.5 (z)")
        ax[0, i].set_title(f"{j} force on {s}")
        ax[1, i].set_title(f"{j} moment on {s} (ground axes)")
        ax[0, i].set_ylabel("force (N)")
        ax[1, i].set_ylabel("moment (N·m)")
        for row in range(2):
            ax[row, i].set_xlabel("time (s)")
            ax[row, i].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_history(result, path: str, names: Sequence[str] | None = None):
    """Save a figure of the loss and the parameter paths of a fit to ``path`` (PNG); ``result`` is
    a :class:`jaxmb.simulation.IdentificationResult`. Returns ``path``."""
    plt = _pyplot_for_files()
    h = result.history
    P = [np.concatenate([np.ravel(p) for p in ps]) for ps in h["params"]]
    P = np.asarray(P)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    a.semilogy(np.arange(1, len(h["loss"]) + 1), h["loss"], "-o", ms=3)
    a.set_xlabel("iteration")
    a.set_ylabel("negative log posterior")
    a.set_title(f"loss ({result.optimizer})")
    a.grid(True, which="both", alpha=0.3)
    for j in range(P.shape[1]):
        lab = names[j] if names is not None and j < len(names) else f"θ{j}"
        b.plot(np.arange(1, P.shape[0] + 1), P[:, j] / P[-1, j], "-o", ms=3, label=lab)
    b.set_xlabel("iteration")
    b.set_ylabel("parameter / final value")
    b.set_title("parameter paths")
    b.grid(True, alpha=0.3)
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_muscle_forces(t, forces, names=None, *, infeasible=(), ax=None, path=None):
    """Musculotendon forces over time (the seed's Fig. 21); returns the matplotlib figure.

    Args:
        t: (nt,) s. forces: (nt, nm) N. names: the nm muscle names (legend; default
            "muscle 1" … "muscle nm").
        infeasible: frame indices to mark (grey bands) where the torques could not be produced.
        ax: an axes to draw on (default: a new figure). path: save the figure there (PNG, SVG).
    """
    if ax is None:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5))
    else:
        fig = ax.figure
    t = np.asarray(t, dtype=float)
    F = np.asarray(forces, dtype=float)
    if names is None:
        names = [f"muscle {k + 1}" for k in range(F.shape[-1])]
    if F.shape != (t.shape[0], len(names)):
        raise ValueError(f"plot_muscle_forces: forces {F.shape} != (len(t), len(names))")
    styles = ["-", "--", ":", "-."]
    for k, n in enumerate(names):
        ax.plot(t, F[:, k], styles[(k // 10) % 4], label=n, lw=1.4)
    for i in np.asarray(infeasible, dtype=int):
        ax.axvspan(t[max(i - 1, 0)], t[min(i + 1, len(t) - 1)], color="0.85", lw=0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("musculotendon force (N)")
    ax.set_title("Shoulder muscle forces (minimum Σa², rigid-tendon Hill)")
    ax.legend(ncol=2, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def _panel_range(v: np.ndarray) -> tuple[float, float]:
    """A panel's y range (lo, hi): the finite data's, widened by 5 % each side (matplotlib's
    default margin); a constant column gets ±1 % of its value (±1 at 0)."""
    v = v[np.isfinite(v)]
    if v.size == 0:
        return -1.0, 1.0
    lo, hi = float(np.min(v)), float(np.max(v))
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi), 1e-300):
        pad = 0.01 * abs(lo) if lo != 0.0 else 1.0
        return lo - pad, hi + pad
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


class TrialPlot(NamedTuple):
    """What :func:`plot_trial_columns` drew, in figure fractions (x right, y up, 0..1).

    Attributes:
        panels: per column ``(label, (x0, y0, w, h), (t0, t1), (lo, hi))``: the panel's box and
            the data ranges (time in s, the column's unit) that box spans.
        curves: ``{"jaxmb": polylines, "OpenSim": polylines}`` ((k, 2) arrays; a NaN value ends
            a polyline, as ``plot`` leaves a gap).
        texts: every text drawn, ``(text, (x, y))`` at its anchor.
        ylabel, title: the figure's labels; legend: the series named in its legend.
        size: (width, height) of the image (pixels).
    """

    panels: list
    curves: dict
    texts: list
    ylabel: str
    title: str
    legend: tuple
    size: tuple


_C0, _C1, _GRID = (31, 119, 180), (255, 127, 14), (217, 217, 217)  # matplotlib's C0, C1, 0.85


def plot_trial_columns(
    path,
    time,
    values,
    labels: Sequence[str],
    ylabel: str,
    title: str,
    reference=None,
    ncols: int = 4,
) -> TrialPlot:
    """Write a PNG of a trial's columns against time, one panel per column (``ylabel`` names the
    quantity and its unit); ``reference`` an optional ``(time, values)`` of the same columns
    (OpenSim's, dashed). Returns a :class:`TrialPlot` saying where everything was drawn.

    The setup commands draw one after every analysis, so it is drawn with Pillow (imported in
    ~0.02 s, drawn and written in ~0.1 s for 28 panels), not matplotlib, whose import and draw
    cost a warm ``jaxmb static-optimization`` of Gait10dof18musc 0.6–0.8 s of its ~2.3 s. Lines
    are drawn at twice the size and the image halved (anti-aliasing); text is Pillow's scalable
    default font. NaN values leave gaps in the curves.
    """
    from PIL import Image, ImageDraw, ImageFont

    time = np.asarray(time, dtype=float)
    values = np.asarray(values, dtype=float)
    n = len(labels)
    if values.shape != (time.shape[0], n):
        raise ValueError(f"plot_trial_columns: values {values.shape} != (len(time), len(labels))")
    ref_t = ref_v = None
    if reference is not None:
        ref_t = np.asarray(reference[0], dtype=float)
        ref_v = np.asarray(reference[1], dtype=float)
    ncols = max(1, min(ncols, n))
    nrows = (n + ncols - 1) // ncols
    width, height = 3.3 * ncols, 1.7 * nrows + 0.8  # inches at 100 dpi
    left, right = 0.85 / width, 1 - 0.15 / width
    bottom, top = 0.5 / height, 1 - 0.45 / height
    cw, rh = (right - left) / ncols, (top - bottom) / nrows
    pw, ph = cw / (1 + 0.3), rh / (1 + 0.15)  # a panel and its gaps (0.3 and 0.15 of it)
    t0, t1 = float(time[0]), float(time[-1])
    if t1 <= t0:
        t1 = t0 + 1.0
    tt = [t for t in _nice_ticks(t0, t1, 4) if t0 - 1e-9 * (t1 - t0) <= t <= t1 + 1e-9 * (t1 - t0)]
    panels, texts, grid, frames = [], [], [], []
    curves = {"jaxmb": [], "OpenSim": []}
    for k, lab in enumerate(labels):
        r, c = divmod(k, ncols)
        x0, y0 = left + c * cw, top - (r + 1) * rh + (rh - ph)
        v = values[:, k]
        lo, hi = _panel_range(v if ref_v is None else np.concatenate([v, ref_v[:, k]]))
        panels.append((lab, (x0, y0, pw, ph), (t0, t1), (lo, hi)))
        box = (x0, y0, lo, hi)
        frames.append((x0, y0, x0 + pw, y0 + ph))
        for y in _nice_ticks(lo, hi, 3):
            if lo <= y <= hi:
                yf = y0 + ph * (y - lo) / (hi - lo)
                grid.append(((x0, yf), (x0 + pw, yf)))
                texts.append((f"{y:.4g}", (x0 - 0.004, yf), 7, "rm"))
        for t in tt:
            xf = x0 + pw * (t - t0) / (t1 - t0)
            grid.append(((xf, y0), (xf, y0 + ph)))
        curves["jaxmb"] += _polylines(time, v, box, pw, ph, t0, t1)
        if ref_v is not None:
            curves["OpenSim"] += _polylines(ref_t, ref_v[:, k], box, pw, ph, t0, t1)
        texts.append((lab, (x0 + 0.02 * pw, y0 + 0.95 * ph), 8, "la"))
    for c in range(ncols):  # the lowest panel of each column carries the time axis
        x0, y0, _, _ = panels[c + ncols * ((n - 1 - c) // ncols)][1]
        for t in tt:
            texts.append((f"{t:g}", (x0 + pw * (t - t0) / (t1 - t0), y0 - 0.006), 7, "ma"))
        texts.append(("time (s)", (x0 + pw / 2, y0 - 0.12 / height - 0.006), 8, "ma"))
    texts.append((title, (0.5, 1 - 0.08 / height), 10, "ma"))
    legend = ("jaxmb",) if ref_v is None else ("jaxmb", "OpenSim")

    S = 2  # drawn at twice the size, halved when written
    W, H = round(100 * width), round(100 * height)
    img = Image.new("RGB", (S * W, S * H), "white")
    draw = ImageDraw.Draw(img)
    px = lambda x, y: (S * W * x, S * H * (1 - y))
    for a, b in grid:
        draw.line([px(*a), px(*b)], fill=_GRID, width=S)
    for x0, y0, x1, y1 in frames:
        draw.rectangle([px(x0, y1), px(x1, y0)], outline="black", width=S)
    for xy in curves["jaxmb"]:
        draw.line([px(x, y) for x, y in xy], fill=_C0, width=round(1.3 * S), joint="curve")
    for xy in curves["OpenSim"]:
        for seg in _dashes([px(x, y) for x, y in xy], 6.0 * S, 3.0 * S):
            draw.line(seg, fill=_C1, width=round(1.1 * S))
    fonts = {}
    font = lambda pt: fonts.get(pt) or fonts.setdefault(pt, _font(ImageFont, S * pt * 100 / 72))
    # legend (upper right): each name right of its line sample, placed by the name's width
    x = 1 - 0.02
    for name, color in reversed(list(zip(legend, (_C0, _C1), strict=False))):
        box = draw.textbbox(px(x, 1 - 0.1 / height), name, font=font(7), anchor="rm")
        ly = (box[1] + box[3]) / 2
        draw.line([(box[0] - 30 * S, ly), (box[0] - 6 * S, ly)], fill=color, width=round(1.3 * S))
        texts.append((name, (x, 1 - 0.1 / height), 7, "rm"))
        x -= (box[2] - box[0] + 45 * S) / (S * W)
    for text, (x, y), pt, anchor in texts:
        draw.text(px(x, y), text, font=font(pt), fill="black", anchor=anchor)
    # the y label (rotated, left edge)
    label = Image.new("RGB", (S * H, S * 30), "white")
    ImageDraw.Draw(label).text((S * H / 2, S * 15), ylabel, font=font(9), fill="black", anchor="mm")
    img.paste(label.rotate(90, expand=True), (S * 4, 0))
    img.reduce(S).save(path, compress_level=1)
    texts = [(text, xy) for text, xy, _, _ in texts] + [(ylabel, (4 / W, 0.5))]
    return TrialPlot(panels, curves, texts, ylabel, title, legend, (W, H))


def _font(ImageFont, px: float):
    """Pillow's default font at ``px`` pixels (scalable with FreeType; else its bitmap font)."""
    try:
        return ImageFont.load_default(size=px)
    except (TypeError, ImportError, OSError):  # Pillow < 10.1 or no FreeType
        return ImageFont.load_default()


def _nice_ticks(lo: float, hi: float, nbins: int) -> list[float]:
    """Tick values inside [lo, hi] at the finest step of 1, 2, 2.5 or 5 × 10^k that leaves at
    most nbins + 1 of them (matplotlib's MaxNLocator in spirit)."""
    if not hi > lo:
        return [lo]
    mag = 10.0 ** np.floor(np.log10((hi - lo) / nbins))
    for step in (m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0, 20.0, 25.0, 50.0)):
        first = np.ceil(lo / step - 1e-9) * step
        ticks = first + step * np.arange(int(np.floor((hi - first) / step + 1e-9)) + 1)
        if len(ticks) <= nbins + 1:
            break
    return [0.0 if abs(t) < 1e-12 * step else float(t) for t in ticks]


def _polylines(t, y, box, pw, ph, t0, t1) -> list[np.ndarray]:
    """The finite runs of (t, y) as polylines in figure fractions (a NaN leaves a gap)."""
    x0, y0, lo, hi = box
    xy = np.column_stack([x0 + pw * (t - t0) / (t1 - t0), y0 + ph * (y - lo) / (hi - lo)])
    ok = np.isfinite(xy).all(axis=1)
    cuts = np.flatnonzero(np.diff(ok.astype(np.int8))) + 1
    return [
        run for run, good in zip(np.split(xy, cuts), np.split(ok, cuts), strict=True) if good[0]
    ]


def _dashes(points, on: float, off: float) -> list[list[tuple]]:
    """A polyline (pixel points) cut into dashes ``on`` long with gaps ``off`` long."""
    p = np.asarray(points, dtype=float)
    if len(p) < 2:
        return []
    s = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(p, axis=0).T))])
    out = []
    for a in np.arange(0.0, s[-1], on + off):
        b = min(a + on, s[-1])
        inside = (s > a) & (s < b)
        xs = np.concatenate([[a], s[inside], [b]])
        out.append([tuple(q) for q in np.column_stack([np.interp(xs, s, p[:, 0]),
                                                        np.interp(xs, s, p[:, 1])])])  # fmt: skip
    return out
