"""The CLI's plots (issue 22): axes and legends carry units, and curves that coincide (arm26's three
triceps heads) stay distinguishable: each gets its own line style and marker, markers at staggered
samples, and a legend entry naming the curve it coincides with."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from helpers import PACKAGE_DATA  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import plots  # noqa: E402


def test_coinciding_curves_get_distinct_styles_and_name_their_twin():
    x = np.linspace(0.0, 1.0, 40)
    Y = np.stack([np.sin(x), np.sin(x), np.cos(x), np.sin(x) * (1 + 1e-6)], axis=1)
    styles, same = plots.curve_styles(Y)
    assert same == [None, 0, None, 0]
    looks = {(s["ls"], s["marker"]) for s in styles}
    assert len(looks) == 4
    starts = [s["markevery"][0] for s in styles if s is not styles[2]]
    assert len(set(starts)) == 3  # the markers of the three equal curves fall on different samples
    assert [s["zorder"] for s in styles] == sorted(s["zorder"] for s in styles)
    assert styles[0]["lw"] > styles[-1]["lw"]  # earlier curves drawn wider, underneath


def _kept_figure(monkeypatch):
    """Run a plot function without closing its figure, to read its axes."""
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    plt.close("all")


def test_moment_arm_plot_has_units_and_names_coinciding_muscles(monkeypatch, tmp_path):
    model = mb.load_model(PACKAGE_DATA / "models" / "two_link_arm.json")
    flexor, extensor = model.muscle_names
    xs = np.linspace(0.0, 2.0, 30)
    R = np.tile(np.linspace(0.01, 0.02, 30)[:, None], (1, 2))  # equal moment arms
    L = np.stack([np.linspace(0.2, 0.3, 30), np.linspace(0.3, 0.2, 30)], axis=1)  # lengths apart
    _kept_figure(monkeypatch)
    plots.plot_moment_arms(tmp_path / "r.png", model, "elbow", xs, R, L)
    arms, lengths = plt.gcf().axes[:2]
    assert arms.get_xlabel() == "elbow (rad)"
    assert arms.get_ylabel() == "moment arm R = −∂L/∂q (mm)"
    assert lengths.get_ylabel() == "musculotendon length L (m)"
    assert [t.get_text() for t in arms.get_legend().get_texts()] == [
        flexor,
        f"{extensor} (= {flexor})",
    ]
    assert [t.get_text() for t in lengths.get_legend().get_texts()] == [flexor, extensor]
    assert (tmp_path / "r.png").stat().st_size > 0


def test_trajectory_plot_axes_and_legend_carry_units(monkeypatch, tmp_path):
    model = mb.models.chain(3)
    t = np.linspace(0.0, 1.0, 20)
    q = np.zeros((20, 3))
    _kept_figure(monkeypatch)
    plots.plot_trajectory(tmp_path / "q.png", model, t, q, q)
    fig = plt.gcf()
    assert fig.axes[0].get_xlabel() == "t (s)"
    assert fig.axes[0].get_ylabel() == "q (rad)"
    assert fig.axes[1].get_ylabel() == "q̇ (rad/s)"
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [f"{c} (rad)" for c in model.coordinate_names]


def test_trial_columns_plot_one_panel_per_column_and_a_time_axis_under_each_column(tmp_path):
    """The setup commands' plot: 7 columns in 3 columns of panels leave the last row with one
    panel, so columns 2 and 3 end one row higher: their lowest panels carry the time axis. Each
    panel's curves, mapped back through its box and data ranges, are the columns drawn; the PNG
    has the size the plot reports and is not blank inside the panels."""
    from PIL import Image

    t = np.linspace(0.5, 1.1, 20)
    values = np.outer(t, np.arange(1.0, 8.0))
    values[3, 2] = np.nan  # a gap, not a number
    labels = [f"col{k}" for k in range(7)]
    png = tmp_path / "cols.png"
    fig = plots.plot_trial_columns(png, t, values, labels, "moment (N·m)", "trial",
                                   reference=(t, 2 * values), ncols=3)  # fmt: skip
    image = np.asarray(Image.open(png).convert("L"))
    assert image.shape == fig.size[::-1]
    assert [p[0] for p in fig.panels] == labels
    texts = [x for x, _ in fig.texts]
    assert all(lab in texts for lab in labels)
    for k, (_, (x0, y0, w, h), (t0, t1), (lo, hi)) in enumerate(fig.panels):
        for name, scale in (("jaxmb", 1.0), ("OpenSim", 2.0)):
            runs = [xy for xy in fig.curves[name] if x0 <= xy[0, 0] <= x0 + w
                    and y0 <= xy[0, 1] <= y0 + h]  # fmt: skip
            assert len(runs) == (2 if k == 2 else 1)  # the NaN splits column 2's curve
            xy = np.concatenate(runs)
            ok = np.isfinite(values[:, k])
            np.testing.assert_allclose(t0 + (xy[:, 0] - x0) / w * (t1 - t0), t[ok], rtol=1e-12)
            np.testing.assert_allclose(lo + (xy[:, 1] - y0) / h * (hi - lo),
                                       scale * values[ok, k], rtol=1e-12)  # fmt: skip
            assert np.all(lo <= np.nanmin(scale * values[:, k]))
            assert np.all(np.nanmax(scale * values[:, k]) <= hi)
        H, W = image.shape
        inside = image[round(H * (1 - y0 - h)) + 3 : round(H * (1 - y0)) - 3,
                       round(W * x0) + 3 : round(W * (x0 + w)) - 3]  # fmt: skip
        assert (inside < 200).mean() > 0.005  # curves drawn in every panel
    # "time (s)" under the lowest panel of each column: rows 2, 1, 1 (panels 6, 4, 5)
    timed = [xy for x, xy in fig.texts if x == "time (s)"]
    boxes = [fig.panels[k][1] for k in (6, 4, 5)]
    assert sorted(x for x, _ in timed) == pytest.approx(sorted(b[0] + b[2] / 2 for b in boxes))
    for (_, y), b in zip(sorted(timed), sorted(boxes), strict=True):
        assert y < b[1]
    assert fig.ylabel == "moment (N·m)"
    assert fig.legend == ("jaxmb", "OpenSim")


def test_trial_columns_ticks_are_round_steps_inside_each_panel(tmp_path):
    """Each panel's value ticks (the labels left of its box): 1, 2, 2.5 or 5 × 10^k apart, inside
    the panel's range, two to four of them; the time ticks likewise inside the trial."""
    t = np.linspace(0.5, 1.1, 20)
    ranges = [(0.05, 0.38), (-5.3, 11.2), (0.0, 1e-3), (-1.0, -0.2), (3.0, 3.0)]
    values = np.stack([np.linspace(lo, hi, t.size) for lo, hi in ranges], axis=1)
    fig = plots.plot_trial_columns(tmp_path / "t.png", t, values, [f"c{k}" for k in range(5)],
                                   "value (m)", "ticks", ncols=5)  # fmt: skip
    for _, (x0, y0, _w, h), _, (lo, hi) in fig.panels:
        ticks = sorted(
            float(x)
            for x, (xt, yt) in fig.texts  # fmt: skip
            if np.isclose(xt, x0 - 0.004) and y0 - 1e-9 <= yt <= y0 + h + 1e-9
        )
        assert 2 <= len(ticks) <= 4, ticks
        assert all(lo <= x <= hi for x in ticks)
        step = np.diff(ticks)
        np.testing.assert_allclose(step, step[0], rtol=1e-3)  # labels carry 4 digits
        mantissa = step[0] / 10 ** np.floor(np.log10(step[0]) + 1e-9)
        assert min(abs(mantissa - m) for m in (1.0, 2.0, 2.5, 5.0)) < 1e-3
    x0, _, w, _ = fig.panels[0][1]
    times = [float(x) for x, (xt, _) in fig.texts if x0 <= xt <= x0 + w and x[0].isdigit()
             and x not in ("c0",)]  # fmt: skip
    assert times and all(0.5 <= x <= 1.1 for x in times)
