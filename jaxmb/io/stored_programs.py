"""Compiled programs kept across processes, next to JAX's persistent compilation cache.

JAX's persistent cache skips XLA's compilation in a second process, but not the Python tracing
and lowering that come before it (the cache key is a hash of the lowered program), and on an
imported musculoskeletal model those are most of a warm run (tracing the Gait10dof18musc static
optimization takes 15–25 s). :func:`stored_program` therefore keeps the compiled executable
itself: the first call compiles ``jax.jit(fn)`` for the arguments' shapes and writes the executable
(``jax.experimental.serialize_executable``) to ``<compilation cache>/jaxmb_programs/``; a later
process with the same program loads it and runs it, tracing, lowering and compiling nothing.
(An earlier version stored the traced program with ``jax.export`` and let the persistent cache
find its executable: lowering the exported program again cost about 0.5 s of every warm run.)

A stored program is found by a key over everything its trace and its machine code depend on: the
function's name, the source of the jaxmb package (any edit makes new keys), the jax/jaxlib
versions and x64 flag, the backend, its platform version and device kind and (CPU) the
processor's model and feature flags, the argument pytree's structure (it holds every static field
of a model: joint types, path-point kinds, muscle models, indices) and each array argument's shape
and dtype. Array values are not in the key: they are the program's inputs. Without a persistent
cache directory (``--no-cache``) or for arguments that are not all arrays, :func:`stored_program`
is ``jax.jit(fn)``. :func:`stored_jit` calls the program at once; :func:`stored_programs` loads (or
compiles) several side by side in threads, where XLA's loading and compiling leave Python's lock
free; a program may be asked for by its arguments' shapes (``jax.ShapeDtypeStruct``) before the
arrays exist, e.g. the outputs of the program that runs first.

:func:`stored_value` keeps what a setup command builds from the user's model files (an imported
``.osim`` with its muscles and actuators: about 0.2 s of Python per run) in
``<compilation cache>/jaxmb_models/``, as a pickle (its JAX arrays as NumPy arrays, moved to the
device in one call when read) found by a key over the files' paths and contents, the build's
parameters, the jaxmb source and the jax/jaxlib/numpy/equinox/Python versions. Any change to a
file, a parameter or jaxmb builds it afresh; a build that warns is not kept (its warnings would
not be repeated); an unreadable file or entry is built as usual.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import pickle
import platform
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import equinox
import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax.experimental.serialize_executable import deserialize_and_load, serialize

from ..xla_options import program_options

try:  # MLIR's pass manager, which JAX itself loads to lower programs
    from jaxlib.mlir import passmanager
except ImportError:  # another jaxlib: stored programs keep their debug info
    passmanager = None

try:  # registers the CPU's LAPACK kernels (what lowering a program that uses them does first)
    from jax._src.lax.linalg import initialize_lapack as _jax_initialize_lapack
except ImportError:  # another jax: lowering a small solve does the same, publicly

    def _jax_initialize_lapack():
        jax.jit(jnp.linalg.solve).lower(np.eye(1), np.ones(1))


_KERNEL_TABLES = ("cython_blas", "cython_lapack")  # what jaxlib reads the kernels from
_KEPT: list = []  # those tables when loaded alone (kept alive, out of sys.modules)
_LAPACK_LOCK = threading.Lock()  # two programs loaded at once register the kernels once


def _initialize_lapack() -> None:
    """Register the CPU's LAPACK kernels for a loaded program that calls them.

    jaxlib takes the kernels' addresses from two extension modules of scipy,
    ``scipy.linalg.cython_blas`` and ``cython_lapack``; importing them by name first imports the
    whole ``scipy.linalg`` package (about 0.2 s of a warm run). Where ``scipy.linalg`` is not
    imported yet, the two modules are loaded from their files alone (about 0.01 s), jaxlib
    registers from them, and they are taken out of ``sys.modules`` again, so that a later
    ``import scipy.linalg`` imports everything as usual. Anything unexpected (another scipy
    layout, a failing load) falls back to jaxlib's own import."""
    if "scipy.linalg" in sys.modules:
        return _jax_initialize_lapack()
    loaded = []
    try:
        spec = importlib.util.find_spec("scipy")
        for name in _KERNEL_TABLES:
            full = f"scipy.linalg.{name}"
            if full in sys.modules:
                continue
            files = [
                Path(d, "linalg", name + suffix)
                for d in spec.submodule_search_locations or ()
                for suffix in importlib.machinery.EXTENSION_SUFFIXES
            ]
            found = next((f for f in files if f.is_file()), None)
            sub = importlib.util.spec_from_file_location(full, found) if found else None
            if sub is None:
                raise ImportError(f"{full}: no extension module among {files}")
            module = importlib.util.module_from_spec(sub)
            sys.modules[full] = module
            loaded.append(full)
            sub.loader.exec_module(module)
        _jax_initialize_lapack()
    except Exception:
        for full in loaded:
            sys.modules.pop(full, None)
        loaded = []
        _jax_initialize_lapack()
    finally:
        for full in loaded:  # the kernels stay registered: their library stays loaded
            _KEPT.append(sys.modules.pop(full))


