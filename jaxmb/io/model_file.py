"""The jaxmb model file: a documented, versioned JSON description of a :class:`jaxmb.Model`.

``save_model(model, path)`` writes one, ``load_model(path)`` reads it back; the reference of every
field is ``docs/model_file.md``. A file looks like::

    {"format": "jaxmb-model", "version": 1, "name": "pendulum",
     "gravity": [0, 0, -9.81], "coordinates": ["phi"],
     "bodies": [{"name": "rod", "parent": "ground", "joint": "revolute",
                 "V_theta": [0, 1, 0], "V_d": [1, 0, 0], "d": 0.0,
                 "mass": 1.0, "com": [0, 0, -0.5], "inertia": [0.02, 0.02, 0.001]}],
     "joint_map": {"kind": "explicit", "expressions": ["phi"]}}

Round trips are exact: every float is written with Python's shortest round-trip ``repr`` and read
back with the same value, and every pytree leaf and static field of the model is restored, so
``load_model(save_model(m))`` has bitwise-identical leaves and the same static structure (tested
for every built-in model). Joint maps are written declaratively (``identity``, ``linear``,
``explicit`` expressions, ``implicit`` loop constraints) when they can be; a library class (such as
``AndrewsJointMap`` or a pre-modeled spline) is written field by field (``kind: "module"``); an
opaque Python callable (``ExplicitMap`` of a lambda) cannot be written and raises
:class:`ModelFileError` naming the joint map. Expressions are parsed by the restricted language of
:mod:`jaxmb.expressions`; nothing from a file is ever evaluated as Python.

Loading validates everything and names the element: its JSON path (``bodies[3].inertia``) and its
line in the file.
"""

from __future__ import annotations

import bisect
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

from ..joint_maps import AbstractJointMap, ExplicitMap, ImplicitMap, LinearMap, identity_map
from ..math import ExpressionError, Expressions, function_name, registered_function
from ..model import Body, Model, ModelError, build_model

__all__ = [
    "FORMAT",
    "VERSION",
    "ModelFileError",
    "save_model",
    "load_model",
    "model_to_dict",
    "model_from_dict",
    "dumps_model",
    "loads_model",
]

FORMAT = "jaxmb-model"
VERSION = 1
_MODULE_PREFIXES = ("jaxmb.", "interpax.")


