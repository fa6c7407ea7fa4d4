"""Writing a model file: a :class:`~jaxmb.Model` to the format's dictionary and JSON text.

Classes are named by their public module (the shortest module path that exports them), so a file
survives moves between a package's internal modules.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import math
import re
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ... import forces as fmod
from ... import muscles as mu
from ...joint_maps import (
    AbstractJointMap,
    ExplicitMap,
    IdentityMap,
    ImplicitMap,
    LinearMap,
)
from ...math import ExpressionError, Expressions, function_name, registered_function
from ...model import Model
from .format import FORMAT, MODULE_PREFIXES, MUSCLE_ELEMENTS, VERSION, ModelFileError, join_path

__all__ = ["model_to_dict", "dumps_model", "save_model"]


def _float(x: float):
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _plain_array(a) -> Any:
    """A float64 array as a JSON number / nested list (non-finite as "inf", "-inf", "nan")."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return _float(a.item())
    return [_plain_array(x) for x in a]


def _is_plain_f64(v) -> bool:
    return (
        isinstance(v, jax.Array)
        and v.dtype == jnp.float64
        and (v.ndim == 0 or all(s > 0 for s in v.shape))
    )


def _enc_generic(v, where: str):
    """Any supported Python / JAX value, tagged so that decoding restores type and value."""
    if v is None or isinstance(v, bool | int | str) and not isinstance(v, np.generic):
        return v
    if isinstance(v, float) and not isinstance(v, np.generic):
        return v if math.isfinite(v) else {"__float__": _float(v)}
    if isinstance(v, jax.Array | np.ndarray | np.generic):
        a = np.asarray(v)
        tag = "__array__" if isinstance(v, jax.Array) else "__ndarray__"
        flat = [_float(x) if a.dtype.kind == "f" else x for x in a.ravel().tolist()]
        return {tag: flat, "shape": list(a.shape), "dtype": str(a.dtype)}
    if isinstance(v, tuple):
        return {"__tuple__": [_enc_generic(x, join_path(where, k)) for k, x in enumerate(v)]}
    if isinstance(v, list):
        return [_enc_generic(x, join_path(where, k)) for k, x in enumerate(v)]
    if isinstance(v, dict):
        if not all(isinstance(k, str) and not k.startswith("__") for k in v):
            raise ModelFileError(f"{where}: dictionary keys must be strings not starting with __")
        return {"__dict__": {k: _enc_generic(x, join_path(where, k)) for k, x in v.items()}}
    if isinstance(v, Expressions):
        return {"__expressions__": _enc_expressions(v)}
    if isinstance(v, eqx.Module):
        return _enc_module(v, where)
    if callable(v):
        return {"__function__": _function_ref(v, where)}
    raise ModelFileError(f"{where}: cannot write a value of type {type(v).__name__}")


def _public_module(cls) -> str:
    """The shortest module path that exports ``cls``: files name the public place of a class, so
    that moving it between a package's internal modules does not break them."""
    parts = cls.__module__.split(".")
    for k in range(2, len(parts)):
        mod = ".".join(parts[:k])
        try:
            if getattr(importlib.import_module(mod), cls.__qualname__, None) is cls:
                return mod
        except ImportError:
            continue
    return cls.__module__


def _enc_module(v: eqx.Module, where: str) -> dict:
    cls = type(v)
    name = f"{_public_module(cls)}.{cls.__qualname__}"
    if not cls.__module__.startswith(MODULE_PREFIXES) or "<" in cls.__qualname__:
        raise ModelFileError(
            f"{where}: a {name} cannot be written; only jaxmb (and interpax) classes can be "
            "stored field by field"
        )
    fields = {
        f.name: _enc_generic(getattr(v, f.name), join_path(where, f.name))
        for f in dataclasses.fields(v)
    }
    return {"__module__": name, "fields": fields}


def _function_ref(fn, where: str) -> str:
    name = function_name(fn) if hasattr(fn, "__qualname__") else repr(fn)
    try:
        if registered_function(name) is fn:
            return name
    except ExpressionError:
        pass
    raise ModelFileError(
        f"{where}: the Python callable {name} is opaque and cannot be saved; write the map with "
        "jaxmb.expressions.Expressions (text in the restricted expression language) or register "
        "a library function with jaxmb.expressions.serialisable"
    )


