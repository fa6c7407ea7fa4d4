"""What the model file's writer and reader share: the format's name and version, its error, and
the JSON-path notation that error messages use (``bodies[3].inertia``).

``MUSCLE_ELEMENTS`` are the muscle-path classes of :mod:`jaxmb.muscles` the format writes by their
fields with bodies and coordinates by name (``docs/model_file.md``); any other jaxmb class (an
imported model's ``OsimMovingPathPoint``, a ``FunctionPathPoint``) is written field by field under
its public module path.
"""

from __future__ import annotations

from ...model import ModelError

__all__ = ["FORMAT", "VERSION", "MODULE_PREFIXES", "MUSCLE_ELEMENTS", "ModelFileError", "join_path"]

FORMAT = "jaxmb-model"
VERSION = 1
# only classes of these packages are rebuilt from a file (nothing else is ever imported)
MODULE_PREFIXES = ("jaxmb.", "interpax.")
MUSCLE_ELEMENTS = (
    "PathPoint",
    "ConditionalPathPoint",
    "MovingPathPoint",
    "WrapCylinder",
    "WrapSphere",
    "WrapEllipsoid",
    "WrapTorus",
    "PathWrap",
    "MuscleParameters",
    "Muscle",
    "MuscleSet",
)


class ModelFileError(ModelError):
    """A model file (or model) that cannot be read or written; names the element and its place.

    Attributes:
        path: the JSON path of the offending element (``"bodies[3].inertia"``), or ``""``.
        line: its 1-based line in the file, or ``None`` when unknown.
    """

    def __init__(self, message: str, path: str = "", line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


def join_path(path: str, key) -> str:
    """``path`` extended by a key (``a.b``) or a list index (``a[3]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)
