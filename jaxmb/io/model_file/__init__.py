"""The jaxmb model file: a documented, versioned JSON description of a :class:`jaxmb.Model`.

``save_model(model, path)`` writes one, ``load_model(path)`` reads it back; the reference of every
field is ``docs/model_file.md``. A file looks like::

    {"format": "jaxmb-model", "version": 1, "name": "pendulum",
     "gravity": [0, 0, -9.81], "coordinates": ["phi"],
     "bodies": [{"name": "rod", "parent": "ground", "joint": "revolute",
                 "V_theta": [0, 1, 0], "V_d": [1, 0, 0], "d": 0.0,
                 "mass": 1.0, "com": [0, 0, -0.5], "inertia": [0.02, 0.02, 0.001]}],
     "joint_map": {"kind": "explicit", "expressions": ["phi"]}}

Round trips are exact: every float is written with Python's shortest round-trip ``repr`` and read
back with the same value, and every pytree leaf and static field of the model is restored, so
``load_model(save_model(m))`` has bitwise-identical leaves and the same static structure (tested
for every built-in model). Joint maps are written declaratively (``identity``, ``linear``,
``explicit`` expressions, ``implicit`` loop constraints) when they can be; a library class (such as
``AndrewsJointMap`` or a pre-modeled spline) is written field by field (``kind: "module"``); an
opaque Python callable (``ExplicitMap`` of a lambda) cannot be written and raises
:class:`ModelFileError` naming the joint map. Expressions are parsed by the restricted language of
:mod:`jaxmb.expressions`; nothing from a file is ever evaluated as Python.

Loading validates everything and names the element: its JSON path (``bodies[3].inertia``) and its
line in the file.

The package: :mod:`.format` (what both sides share), :mod:`.encode` (writing), :mod:`.reading`
(typed JSON values with their lines) and :mod:`.decode` (reading a model).
"""

from .decode import load_model, loads_model, model_from_dict
from .encode import dumps_model, model_to_dict, save_model
from .format import FORMAT, VERSION, ModelFileError

__all__ = [
    "FORMAT",
    "VERSION",
    "ModelFileError",
    "save_model",
    "load_model",
    "model_to_dict",
    "model_from_dict",
    "dumps_model",
    "loads_model",
]
