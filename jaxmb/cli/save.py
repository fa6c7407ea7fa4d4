"""``jaxmb save MODEL FILE``: a model (built-in or file) written as a jaxmb model file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..io.model_file import ModelFileError, save_model
from .common import CliError, resolve_model, table

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register ``save`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "save",
        help="write a model (built-in or file) as a jaxmb model file",
        description="Write MODEL as a versioned JSON model file (reference: docs/model_file.md). "
        "Reading it back gives the same model, bit for bit.",
        epilog="example:\n  jaxmb save four_bar four_bar.json && jaxmb simulate four_bar.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="built-in model name or model file")
    p.add_argument("file", help="the model file to write (*.json)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    name, model, _ = resolve_model(args.model)
    out = Path(args.file)
    if out.suffix != ".json":
        raise CliError(f"the model file must end in .json, got {str(out)!r}")
    if out.is_dir():
        raise CliError(f"{out} is a directory; give the model file's name (*.json)")
    if out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        raise CliError(f"directory {str(out.parent)!r} does not exist")
    try:
        save_model(model, out)
    except ModelFileError as e:
        raise CliError(" ".join(str(e).split())) from None
    print(
        table(
            [
                (
                    "model",
                    f"{name} (nq = {model.nq}, bodies = {model.nb}, "
                    f"muscles = {len(model.muscle_names)})",
                ),
                ("file", f"{out} ({out.stat().st_size} bytes)"),
                ("read back", f"jaxmb simulate {out}"),
            ]
        )
    )
    return 0
