"""jaxmb's XLA:CPU loop threshold (``jaxmb.xla_options``): added to XLA_FLAGS on import, never
over a user's own setting, and the loops it is for compile into one function."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb  # noqa: F401  (sets the options before JAX's backend starts)
from jaxmb.xla_options import SMALL_LOOP_BYTES, set_xla_flags

THRESHOLD = "xla_cpu_small_while_loop_byte_threshold"


def test_this_process_got_the_options():
    flags = os.environ["XLA_FLAGS"].split()
    assert any(f.startswith("--xla_backend_extra_options=") and THRESHOLD in f for f in flags)


def _set(monkeypatch, flags):
    jnp.zeros(1).block_until_ready()  # the backend starts (and reads XLA_FLAGS) before the change
    if flags is None:
        monkeypatch.delenv("XLA_FLAGS", raising=False)
    else:
        monkeypatch.setenv("XLA_FLAGS", flags)
    with pytest.warns(UserWarning, match="imported after JAX started its backend"):
        set_xla_flags()  # too late for this process: the call says so
    return os.environ["XLA_FLAGS"].split()


def test_options_join_the_users_flags(monkeypatch):
    flags = _set(monkeypatch, "--xla_backend_extra_options=foo=1 --xla_dump_to=/tmp/x")
    assert f"--xla_backend_extra_options=foo=1,{THRESHOLD}={SMALL_LOOP_BYTES}" in flags
    assert "--xla_dump_to=/tmp/x" in flags
    assert _set(monkeypatch, None) == [
        f"--xla_backend_extra_options={THRESHOLD}={SMALL_LOOP_BYTES}"
    ]


def test_a_users_own_setting_is_kept(monkeypatch):
    jnp.zeros(1).block_until_ready()
    mine = f"--xla_dump_to=/tmp/x --xla_backend_extra_options=foo=1,{THRESHOLD}=5"
    monkeypatch.setenv("XLA_FLAGS", mine)
    set_xla_flags()  # nothing to add: no change, no warning
    assert os.environ["XLA_FLAGS"] == mine
    monkeypatch.setenv("JAXMB_XLA_OPTIONS", "0")
    monkeypatch.setenv("XLA_FLAGS", "")
    set_xla_flags()
    assert os.environ["XLA_FLAGS"] == ""


def test_a_small_loop_compiles_into_one_function():
    """A scalar Newton iteration (the shape of the wrap algorithms' loops) is compiled as one
    call, and gives the root."""

    def newton(a):
        def body(s):
            x, k = s
            return x - (x * x - a) / (2.0 * x), k + 1

        return jax.lax.while_loop(
            lambda s: (jnp.abs(s[0] * s[0] - a) > 1e-15) & (s[1] < 50), body, (a, 0)
        )[0]

    compiled = jax.jit(newton).lower(2.0).compile()
    assert "xla_cpu_small_call" in compiled.as_text()
    np.testing.assert_allclose(compiled(2.0), np.sqrt(2.0), rtol=1e-15)
