"""Reading a model file's JSON: the line of every element, and typed, validated values.

:class:`FileReader` checks each value against what the format expects (an object with these keys,
a finite number, an array of this shape, a registered function, a jaxmb class) and raises
:class:`ModelFileError` naming its JSON path and line.
"""

from __future__ import annotations

import bisect
import dataclasses
import importlib
import json
import math
import re

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ...math import ExpressionError, Expressions, registered_function
from .format import MODULE_PREFIXES, ModelFileError, join_path

__all__ = ["FileReader", "line_table"]


def line_table(text: str) -> dict[str, int]:
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
                i = value(i, join_path(path, key))
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
                i = value(i, join_path(path, k))
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


class FileReader:
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
                        join_path(path, k), f"unknown key {k!r} (allowed: {', '.join(allowed)})"
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
                return [conv(y, join_path(p, k)) for k, y in enumerate(x)]
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
        return [self.string(x, join_path(path, k)) for k, x in enumerate(v)]

    # -- tagged generic values ------------------------------------------------------------------
    def generic(self, v, path):
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list):
            return [self.generic(x, join_path(path, k)) for k, x in enumerate(v)]
        if not isinstance(v, dict):
            raise self.error(path, f"unsupported value {_kind(v)}")
        if "__float__" in v:
            return self.number(v["__float__"], join_path(path, "__float__"), finite=False)
        for tag in ("__array__", "__ndarray__"):
            if tag in v:
                self.obj(v, path, allowed=(tag, "shape", "dtype"), required=("shape", "dtype"))
                dtype = self.string(v["dtype"], join_path(path, "dtype"))
                if dtype not in ("float64", "float32", "int64", "int32", "bool"):
                    raise self.error(join_path(path, "dtype"), f"unsupported dtype {dtype!r}")
                flat = v[tag]
                if not isinstance(flat, list):
                    raise self.error(join_path(path, tag), "expected a flat list of values")
                try:
                    if dtype.startswith("float"):
                        a = np.asarray([float(x) for x in flat], dtype=dtype)
                    else:
                        a = np.asarray(flat, dtype=dtype)
                    a = a.reshape([self.integer(s, join_path(path, "shape")) for s in v["shape"]])
                except (TypeError, ValueError) as e:
                    raise self.error(path, f"bad array data: {e}") from None
                return jnp.asarray(a) if tag == "__array__" else a
        if "__tuple__" in v:
            items = v["__tuple__"]
            if not isinstance(items, list):
                raise self.error(path, "__tuple__ must be a list")
            return tuple(self.generic(x, join_path(path, k)) for k, x in enumerate(items))
        if "__dict__" in v:
            return {k: self.generic(x, join_path(path, k)) for k, x in v["__dict__"].items()}
        if "__expressions__" in v:
            return self.expressions_tag(v["__expressions__"], join_path(path, "__expressions__"))
        if "__function__" in v:
            return self.function(v["__function__"], join_path(path, "__function__"))
        if "__module__" in v:
            return self.module(v, path)
        if "__scalar__" in v:
            return self.generic(v["__scalar__"], join_path(path, "__scalar__"))
        return {k: self.generic(x, join_path(path, k)) for k, x in v.items()}

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
            return {k: self.params(x, join_path(path, k)) for k, x in v.items()}
        raise self.error(path, f"unsupported parameter value {_kind(v)}")

    def function(self, name, path):
        try:
            return registered_function(self.string(name, path))
        except ExpressionError as e:
            raise self.error(path, str(e)) from None

    def expressions_tag(self, v, path):
        self.obj(v, path, ("sources", "coordinates", "parameters", "signature"), ("sources",))
        return self.make_expressions(
            self.strings(v["sources"], join_path(path, "sources")),
            self.strings(v.get("coordinates", []), join_path(path, "coordinates")),
            self.strings(v.get("parameters", []), join_path(path, "parameters")),
            self.string(v.get("signature", "q"), join_path(path, "signature")),
            path,
        )

    def make_expressions(self, sources, coordinates, parameters, signature, path):
        try:
            return Expressions(tuple(sources), tuple(coordinates), tuple(parameters), signature)
        except ExpressionError as e:
            k = next((k for k, s in enumerate(sources) if s in str(e)), None)
            raise self.error(join_path(path, k) if k is not None else path, str(e)) from None

    def module(self, v, path):
        self.obj(v, path, ("__module__", "fields", "kind"), ("__module__", "fields"))
        name = self.string(v["__module__"], join_path(path, "__module__"))
        mod, _, qual = name.rpartition(".")
        if not mod.startswith(MODULE_PREFIXES) or not qual.isidentifier():
            raise self.error(
                join_path(path, "__module__"), f"{name!r} is not a jaxmb (or interpax) class"
            )
        try:
            cls = getattr(importlib.import_module(mod), qual)
        except (ImportError, AttributeError):
            raise self.error(join_path(path, "__module__"), f"no class {name!r}") from None
        if not (isinstance(cls, type) and issubclass(cls, eqx.Module)):
            raise self.error(join_path(path, "__module__"), f"{name!r} is not an equinox Module")
        fields = self.obj(v["fields"], join_path(path, "fields"))
        declared = {f.name: f for f in dataclasses.fields(cls)}
        names = list(declared)
        for k in fields:
            if k not in names:
                raise self.error(join_path(path, f"fields.{k}"), f"{name} has no field {k!r}")
        # a field added to the class after the file was written keeps its declared default
        missing = [
            k for k in names if k not in fields and declared[k].default is dataclasses.MISSING
        ]
        if missing:
            raise self.error(join_path(path, "fields"), f"{name}: missing fields {missing}")
        # restore the fields as they were written (the constructor may take other arguments)
        obj = object.__new__(cls)
        for k in names:
            value = (
                self.generic(fields[k], join_path(path, f"fields.{k}"))
                if k in fields
                else declared[k].default
            )
            object.__setattr__(obj, k, value)
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
