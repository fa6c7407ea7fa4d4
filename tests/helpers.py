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
