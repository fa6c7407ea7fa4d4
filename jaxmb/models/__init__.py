"""Built-in models: ``chain(n)`` and the mechanisms of the seeds.

Each model is a function returning a fresh :class:`jaxmb.Model`; :data:`DESCRIPTIONS` gives each a
one-line description (printed by ``jaxmb models``).
"""

from .andrews import andrews_squeezer
from .arm26 import arm26
from .chain import chain
from .five_bar import five_bar
from .four_bar import four_bar
from .shoulder import shoulder

DESCRIPTIONS = {
    "andrews_squeezer": "Andrews' squeezing mechanism: 7 bodies, 6 loop closures, 1 DOF",
    "arm26": "OpenSim arm26: shoulder and elbow hinges, 6 muscles",
    "chain": "reference open chain of n revolute joints (axes x, y, z cycling; default n = 7)",
    "five_bar": "planar five-bar linkage, 2 DOF (q = first two joint angles)",
    "four_bar": "planar four-bar linkage, 1 DOF (q = height of the coupler's centre of mass)",
    "shoulder": "MoBL-ARMS shoulder (thorax, clavicle, scapula, humerus), 3 DOF, full de Groot &"
    " Brand rhythm (rhythm='mobl': the .osim's couplers), 14 muscles",
}

# model function name -> module, for tools that look models up by name
_BUILTINS = {
    "andrews_squeezer": "andrews",
    "arm26": "arm26",
    "chain": "chain",
    "five_bar": "five_bar",
    "four_bar": "four_bar",
    "shoulder": "shoulder",
}

__all__ = ["andrews_squeezer", "arm26", "chain", "five_bar", "four_bar", "shoulder"]
