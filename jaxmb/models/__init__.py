"""Built-in models: ``chain(n)`` and the mechanisms of the seeds.

Each model is a function returning a fresh :class:`jaxmb.Model`; :data:`BUILTIN` lists them with a
one-line description (used by ``jaxmb models``).
"""

from .andrews import andrews_squeezer
from .arm26 import arm26
from .chain import chain
from .five_bar import five_bar
from .four_bar import four_bar

BUILTIN = {
    "andrews": (andrews_squeezer, "Andrews' squeezing mechanism: 7 bodies, 6 loop closures, 1 DOF"),
    "four_bar": (four_bar, "planar four-bar linkage, 1 DOF (q = height of body 2's centre of mass)"),
    "five_bar": (five_bar, "planar five-bar linkage, 2 DOF (q = first two joint angles)"),
    "chain": (chain, "reference open chain of 7 revolute joints (x, y, z axes cycling)"),
    "arm26": (arm26, "OpenSim arm26: shoulder and elbow hinges, 6 muscles"),
}

# model function name -> module, for tools that look models up by name
_BUILTINS = {
    "andrews_squeezer": "andrews",
    "arm26": "arm26",
    "chain": "chain",
    "five_bar": "five_bar",
    "four_bar": "four_bar",
}

__all__ = ["andrews_squeezer", "arm26", "chain", "five_bar", "four_bar"]