def _enc_params(p, where: str):
    """Parameters: float64 arrays as plain numbers / lists, anything else tagged."""
    if p is None or isinstance(p, str):
        return p
    if isinstance(p, dict) and all(isinstance(k, str) and not k.startswith("__") for k in p):
        return {k: _enc_params(x, join_path(where, k)) for k, x in p.items()}
    if _is_plain_f64(p):
        return _plain_array(p)
    if isinstance(p, bool | int | float) and not isinstance(p, np.generic):
        return {"__scalar__": _enc_generic(p, where)}
    return _enc_generic(p, where)


def _enc_expressions(e: Expressions, coordinates=None) -> dict:
    out = {"sources": list(e.sources)}
    if coordinates is None or tuple(coordinates) != e.coordinates:
        out["coordinates"] = list(e.coordinates)
    out["parameters"] = list(e.parameters)
    out["signature"] = e.signature
    return out


def _enc_callable(fn, where: str, coordinates, signature: str):
    """An ImplicitMap/ExplicitMap callable: a list of expressions or a library function name."""
    if fn is None:
        return None
    if isinstance(fn, Expressions):
        if fn.signature != signature:
            raise ModelFileError(f"{where}: expressions with signature {fn.signature!r} here")
        if fn.coordinates != tuple(coordinates):
            return {"expressions": list(fn.sources), "coordinates": list(fn.coordinates)}
        return list(fn.sources)
    return {"function": _function_ref(fn, where)}


def _enc_joint_map(jm: AbstractJointMap, coordinates, where: str = "joint_map") -> dict:
    if type(jm) is IdentityMap:
        return {"kind": "identity"}
    if type(jm) is LinearMap:
        # a LinearMap stays one (A = I included): the file decodes to the same type
        A, b = np.asarray(jm.A), np.asarray(jm.b)
        return {"kind": "linear", "A": _plain_array(A), "b": _plain_array(b)}
    if type(jm) is ExplicitMap:
        out = {"kind": "explicit"}
        fn = _enc_callable(jm.fn, join_path(where, "fn"), coordinates, "q")
        if isinstance(fn, list):
            out["expressions"] = fn
        else:
            out.update(fn)
            out["nq"], out["nj"] = jm.nq, jm.nj
        out["parameters"] = _enc_params(jm.params, join_path(where, "parameters"))
        return out
    if type(jm) is ImplicitMap:
        return {
            "kind": "implicit",
            "constraints": _enc_callable(
                jm.constraints, join_path(where, "constraints"), coordinates, "fq"
            ),
            "nj": jm.nj,
            "dependent": list(jm.dependent),
            "reference": _plain_array(jm.reference),
            "parameters": _enc_params(jm.params, join_path(where, "parameters")),
            "independent": _enc_callable(
                jm.independent, join_path(where, "independent"), coordinates, "q"
            ),
            "initial_guess": _enc_callable(
                jm.initial_guess, join_path(where, "initial_guess"), coordinates, "q"
            ),
            "warm_start": None
            if jm.warm_start is None
            else _enc_joint_map(jm.warm_start, coordinates, join_path(where, "warm_start")),
            "iterations": jm.iterations,
            "tol": jm.tol,
            "rcond": jm.rcond,
            "check": jm.check,
        }
    return {"kind": "module", **_enc_module(jm, where)}


def _body_ref(model: Model, b) -> Any:
    if isinstance(b, str):
        return b
    b = int(b)
    return "ground" if b < 0 else model.body_names[b]


def _coord_ref(model: Model, c) -> Any:
    return c if isinstance(c, str) else model.coordinate_names[int(c)]


def _enc_force(f, where: str) -> dict:
    cls = type(f)
    if getattr(fmod, cls.__name__, None) is cls and _init_takes_fields(cls):
        out = {"type": cls.__name__}
        for fld in dataclasses.fields(f):
            v = getattr(f, fld.name)
            out[fld.name] = _plain_array(v) if _is_plain_f64(v) else _enc_generic(v, where)
        return out
    return _enc_module(f, where)


def _init_takes_fields(cls) -> bool:
    names = {f.name for f in dataclasses.fields(cls)}
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    return names == params


