"""Stored compiled programs (serialized executables next to the persistent compilation cache): a
later call with the same structure and shapes runs the stored program without tracing, with the
same result as ``jax.jit``, in a new process too; anything in the key that changes makes a new
program; a damaged file is traced again; no persistent cache, no storing. Stored values (an
imported model): built once per files' contents and parameters, not kept when the build warns."""

from __future__ import annotations

import os
import subprocess
import sys
import types
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ROOT

import jaxmb  # noqa: F401  (x64)
from jaxmb.io import stored_programs as sp


class _Springs(eqx.Module):
    k: jax.Array
    order: tuple[int, ...] = eqx.field(static=True)


TRACES = []


def _energy(m: _Springs, q):
    TRACES.append(q.shape)  # runs only when traced
    x = q[:, jnp.asarray(m.order)]
    return 0.5 * jnp.sum(m.k * jnp.sin(x) ** 2, axis=1), jnp.cos(x) @ m.k


@pytest.fixture
def cache_dir(tmp_path):
    # the directory is passed to stored_jit: setting JAX's cache directory here would start the
    # persistent cache for the rest of the test process
    sp.forget_loaded()
    TRACES.clear()
    return tmp_path


def run(cache_dir, *args):
    return sp.stored_jit(_energy, *args, name="energy", directory=cache_dir / "p")


def _new_process():
    """What a new process sees: nothing compiled in memory (the files stay)."""
    sp.forget_loaded()


def test_second_process_runs_the_stored_program_without_tracing(cache_dir):
    m = _Springs(jnp.array([1.0, 2.0, 3.0]), (2, 0, 1))
    q = np.random.default_rng(0).normal(size=(5, 3))
    ref = jax.jit(_energy)(m, q)
    TRACES.clear()
    a = run(cache_dir, m, q)
    assert len(TRACES) == 1
    files = list((cache_dir / "p").glob("energy-*.xlaexec"))
    assert len(files) == 1
    _new_process()
    b = run(cache_dir, m, q * 2)
    assert len(TRACES) == 1  # not traced again
    c = run(cache_dir, _Springs(m.k * 3, m.order), q)
    assert len(TRACES) == 1  # new array values are inputs, not part of the key
    ref2 = jax.jit(_energy)(m, q * 2)
    ref3 = jax.jit(_energy)(_Springs(m.k * 3, m.order), q)
    for got, want in ((a, ref), (b, ref2), (c, ref3)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-15, atol=1e-15)


def test_a_stored_program_keeps_no_operation_names(cache_dir):
    """A stored program is compiled without its source locations and operation names (most of a
    large program's bytes, parsed on every load): the file holds no name-stack entry such as
    ``jit(flat)/sin``, and its numbers are jax.jit's."""
    m = _Springs(jnp.array([1.0, 2.0, 3.0]), (2, 0, 1))
    q = np.random.default_rng(1).normal(size=(4, 3))
    got = run(cache_dir, m, q)
    (f,) = (cache_dir / "p").glob("energy-*.xlaexec")
    assert b"jit(flat)/" not in f.read_bytes()
    for g, w in zip(got, jax.jit(_energy)(m, q), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-15, atol=1e-15)


def test_structure_or_shape_change_makes_a_new_program(cache_dir):
    m = _Springs(jnp.array([1.0, 2.0, 3.0]), (2, 0, 1))
    q = np.ones((4, 3))
    run(cache_dir, m, q)
    _new_process()
    run(cache_dir, m, np.ones((6, 3)))  # another trial length: a new program
    e = run(cache_dir, _Springs(m.k, (0, 1, 2)), q)  # another static field: a new program
    assert len(TRACES) == 3
    assert len(list((cache_dir / "p").glob("*.xlaexec"))) == 3
    want = jax.jit(_energy)(_Springs(m.k, (0, 1, 2)), q)
    np.testing.assert_allclose(np.asarray(e[0]), np.asarray(want[0]), rtol=1e-15)


def test_a_damaged_file_is_traced_again(cache_dir):
    m = _Springs(jnp.array([1.0, 2.0]), (1, 0))
    q = np.ones((3, 2))
    run(cache_dir, m, q)
    (f,) = (cache_dir / "p").glob("*.xlaexec")
    f.write_bytes(f.read_bytes()[:100])
    _new_process()
    out = run(cache_dir, m, q)
    assert len(TRACES) == 2
    np.testing.assert_allclose(np.asarray(out[1]), np.asarray(jax.jit(_energy)(m, q)[1]))


def test_no_persistent_cache_no_files(monkeypatch):
    monkeypatch.setattr(sp, "program_dir", lambda: None)
    sp.forget_loaded()
    TRACES.clear()
    m = _Springs(jnp.array([1.0]), (0,))
    for _ in range(2):  # plain jax.jit: traced once in this process, nothing stored
        out = sp.stored_jit(_energy, m, np.ones((2, 1)), name="energy")
        np.testing.assert_allclose(np.asarray(out[0]), 0.5 * np.sin(1.0) ** 2, rtol=1e-15)
    assert len(TRACES) == 1


