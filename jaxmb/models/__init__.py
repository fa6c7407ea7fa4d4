"""Built-in models: ``chain(n)`` and the mechanisms of the seed."""

from .chain import chain

__all__ = ["chain"]
