"""``python -m jaxmb.cli``: the ``jaxmb`` command."""

from .main import console

console()
