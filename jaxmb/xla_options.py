"""The XLA:CPU option jaxmb sets for the process when it is imported (before JAX starts a backend).

jaxmb's OpenSim algorithms are loops of small scalar work: the wrap shapes' Newton and
Levenberg–Marquardt iterations, the multi-object passes, a batch of poses run one after another
(:data:`jaxmb.muscles.wrapped_kernels.WRAPPED_BATCHING`). XLA:CPU runs a ``while`` loop as a
sequence of kernels dispatched one by one by its runtime, each costing far more than the few
flops it does; a loop whose buffers are small enough it compiles instead into one function
(``xla_cpu_small_while_loop_byte_threshold``, by default a few kilobytes). jaxmb raises that
threshold to :data:`SMALL_LOOP_BYTES`. (A loop compiles that way only if it holds no library
call, sort or scatter: jaxmb's loops write their small matrix products as products and sums,
:func:`jaxmb.muscles.wrap.common.rotate`, and order a path's points by comparisons.)

Measured on arm26 (``jax.jit(jax.vmap(lengths_and_moment_arms))``, 256 poses, one 2-core
machine, ``python benchmarks/exact_paths.py``): see the README's "Known costs".

It is a process-wide XLA flag, read once when JAX starts its CPU backend, so it applies only
if jaxmb is imported before the first JAX computation; otherwise a warning says so. A threshold
the user already set in ``XLA_FLAGS`` is left as it is; ``JAXMB_XLA_OPTIONS=0`` leaves
``XLA_FLAGS`` untouched altogether.
"""

from __future__ import annotations

import functools
import os
import warnings

import jax  # importing JAX does not start its backend: XLA_FLAGS may still change
import jax.numpy as jnp

try:  # whether JAX has started a backend (and read XLA_FLAGS)
    from jax._src.xla_bridge import backends_are_initialized
except ImportError:  # a JAX without this check: nothing to say
    backends_are_initialized = None

__all__ = ["PROGRAM_OPTIONS", "SMALL_LOOP_BYTES", "program_options", "set_xla_flags"]

#: ``xla_cpu_small_while_loop_byte_threshold``: a loop whose body and condition access fewer
#: bytes (XLA's cost analysis, one iteration) compiles into one function.
SMALL_LOOP_BYTES = 1_000_000

#: Compiler options of the programs jaxmb compiles itself (``simulate``'s solve, the stored
#: programs of the ``jaxmb`` command): XLA:CPU's YNNPACK library fusions off. A library fusion
#: inside a loop keeps the loop from compiling into one function (the rigid-body terms' small
#: matrix products inside diffrax's step loop), and a loaded program builds each fusion's kernel
#: when it first runs. Not set process-wide: large batched products, a user's own programs among
#: them, run faster with them (chain(30)'s batched M, N q̇, G ~15 %).
PROGRAM_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}

_THRESHOLD = "xla_cpu_small_while_loop_byte_threshold"
_EXTRA = "--xla_backend_extra_options="


def _with_options(flags: str) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) with jaxmb's threshold added unless the user set one."""
    words = flags.split()
    extra = [w for w in words if w.startswith(_EXTRA)]
    if any(_THRESHOLD in w for w in extra):
        return flags
    option = f"{_THRESHOLD}={SMALL_LOOP_BYTES}"
    if extra:  # one map flag: XLA keeps only the last one given
        i = words.index(extra[-1])
        words[i] = f"{words[i]},{option}" if words[i] != _EXTRA else _EXTRA + option
    else:
        words.append(_EXTRA + option)
    return " ".join(words)


def set_xla_flags() -> None:
    """Add jaxmb's loop threshold to ``XLA_FLAGS`` (see the module docstring); warn if JAX's backend
    has already started and will not read them."""
    if os.environ.get("JAXMB_XLA_OPTIONS", "1") == "0":
        return
    old = os.environ.get("XLA_FLAGS", "")
    new = _with_options(old)
    if new == old:
        return
    os.environ["XLA_FLAGS"] = new
    if backends_are_initialized is not None and backends_are_initialized():
        warnings.warn(
            "jaxmb was imported after JAX started its backend, so XLA does not read jaxmb's "
            f"loop threshold ({new!r} in XLA_FLAGS): wrapped muscle paths run slower. "
            "Import jaxmb before the first JAX computation, or set XLA_FLAGS before starting "
            "Python (JAXMB_XLA_OPTIONS=0 silences this).",
            stacklevel=3,
        )


def program_options() -> dict:
    """:data:`PROGRAM_OPTIONS` where this jaxlib knows them (checked once, by compiling a small
    program with them), else none."""
    return dict(PROGRAM_OPTIONS) if _options_known() else {}


@functools.cache
def _options_known() -> bool:
    try:
        jax.jit(jnp.sum).lower(jnp.ones(2)).compile(dict(PROGRAM_OPTIONS))
        return True
    except Exception:  # another jaxlib: no such option
        return False