def _enc_element(model: Model, obj, where: str) -> dict:
    """A muscle-path element (point, wrap object, PathWrap, Hill parameters, Muscle) by its fields;
    bodies and coordinates by name."""
    cls = type(obj)
    if cls.__name__ not in MUSCLE_ELEMENTS or getattr(mu, cls.__name__, None) is not cls:
        return _enc_module(obj, where)  # another jaxmb element class: field by field, as is
    d = {"type": cls.__name__}
    for f in dataclasses.fields(obj):
        v, w = getattr(obj, f.name), join_path(where, f.name)
        if f.name == "body":
            d[f.name] = _body_ref(model, v)
        elif f.name == "coordinate":
            d[f.name] = _coord_ref(model, v)
        elif f.name == "coordinates":
            d[f.name] = [_coord_ref(model, c) for c in v]
        elif f.name == "name" and v == "" and cls is not mu.Muscle:
            continue
        elif _is_plain_f64(v):
            d[f.name] = _plain_array(v)
        elif isinstance(v, eqx.Module):
            d[f.name] = _enc_element(model, v, w)
        elif isinstance(v, tuple) and all(isinstance(x, eqx.Module) for x in v):
            d[f.name] = [_enc_element(model, x, join_path(w, k)) for k, x in enumerate(v)]
        else:
            d[f.name] = _enc_generic(v, w)
    return d


def model_to_dict(model: Model) -> dict:
    """The model as the JSON-ready dictionary of the file format (raises :class:`ModelFileError`
    naming the element that cannot be written)."""
    if not isinstance(model, Model):
        raise ModelFileError(f"expected a jaxmb Model, got {type(model).__name__}")
    if model.prescribed is not None:  # not in the format yet: refuse rather than drop them
        names = [model.coordinate_names[i] for i in model.prescribed.indices]
        raise ModelFileError(
            f"model {model.name!r}: prescribed coordinates {names} cannot be written (the model"
            " file format has no functions of time yet)"
        )
    bodies = []
    axd, axt = np.asarray(model.axis_d), np.asarray(model.axis_theta)
    d, th = np.asarray(model.d), np.asarray(model.theta)
    mass, com, inertia = np.asarray(model.mass), np.asarray(model.com), np.asarray(model.inertia)
    for i, name in enumerate(model.body_names):
        b = {
            "name": name,
            "parent": _body_ref(model, model.parent[i]),
            "joint": model.joint_type[i],
            "V_theta": _plain_array(axt[i]),
            "V_d": _plain_array(axd[i]),
        }
        if model.joint_type[i] == "revolute":
            b["d"] = _float(d[i])
        else:
            b["theta"] = _float(th[i])
        b["mass"] = _float(mass[i])
        b["com"] = _plain_array(com[i])
        b["inertia"] = _plain_array(inertia[i])
        bodies.append(b)
    out = {
        "format": FORMAT,
        "version": VERSION,
        "name": model.name,
        "gravity": _plain_array(model.gravity),
        "coordinates": list(model.coordinate_names),
        "bodies": bodies,
        "joint_map": _enc_joint_map(model.joint_map, model.coordinate_names),
    }
    if model.points:
        out["points"] = {
            k: {"body": _body_ref(model, p.body), "position": _plain_array(p.position)}
            for k, p in sorted(model.points.items())  # a pytree dict is key-sorted anyway
        }
    if model.forces:
        out["forces"] = [_enc_force(f, f"forces[{k}]") for k, f in enumerate(model.forces)]
    if model.muscles is not None:
        ms = getattr(model.muscles, "muscles", None)
        if ms is None:
            raise ModelFileError("muscles: expected a jaxmb.muscles.MuscleSet")
        if getattr(model.muscles, "fit", None) is not None:
            raise ModelFileError(
                "muscles: the model's paths are a fit (jaxmb.fit_paths), which the model file "
                "does not hold; save jaxmb.exact_paths(model) and fit again after loading"
            )
        out["muscles"] = [_enc_element(model, m, f"muscles[{k}]") for k, m in enumerate(ms)]
    return out


def dumps_model(model: Model) -> str:
    """The model file's text (JSON, two-space indent, innermost arrays on one line)."""
    text = json.dumps(model_to_dict(model), indent=2, allow_nan=False)
    # numbers of one innermost array on one line: compact but still one element per line
    return re.sub(
        r"\[\s*([-0-9.eE+\"a-z]+(?:,\s*[-0-9.eE+\"a-z]+)*)\s*\]",
        lambda m: "[" + ", ".join(s.strip() for s in m.group(1).split(",")) + "]",
        text,
    )


def save_model(model: Model, path) -> Path:
    """Write ``model`` to ``path`` as a jaxmb model file (JSON); returns the path.

    Raises:
        ModelFileError: naming the element that cannot be written (an opaque callable).
    """
    text = dumps_model(model)
    path = Path(path)
    path.write_text(text + "\n", encoding="utf-8")
    return path
