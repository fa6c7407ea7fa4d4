import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)

from strategies import examples  # noqa: E402

# Each example compiles JAX code (a new random tree is a new structure), so the default suite draws
# a few examples per property; JAXMB_HYPOTHESIS_SCALE=1 runs every property at its full count
# (JAXMB_HYPOTHESIS_SCALE=4 for a deep run).
settings.register_profile(
    "jaxmb",
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.load_profile("jaxmb")


# JAXMB_TEST_TIMES=path appends "cpu_s wall_s nodeid" per test, written as each test ends, so a
# profile of the suite survives interruption and CPU time stays meaningful on a loaded machine.
_TIMES = os.environ.get("JAXMB_TEST_TIMES")
if _TIMES:
    import time

    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        c0, w0 = time.process_time(), time.perf_counter()
        yield
        with open(_TIMES, "a") as fh:
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            fh.write(f"{cpu:.2f} {wall:.2f} {item.nodeid}\n")