def test_program_dir_follows_the_compilation_cache():
    d = jax.config.jax_compilation_cache_dir
    assert sp.program_dir() == (None if not d else sp.Path(d) / "jaxmb_programs")


class _Table(eqx.Module):
    k: jax.Array
    table: np.ndarray = eqx.field(static=True)


def _weighted(m: _Table, q):
    return m.k * (q @ jnp.asarray(m.table))


def test_models_differing_inside_a_large_static_array_get_their_own_program(cache_dir):
    """numpy prints arrays of more than 1000 entries with '...': two models differing only in the
    elided part shared a key, and the second got the first's stored program (its constant)."""
    a = np.zeros(2000)
    b = a.copy()
    b[1000] = 1.0
    q = jnp.ones((3, 2000))
    ra = sp.stored_jit(_weighted, _Table(jnp.ones(3), a), q, name="weighted", directory=cache_dir)
    sp.forget_loaded()  # a new process
    rb = sp.stored_jit(_weighted, _Table(jnp.ones(3), b), q, name="weighted", directory=cache_dir)
    np.testing.assert_array_equal(ra, np.zeros(3))
    np.testing.assert_array_equal(rb, np.ones(3))
    assert len(list(cache_dir.glob("weighted-*.xlaexec"))) == 2




_A = np.array([[4.0, 1.0], [2.0, 3.0]])
_B = np.array([1.0, 2.0])
_SCRIPT = f"""
import sys
import jax
import jax.numpy as jnp
import numpy as np
import jaxmb  # noqa: F401  (x64)
from pathlib import Path
from jaxmb.io.stored_programs import forget_loaded, stored_jit

def solve(A, b):
    print("traced")
    return jnp.linalg.solve(A, b) * 2.0

A, b = np.array({_A.tolist()!r}), np.array({_B.tolist()!r})
cache, programs = sys.argv[1:3]
jax.config.update("jax_compilation_cache_dir", cache)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
if sys.argv[3] == "store":  # stored twice: the second compilation is a persistent-cache hit
    stored_jit(solve, A, b, name="solve", directory=programs)
    for f in Path(programs).iterdir():
        f.unlink()
    forget_loaded()
print(repr(np.asarray(stored_jit(solve, A, b, name="solve", directory=programs)).tolist()))
print("scipy.linalg imported:", "scipy.linalg" in sys.modules)
import scipy.linalg  # noqa: E402  (whole, as usual, after the kernels were registered)
print("scipy.linalg:", scipy.linalg.cython_lapack.__name__, scipy.linalg.solve(A, b).tolist())
"""


