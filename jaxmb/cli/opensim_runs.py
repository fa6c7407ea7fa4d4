"""What the OpenSim-setup commands share (``inverse-kinematics``, ``inverse-dynamics SETUP.xml``,
``static-optimization``): JAX's persistent compilation cache, the progress display, and the
one-line error for unusable setups."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jax

from ..io.motion import MotionFileError
from ..io.osim import OsimImportError
from ..io.setup import SetupError
from .common import CliError, output_dir

__all__ = [
    "cache_dir", "enable_cache", "Progress", "add_common_options", "setup_errors", "start_run",
]


def cache_dir() -> Path:
    """The user's cache directory for jaxmb's compiled code: ``$JAXMB_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/jaxmb/jax`` (``~/.cache/jaxmb/jax``; ``%LOCALAPPDATA%`` on Windows)."""
    if os.environ.get("JAXMB_CACHE_DIR"):
        return Path(os.environ["JAXMB_CACHE_DIR"])
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        base = Path(os.environ["LOCALAPPDATA"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "jaxmb" / "jax"


def enable_cache(path: Path | None = None) -> Path:
    """Turn on JAX's persistent compilation cache (every compilation kept, however quick), so a
    second trial or a repeated analysis compiles nothing it compiled before."""
    d = Path(path) if path is not None else cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(d))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return d


class Progress:
    """Stage lines with the elapsed time on stderr: ``[  12.3 s] compiling ...``."""

    def __init__(self, quiet: bool = False):
        self.t0 = time.perf_counter()
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            sys.stderr.write(f"[{time.perf_counter() - self.t0:7.1f} s] {msg}\n")
            sys.stderr.flush()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


def add_common_options(p) -> None:
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="do not use JAX's persistent compilation cache, nor the compiled programs and "
        f"imported models kept beside it (default: on, in {cache_dir()}; JAXMB_CACHE_DIR "
        "overrides the folder)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write the PNG")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def setup_errors(fn):
    """Run ``fn()``, turning an unusable setup, model or data file into a :class:`CliError`."""
    try:
        return fn()
    except (SetupError, OsimImportError, MotionFileError, OSError) as e:
        raise CliError(str(e).splitlines()[0]) from None


def start_run(args) -> Progress:
    """What every setup command does first: ``--out`` checked before any work, the progress
    display and the persistent compilation cache unless ``--no-cache``."""
    if args.out is not None:
        output_dir(args.out)
    say = Progress(args.quiet)
    if not args.no_cache:
        say(f"compilation cache: {enable_cache()}")
    return say
