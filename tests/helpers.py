"""What many test modules share: the repository's paths and the error measures tolerances are
stated in. Test modules import it as ``from helpers import ...`` (``tests/`` is on the path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"  # references made by tests/data/make_*.py from OpenSim 4.6 and published data
ROOT = TESTS.parent
PACKAGE_DATA = ROOT / "jaxmb" / "data"


def rel_err(x, ref) -> float:
    """max |x − ref| / max(1, max |ref|): relative for large values, absolute below 1.

    Shapes must agree (no broadcasting hides a wrong shape)."""
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    return float(np.max(np.abs(x - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def rel(x, ref) -> float:
    """max |x − ref| / max |ref|: strictly relative (for quantities far from zero)."""
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    return float(np.max(np.abs(x - ref)) / max(float(np.max(np.abs(ref))), 1e-300))


def assert_rel(a, b, what: str = "", *, rel: float = 1e-10) -> None:
    """Assert max |a − b| ≤ rel · max(max |b|, 1e-6): relative to the reference's magnitude, and
    below 1e-6 an absolute bound of rel · 1e-6 (so an all-zero reference is not divided by).

    Shapes must agree (no broadcasting hides a wrong shape)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    scale = max(np.abs(b).max(initial=0.0), 1e-6)
    err = np.abs(a - b).max(initial=0.0)
    assert err <= rel * scale, f"{what}: max error {err:.3e} > {rel:g} × {scale:.3e}"
