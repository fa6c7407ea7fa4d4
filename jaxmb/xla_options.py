"""XLA:CPU options jaxmb sets for the process when it is imported (before JAX starts a backend).

jaxmb's OpenSim algorithms are loops of small scalar work: the wrap shapes' Newton and
Levenberg–Marquardt iterations, the multi-object passes, a batch of poses run one after another
(:data:`jaxmb.muscles.wrapped_kernels.WRAPPED_BATCHING`). XLA:CPU runs a ``while`` loop as a
sequence of kernels dispatched one by one by its runtime, each costing far more than the few
flops it does; a loop whose buffers are small enough it compiles instead into one function
(``xla_cpu_small_while_loop_byte_threshold``, by default a few kilobytes). jaxmb raises that
threshold to :data:`SMALL_LOOP_BYTES` and turns off XLA:CPU's YNNPACK library fusions (its
matrix products inside such a loop are library calls, which keep the loop from compiling into
one function; those products are small here).

Measured on arm26 (``jax.jit(jax.vmap(lengths_and_moment_arms))``, 256 poses, one 2-core
machine, ``python benchmarks/exact_paths.py``): see the README's "Known costs".

Both are process-wide XLA flags, read once when JAX starts its CPU backend, so they apply only
if jaxmb is imported before the first JAX computation; otherwise a warning says so. A flag the
user already set in ``XLA_FLAGS`` is left as it is; ``JAXMB_XLA_OPTIONS=0`` leaves ``XLA_FLAGS``
untouched altogether.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["SMALL_LOOP_BYTES", "set_xla_flags"]

#: ``xla_cpu_small_while_loop_byte_threshold``: a loop whose body and condition access fewer
#: bytes (XLA's cost analysis, one iteration) compiles into one function.
SMALL_LOOP_BYTES = 1_000_000

_THRESHOLD = "xla_cpu_small_while_loop_byte_threshold"
_EXTRA = "--xla_backend_extra_options="
_YNN = "--xla_cpu_experimental_ynn_fusion_type="


def _with_options(flags: str) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) with jaxmb's options added where the user set none."""
    words = flags.split()
    extra = [w for w in words if w.startswith(_EXTRA)]
    if not any(_THRESHOLD in w for w in extra):
        option = f"{_THRESHOLD}={SMALL_LOOP_BYTES}"
        if extra:  # one map flag: XLA keeps only the last one given
            i = words.index(extra[-1])
            words[i] = f"{words[i]},{option}" if words[i] != _EXTRA else _EXTRA + option
        else:
            words.append(_EXTRA + option)
    if not any(w.startswith(_YNN) for w in words):
        words.append(_YNN)
    return " ".join(words)


def set_xla_flags() -> None:
    """Add jaxmb's options to ``XLA_FLAGS`` (see the module docstring); warn if JAX's backend
    has already started and will not read them."""
    if os.environ.get("JAXMB_XLA_OPTIONS", "1") == "0":
        return
    old = os.environ.get("XLA_FLAGS", "")
    new = _with_options(old)
    if new == old:
        return
    os.environ["XLA_FLAGS"] = new
    try:
        from jax._src import xla_bridge

        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):  # a JAX without this check: nothing to say
        started = False
    if started:
        warnings.warn(
            "jaxmb was imported after JAX started its backend, so XLA does not read jaxmb's "
            f"options ({new!r} in XLA_FLAGS): wrapped muscle paths run several times slower. "
            "Import jaxmb before the first JAX computation, or set XLA_FLAGS before starting "
            "Python (JAXMB_XLA_OPTIONS=0 silences this).",
            stacklevel=3,
        )
