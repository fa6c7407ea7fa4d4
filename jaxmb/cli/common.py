"""What the commands share: the one-line user error, model resolution (built-in name, model file
or OpenSim ``.osim`` file), output directories checked before any work, each built-in's default
initial state, argument parsing and text output."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from ..io.model_file import ModelFileError, load_model
from ..io.osim import OsimImportError, load_osim
from ..model import ModelError

__all__ = [
    "ALIASES",
    "EXAMPLE_MODEL_FILES",
    "CliError",
    "builtin_models",
    "resolve_model",
    "output_dir",
    "default_run",
    "parse_vector",
    "progress",
    "table",
]

ALIASES = {"andrews": "andrews_squeezer", "squeezer": "andrews_squeezer"}

EXAMPLE_MODEL_FILES = Path(__file__).resolve().parents[1] / "data" / "models"
"""The model files shipped with jaxmb (``jaxmb models`` lists them)."""


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def _models(module: str = ""):
    """``jaxmb.models`` (or its ``module``), imported on first use as ``main`` imports the
    commands: the OpenSim-setup commands import this module too, and need no built-in model."""
    return importlib.import_module(f"..models{module}", __package__)


def builtin_models() -> tuple[str, ...]:
    """Names of the built-in model functions (``jaxmb.models``), sorted."""
    return tuple(sorted(_models().__all__))


def _canonical(name: str) -> str:
    name = ALIASES.get(name, name)
    if name not in builtin_models():
        raise CliError(
            f"unknown model {name!r}; built-in models: {', '.join(builtin_models())} "
            "(alias: andrews)"
        )
    return name


def _is_file(spec: str) -> bool:
    return spec.endswith((".json", ".osim")) or "/" in spec or Path(spec).is_file()


def resolve_model(spec: str):
    """``(name, model, builtin)`` for a built-in model name, a model-file path (``*.json``) or an
    OpenSim model (``*.osim``, read by :func:`jaxmb.io.load_osim`)."""
    if _is_file(spec):
        path = Path(spec)
        if not path.is_file():
            raise CliError(
                f"cannot read the model file {spec!r}: no such file (MODEL is a built-in name, a"
                f" *.json model file or an *.osim OpenSim model; built-in models:"
                f" {', '.join(builtin_models())})"
            )
        try:
            if path.suffix.lower() == ".osim":
                model = load_osim(path)
            else:
                model = load_model(path)
        except (ModelFileError, OsimImportError, ModelError) as e:
            raise CliError(" ".join(str(e).split())) from None
        return path.stem, model, False
    name = _canonical(spec)
    return name, getattr(_models(), name)(), True


def output_dir(out: str) -> Path:
    """The ``--out`` directory, checked before any work is done: not a file, and either a
    writable directory or creatable in the nearest existing one (created when the results are
    written, so a refused command leaves nothing behind)."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise CliError(f"--out {out!r} is a file, not a directory")
    base = path
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise CliError(f"--out {out!r}: {str(base)!r} is a file, not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise CliError(f"--out {out!r}: {str(base)!r} is not writable")
    return path


def default_run(name: str, model):
    """Default (q0, qd0, t1, solver, rtol, atol) of a run of a built-in model (``name``; "" for a
    model file), and a reference check ``reference(t1, q0, qd0, traj) -> dict | None`` where a
    published solution is known (else None)."""
    if name == "andrews_squeezer":
        an = _models(".andrews")
        ref_angles, ref_vel = an.reference_solution()

        def reference(t1, q0, qd0, traj):
            if not (abs(t1 - 0.03) < 1e-15 and q0[0] == an.BETA0 and qd0[0] == 0.0):
                return None
            f, J, _ = model.joint_map.derivatives(jnp.asarray(traj.q[-1]))
            y = np.asarray(an.to_test_set(f))
            yd = np.asarray(an.to_test_set(J[:, 0])) * float(traj.qd[-1][0])
            return {
                "reference": "IVP test set 'andrews', t = 0.03 s (7 angles, test-set order)",
                "angles": y,
                "angle_error": float(np.max(np.abs(y - ref_angles))),
                "velocity_error_rel": float(np.max(np.abs(yd - ref_vel)) / np.max(np.abs(ref_vel))),
            }

        return np.array([an.BETA0]), np.zeros(1), 0.03, "dopri8", 1e-10, 1e-10, reference
    nq = model.nq
    q0 = np.zeros(nq)
    if name in ("four_bar", "five_bar"):  # q = 0 is outside (four_bar) or far from the assembly
        q_ref = _models(f".{name}").Q_REF
        q0 = np.atleast_1d(np.asarray(q_ref, dtype=float))
    return q0, np.zeros(nq), 1.0, "tsit5", 1e-8, 1e-8, None


def parse_vector(text: str | None, n: int, what: str):
    """The (n,) vector of a comma-separated option ``what`` (None when not given)."""
    if text is None:
        return None
    try:
        v = np.array([float(x) for x in text.replace(" ", ",").split(",") if x != ""])
    except ValueError:
        raise CliError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if v.shape != (n,):
        raise CliError(f"{what} needs {n} value(s) for this model, got {v.size}: {text!r}")
    if not np.all(np.isfinite(v)):
        raise CliError(f"{what} has non-finite values: {text!r}")
    return v


def progress(k: int, n: int, label: str) -> None:
    """A one-line text progress bar on stderr (only for runs of several steps)."""
    if n < 2:
        return
    width = 30
    done = int(width * k / n)
    end = "\n" if k >= n else ""
    sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (width - done)}] {k}/{n}{end}")
    sys.stderr.flush()


def table(rows, header=None) -> str:
    """Rows (and an optional header, underlined) as left-aligned text columns."""
    rows = [tuple(str(c) for c in r) for r in rows]
    if header is not None:
        rows = [tuple(header)] + rows
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if header is not None:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
