"""``jaxmb models``: the built-in models, one line each, and the example model files."""

from __future__ import annotations

from ..models import DESCRIPTIONS
from .common import EXAMPLE_MODEL_FILES, builtin_models

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Register ``models`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser("models", help="list the built-in models")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    for name in builtin_models():
        print(f"{name:18s} {DESCRIPTIONS.get(name, '')}")
    print("alias: andrews -> andrews_squeezer")
    print(
        "model files: any command taking MODEL also takes a *.json model file "
        "(jaxmb save NAME FILE writes one; docs/model_file.md)"
    )
    examples = sorted(EXAMPLE_MODEL_FILES.glob("*.json"))
    if examples:
        print("example model files:")
        for path in examples:
            print(f"  {path}")
    return 0
