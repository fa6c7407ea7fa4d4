import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)

# Each example compiles JAX code (a new random tree is a new structure), so the default suite draws
# a few examples per property; set JAXMB_HYPOTHESIS_EXAMPLES=50 for a deeper run.
settings.register_profile(
    "jaxmb",
    max_examples=int(os.environ.get("JAXMB_HYPOTHESIS_EXAMPLES", "8")),
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
            fh.write(f"{time.process_time() - c0:.2f} {time.perf_counter() - w0:.2f} {item.nodeid}\n")
