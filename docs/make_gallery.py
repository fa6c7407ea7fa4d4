"""Generate the README gallery: small PNGs (≤ 150 KB) of the key figures into ``docs/gallery/``.

    python docs/make_gallery.py            # all figures (a few minutes on 2 cores)
    python docs/make_gallery.py andrews    # only some of them

Each figure is made by the code that makes it elsewhere, not redrawn: the `jaxmb` command's own
plot (Andrews' squeezer, gait inverse dynamics), the notebooks' cells executed as they are
(joint maps), the benchmark scripts' saved PNGs (work-precision, shoulder moment arms), and for
arm26's moment arms jaxmb's closed form over an elbow sweep against the OpenSim 4.6 values
recorded in ``tests/data/arm26_opensim_reference.json``. Images are downscaled and reduced to an
adaptive palette so that each stays under the size limit.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "docs" / "gallery"
MAX_BYTES = 150_000
WIDTH = 900  # px; the README shows them at about this width


def save_small(img: Image.Image, name: str, width: int = WIDTH) -> Path:
    """Downscale to ``width`` px and write an adaptive-palette PNG, shrinking until ≤ MAX_BYTES."""
    img = img.convert("RGB")
    path = GALLERY / name
    while True:
        w = min(width, img.width)
        small = img.resize((w, round(img.height * w / img.width)), Image.LANCZOS)
        small.quantize(colors=96, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        if path.stat().st_size <= MAX_BYTES:
            return path
        width = int(width * 0.85)


def figure_image(fig) -> Image.Image:
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, bbox_inches="tight")
    plt.close(fig)
    buf.seek(0)
    return Image.open(buf)


def notebook_figures(name: str) -> list:
    """Run the code cells of ``notebooks/<name>.ipynb`` in order; the figures the notebook would
    display (at each ``plt.show()`` and, as the inline backend does, at the end of each cell)."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    shown = []

    def flush(*_, **__):
        for num in plt.get_fignums():
            shown.append(plt.figure(num))
            plt.close(num)

    show = plt.show
    plt.show = flush
    cwd = Path.cwd()
    os.chdir(ROOT / "notebooks")  # where nbmake runs them
    try:
        env: dict = {"__name__": "__main__"}
        for cell in nb.cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, f"{name}.ipynb", "exec"), env)  # noqa: S102
                flush()
    finally:
        plt.show = show
        os.chdir(cwd)
    return shown


def cli_png(argv: list[str], pattern: str) -> Image.Image:
    from jaxmb.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        if main([*argv, "--out", tmp]) != 0:
            raise SystemExit(f"jaxmb {' '.join(argv)} failed")
        (png,) = Path(tmp).glob(pattern)
        return Image.open(png).copy()


def andrews():
    """`jaxmb simulate andrews`: q(t), q̇(t) and the mechanism at a few instants."""
    return save_small(cli_png(["simulate", "andrews"], "*.png"), "andrews.png")


def work_precision():
    src = ROOT / "benchmarks" / "results" / "andrews_work_precision.png"
    return save_small(Image.open(src), "work_precision.png")


def joint_maps():
    figs = notebook_figures("joint_maps")
    titles = [" | ".join(a.get_title() for a in f.axes) for f in figs]
    for k, t in enumerate(titles):
        print(f"  figure {k}: {t}")

    def pick(words):
        return next(f for f, t in zip(figs, titles, strict=True) if all(w in t for w in words))

    # the four-bar's joint manifold (Fig. 5) and p's velocity/acceleration against the classical
    # absolute-coordinate analysis
    paths = [save_small(figure_image(pick(["Fig. 5"])), "joint_manifolds.png")]
    classical = pick(["Fig. 6", "Fig. 9"])
    paths.append(save_small(figure_image(classical), "joint_maps_vs_classical.png"))
    return paths


def gait():
    """`jaxmb inverse-dynamics winter`: joint moments and forces of Winter's stride."""
    return save_small(cli_png(["inverse-dynamics", "winter"], "*.png"), "gait.png")


def moment_arms():
    """arm26 moment arms over elbow flexion: jaxmb's closed form (lines) and OpenSim 4.6 (dots)."""
    import jax
    import jax.numpy as jnp

    import jaxmb as mb
    from jaxmb.models.arm26 import arm26

    ref = json.loads((ROOT / "tests" / "data" / "arm26_opensim_reference.json").read_text())
    poses = np.asarray(ref["poses"])
    R_os = np.asarray(ref["moment_arms_m"])  # (poses, coordinates, muscles)
    shoulder = poses[np.argmin(np.abs(poses[:, 0] - 0.3)), 0]
    sel = np.isclose(poses[:, 0], shoulder)
    model = arm26()
    elbow = jnp.linspace(poses[sel, 1].min(), poses[sel, 1].max(), 200)
    q = jnp.stack([jnp.full_like(elbow, shoulder), elbow], axis=1)
    R = np.asarray(jax.jit(lambda Q: jax.lax.map(lambda x: mb.moment_arms(model, x), Q))(q))
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for c, title in enumerate(ref["coordinates"]):
        for m, muscle in enumerate(ref["muscles"]):
            (line,) = ax[c].plot(elbow, 100 * R[:, c, m], lw=1.2, label=muscle)
            ax[c].plot(poses[sel, 1], 100 * R_os[sel, c, m], "o", ms=3, color=line.get_color())
        ax[c].set(xlabel="elbow flexion (rad)", ylabel="moment arm (cm)", title=title)
    ax[0].legend(fontsize=7, ncol=2)
    title = f"arm26, shoulder elevation {shoulder:g} rad: jaxmb (lines), OpenSim 4.6 (dots)"
    fig.suptitle(title, y=1.03)
    return save_small(figure_image(fig), "moment_arms.png")


def shoulder():
    src = ROOT / "benchmarks" / "results" / "shoulder_moment_arms.png"
    if not src.exists():
        print("  skipped: benchmarks/results/shoulder_moment_arms.png not made yet")
        return None
    return save_small(Image.open(src), "shoulder_moment_arms.png")


FIGURES = {
    "andrews": andrews,
    "work_precision": work_precision,
    "joint_maps": joint_maps,
    "gait": gait,
    "moment_arms": moment_arms,
    "shoulder": shoulder,
}


def main(names: list[str]) -> None:
    GALLERY.mkdir(parents=True, exist_ok=True)
    unknown = set(names) - set(FIGURES)
    if unknown:
        raise SystemExit(f"unknown figure(s) {sorted(unknown)}; choose from {sorted(FIGURES)}")
    for name in names or FIGURES:
        print(f"{name} …", flush=True)
        out = FIGURES[name]()
        for p in out if isinstance(out, list) else [out]:
            if p is not None:
                size = p.stat().st_size
                assert size <= MAX_BYTES, f"{p}: {size} bytes"
                print(f"  {p.relative_to(ROOT)}  {size / 1000:.0f} KB")


if __name__ == "__main__":
    main(sys.argv[1:])
