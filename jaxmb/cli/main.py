"""The ``jaxmb`` command: the parser and the dispatch; each command is a module of this package.

    jaxmb models                         list the built-in models
    jaxmb simulate andrews               integrate Andrews' squeezer: summary table, PNG and CSV
    jaxmb simulate chain --t1 2 --q0 0.1,0,0,0,0,0,0 --out runs/ --no-plot
    jaxmb simulate my_model.json         a model file (docs/model_file.md) instead of a built-in
    jaxmb save four_bar four_bar.json    write a model (built-in or file) as a model file
    jaxmb moment-arms arm26 --coordinate r_elbow_flex --range 0,2.2 --steps 45
    jaxmb benchmark chain --quick        compiled per-state times (and Pinocchio's, if installed)
    jaxmb inverse-dynamics winter        Winter's gait tables, Newton-Euler
    jaxmb inverse-kinematics SETUP.xml   an OpenSim InverseKinematicsTool setup
    jaxmb inverse-dynamics SETUP.xml     an OpenSim InverseDynamicsTool setup
    jaxmb static-optimization SETUP.xml  an OpenSim AnalyzeTool + StaticOptimization setup

``simulate`` (:mod:`.simulate`) integrates a built-in model (or a model file) with diffrax and
writes CSV and PNG; ``moment-arms`` (:mod:`.moment_arms`) sweeps one coordinate; ``benchmark``
(:mod:`.benchmark`) times the compiled equations of motion per state; ``save`` (:mod:`.save`)
writes a model file; ``inverse-dynamics`` (:mod:`.inverse_dynamics`) runs the Newton–Euler gait
route; :mod:`.common` resolves models and formats output for all of them. Bad
input ends with a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from .common import CliError

__all__ = ["main", "console"]

_EPILOG = """examples:
  jaxmb models                                   the built-in models, one line each
  jaxmb simulate andrews                         Andrews' squeezer against the published solution
  jaxmb simulate chain --t1 2 --q0 0.1,0,0,0,0,0,0 --out runs/
  jaxmb save five_bar five_bar.json              a built-in as a model file (docs/model_file.md)
  jaxmb simulate five_bar.json --t1 0.5          ... and simulated from the file
  jaxmb moment-arms arm26 --coordinate r_elbow_flex --range 0,2.2
  jaxmb benchmark chain --quick                  compiled per-state times vs Pinocchio
  jaxmb inverse-dynamics winter                  Winter's gait tables, Newton-Euler
  jaxmb inverse-dynamics walk_Setup_ID.xml --out res/   OpenSim ID setup → .sto, PNG
  jaxmb static-optimization arm26_Setup_StaticOptimization.xml --out res/

MODEL is a built-in name (jaxmb models) or the path of a model file (*.json). Outputs go to
--out (default jaxmb_out/). Exit status 0 on success, 2 with a one-line error on bad input.
"""

# command → its module in this package, in the order of `jaxmb --help`. Only the module of the
# command being run is imported: the simulation commands import diffrax (1.5–3 s of a run's
# start on a loaded 2-core machine) that the OpenSim-setup commands never use.
_COMMANDS = {
    "models": "models",
    "simulate": "simulate",
    "save": "save",
    "moment-arms": "moment_arms",
    "benchmark": "benchmark",
    "inverse-kinematics": "inverse_kinematics",
    "inverse-dynamics": "inverse_dynamics",
    "static-optimization": "static_optimization",
}


def _parser(commands=tuple(_COMMANDS)) -> argparse.ArgumentParser:
    """The parser with the subcommands ``commands`` (all of them by default)."""
    ap = argparse.ArgumentParser(
        prog="jaxmb",
        description="jaxmb: multibody dynamics with joint maps f(q), in JAX.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"{__package__}.{_COMMANDS[name]}").add_parser(sub)
    return ap


def main(argv=None) -> int:
    """Entry point of the ``jaxmb`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # a known command first: only its parser (and module); else all, for help and errors
    first = argv[0] if argv else None
    args = _parser((first,) if first in _COMMANDS else tuple(_COMMANDS)).parse_args(argv)
    try:
        return args.func(args)
    except CliError as e:
        print(f"jaxmb: error: {e}", file=sys.stderr)
        return 2


def console() -> None:
    """The ``jaxmb`` process (console script and ``python -m jaxmb.cli``): :func:`main`, then the
    process ends at once with its status. Every output file is closed by then and both streams are
    flushed here; skipped is only the interpreter's teardown of JAX and XLA's objects (about 1 s of
    a 2-core machine after a setup command), which writes nothing.

    The objects that exist by then (jax's, jaxmb's: about 120,000) are frozen out of the
    cyclic garbage collector first: they live until the process ends, and each full collection
    walked all of them again (about 0.15 s of a warm static-optimization run)."""
    gc.freeze()
    try:
        rc = main()
    except SystemExit as e:  # argparse's --help (0) and usage errors (2)
        rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


if __name__ == "__main__":
    console()