class ModelFileError(ModelError):
    """A model file (or model) that cannot be read or written; names the element and its place.

    Attributes:
        path: the JSON path of the offending element (``"bodies[3].inertia"``), or ``""``.
        line: its 1-based line in the file, or ``None`` when unknown.
    """

    def __init__(self, message: str, path: str = "", line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


# =================================================================================================
# Writing
# =================================================================================================
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
        return {"__tuple__": [_enc_generic(x, _join(where, k)) for k, x in enumerate(v)]}
    if isinstance(v, list):
        return [_enc_generic(x, _join(where, k)) for k, x in enumerate(v)]
    if isinstance(v, dict):
        if not all(isinstance(k, str) and not k.startswith("__") for k in v):
            raise ModelFileError(f"{where}: dictionary keys must be strings not starting with __")
        return {"__dict__": {k: _enc_generic(x, _join(where, k)) for k, x in v.items()}}
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
    if not cls.__module__.startswith(_MODULE_PREFIXES) or "<" in cls.__qualname__:
        raise ModelFileError(
            f"{where}: a {name} cannot be written; only jaxmb (and interpax) classes can be "
            "stored field by field"
        )
    fields = {
        f.name: _enc_generic(getattr(v, f.name), _join(where, f.name))
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
        return {k: _enc_params(x, _join(where, k)) for k, x in p.items()}
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
    if type(jm) is LinearMap:
        A, b = np.asarray(jm.A), np.asarray(jm.b)
        if A.shape[0] == A.shape[1] and np.array_equal(A, np.eye(A.shape[0])) and not b.any():
            if _same_leaves(jm, identity_map(A.shape[0])):
                return {"kind": "identity"}
        return {"kind": "linear", "A": _plain_array(A), "b": _plain_array(b)}
    if type(jm) is ExplicitMap:
        out = {"kind": "explicit"}
        fn = _enc_callable(jm.fn, _join(where, "fn"), coordinates, "q")
        if isinstance(fn, list):
            out["expressions"] = fn
        else:
            out.update(fn)
            out["nq"], out["nj"] = jm.nq, jm.nj
        out["parameters"] = _enc_params(jm.params, _join(where, "parameters"))
        return out
    if type(jm) is ImplicitMap:
        return {
            "kind": "implicit",
            "constraints": _enc_callable(
                jm.constraints, _join(where, "constraints"), coordinates, "fq"
            ),
            "nj": jm.nj,
            "dependent": list(jm.dependent),
            "reference": _plain_array(jm.reference),
            "parameters": _enc_params(jm.params, _join(where, "parameters")),
            "independent": _enc_callable(
                jm.independent, _join(where, "independent"), coordinates, "q"
            ),
            "initial_guess": _enc_callable(
                jm.initial_guess, _join(where, "initial_guess"), coordinates, "q"
            ),
            "warm_start": None
            if jm.warm_start is None
            else _enc_joint_map(jm.warm_start, coordinates, _join(where, "warm_start")),
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
    from ..forces import elements as fmod

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
    from ..muscles import paths as mu

    cls = type(obj)
    if getattr(mu, cls.__name__, None) is not cls or cls.__name__ not in mu.__all__:
        return _enc_module(obj, where)  # another jaxmb element class: field by field, as is
    d = {"type": cls.__name__}
    for f in dataclasses.fields(obj):
        v, w = getattr(obj, f.name), _join(where, f.name)
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
            d[f.name] = [_enc_element(model, x, _join(w, k)) for k, x in enumerate(v)]
        else:
            d[f.name] = _enc_generic(v, w)
    return d


def model_to_dict(model: Model) -> dict:
    """The model as the JSON-ready dictionary of the file format (raises :class:`ModelFileError`
    naming the element that cannot be written)."""
    if not isinstance(model, Model):
        raise ModelFileError(f"expected a jaxmb Model, got {type(model).__name__}")
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


# =================================================================================================
# Reading
# =================================================================================================
def _line_table(text: str) -> dict[str, int]:
    """JSON path -> 1-based line of the value, by a small position-tracking scan of valid JSON."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    lines: dict[str, int] = {}
    ws = re.compile(r"[ \t\n\r]*")
    scalar = re.compile(r"-?Infinity|NaN|true|false|null|-?[0-9][0-9.eE+\-]*")

    def value(i, path):
        i = ws.match(text, i).end()
        lines[path] = bisect.bisect_right(starts, i)
        c = text[i]
        if c == "{":
            i = ws.match(text, i + 1).end()
            if text[i] == "}":
                return i + 1
            while True:
                i = ws.match(text, i).end()
                key, i = json.decoder.scanstring(text, i + 1)
                i = ws.match(text, i).end() + 1  # the colon
                i = value(i, _join(path, key))
                i = ws.match(text, i).end()
                if text[i] == "}":
                    return i + 1
                i += 1
        if c == "[":
            i = ws.match(text, i + 1).end()
            if text[i] == "]":
                return i + 1
            k = 0
            while True:
                i = value(i, _join(path, k))
                k += 1
                i = ws.match(text, i).end()
                if text[i] == "]":
                    return i + 1
                i += 1
        if c == '"':
            return json.decoder.scanstring(text, i + 1)[1]
        return scalar.match(text, i).end()

    try:
        value(0, "")
    except (IndexError, ValueError, AttributeError):
        pass  # positions are a convenience; the values come from json.loads
    return lines


class _Reader:
    """Decoding context: the file name and the line table, to name elements in errors."""

    def __init__(self, source: str, lines: dict[str, int]):
        self.source = source
        self.lines = lines

    def error(self, path: str, msg: str) -> ModelFileError:
        line, p = None, path
        while True:
            if p in self.lines:
                line = self.lines[p]
                break
            if not p:
                break
            p = re.sub(r"(\.[^.\[\]]*|\[\d+\])$", "", p)
        where = path or "(top level)"
        at = f" (line {line})" if line is not None else ""
        return ModelFileError(f"{self.source}: {where}{at}: {msg}", path, line)

    # -- typed getters --------------------------------------------------------------------------
    def obj(self, v, path, allowed=None, required=()):
        if not isinstance(v, dict):
            raise self.error(path, f"expected an object {{...}}, got {_kind(v)}")
        for k in required:
            if k not in v:
                raise self.error(path, f"missing required key {k!r}")
        if allowed is not None:
            for k in v:
                if k not in allowed:
                    raise self.error(
                        _join(path, k), f"unknown key {k!r} (allowed: {', '.join(allowed)})"
                    )
        return v

    def number(self, v, path, finite=True) -> float:
        if isinstance(v, str) and v in ("inf", "-inf", "nan") and not finite:
            return float(v)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.error(path, f"expected a number, got {_kind(v)}")
        x = float(v)
        if finite and not math.isfinite(x):
            raise self.error(path, f"expected a finite number, got {v}")
        return x

    def integer(self, v, path) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(path, f"expected an integer, got {_kind(v)}")
        return v

    def string(self, v, path) -> str:
        if not isinstance(v, str):
            raise self.error(path, f"expected a string, got {_kind(v)}")
        return v

    def array(self, v, path, shape=None, finite=True) -> np.ndarray:
        def conv(x, p):
            if isinstance(x, list):
                return [conv(y, _join(p, k)) for k, y in enumerate(x)]
            return self.number(x, p, finite)

        data = conv(v, path)
        try:
            a = np.asarray(data, dtype=np.float64)
        except ValueError:
            raise self.error(path, "ragged array (rows of different lengths)") from None
        if shape is not None and a.shape not in shape:
            want = " or ".join(str(s) for s in shape)
            raise self.error(path, f"expected an array of shape {want}, got shape {a.shape}")
        return a

    def strings(self, v, path) -> list[str]:
        if not isinstance(v, list):
            raise self.error(path, f"expected a list of strings, got {_kind(v)}")
        return [self.string(x, _join(path, k)) for k, x in enumerate(v)]

    # -- tagged generic values ------------------------------------------------------------------
    def generic(self, v, path):
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list):
            return [self.generic(x, _join(path, k)) for k, x in enumerate(v)]
        if not isinstance(v, dict):
            raise self.error(path, f"unsupported value {_kind(v)}")
        if "__float__" in v:
            return self.number(v["__float__"], _join(path, "__float__"), finite=False)
        for tag in ("__array__", "__ndarray__"):
            if tag in v:
                self.obj(v, path, allowed=(tag, "shape", "dtype"), required=("shape", "dtype"))
                dtype = self.string(v["dtype"], _join(path, "dtype"))
                if dtype not in ("float64", "float32", "int64", "int32", "bool"):
                    raise self.error(_join(path, "dtype"), f"unsupported dtype {dtype!r}")
                flat = v[tag]
                if not isinstance(flat, list):
                    raise self.error(_join(path, tag), "expected a flat list of values")
                try:
                    if dtype.startswith("float"):
                        a = np.asarray([float(x) for x in flat], dtype=dtype)
                    else:
                        a = np.asarray(flat, dtype=dtype)
                    a = a.reshape([self.integer(s, _join(path, "shape")) for s in v["shape"]])
                except (TypeError, ValueError) as e:
                    raise self.error(path, f"bad array data: {e}") from None
                return jnp.asarray(a) if tag == "__array__" else a
        if "__tuple__" in v:
            items = v["__tuple__"]
            if not isinstance(items, list):
                raise self.error(path, "__tuple__ must be a list")
            return tuple(self.generic(x, _join(path, k)) for k, x in enumerate(items))
        if "__dict__" in v:
            return {k: self.generic(x, _join(path, k)) for k, x in v["__dict__"].items()}
        if "__expressions__" in v:
            return self.expressions_tag(v["__expressions__"], _join(path, "__expressions__"))
        if "__function__" in v:
            return self.function(v["__function__"], _join(path, "__function__"))
        if "__module__" in v:
            return self.module(v, path)
        if "__scalar__" in v:
            return self.generic(v["__scalar__"], _join(path, "__scalar__"))
        return {k: self.generic(x, _join(path, k)) for k, x in v.items()}

    def params(self, v, path):
        """Parameters: plain numbers and (nested) lists become float64 JAX arrays."""
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, bool):
            raise self.error(path, "a parameter must be a number or an array, got a boolean")
        if isinstance(v, int | float | list):
            return jnp.asarray(self.array(v, path, finite=False))
        if isinstance(v, dict) and any(k.startswith("__") for k in v):
            return self.generic(v, path)
        if isinstance(v, dict):
            return {k: self.params(x, _join(path, k)) for k, x in v.items()}
        raise self.error(path, f"unsupported parameter value {_kind(v)}")

    def function(self, name, path):
        try:
            return registered_function(self.string(name, path))
        except ExpressionError as e:
            raise self.error(path, str(e)) from None

    def expressions_tag(self, v, path):
        self.obj(v, path, ("sources", "coordinates", "parameters", "signature"), ("sources",))
        return self.make_expressions(
            self.strings(v["sources"], _join(path, "sources")),
            self.strings(v.get("coordinates", []), _join(path, "coordinates")),
            self.strings(v.get("parameters", []), _join(path, "parameters")),
            self.string(v.get("signature", "q"), _join(path, "signature")),
            path,
        )

    def make_expressions(self, sources, coordinates, parameters, signature, path):
        try:
            return Expressions(tuple(sources), tuple(coordinates), tuple(parameters), signature)
        except ExpressionError as e:
            k = next((k for k, s in enumerate(sources) if s in str(e)), None)
            raise self.error(_join(path, k) if k is not None else path, str(e)) from None

    def module(self, v, path):
        self.obj(v, path, ("__module__", "fields", "kind"), ("__module__", "fields"))
        name = self.string(v["__module__"], _join(path, "__module__"))
        mod, _, qual = name.rpartition(".")
        if not mod.startswith(_MODULE_PREFIXES) or not qual.isidentifier():
            raise self.error(
                _join(path, "__module__"), f"{name!r} is not a jaxmb (or interpax) class"
            )
        try:
            cls = getattr(importlib.import_module(mod), qual)
        except (ImportError, AttributeError):
            raise self.error(_join(path, "__module__"), f"no class {name!r}") from None
        if not (isinstance(cls, type) and issubclass(cls, eqx.Module)):
            raise self.error(_join(path, "__module__"), f"{name!r} is not an equinox Module")
        fields = self.obj(v["fields"], _join(path, "fields"))
        names = [f.name for f in dataclasses.fields(cls)]
        for k in fields:
            if k not in names:
                raise self.error(_join(path, f"fields.{k}"), f"{name} has no field {k!r}")
        missing = [k for k in names if k not in fields]
        if missing:
            raise self.error(_join(path, "fields"), f"{name}: missing fields {missing}")
        # restore the fields as they were written (the constructor may take other arguments)
        obj = object.__new__(cls)
        for k in names:
            object.__setattr__(obj, k, self.generic(fields[k], _join(path, f"fields.{k}")))
        return obj


def _kind(v) -> str:
    if v is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: f"the string {v!r}",
        list: "a list",
        dict: "an object",
    }.get(type(v), type(v).__name__)


# -- joint maps -----------------------------------------------------------------------------------
_MAP_KEYS = {
    "identity": ("kind",),
    "linear": ("kind", "A", "b"),
    "explicit": ("kind", "expressions", "coordinates", "function", "nq", "nj", "parameters"),
    "implicit": (
        "kind",
        "constraints",
        "nj",
        "dependent",
        "reference",
        "parameters",
        "independent",
        "initial_guess",
        "warm_start",
        "iterations",
        "tol",
        "rcond",
        "check",
    ),
    "module": ("kind", "__module__", "fields"),
}


def _param_names(params) -> list[str]:
    return sorted(params) if isinstance(params, dict) else []


def _sugar(r: _Reader, spec, path, coords, params: dict, k: int) -> str:
    """A joint entry of an explicit map: text, or a polynomial / spline object (sugar)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in ("polynomial", "spline"):
        kind = next(iter(spec))
        body = r.obj(spec[kind], _join(path, kind))
        p = _join(path, kind)
        if kind == "polynomial":
            r.obj(body, p, ("coordinate", "coefficients"), ("coordinate", "coefficients"))
        else:
            r.obj(body, p, ("coordinate", "knots", "values"), ("coordinate", "knots", "values"))
        c = r.string(body["coordinate"], _join(p, "coordinate"))
        if c not in coords:
            raise r.error(_join(p, "coordinate"), f"unknown coordinate {c!r}; coordinates {coords}")
        if kind == "polynomial":
            co = r.array(body["coefficients"], _join(p, "coefficients"))
            if co.ndim != 1 or co.size < 1:
                raise r.error(_join(p, "coefficients"), "expected a non-empty list of numbers")
            params[f"poly{k}"] = jnp.asarray(co)
            return f"polyval(poly{k}, {c})"
        kn = r.array(body["knots"], _join(p, "knots"))
        va = r.array(body["values"], _join(p, "values"))
        if kn.ndim != 1 or kn.shape != va.shape or kn.size < 2:
            raise r.error(
                p,
                f"knots and values must be lists of equal length >= 2, got "
                f"{kn.shape} and {va.shape}",
            )
        if np.any(np.diff(kn) <= 0):
            raise r.error(_join(p, "knots"), "spline knots must be strictly increasing")
        params[f"knots{k}"], params[f"values{k}"] = jnp.asarray(kn), jnp.asarray(va)
        return f"spline(knots{k}, values{k}, {c})"
    raise r.error(
        path, "a joint entry is an expression string, {'polynomial': ...} or {'spline': ...}"
    )


def _callable(r: _Reader, v, path, coords, params, signature, allow_none=True):
    if v is None and allow_none:
        return None
    if isinstance(v, dict) and "function" in v:
        r.obj(v, path, ("function",))
        return r.function(v["function"], _join(path, "function"))
    cs = coords
    if isinstance(v, dict) and "expressions" in v:
        r.obj(v, path, ("expressions", "coordinates"))
        cs = r.strings(v.get("coordinates", coords), _join(path, "coordinates"))
        path, v = _join(path, "expressions"), v["expressions"]
    sources = r.strings(v, path)
    if not sources:
        raise r.error(path, "needs at least one expression")
    return r.make_expressions(sources, cs, _param_names(params), signature, path)


def _dec_joint_map(r: _Reader, v, path, coords, nb) -> AbstractJointMap:
    r.obj(v, path)
    if "__module__" in v and "kind" not in v:
        v = {"kind": "module", **v}
    kind = r.string(v.get("kind"), _join(path, "kind")) if "kind" in v else None
    if kind not in _MAP_KEYS:
        raise r.error(
            _join(path, "kind"), f"unknown joint map kind {kind!r} (one of {', '.join(_MAP_KEYS)})"
        )
    r.obj(v, path, _MAP_KEYS[kind])
    nq = len(coords)
    if kind == "identity":
        return identity_map(nb)
    if kind == "linear":
        r.obj(v, path, required=("A",))
        A = r.array(v["A"], _join(path, "A"))
        if A.ndim != 2:
            raise r.error(
                _join(path, "A"), f"A must be a matrix (nj rows, nq columns), got {A.shape}"
            )
        b = None if v.get("b") is None else r.array(v["b"], _join(path, "b"), ((A.shape[0],),))
        return LinearMap(A, b)
    if kind == "module":
        jm = r.module(v, path)
        if not isinstance(jm, AbstractJointMap):
            raise r.error(_join(path, "__module__"), "not a joint map class")
        return jm
    params = r.params(v.get("parameters"), _join(path, "parameters"))
    if kind == "explicit":
        if "function" in v:
            r.obj(v, path, required=("nq", "nj"))
            fn = r.function(v["function"], _join(path, "function"))
            return ExplicitMap(
                fn,
                r.integer(v["nq"], _join(path, "nq")),
                r.integer(v["nj"], _join(path, "nj")),
                params,
            )
        r.obj(v, path, required=("expressions",))
        ep = _join(path, "expressions")
        if not isinstance(v["expressions"], list) or not v["expressions"]:
            raise r.error(ep, "expected a list with one entry per joint")
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise r.error(_join(path, "parameters"), "expected an object {name: value}")
        cs = r.strings(v.get("coordinates", coords), _join(path, "coordinates"))
        sources = [
            _sugar(r, s, _join(ep, k), cs, params, k) for k, s in enumerate(v["expressions"])
        ]
        fn = r.make_expressions(sources, cs, _param_names(params), "q", ep)
        return ExplicitMap(fn, len(cs), len(sources), params)
    # implicit
    r.obj(v, path, required=("constraints", "dependent", "reference"))
    dep = v["dependent"]
    if not isinstance(dep, list):
        raise r.error(_join(path, "dependent"), "expected a list of joint indices")
    dep = [r.integer(x, _join(path, f"dependent[{k}]")) for k, x in enumerate(dep)]
    nj = r.integer(v.get("nj", nb), _join(path, "nj"))
    ws = v.get("warm_start")
    kw = {
        "independent": _callable(
            r, v.get("independent"), _join(path, "independent"), coords, params, "q"
        ),
        "initial_guess": _callable(
            r, v.get("initial_guess"), _join(path, "initial_guess"), coords, params, "q"
        ),
        "warm_start": None
        if ws is None
        else _dec_joint_map(r, ws, _join(path, "warm_start"), coords, nb),
    }
    for key, conv in (("iterations", r.integer), ("tol", r.number), ("rcond", r.number)):
        if key in v:
            kw[key] = conv(v[key], _join(path, key))
    if "check" in v:
        if not isinstance(v["check"], bool):
            raise r.error(_join(path, "check"), "expected true or false")
        kw["check"] = v["check"]
    cons = _callable(r, v["constraints"], _join(path, "constraints"), coords, params, "fq", False)
    reference = r.array(v["reference"], _join(path, "reference"), ((len(dep),),))
    try:
        return ImplicitMap(cons, nq, nj, dep, jnp.asarray(reference), params, **kw)
    except (ValueError, TypeError) as e:
        raise r.error(path, str(e)) from None


# -- forces and muscles ---------------------------------------------------------------------------
def _dec_force(r: _Reader, v, path):
    from ..forces import elements as fmod

    r.obj(v, path)
    if "__module__" in v:
        return r.module(v, path)
    r.obj(v, path, required=("type",))
    name = r.string(v["type"], _join(path, "type"))
    cls = getattr(fmod, name, None)
    if not (isinstance(cls, type) and issubclass(cls, fmod.AbstractForce)) or name.startswith("_"):
        known = [
            n
            for n in dir(fmod)
            if isinstance(getattr(fmod, n), type)
            and issubclass(getattr(fmod, n), fmod.AbstractForce)
            and getattr(fmod, n) is not fmod.AbstractForce
        ]
        raise r.error(_join(path, "type"), f"unknown force type {name!r} (one of {known})")
    names = [f.name for f in dataclasses.fields(cls)]
    r.obj(
        v,
        path,
        ["type"] + names,
        ["type"]
        + [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING
            and inspect.signature(cls.__init__).parameters[f.name].default
            is inspect.Parameter.empty
        ],
    )
    kwargs = {}
    for k in names:
        if k in v:
            x = v[k]
            kwargs[k] = (
                r.array(x, _join(path, k), finite=False)
                if isinstance(x, float | list)
                else r.generic(x, _join(path, k))
            )
            if isinstance(kwargs[k], np.ndarray) and not np.all(np.isfinite(kwargs[k])):
                raise r.error(_join(path, k), "non-finite value")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise r.error(path, f"{name}: {e}") from None


_DEFAULT_TYPES = {"points": "PathPoint", "wraps": "PathWrap", "params": "MuscleParameters"}


def _dec_element(r: _Reader, v, path, expect=None, default=None):
    """A muscle element written by :func:`_enc_element` (points, wraps, parameters, muscles)."""
    from ..muscles import paths as mu

    if isinstance(v, dict) and "__module__" in v:
        return r.module(v, path)
    r.obj(v, path, required=() if default else ("type",))
    name = r.string(v.get("type", default), _join(path, "type"))
    cls = getattr(mu, name, None) if name in mu.__all__ else None
    if not (isinstance(cls, type) and issubclass(cls, eqx.Module)) or (
        expect is not None and not issubclass(cls, expect)
    ):
        kinds = [
            n
            for n in mu.__all__
            if isinstance(getattr(mu, n), type)
            and (expect is None or issubclass(getattr(mu, n), expect))
        ]
        raise r.error(_join(path, "type"), f"unknown type {name!r} here (one of {kinds})")
    fields = [f.name for f in dataclasses.fields(cls)]
    r.obj(v, path, ["type"] + fields)
    kw = {}
    for k in fields:
        if k not in v:
            continue
        x, w = v[k], _join(path, k)
        if k in ("body", "coordinate"):
            kw[k] = x if isinstance(x, int) else r.string(x, w)
        elif k == "coordinates":
            if not isinstance(x, list):
                raise r.error(w, "expected a list of coordinate names")
            kw[k] = tuple(
                c if isinstance(c, int) else r.string(c, _join(w, j)) for j, c in enumerate(x)
            )
        elif isinstance(x, dict) and ("type" in x or k in _DEFAULT_TYPES):
            kw[k] = _dec_element(r, x, w, default=_DEFAULT_TYPES.get(k))
        elif k in ("points", "wraps") or (
            isinstance(x, list) and x and all(isinstance(y, dict) and "type" in y for y in x)
        ):
            if not isinstance(x, list):
                raise r.error(w, f"expected a list of {k}")
            d = _DEFAULT_TYPES.get(k)
            kw[k] = tuple(_dec_element(r, y, _join(w, j), default=d) for j, y in enumerate(x))
        elif isinstance(x, float | list) or (isinstance(x, str) and x in ("inf", "-inf")):
            kw[k] = r.array(x, w, finite=False)
        elif isinstance(x, int) and not isinstance(x, bool) and k in ("start", "end", "segment"):
            kw[k] = x
        elif isinstance(x, int) and not isinstance(x, bool):
            kw[k] = r.array(x, w)
        else:
            kw[k] = r.generic(x, w)
    params = inspect.signature(cls.__init__).parameters
    try:
        if set(fields) <= set(params):
            return cls(**kw)
        return cls(*[kw[f] for f in fields if f in kw])
    except (TypeError, ValueError, KeyError) as e:
        raise r.error(path, f"{name}: {e}") from None


# -- the model ------------------------------------------------------------------------------------
_TOP = (
    "format",
    "version",
    "name",
    "gravity",
    "coordinates",
    "bodies",
    "joint_map",
    "points",
    "forces",
    "muscles",
    "description",
)
_BODY = ("name", "parent", "joint", "V_theta", "V_d", "d", "theta", "mass", "com", "inertia")


def model_from_dict(data, *, source: str = "<model>", lines: dict | None = None) -> Model:
    """Build a :class:`Model` from the file format's dictionary (see :func:`load_model`)."""
    r = _Reader(source, lines or {})
    r.obj(data, "", _TOP, ("format", "version", "bodies"))
    if data["format"] != FORMAT:
        raise r.error(
            "format", f"not a jaxmb model file (format {data['format']!r}, expected {FORMAT!r})"
        )
    version = r.integer(data["version"], "version")
    if version > VERSION:
        raise r.error(
            "version",
            f"version {version} was written by a newer jaxmb; this one "
            f"reads versions up to {VERSION}",
        )
    if version < 1:
        raise r.error("version", f"invalid version {version}")
    name = r.string(data.get("name", "model"), "name")
    gravity = r.array(data.get("gravity", [0.0, 0.0, -9.81]), "gravity", ((3,),))
    if not isinstance(data["bodies"], list) or not data["bodies"]:
        raise r.error("bodies", "expected a non-empty list of bodies")
    bodies, inertias = [], []
    for i, b in enumerate(data["bodies"]):
        p = f"bodies[{i}]"
        r.obj(b, p, _BODY, ("name", "V_theta", "mass"))
        joint = r.string(b.get("joint", "revolute"), _join(p, "joint"))
        if joint not in ("revolute", "prismatic"):
            raise r.error(
                _join(p, "joint"), f"joint type {joint!r} is not 'revolute' or 'prismatic'"
            )
        unused = "theta" if joint == "revolute" else "d"
        if unused in b and r.number(b[unused], _join(p, unused)) != 0.0:
            raise r.error(
                _join(p, unused),
                f"a {joint} joint has no constant {unused} (its "
                f"joint variable is {unused}); leave it out",
            )
        parent = b.get("parent", "ground")
        if parent is not None and not isinstance(parent, int):
            parent = r.string(parent, _join(p, "parent"))
        if joint == "prismatic" and "V_d" not in b:
            raise r.error(p, "a prismatic joint needs V_d (the sliding axis)")
        vd = r.array(b.get("V_d", [1.0, 0.0, 0.0]), _join(p, "V_d"), ((3,),))
        inertia = r.array(b.get("inertia", [0.0, 0.0, 0.0]), _join(p, "inertia"), ((3,), (3, 3)))
        inertias.append(_inertia(r, inertia, r.number(b["mass"], _join(p, "mass")), p))
        try:
            bodies.append(
                Body(
                    name=r.string(b["name"], _join(p, "name")),
                    parent=parent,
                    joint=joint,
                    axis=r.array(b["V_theta"], _join(p, "V_theta"), ((3,),)),
                    offset_axis=vd,
                    offset=r.number(b.get("d", 0.0), _join(p, "d")) if joint == "revolute" else 0.0,
                    angle=r.number(b.get("theta", 0.0), _join(p, "theta")),
                    mass=r.number(b["mass"], _join(p, "mass")),
                    com=r.array(b.get("com", [0.0, 0.0, 0.0]), _join(p, "com"), ((3,),)),
                    inertia=np.zeros((3, 3)),  # checked above, set below
                )
            )
        except ModelFileError:
            raise
        except ModelError as e:
            raise r.error(p, str(e)) from None
    nb = len(bodies)
    coords = data.get("coordinates")
    jm_spec = data.get("joint_map", {"kind": "identity"})
    if coords is None:
        coords = [f"q{k}" for k in range(nb)] if jm_spec.get("kind") == "identity" else None
        if coords is None:
            raise r.error("coordinates", "missing: name the generalized coordinates")
    coords = r.strings(coords, "coordinates")
    jm = _dec_joint_map(r, jm_spec, "joint_map", coords, nb)
    if jm.nq != len(coords):
        raise r.error(
            "coordinates", f"{len(coords)} coordinate names for a joint map of {jm.nq} coordinates"
        )
    points = {}
    for k, pv in r.obj(data.get("points", {}), "points").items():
        pp = _join("points", k)
        r.obj(pv, pp, ("body", "position"), ("body", "position"))
        pb = pv["body"] if isinstance(pv["body"], int) else r.string(pv["body"], _join(pp, "body"))
        points[k] = (pb, r.array(pv["position"], _join(pp, "position"), ((3,),)))
    fs = data.get("forces", [])
    if not isinstance(fs, list):
        raise r.error("forces", "expected a list of force elements")
    forces = [_dec_force(r, f, f"forces[{k}]") for k, f in enumerate(fs)]
    try:
        model = build_model(
            bodies,
            jm,
            gravity=gravity,
            coordinate_names=coords,
            forces=forces,
            points=points,
            name=name,
        )
    except ModelError as e:
        msg = str(e)
        m = re.search(r"\(index (\d+)\)", msg)
        where = f"bodies[{m.group(1)}]" if m else ("joint_map" if "joint map" in msg else "")
        if msg.startswith("point "):
            where = _join("points", msg.split("'")[1])
        raise r.error(where, msg) from None
    model = eqx.tree_at(lambda m: m.inertia, model, jnp.asarray(np.stack(inertias)))
    for k, f in enumerate(forces):
        for attr in ("body", "body_a", "body_b", "joint"):
            if isinstance(getattr(f, attr, None), str | int):
                try:
                    model.body_index(getattr(f, attr))
                except ModelError as e:
                    raise r.error(_join(f"forces[{k}]", attr), str(e)) from None
        if hasattr(f, "index"):
            try:
                model.coordinate_index(f.index)
            except ModelError as e:
                raise r.error(_join(f"forces[{k}]", "index"), str(e)) from None
    ms = data.get("muscles")
    if ms is not None:
        from ..muscles import paths as mu
        from ..muscles import with_muscles

        if not isinstance(ms, list):
            raise r.error("muscles", "expected a list of muscles")
        muscles = [
            _dec_element(r, m, f"muscles[{k}]", mu.Muscle, "Muscle") for k, m in enumerate(ms)
        ]
        for k, m in enumerate(muscles):
            try:
                with_muscles(model, [m])
            except ModelError as e:
                raise r.error(f"muscles[{k}]", str(e)) from None
        try:
            model = with_muscles(model, muscles)
        except ModelError as e:
            raise r.error("muscles", str(e)) from None
        model = _keep_subclasses(model, muscles)
    return model


def _keep_subclasses(model: Model, written) -> Model:
    """with_muscles rebuilds the elements it knows by their base class; an element of a subclass
    (written field by field, bodies already resolved) is put back as it was written."""
    out = []
    for mus, w in zip(model.muscles.muscles, written, strict=True):
        pts = tuple(
            b if type(a) is not type(b) else a for a, b in zip(mus.points, w.points, strict=True)
        )
        wraps = []
        same_order = len(mus.wraps) == len(w.wraps)  # with_muscles keeps the written order
        for a, b in zip(mus.wraps, w.wraps if same_order else [None] * len(mus.wraps), strict=True):
            if b is not None and type(b.wrap) is not type(a.wrap):
                a = eqx.tree_at(lambda x: x.wrap, a, b.wrap)
            wraps.append(a)
        if pts != mus.points or any(x is not y for x, y in zip(wraps, mus.wraps, strict=True)):
            mus = eqx.tree_at(lambda x: (x.points, x.wraps), mus, (pts, tuple(wraps)))
        out.append(mus)
    return eqx.tree_at(lambda m: m.muscles.muscles, model, tuple(out))


def _inertia(r: _Reader, inertia: np.ndarray, mass: float, p: str) -> np.ndarray:
    """Symmetric, positive definite for a body with mass (all zeros: a point mass or massless).

    Unlike :func:`jaxmb.build_model`, the triangle inequality of the principal moments is not
    enforced: measured models (MoBL-ARMS's clavicle and scapula) violate it and OpenSim takes them
    as written, so a saved model must load as it was."""
    I = np.diag(inertia) if inertia.shape == (3,) else inertia
    w = _join(p, "inertia")
    if np.abs(I - I.T).max() > 1e-12 * max(np.abs(I).max(), 1e-300):
        raise r.error(w, f"inertia tensor is not symmetric: {I.tolist()}")
    if np.any(I):
        ev = np.linalg.eigvalsh(I)
        if mass > 0 and ev.min() <= 0:
            raise r.error(w, f"inertia tensor is not positive definite (eigenvalues {ev.tolist()})")
        if ev.min() < 0:
            raise r.error(w, f"inertia tensor has a negative eigenvalue ({ev.min():.3g})")
    return I


def loads_model(text: str, source: str = "<string>") -> Model:
    """Build a model from the text of a model file (see :func:`load_model`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelFileError(
            f"{source}: line {e.lineno} column {e.colno}: invalid JSON: {e.msg}", "", e.lineno
        ) from None
    return model_from_dict(data, source=source, lines=_line_table(text))


def load_model(path) -> Model:
    """Read a jaxmb model file (JSON, ``"format": "jaxmb-model"``, version ≤ 1).

    Raises:
        ModelFileError: for an unreadable file, invalid JSON, or any invalid element; the message
            names the element's JSON path (``bodies[3].inertia``) and its line in the file.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ModelFileError(f"{path}: cannot read the model file: {e}") from None
    return loads_model(text, str(path))


def _same_leaves(a, b) -> bool:
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    return ta == tb and all(
        np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(x, y, equal_nan=True)
        for x, y in zip(la, lb, strict=True)
    )
