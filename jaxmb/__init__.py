"""jaxmb: differentiable multibody dynamics with empirical joint maps f(q), in JAX.

The curated public API. Functions follow ``algorithm(model, ...)``; models are immutable pytrees.
The package's folders are the data flow (``docs/architecture.md``): ``math`` → ``joint_maps`` →
``model`` → ``kinematics`` → ``forces`` → ``dynamics`` → ``muscles`` → ``simulation`` →
``analyses`` → ``io`` → ``models`` → ``cli``.

Importing jaxmb enables 64-bit floats in JAX for the whole program (``jax_enable_x64``): the
reference cross-checks, implicit joint maps and tight integration tolerances need float64. Every
entry point also runs on float32 inputs (about 1e-6 relative accuracy; loosen rtol/atol to ≥ 1e-6);
``jax.config.update("jax_enable_x64", False)`` after the import restores JAX's default for the rest
of a program (see the README, "Using it").
"""

import gc as _gc
import importlib
import importlib.abc
import importlib.util
import sys

# The import creates about 10^5 objects (JAX's, equinox's, jaxmb's) that live as long as the
# process; the cyclic garbage collector, run ~250 times while they are made, walked them again and
# again: ~0.1 s of an 0.8 s import. It is paused for the import and then restored as it was. The
# objects made meanwhile are then handed to the oldest generation (freeze, unfreeze: no walk), as
# if they had survived collections; otherwise the first collection after the import walks them
# all at once (45 ms), even in a process such as the jaxmb command that freezes them right after.
_collecting = _gc.isenabled()
_gc.disable()
try:
    from .xla_options import set_xla_flags as _set_xla_flags

    _set_xla_flags()  # before anything starts JAX's backend, which reads XLA_FLAGS once

    import jax as _jax

    _jax.config.update("jax_enable_x64", True)

    from . import joint_maps, kinematics, math  # noqa: E402
    from .dynamics import (  # noqa: E402
        PremodelDynamics,
        applied_forces,
        bias_forces,
        forward_dynamics,
        gravity_forces,
        inverse_dynamics,
        kinetic_energy,
        mass_matrix,
        potential_energy,
        premodel_dynamics,
    )
    from .joint_maps import (  # noqa: E402
        AbstractJointMap,
        ExplicitMap,
        IdentityMap,
        ImplicitMap,
        ImplicitSolution,
        LinearMap,
        PremodelMap,
        identity_map,
        joint_gradients,
        joint_hessians,
        joint_values,
        premodel,
    )
    from .kinematics import (  # noqa: E402
        body_angular_acceleration,
        body_angular_velocity,
        body_transforms,
        kron_derivatives,
        point_acceleration,
        point_position,
        point_velocity,
        transform_derivatives,
    )
    from .model import Body, Model, ModelError, build_model  # noqa: E402
    from .muscles import (  # noqa: E402
        exact_paths,
        fit_paths,
        lengths_and_moment_arms,
        moment_arms,
        muscle_lengths,
        muscle_velocities,
        with_muscles,
    )
finally:
    if _collecting:
        if _gc.get_freeze_count() == 0:  # (another's frozen objects stay frozen)
            _gc.freeze()
            _gc.unfreeze()
        _gc.enable()

__version__ = "0.1.0"

# Subpackages loaded on first use, to keep `import jaxmb` light.
# ``models`` imports every built-in model (the OpenSim ones read the OpenSim reader).
_SUBPACKAGES = {
    "forces", "muscles", "dynamics", "simulation", "analyses", "io", "models", "plots", "cli",
}

# Public names whose modules are imported on first use.
_LAZY_NAMES = {
    "load_model": "jaxmb.io.model_file",
    "save_model": "jaxmb.io.model_file",
    "ModelFileError": "jaxmb.io.model_file",
    "load_osim": "jaxmb.io.osim",
    # the gait pipelines (Newton–Euler, Winter's tables) are not on the setup commands' path
    "joint_loads": "jaxmb.analyses.newton_euler",
    "batched_terms": "jaxmb.dynamics.tree",
    "batched_forward_dynamics": "jaxmb.dynamics.tree",
    "batched_rk4": "jaxmb.simulation.driver",
    # force sharing imports optax, which nothing else on the analyses' commands needs
    "share_forces": "jaxmb.muscles.sharing",
    # the simulation stage (diffrax: ~1.5 s of import) is not needed by the analyses' commands
    "ERKResult": "jaxmb.simulation",
    "SimulationError": "jaxmb.simulation",
    "Trajectory": "jaxmb.simulation",
    "erk_solve": "jaxmb.simulation",
    "shard_batch": "jaxmb.simulation",
    "simulate": "jaxmb.simulation",
    "simulate_batch": "jaxmb.simulation",
    "simulate_sharded": "jaxmb.simulation",
    "stack_models": "jaxmb.simulation",
    "vary": "jaxmb.simulation",
}

# The 0.1 layout's module paths, still importable (``import jaxmb.gait``, ``mb.hill``) for scripts
# written against it; each is the module that now does that job.
MOVED_MODULES = {
    "jaxmb.matcalc": "jaxmb.math.matcalc",
    "jaxmb.expressions": "jaxmb.math.expressions",
    "jaxmb.io.functions": "jaxmb.io.osim.functions",
    "jaxmb.coupling": "jaxmb.joint_maps",
    "jaxmb.wrapping": "jaxmb.muscles.wrap",
    "jaxmb.hill": "jaxmb.muscles.hill",
    "jaxmb.sharing": "jaxmb.muscles.sharing",
    "jaxmb.batched": "jaxmb.dynamics.tree",
    "jaxmb.dynamics.batched": "jaxmb.dynamics.tree",
    "jaxmb.forces.elements": "jaxmb.forces",
    "jaxmb.batch": "jaxmb.simulation.batch",
    "jaxmb.control": "jaxmb.simulation.control",
    "jaxmb.identify": "jaxmb.simulation.identify",
    "jaxmb.newton_euler": "jaxmb.analyses.newton_euler",
    "jaxmb.gait": "jaxmb.analyses.gait",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path to the module that now holds its job."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # the import system stamped the alias's spec on the module: give it back its own
        module.__spec__ = module.__spec__.loader_state


sys.meta_path.append(_MovedModuleFinder())


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if f"{__name__}.{name}" in MOVED_MODULES:
        return importlib.import_module(MOVED_MODULES[f"{__name__}.{name}"])
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    raise AttributeError(f"module 'jaxmb' has no attribute {name!r}")