__all__ = [
    "StoredProgram",
    "stored_jit",
    "stored_program",
    "stored_programs",
    "stored_program_future",
    "stored_value",
    "program_dir",
    "value_dir",
    "forget_loaded",
]

_PACKAGE = Path(__file__).resolve().parents[1]
_SOURCE_HASH: str | None = None
_LOADED: dict[Path, object] = {}  # this process's compiled stored programs, by file
_SUFFIX = ".xlaexec"


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


def value_dir() -> Path | None:
    """Where :func:`stored_value` keeps built values: ``jaxmb_models/`` in JAX's persistent
    compilation cache directory, or None when no persistent cache is configured."""
    d = jax.config.jax_compilation_cache_dir
    return Path(d) / "jaxmb_models" if d else None


def forget_loaded() -> None:
    """Drop this process's compiled stored programs (the files stay): what a new process sees."""
    _LOADED.clear()


def _weak(x) -> bool:
    """Whether x is a weakly typed JAX array (a Python scalar's type): part of its abstract
    value, which a compiled program checks its arguments against."""
    return bool(getattr(x, "weak_type", False))


def _machine() -> str:
    """What the compiled code depends on besides jax: the backend's platform version and device
    kind, and on CPU the processor (XLA compiles for the host's instruction set)."""
    dev = jax.devices()[0]
    parts = [jax.default_backend(), dev.client.platform_version, dev.device_kind,
             platform.machine()]  # fmt: skip
    if jax.default_backend() == "cpu":
        try:
            with open("/proc/cpuinfo") as f:
                info = f.read().split("\n\n", 1)[0]
            parts += [ln for ln in info.splitlines() if ln.startswith(("model name", "flags"))]
        except OSError:
            parts.append(platform.processor())
    return "|".join(parts)


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
        _machine(),
        os.environ.get("XLA_FLAGS", ""),  # read by XLA when the backend started: how it compiles
        structure,
        repr([(np.shape(x), str(x.dtype), _weak(x)) for x in leaves]),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


# An executable that JAX's persistent cache handed back serializes without its compiled functions
# (loading it fails with "Function … not found"), so a program to be stored is compiled afresh:
# with a compiler option (its default value) that puts it under its own cache key, and with the
# persistent cache's writing held off, so that key never has an entry to hand back.
_OWN_KEY = {"xla_cpu_enable_fast_math": False}

# XLA:CPU's YNNPACK fusions (this jaxlib's default for small reductions and dots) build each
# fusion's kernel when a loaded program first runs: the Gait10dof static optimization has 154 of
# them, about 0.45 s of every warm run (and 0.09 s against 0.05 s per later call). Stored programs
# and their --no-cache twin (jax.jit with the same options) are compiled without them
# (:data:`jaxmb.xla_options.PROGRAM_OPTIONS`); the sums are then XLA's own, so results differ from
# a default jax.jit in the last bits (activations of that trial by up to 1.1e-11, residuals
# unchanged at ~1e-14 N·m).

_HOLD_LOCK = threading.Lock()
_HOLDERS = 0
_HELD_VALUE = None


@contextlib.contextmanager
def _persistent_cache_writes_held():
    """JAX's persistent cache keeps no entry while inside (several threads may be: the setting
    is global, so the first one in holds it and the last one out restores it)."""
    global _HOLDERS, _HELD_VALUE
    with _HOLD_LOCK:
        if _HOLDERS == 0:
            _HELD_VALUE = jax.config.jax_persistent_cache_min_compile_time_secs
            jax.config.update("jax_persistent_cache_min_compile_time_secs", float("inf"))
        _HOLDERS += 1
    try:
        yield
    finally:
        with _HOLD_LOCK:
            _HOLDERS -= 1
            if _HOLDERS == 0:
                jax.config.update("jax_persistent_cache_min_compile_time_secs", _HELD_VALUE)


