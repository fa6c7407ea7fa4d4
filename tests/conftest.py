import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Most of the suite's time is XLA compiling small, different programs, and most of that is LLVM
# optimizing them; at -O0 a test compiles about a quarter faster and the few long simulations do
# not run slower on balance (measured per test, CPU s). Numbers are compared with tolerances far
# above the last-bit differences optimization can make. XLA_FLAGS is inherited by the notebook
# kernels and subprocesses the suite starts; set --xla_backend_optimization_level yourself to
# test at another level.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()

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
# cpu_s includes the test's finished child processes (notebook kernels, subprocess checks).
_TIMES = os.environ.get("JAXMB_TEST_TIMES")
if _TIMES:
    import resource
    import time

    import pytest

    def _cpu():
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        c0, w0 = _cpu(), time.perf_counter()
        yield
        with open(_TIMES, "a") as fh:
            cpu, wall = _cpu() - c0, time.perf_counter() - w0
            fh.write(f"{cpu:.2f} {wall:.2f} {item.nodeid}\n")
