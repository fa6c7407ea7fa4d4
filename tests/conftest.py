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
