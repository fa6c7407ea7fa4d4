"""Shared helpers for the benchmarks: run metadata, compiled steady-state timing, saving results.

Usage from a benchmark script in this folder::

    from _common import metadata, timeit_compiled, compile_seconds, save_results

Timings are of *compiled* functions in steady state: the first call (compilation and the first
run) is excluded, and every timed call ends with ``jax.block_until_ready``.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

__all__ = [
    "RESULTS",
    "jaxmb_source",
    "metadata",
    "timeit_compiled",
    "timeit_interleaved",
    "compile_seconds",
    "save_results",
]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


_CHECKOUT = Path(__file__).resolve().parents[1] / "jaxmb"
_WARNED: list[str] = []


def jaxmb_source() -> str | None:
    """The folder of the jaxmb this process imports (found, not imported), with a warning on
    stderr, once, when it is not this checkout's: an installed copy left by ``pip install .``
    (``.ci/run`` makes one) is imported ahead of the checkout, and its figures would be
    recorded under this checkout's commit."""
    spec = importlib.util.find_spec("jaxmb")
    if spec is None or spec.origin is None:
        return None
    src = Path(spec.origin).resolve().parent
    if src != _CHECKOUT and not _WARNED:
        _WARNED.append(str(src))
        print(
            f"warning: this benchmark imports jaxmb from {src}, not from this checkout "
            f"({_CHECKOUT}): its figures measure that copy. `pip install -e {_CHECKOUT.parent}` "
            f"or PYTHONPATH={_CHECKOUT.parent} measures the checkout.",
            file=sys.stderr,
        )
    return str(src)


def metadata(**extra: Any) -> dict[str, Any]:
    """Machine, versions, date and precision of this run (plus any ``extra`` fields)."""
    versions = {"python": platform.python_version(), "jax": jax.__version__}
    for mod in ("jaxlib", "equinox", "diffrax", "numpy", "pinocchio", "mujoco"):
        m = sys.modules.get(mod)
        if m is not None:
            versions[mod] = getattr(m, "__version__", "?")
    versions["numpy"] = np.__version__
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    meta = {
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpu": _cpu_model(),
            "logical_cpus": os.cpu_count(),
            "load_average_at_start": load,
            "jax_backend": jax.default_backend(),
            "jax_devices": [str(d) for d in jax.devices()],
        },
        "versions": versions,
        "precision": "float64" if jax.config.jax_enable_x64 else "float32",
        "git_commit": _git_commit(),
        "jaxmb_source": jaxmb_source(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    meta.update(extra)
    return meta


def compile_seconds(fn, *args) -> float:
    """Seconds to lower and compile ``fn`` (a ``jax.jit``-wrapped function) for these arguments."""
    t0 = time.perf_counter()
    fn.lower(*args).compile()
    return time.perf_counter() - t0


def timeit_compiled(
    fn,
    *args,
    repeats: int = 20,
    number: int = 1,
    warmup: int = 2,
    samples_out=None,
    cpu_samples_out=None,
) -> float:
    """Median wall-clock seconds of one call of a compiled ``fn(*args)`` in steady state.

    ``warmup`` calls run first (they compile, if needed, and fill caches); then ``repeats``
    samples of ``number`` back-to-back calls are timed, each ended by ``block_until_ready``,
    and the median per-call time is returned. Pass a list as ``samples_out`` to receive every
    per-call sample (seconds), and one as ``cpu_samples_out`` for the process CPU seconds of the
    same calls (all threads: above the wall time when XLA runs on several cores).
    """
    for _ in range(max(1, warmup)):
        jax.block_until_ready(fn(*args))
    samples, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(number):
            out = fn(*args)
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - t0) / number)
        cpu.append((time.process_time() - c0) / number)
    if samples_out is not None:
        samples_out.extend(samples)
    if cpu_samples_out is not None:
        cpu_samples_out.extend(cpu)
    return statistics.median(samples)


def timeit_interleaved(
    fns, *args, repeats: int = 15, number: int = 1, warmup: int = 2
) -> list[list[float]]:
    """Per-call seconds of several compiled functions on the same arguments, sampled in turn.

    Each round times ``number`` calls of every function, one after the other, so that a shared,
    busy machine disturbs all of them alike; ratios of the per-round samples are then robust.
    Returns one list of ``repeats`` samples per function (take the median).
    """
    for fn in fns:
        for _ in range(max(1, warmup)):
            jax.block_until_ready(fn(*args))
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(number):
                out = fn(*args)
            jax.block_until_ready(out)
            samples[k].append((time.perf_counter() - t0) / number)
    return samples


def save_results(name: str, results: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` (pretty-printed) and return its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    with open(path, "w") as fh:
        json.dump(results, fh, indent=2, default=_to_json)
        fh.write("\n")
    return path


def _to_json(x):
    if isinstance(x, np.ndarray | jax.Array):
        return np.asarray(x).tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"cannot serialize {type(x).__name__}")
