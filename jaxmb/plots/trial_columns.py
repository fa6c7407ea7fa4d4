"""The figure of a trial's columns against time (:func:`plot_trial_columns`: the PNG of every
setup command, IK, ID and SO), and :class:`FigureProcess`, which draws it in a second Python
process.

A setup command spends about 1.5 s of a warm run in its own work, and matplotlib's import and the
figure take another 0.6 s. :class:`FigureProcess` starts a Python process when the command starts;
it imports matplotlib on the machine's other core while the command imports jaxmb, loads its
compiled programs and solves, then draws the figure it is sent, and the command waits for it
before it ends. The process loads this file alone (it imports numpy and matplotlib only, never
the jaxmb package, whose import would cost it as much as it saves).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Sequence

import numpy as np

__all__ = ["plot_trial_columns", "FigureProcess", "serve_figures"]

# what the figure process runs: this file, loaded by path as a module of its own
_PROCESS = (
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('jaxmb_trial_figure', sys.argv[1]); "
    "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
    "module.serve_figures()"
)


class FigureProcess:
    """A second Python process that imports matplotlib now and draws :func:`plot_trial_columns`
    figures when asked (see the module docstring). :meth:`close` waits for the figures; a
    process that cannot start or fails leaves the figures to this process (drawn in
    :meth:`close`, raising what drawing raises)."""

    def __init__(self):
        self._jobs: list[tuple[tuple, dict]] = []
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _PROCESS, __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except OSError:
            self._process = None

    def plot_trial_columns(self, path, time, values, labels, ylabel, title, **kwargs) -> None:
        """Send :func:`plot_trial_columns`'s arguments to the process (arrays as numpy)."""
        job = ((str(path), np.asarray(time), np.asarray(values), tuple(labels), ylabel, title),
               kwargs)  # fmt: skip
        self._jobs.append(job)
        if self._process is not None:
            try:
                pickle.dump(job, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._process.stdin.flush()
            except OSError:  # the process ended early: close() draws here
                pass

    def close(self, timeout: float = 300.0) -> None:
        """Wait until every figure sent is written; draw them here if the process failed."""
        failed = self._process is None
        if not failed:
            try:
                _, err = self._process.communicate(timeout=timeout)
                failed = self._process.returncode != 0
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                failed = True
        if failed:
            for args, kwargs in self._jobs:
                plot_trial_columns(*args, **kwargs)
        self._jobs = []


def serve_figures(stream=None) -> None:
    """The figure process: import matplotlib, then draw each pickled ``(args, kwargs)`` job read
    from ``stream`` (standard input) with :func:`plot_trial_columns`, until the stream ends."""
    stream = sys.stdin.buffer if stream is None else stream
    _import_matplotlib()
    while True:
        try:
            args, kwargs = pickle.load(stream)
        except EOFError:
            return
        plot_trial_columns(*args, **kwargs)


def _import_matplotlib() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.collections import LineCollection  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401
    from matplotlib.lines import Line2D  # noqa: F401
    from matplotlib.ticker import MaxNLocator  # noqa: F401


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


def plot_trial_columns(
    path,
    time,
    values,
    labels: Sequence[str],
    ylabel: str,
    title: str,
    reference=None,
    ncols: int = 4,
):
    """Write a PNG of a trial's columns against time, one panel per column (``ylabel`` names the
    quantity and its unit); ``reference`` an optional ``(time, values)`` of the same columns
    (OpenSim's, dashed). Returns the matplotlib ``Figure``, whose ``panels`` attribute lists each
    panel as ``(label, (x0, y0, w, h), (t0, t1), (lo, hi))``: its box in figure fractions and the
    data ranges that box spans (the curves are line collections on ``fig.axes[0]`` in figure
    fractions, labelled "jaxmb" and "OpenSim").

    The setup commands draw one after every analysis, so it is drawn cheaply: the panels are
    drawn on one axes-less canvas (``Figure`` on Agg, pyplot not imported) as boxes, three or
    four grid lines and their labels each, and one line collection per series. An ``Axes`` per
    panel costs matplotlib most of a second on 28 panels (each tick is several artists).
    NaN values leave gaps in the curves, as ``plot`` does.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

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
    width, height = 3.3 * ncols, 1.7 * nrows + 0.8
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    # panel grid in figure fractions (the margins of the former subplots layout, in inches)
    left, right = 0.85 / width, 1 - 0.15 / width
    bottom, top = 0.5 / height, 1 - 0.45 / height
    cw, rh = (right - left) / ncols, (top - bottom) / nrows
    pw, ph = cw / (1 + 0.3), rh / (1 + 0.15)  # wspace 0.3, hspace 0.15 of a panel
    t0, t1 = float(time[0]), float(time[-1])
    if t1 <= t0:
        t1 = t0 + 1.0
    tt = MaxNLocator(nbins=4).tick_values(t0, t1)
    tt = tt[(tt >= t0 - 1e-9 * abs(t1 - t0)) & (tt <= t1 + 1e-9 * abs(t1 - t0))]
    ylocator = MaxNLocator(nbins=3)
    frames, grid, curves, ref_curves = [], [], [], []
    panels = []
    text = dict(transform=ax.transAxes, fontsize=7)
    for k, lab in enumerate(labels):
        r, c = divmod(k, ncols)
        x0, y0 = left + c * cw, top - (r + 1) * rh + (rh - ph)
        v = values[:, k]
        lo, hi = _panel_range(v if ref_v is None else np.concatenate([v, ref_v[:, k]]))
        panels.append((lab, (x0, y0, pw, ph), (t0, t1), (lo, hi)))

        def to_fig(t, y, x0=x0, y0=y0, lo=lo, hi=hi):
            """The finite runs of (t, y) as polylines in figure fractions (NaN leaves a gap)."""
            xy = np.column_stack([x0 + pw * (t - t0) / (t1 - t0), y0 + ph * (y - lo) / (hi - lo)])
            ok = np.isfinite(xy).all(axis=1)
            cuts = np.flatnonzero(np.diff(ok.astype(np.int8))) + 1
            return [run for run, good in zip(np.split(xy, cuts), np.split(ok, cuts), strict=True)
                    if good[0]]  # fmt: skip

        frames.append([(x0, y0), (x0 + pw, y0), (x0 + pw, y0 + ph), (x0, y0 + ph), (x0, y0)])
        for y in ylocator.tick_values(lo, hi):
            if lo <= y <= hi:
                yf = y0 + ph * (y - lo) / (hi - lo)
                grid.append([(x0, yf), (x0 + pw, yf)])
                ax.text(x0 - 0.004, yf, f"{y:.4g}", ha="right", va="center", **text)
        for t in tt:
            xf = x0 + pw * (t - t0) / (t1 - t0)
            grid.append([(xf, y0), (xf, y0 + ph)])
        curves += to_fig(time, v)
        if ref_v is not None:
            ref_curves += to_fig(ref_t, ref_v[:, k])
        ax.text(x0 + 0.02 * pw, y0 + 0.95 * ph, lab, va="top", **{**text, "fontsize": 8})
    for c in range(ncols):  # the lowest panel of each column carries the time axis
        x0, y0, _, _ = panels[c + ncols * ((n - 1 - c) // ncols)][1]
        for t in tt:
            ax.text(
                x0 + pw * (t - t0) / (t1 - t0), y0 - 0.006, f"{t:g}", ha="center", va="top", **text
            )
        ax.text(
            x0 + pw / 2,
            y0 - 0.12 / height - 0.006,
            "time (s)",
            ha="center",
            va="top",
            **{**text, "fontsize": 8},
        )
    ax.add_collection(LineCollection(grid, colors="0.85", linewidths=0.6))
    ax.add_collection(LineCollection(frames, colors="k", linewidths=0.8))
    ax.add_collection(LineCollection(curves, colors="C0", linewidths=1.3, label="jaxmb"))
    if ref_v is not None:
        ax.add_collection(
            LineCollection(
                ref_curves, colors="C1", linewidths=1.1, linestyles="--", label="OpenSim"
            )
        )
        fig.legend(
            handles=[
                Line2D([], [], color="C0", lw=1.3, label="jaxmb"),
                Line2D([], [], color="C1", lw=1.1, ls="--", label="OpenSim"),
            ],
            loc="upper right",
            fontsize=7,
            ncols=2,
            frameon=False,
        )
    fig.supylabel(ylabel, fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.panels = panels
    fig.savefig(path, dpi=100, pil_kwargs={"compress_level": 1})
    return fig