def test_a_new_process_runs_a_stored_program_that_calls_lapack(tmp_path):
    """Two ways a stored program failed in a new process, as the command line met them: (1) an
    executable the persistent cache handed back (the same program compiled before) serializes
    without its functions ("Function … not found" when loaded); (2) a loaded executable is not
    lowered, and lowering is where jax registers the CPU's LAPACK kernels: a linear solve
    crashed. Stored by one process, run by another that must not trace."""
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.run([sys.executable, str(script), str(tmp_path / "xla"), str(tmp_path / "p"),
                        mode], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
        for mode in ("store", "load")
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert runs[0].stdout.count("traced") == 2 and "traced" not in runs[1].stdout
    lines = runs[1].stdout.strip().splitlines()
    got = np.array(eval(lines[-3]))
    np.testing.assert_allclose(got, 2.0 * np.linalg.solve(_A, _B), rtol=1e-15)
    # (3) registering the kernels imported all of scipy.linalg (0.2 s of a warm command): the
    # loading process reads only their two tables, and a later import of scipy.linalg is whole
    assert lines[-2] == "scipy.linalg imported: False"
    name, sol = lines[-1].removeprefix("scipy.linalg: ").split(" ", 1)
    assert name == "scipy.linalg.cython_lapack"
    np.testing.assert_allclose(eval(sol), np.linalg.solve(_A, _B), rtol=1e-15)


def _builder(path, calls, warn=False):
    def build():
        calls.append(1)
        if warn:
            warnings.warn("left out: a Ligament", UserWarning, stacklevel=1)
        weak = jax.jit(lambda: 0.5)()  # a Python scalar's weak type
        assert weak.weak_type
        k = jnp.asarray(np.array(float(len(path.read_text()))))
        # a JAX array inside an object that is not a pytree (as an imported model's arrays)
        return {"k": k, "names": ("a", "b"), "host": np.arange(3.0), "weak": weak,
                "plain": types.SimpleNamespace(k=k)}  # fmt: skip

    return build


def test_stored_value_is_built_once_per_files_and_params(tmp_path):
    """A built value is kept for later runs; another file content, file or parameter builds
    afresh; what a later run gets equals the build's."""
    src, calls = tmp_path / "model.osim", []
    src.write_text("<a/>")

    def get(params=(1,), files=None):
        return sp.stored_value(_builder(src, calls), name="m", files=files or [src],
                               params=params, directory=tmp_path / "v")  # fmt: skip

    first = get()
    again = get()
    assert len(calls) == 1
    assert again["names"] == ("a", "b") and isinstance(again["k"], jax.Array)
    np.testing.assert_array_equal(again["k"], first["k"])
    # JAX arrays come back as JAX arrays on the default device, their type (weak or not) kept;
    # NumPy arrays stay NumPy arrays
    for key in ("k", "weak"):
        assert isinstance(again[key], jax.Array) and again[key].dtype == first[key].dtype
        assert again[key].weak_type == first[key].weak_type
        assert again[key].devices() == {jax.devices()[0]}
    assert again["weak"].weak_type and not again["k"].weak_type
    assert type(again["host"]) is np.ndarray
    assert again["plain"].k is again["k"]  # one array, referenced twice, stays one
    np.testing.assert_array_equal(again["host"], first["host"])
    get(params=(2,))  # another parameter
    assert len(calls) == 2
    src.write_text("<ab/>")  # another content
    assert float(get()["k"]) == 5.0 and len(calls) == 3
    assert len(list((tmp_path / "v").glob("m-*.pkl"))) == 3


def test_stored_value_not_kept_when_it_warns_unreadable_or_damaged(tmp_path):
    src, calls = tmp_path / "model.osim", []
    src.write_text("<a/>")
    d = tmp_path / "v"
    for _ in range(2):  # a warning is shown on every run, so nothing is kept
        with pytest.warns(UserWarning, match="left out: a Ligament"):
            sp.stored_value(_builder(src, calls, warn=True), name="w", files=[src], directory=d)
    assert len(calls) == 2 and not list(d.glob("w-*.pkl"))
    missing = tmp_path / "none.xml"  # unreadable: the build runs (and raises as it would)
    with pytest.raises(FileNotFoundError):
        sp.stored_value(_builder(missing, calls), name="x", files=[missing], directory=d)
    sp.stored_value(_builder(src, calls), name="y", files=[src], directory=d)
    (f,) = d.glob("y-*.pkl")
    f.write_bytes(f.read_bytes()[:10])  # damaged: built again and overwritten
    for _ in range(2):
        got = sp.stored_value(_builder(src, calls), name="y", files=[src], directory=d)
        assert float(got["k"]) == 4 and len(calls) == 5


def test_stored_value_without_a_cache_directory_builds_every_time(monkeypatch, tmp_path):
    monkeypatch.setattr(sp, "value_dir", lambda: None)
    src, calls = tmp_path / "model.osim", []
    src.write_text("<a/>")
    for _ in range(2):
        sp.stored_value(_builder(src, calls), name="m", files=[src])
    assert len(calls) == 2


def _kinetic(m: _Springs, q):
    TRACES.append(("kinetic", q.shape))
    return 0.5 * jnp.sum(m.k * q[:, jnp.asarray(m.order)] ** 2, axis=1)


def test_programs_of_shapes_are_compiled_and_loaded_side_by_side(cache_dir):
    m = _Springs(jnp.array([1.0, 2.0, 3.0]), (2, 0, 1))
    q = np.random.default_rng(1).normal(size=(4, 3))
    spec = jax.ShapeDtypeStruct(q.shape, q.dtype)
    held = jax.config.jax_persistent_cache_min_compile_time_secs
    d = cache_dir / "p"
    requests = ((_energy, (m, spec), "energy"), (_kinetic, (m, spec), "kinetic"))
    energy, kinetic = sp.stored_programs(*requests, directory=d)
    assert len(TRACES) == 2
    assert jax.config.jax_persistent_cache_min_compile_time_secs == held
    want_e, want_k = jax.jit(_energy)(m, q), jax.jit(_kinetic)(m, q)
    TRACES.clear()
    for _ in range(2):  # compiled here, then loaded from the files by a new process
        got_e, got_k = energy(m, q), kinetic(m, q)
        for g, w in zip((*got_e, got_k), (*want_e, want_k), strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-15, atol=1e-15)
        _new_process()
        energy, kinetic = sp.stored_programs(*requests, directory=d)
    assert not TRACES  # the shapes' programs are the arrays' programs: nothing traced again
    _new_process()  # one program started alone in the background: the stored one, loaded
    pending = sp.stored_program_future(_kinetic, m, spec, name="kinetic", directory=d)
    np.testing.assert_allclose(np.asarray(pending.result()(m, q)), np.asarray(want_k),
                               rtol=1e-15, atol=1e-15)  # fmt: skip
    assert not TRACES
    run(cache_dir, m, q)
    assert not TRACES and len(list(d.glob("*.xlaexec"))) == 2
    with pytest.raises(TypeError, match="structure"):
        kinetic(m, q, q)
