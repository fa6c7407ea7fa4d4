"""Built-in models: ``chain(n)`` and the mechanisms of the seeds.

Each lives in its own module and is imported on first use, so that importing jaxmb stays cheap.
"""

import importlib

_BUILTINS = {
    "chain": "chain",
    "four_bar": "four_bar",
    "five_bar": "five_bar",
    "andrews_squeezer": "andrews",
    "shoulder": "shoulder",
    "arm26": "arm26",
    "leg_chain": "leg",
}

__all__ = sorted(_BUILTINS)


def __getattr__(name):
    if name in _BUILTINS:
        module = importlib.import_module(f"{__name__}.{_BUILTINS[name]}")
        return getattr(module, name)
    raise AttributeError(f"jaxmb.models has no model {name!r}; built-in models: {__all__}")