def _without_debug_info(lowered) -> None:
    """Drop the source locations and operation names (``op_name`` metadata) from ``lowered``'s
    module before it is compiled. They are most of a stored program's bytes (each HLO instruction
    carries its full name stack), and loading parses them: arm26's batched path lengths, 27,000
    instructions, 6.8 → 3.7 MB and 0.87 → 0.74 s to load; its static-optimization solve 0.38 →
    0.17 s. A large program's load time follows its instruction count more than its bytes
    (arm26's trial paths, 16.9 → 7.9 MB, loaded in about the same time). The program's
    operations are unchanged.
    Where this JAX hands out a copy of the module, or lacks the MLIR pass, nothing is dropped."""
    if passmanager is None:
        return
    try:
        module = lowered.compiler_ir("stablehlo")
        with module.context:
            passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(module.operation)
    except Exception:  # another jaxlib: the program keeps its debug info
        pass


def _fresh_compile(lowered):
    _without_debug_info(lowered)
    with _persistent_cache_writes_held():
        return lowered.compile({**_OWN_KEY, **program_options()})


def _is_array(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, jax.ShapeDtypeStruct))


class StoredProgram:
    """A compiled program of ``fn`` for one argument structure (see :func:`stored_program`).
    Calling it with arguments of that structure, shapes and dtypes runs the compiled code."""

    def __init__(self, compiled, treedef):
        self._compiled = compiled
        self._treedef = treedef

    def __call__(self, *args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        if treedef != self._treedef:
            raise TypeError(f"stored program called with another structure: {treedef}")
        return self._compiled(*leaves)


def stored_program(fn, *args, name: str, directory: str | Path | None = None):
    """The compiled ``jax.jit(fn)`` for ``args`` (arrays, or ``jax.ShapeDtypeStruct`` where
    only the shape is known yet), loaded from :func:`program_dir` when a program with this key
    is stored, else traced, compiled and stored (see the module docstring). ``name`` identifies
    ``fn`` in the key and the file name; ``directory`` overrides :func:`program_dir`. Without a
    directory, or for arguments that are not all arrays, it is ``jax.jit(fn)``."""
    d = Path(directory) if directory is not None else program_dir()
    leaves, treedef = jax.tree_util.tree_flatten(args)
    if d is None or not all(_is_array(x) for x in leaves):
        return jax.jit(fn, compiler_options=program_options() or None)
    path = d / f"{name}-{_key(name, treedef, leaves)}{_SUFFIX}"
    call = _LOADED.get(path)
    if call is None and path.is_file():
        try:
            uses_lapack, *stored = pickle.loads(path.read_bytes())
            # the CPU's LAPACK kernels are registered when a program using them is lowered; a
            # loaded executable is not lowered, and calling one of them unregistered crashes.
            # Registering loads scipy's kernel tables, so only for programs that call them.
            if uses_lapack:
                with _LAPACK_LOCK:
                    _initialize_lapack()
            call = deserialize_and_load(*stored)
        except Exception:  # a truncated or foreign file: compiled again and overwritten below
            call = None
    if call is None:

        def flat(*xs):
            return fn(*jax.tree_util.tree_unflatten(treedef, xs))

        specs = [jax.ShapeDtypeStruct(np.shape(x), x.dtype, weak_type=_weak(x)) for x in leaves]
        lowered = jax.jit(flat).lower(*specs)
        uses_lapack = "@lapack_" in lowered.as_text()  # custom calls to the CPU's LAPACK kernels
        call = _fresh_compile(lowered)
        _write_atomic(d, path, pickle.dumps((uses_lapack, *serialize(call))))
    _LOADED[path] = call
    return StoredProgram(call, treedef)


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def stored_program_future(
    fn, *args, name: str, directory: str | Path | None = None
) -> concurrent.futures.Future:
    """:func:`stored_program` loaded (or traced and compiled) in a background thread; the
    future's ``result()`` is the program. Loading a stored program and compiling one run in XLA
    outside Python's lock, so the caller's own work goes on meanwhile: a warm ``jaxmb
    static-optimization`` samples the trial's external loads while its paths program loads."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="jaxmb-program")
    return _POOL.submit(stored_program, fn, *args, name=name, directory=directory)


def stored_programs(*requests, directory: str | Path | None = None) -> list:
    """Several :func:`stored_program` at once: ``requests`` are ``(fn, args, name)`` tuples,
    the result their programs in that order, loaded (or traced and compiled) side by side
    (:func:`stored_program_future`): two programs take about the time of the larger one on two
    cores."""
    if len(requests) < 2:
        return [stored_program(fn, *args, name=name, directory=directory)
                for fn, args, name in requests]  # fmt: skip
    futures = [stored_program_future(fn, *args, name=name, directory=directory)
               for fn, args, name in requests]  # fmt: skip
    return [f.result() for f in futures]


def stored_jit(fn, *args, name: str, directory: str | Path | None = None):
    """``jax.jit(fn)(*args)``, with the compiled program stored for later processes: the
    :func:`stored_program` of ``args``, called. The result is the same as ``jax.jit(fn)(*args)``
    gives with jaxmb's compiler options (:data:`jaxmb.xla_options.PROGRAM_OPTIONS`)."""
    return stored_program(fn, *args, name=name, directory=directory)(*args)


def _write_atomic(d: Path, path: Path, data: bytes) -> None:
    """``data`` written whole under a temporary name in ``d``, then renamed to ``path``: a
    reader never sees half a file."""
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _value_key(name: str, files: Sequence[str | Path], params) -> str | None:
    """The key of a stored value (see the module docstring); None when a file cannot be read."""
    h = hashlib.sha256()
    for part in (name, _source_hash(), sys.version, jax.__version__, jaxlib.__version__,
                 np.__version__, equinox.__version__, str(jax.config.jax_enable_x64),
                 repr(params)):  # fmt: skip
        h.update(part.encode())
        h.update(b"\0")
    for f in files:
        try:
            data = Path(f).read_bytes()
            where = str(Path(f).resolve())
        except OSError:
            return None
        for part in (str(f).encode(), where.encode(), data):
            h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def stored_value(
    build: Callable[[], object],
    *,
    name: str,
    files: Sequence[str | Path],
    params=(),
    directory: str | Path | None = None,
):
    """``build()``, kept for later processes (see the module docstring): ``files`` are the paths
    ``build`` reads (by content and path, as given and resolved), ``params`` (its repr) every
    other input that changes the result; ``name`` names the builder in the key and the file name;
    ``directory`` overrides :func:`value_dir`. The result is what ``build()`` returns (a fresh
    build when nothing is stored, or its pickle: jax arrays come back on the default device)."""
    d = Path(directory) if directory is not None else value_dir()
    key = _value_key(name, files, params) if d is not None else None
    if key is None:
        return build()
    path = d / f"{name}-{key}.pkl"
    if path.is_file():
        try:
            return _loads(path.read_bytes())
        except Exception:  # a truncated or foreign file: built again and overwritten below
            pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = build()
    for w in caught:  # shown as the build gave them (the caller's filters apply)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    if not caught:
        _write_atomic(d, path, _dumps(value))
    return value


class _ArraysApart(pickle.Pickler):
    """A pickler that leaves the value's JAX arrays out of its stream: each one (wherever it sits,
    in a pytree or in a plain object) becomes a reference into :attr:`arrays`, its NumPy copy.
    Weakly typed arrays are pickled as usual: NumPy has no weak type, and the stored programs'
    keys hold it."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.arrays: list = []
        self._index: dict = {}
        self._keep: list = []  # the arrays referenced, alive while ids are keys

    def persistent_id(self, obj):
        if not isinstance(obj, jax.Array) or _weak(obj):
            return None
        i = self._index.get(id(obj))
        if i is None:
            i = self._index[id(obj)] = len(self.arrays)
            self.arrays.append(np.asarray(obj))
            self._keep.append(obj)
        return i


def _dumps(value) -> bytes:
    """``value`` pickled with its JAX arrays apart, as NumPy arrays (see :func:`_loads`)."""
    body = io.BytesIO()
    pickler = _ArraysApart(body)
    pickler.dump(value)
    return pickle.dumps((pickler.arrays, body.getvalue()), protocol=pickle.HIGHEST_PROTOCOL)


def _loads(data: bytes):
    """The value :func:`_dumps` wrote, its JAX arrays moved to the default device in one call
    (read back one by one, Gait10dof18musc's static-optimization problem's 365 arrays took
    0.07–0.09 s)."""
    arrays, body = pickle.loads(data)
    on_device = jax.device_put(arrays)
    unpickler = pickle.Unpickler(io.BytesIO(body))
    unpickler.persistent_load = on_device.__getitem__
    return unpickler.load()
