"""Which right-hand side :func:`jaxmb.simulate` integrates: the exact tree route or, automatically
where it is exact to round-off, a spectral premodel of the same dynamics.

A one-coordinate model whose joint map declares a period (``joint_map.periods()``, e.g. Andrews'
crank angle) and whose force elements depend on q alone has ``q̈ = a(q) + b(q) q̇²`` with a, b
periodic: :func:`jaxmb.dynamics.premodel_dynamics` fits them once by a Fourier series. It is used
only when the premodel as integrated (its evaluation table) deviates from the exact route by at
most :data:`PREMODEL_TOL` (relative to ``|a| + |b| q̇²``) at every verification state: between the
fitting nodes, one to three periods away, at speeds from 0 to 10⁴. That check runs once, with the
fit, and is cached with it (the model is immutable, so what was checked is what every later solve
integrates); a solve then carries no copy of the exact route, which used to cost as much as the
solve itself. Fit and check happen once per model object (cached while the model lives); their
time is reported in ``Trajectory.stats["premodel_fit_s"]`` on the call that paid for it.
"""

from __future__ import annotations

import time
import weakref

import jax

from ..dynamics import PremodelDynamics, premodel_dynamics
from ..model import Model

__all__ = ["ROUTES", "PREMODEL_TOL", "PREMODEL_SAMPLES", "choose_route"]

ROUTES = ("auto", "exact", "premodel")
#: largest relative deviation of the premodel from the exact route that the automatic route accepts
PREMODEL_TOL = 1e-12
#: Fourier samples per period (measured on Andrews' squeezer: 96 give ~2e-15 relative)
PREMODEL_SAMPLES = 96

_FITS: dict[int, tuple[weakref.ref, PremodelDynamics | None, str, dict]] = {}


def _fit(model: Model) -> tuple[PremodelDynamics | None, str, float, dict]:
    """(premodel or None, why not / how, fit seconds, the route's report), cached per live model
    object: a warm call reads one dict entry (the report is built once, not per call)."""
    hit = _FITS.get(id(model))
    if hit is not None and hit[0]() is model:
        return hit[1], hit[2], 0.0, hit[3]
    t = time.perf_counter()
    pm, why = None, ""
    periods = model.joint_map.periods()
    if model.nq != 1:
        why = f"nq = {model.nq} (the premodel is for one-coordinate models)"
    elif model.muscles is not None and len(getattr(model.muscles, "names", ())) > 0:
        why = "the model has muscles"
    elif model.prescribed is not None:
        why = "the model has prescribed coordinates (functions of time)"
    elif periods is None or periods[0] is None:
        why = f"joint map {type(model.joint_map).__name__} declares no period"
    elif any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(model)):
        # a fit is numbers, not a function of the model's parameters: no derivatives through it
        why = "the model's parameters are traced (jit/grad over the model)"
    else:
        try:
            pm = premodel_dynamics(
                model, period=float(periods[0]), n=PREMODEL_SAMPLES, tol=PREMODEL_TOL
            )
            why = (
                f"Fourier fit, {PREMODEL_SAMPLES} samples, table of {pm.table.shape[0]} cells; "
                f"deviation from the exact route {pm.deviation:.1e} at {pm.n_verified} states"
            )
        except ValueError as e:  # velocity/time-dependent force, fit not exact: the exact route
            why = str(e)
    seconds = time.perf_counter() - t
    report = _report(pm, why)
    if "traced" in why:
        return pm, why, seconds, report
    key = id(model)
    try:
        ref = weakref.ref(model, lambda _: _FITS.pop(key, None))
        _FITS[key] = (ref, pm, why, report)
    except TypeError:  # not weak-referenceable: no cache
        pass
    return pm, why, seconds, report


def _report(pm: PremodelDynamics | None, why: str) -> dict:
    """What ``Trajectory.stats`` says of the automatic choice (without the fit's seconds)."""
    if pm is None:
        return {"route": "exact", "premodel_declined": why}
    return {
        "route": "premodel",
        "premodel": why,
        "premodel_fit_error": float(max(pm.fit_error)),
        "premodel_deviation": pm.deviation,
        "premodel_verified_states": pm.n_verified,
    }


def choose_route(model: Model, route: str, tau) -> tuple[PremodelDynamics | None, dict]:
    """The premodel to integrate (None: the exact route) and what to report about the choice."""
    if route not in ROUTES:
        raise ValueError(f"unknown route {route!r}; choose one of {ROUTES}")
    if route == "exact":
        return None, {"route": "exact"}
    if tau is not None:
        why = "an extra generalized force tau is given"
        pm, fit_s, report = None, 0.0, _report(None, why)
    else:
        pm, why, fit_s, report = _fit(model)
    if pm is None:
        if route == "premodel":
            raise ValueError(f"simulate({model.name!r}, route='premodel'): not premodelled: {why}")
        return None, dict(report)
    return pm, dict(report, premodel_fit_s=fit_s)
