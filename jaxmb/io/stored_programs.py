"""Compiled programs kept across processes, next to JAX's persistent compilation cache.

JAX's persistent cache skips XLA's compilation in a second process, but not the Python tracing
that comes before it, and on an imported musculoskeletal model tracing is most of a warm run
(tracing the Gait10dof18musc static optimization takes 15–25 s; its compilation, from the cache,
under a second). :func:`stored_jit` therefore keeps the traced program itself: the first call
exports it (``jax.export``, StableHLO) to ``<compilation cache>/jaxmb_programs/``; a later process
with the same program deserializes it and runs it, tracing nothing.

A stored program is found by a key over everything its trace depends on: the function's name, the
source of the jaxmb package (any edit makes new keys), the jax/jaxlib versions and x64 flag, the
argument pytree's structure (it holds every static field of a model: joint types, path-point
kinds, muscle models, indices) and each array argument's shape and dtype. Array values are not in
the key: they are the program's inputs. Without a persistent cache directory (``--no-cache``) or
for arguments that are not all arrays, :func:`stored_jit` is ``jax.jit(fn)(*args)``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import jax
import jaxlib
import numpy as np

__all__ = ["stored_jit", "program_dir", "forget_loaded"]

_PACKAGE = Path(__file__).resolve().parents[1]
_SOURCE_HASH: str | None = None
_LOADED: dict[Path, object] = {}  # this process's compiled stored programs, by file
# jax.export's serialization needs flatbuffers (a dependency of jaxmb; without it: no storing)
_CAN_SERIALIZE = importlib.util.find_spec("flatbuffers") is not None


def _source_hash() -> str:
    """sha256 of every ``.py`` file of the jaxmb package (path and content), computed once."""
    global _SOURCE_HASH
    if _SOURCE_HASH is None:
        h = hashlib.sha256()
        for p in sorted(_PACKAGE.rglob("*.py")):
            h.update(str(p.relative_to(_PACKAGE)).encode())
            h.update(p.read_bytes())
        _SOURCE_HASH = h.hexdigest()
    return _SOURCE_HASH


def program_dir() -> Path | None:
    """Where stored programs live: ``jaxmb_programs/`` in JAX's persistent compilation cache
    directory, or None when no persistent cache is configured."""
    d = jax.config.jax_compilation_cache_dir
    return Path(d) / "jaxmb_programs" if d else None


def forget_loaded() -> None:
    """Drop this process's compiled stored programs (the files stay): what a new process sees."""
    _LOADED.clear()


def _key(name: str, treedef, leaves) -> str:
    # static fields enter through the treedef's text: numpy abbreviates arrays of more than 1000
    # entries with "...", which would let two models that differ inside one share a key
    with np.printoptions(threshold=sys.maxsize):
        structure = str(treedef)
    h = hashlib.sha256()
    for part in (
        name,
        _source_hash(),
        jax.__version__,
        jaxlib.__version__,
        str(jax.config.jax_enable_x64),
        jax.default_backend(),
        structure,
        repr([(np.shape(x), str(x.dtype)) for x in leaves]),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def stored_jit(fn, *args, name: str, directory: str | Path | None = None):
    """``jax.jit(fn)(*args)``, with the traced program stored for later processes (see the module
    docstring). ``name`` identifies ``fn`` in the key and the file name; ``directory`` overrides
    :func:`program_dir`. ``fn``'s result must be arrays in tuples, lists or dicts (what
    ``jax.export`` serializes); it is the same as ``jax.jit(fn)(*args)`` gives."""
    d = Path(directory) if directory is not None else program_dir()
    leaves, treedef = jax.tree_util.tree_flatten(args)
    if (
        d is None
        or not _CAN_SERIALIZE
        or not all(isinstance(x, (jax.Array, np.ndarray)) for x in leaves)
    ):
        return jax.jit(fn)(*args)
    path = d / f"{name}-{_key(name, treedef, leaves)}.jaxexport"
    call = _LOADED.get(path)
    if call is not None:
        return call(*leaves)
    exp = None
    if path.is_file():
        try:
            exp = jax.export.deserialize(bytearray(path.read_bytes()))
        except Exception:  # a truncated or foreign file: traced again and overwritten below
            exp = None
    if exp is None:

        def flat(*xs):
            return fn(*jax.tree_util.tree_unflatten(treedef, xs))

        specs = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves]
        exp = jax.export.export(jax.jit(flat))(*specs)
        d.mkdir(parents=True, exist_ok=True)
        # written whole under a temporary name, then renamed: a reader never sees half a file
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(exp.serialize())
        os.replace(tmp, path)
    call = _LOADED[path] = jax.jit(exp.call)
    return call(*leaves)
