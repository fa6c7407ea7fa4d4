"""A safe, restricted expression language for joint maps and loop constraints in model files.

A model file may define joint variables f(q) and loop-closure constraints g(f, q) = 0 as text such
as ``"l1*sin(f[0]) + lcm2*sin(f[0] + f[1]) - y_cm2"``. The text is parsed with :mod:`ast` and only
a whitelist of node kinds is accepted; it is then compiled into a tree of small closures over
``jax.numpy`` operations, so the result is JAX-traceable (jit, vmap, grad, jacfwd). Nothing is ever
passed to ``eval``/``exec``: an attribute access, an import, a lambda, a comparison, a keyword
argument or an unknown name is rejected with an :class:`ExpressionError` naming the offending token
and its column.

Grammar (Python syntax, restricted)::

    expr   := number | name | name[int] | expr (+ - * / **) expr | (+|-) expr | func(expr, ...)
    name   := a coordinate name | a parameter name | q | f | pi

* coordinate names stand for the entries of q (rad or m); ``q[k]`` is the k-th coordinate;
* ``f[k]`` is the k-th joint variable (constraint expressions only);
* parameter names are the keys of the map's ``params`` (traced, differentiable leaves); a vector
  parameter is indexed as ``c[k]`` or passed whole to ``polyval``/``spline``;
* functions: sin cos tan asin acos atan atan2 sinh cosh tanh exp log log10 sqrt abs hypot,
  ``polyval(c, x)`` (coefficients from the highest power down, like :func:`numpy.polyval`) and
  ``spline(knots, values, x)`` (natural cubic spline, end pieces extended;
  :func:`jaxmb.math.functions.natural_cubic_spline`).

:class:`Expressions` is a frozen, hashable callable (so it can sit in an
``eqx.field(static=True)`` slot such as :attr:`jaxmb.coupling.ExplicitMap.fn` or
:attr:`jaxmb.coupling.ImplicitMap.constraints`) and keeps its source text, which is what
:func:`jaxmb.io.model_file.save_model` writes back.

:func:`registered_function` resolves the dotted name of a library function that a model file
refers to (a built-in model's loop constraints, say): only public functions of ``jaxmb`` modules
(listed in the module's ``__all__``) and functions registered with :func:`serialisable` (private
helpers) can be named; nothing outside the ``jaxmb`` package can.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
from collections.abc import Callable

import jax.numpy as jnp

from .functions import natural_cubic_spline

__all__ = [
    "Expressions",
    "ExpressionError",
    "FUNCTIONS",
    "compile_expression",
    "serialisable",
    "registered_function",
    "function_name",
]

MAX_SOURCE = 20_000
MAX_DEPTH = 200


class ExpressionError(ValueError):
    """Text that is not a valid expression of the restricted language (the message says where)."""


def _polyval(c, x):
    c = jnp.atleast_1d(c)
    y = c[0] + 0.0 * x
    for k in range(1, c.shape[0]):
        y = y * x + c[k]
    return y


def _spline(knots, values, x):

    return natural_cubic_spline(jnp.asarray(knots), jnp.asarray(values), x)[0]


#: name -> (callable, number of arguments)
FUNCTIONS: dict[str, tuple[Callable, int]] = {
    "sin": (jnp.sin, 1),
    "cos": (jnp.cos, 1),
    "tan": (jnp.tan, 1),
    "asin": (jnp.arcsin, 1),
    "acos": (jnp.arccos, 1),
    "atan": (jnp.arctan, 1),
    "atan2": (jnp.arctan2, 2),
    "sinh": (jnp.sinh, 1),
    "cosh": (jnp.cosh, 1),
    "tanh": (jnp.tanh, 1),
    "exp": (jnp.exp, 1),
    "log": (jnp.log, 1),
    "log10": (jnp.log10, 1),
    "sqrt": (jnp.sqrt, 1),
    "abs": (jnp.abs, 1),
    "hypot": (jnp.hypot, 2),
    "polyval": (_polyval, 2),
    "spline": (_spline, 3),
}
_CONSTANTS = {"pi": 3.141592653589793}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}


def _float_base(x):
    return float(x) if type(x) is int else x


def _err(source: str, node, msg: str) -> ExpressionError:
    col = getattr(node, "col_offset", None)
    where = f" at column {col + 1}" if col is not None else ""
    return ExpressionError(f"{msg}{where} in expression {source!r}")


def _int_index(source, node) -> int:
    sl = node.slice
    neg = False
    if isinstance(sl, ast.UnaryOp) and isinstance(sl.op, ast.USub):
        neg, sl = True, sl.operand
    if not (isinstance(sl, ast.Constant) and type(sl.value) is int):
        raise _err(source, node, "an index must be an integer literal")
    return -sl.value if neg else sl.value


@functools.lru_cache(maxsize=4096)
def compile_expression(
    source: str, coordinates: tuple[str, ...], parameters: tuple[str, ...], joints: bool
) -> Callable:
    """Compile ``source`` into ``fn(q, f, params) -> scalar`` (raises :class:`ExpressionError`).

    Args:
        source: the expression text.
        coordinates: names bound to ``q[0], q[1], ...``.
        parameters: names looked up in ``params`` at call time.
        joints: whether ``f[k]`` (joint variables) may be used.
    """
    if not isinstance(source, str):
        raise ExpressionError(f"an expression must be a string, got {type(source).__name__}")
    if len(source) > MAX_SOURCE:
        raise ExpressionError(f"expression longer than {MAX_SOURCE} characters")
    clash = set(coordinates) & set(parameters)
    if clash:
        raise ExpressionError(f"names {sorted(clash)} are both coordinates and parameters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"syntax error at column {e.offset}: {source!r}") from None
    known = ", ".join(list(coordinates) + list(parameters) + ["q"] + (["f"] if joints else []))

    def build(node, depth):
        if depth > MAX_DEPTH:
            raise _err(source, node, "expression nested too deeply")
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise _err(source, node, f"constant {node.value!r} is not a number")
            v = node.value  # an int stays an int: x**2 is an exact integer power
            return lambda q, f, p: v
        if isinstance(node, ast.Name):
            n = node.id
            if n in coordinates:
                k = coordinates.index(n)
                return lambda q, f, p: q[k]
            if n in parameters:
                return lambda q, f, p: p[n]
            if n in _CONSTANTS:
                v = _CONSTANTS[n]
                return lambda q, f, p: v
            raise _err(source, node, f"unknown name {n!r} (known: {known}, pi)")
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise _err(source, node, f"operator {type(node.op).__name__} is not allowed")
            a, b = build(node.left, depth + 1), build(node.right, depth + 1)
            if isinstance(node.op, ast.Pow):  # a float base: no unbounded integer arithmetic
                return lambda q, f, p: op(_float_base(a(q, f, p)), b(q, f, p))
            return lambda q, f, p: op(a(q, f, p), b(q, f, p))
        if isinstance(node, ast.UnaryOp):
            a = build(node.operand, depth + 1)
            if isinstance(node.op, ast.USub):
                return lambda q, f, p: -a(q, f, p)
            if isinstance(node.op, ast.UAdd):
                return a
            raise _err(source, node, f"unary {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.Subscript):
            if not isinstance(node.value, ast.Name):
                raise _err(source, node, "only q[k], f[k] or parameter[k] may be indexed")
            n, k = node.value.id, _int_index(source, node)
            if n == "q" and "q" not in parameters and "q" not in coordinates:
                if not -len(coordinates) <= k < len(coordinates):
                    raise _err(source, node, f"q[{k}] out of range for {len(coordinates)} coords")
                return lambda q, f, p: q[k]
            if n == "f" and joints and "f" not in parameters and "f" not in coordinates:
                return lambda q, f, p: f[k]
            if n in parameters:
                return lambda q, f, p: p[n][k]
            raise _err(source, node, f"{n!r} cannot be indexed (known: {known})")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                name = getattr(node.func, "id", ast.unparse(node.func))
                raise _err(
                    source, node, f"unknown function {name!r} (allowed: {', '.join(FUNCTIONS)})"
                )
            if node.keywords:
                raise _err(source, node, "keyword arguments are not allowed")
            fn, nargs = FUNCTIONS[node.func.id]
            if len(node.args) != nargs or any(isinstance(a, ast.Starred) for a in node.args):
                raise _err(
                    source, node, f"{node.func.id}() takes {nargs} argument(s), "
                    f"got {len(node.args)}"
                )  # fmt: skip
            args = [build(a, depth + 1) for a in node.args]
            return lambda q, f, p: fn(*(a(q, f, p) for a in args))
        raise _err(source, node, f"{type(node).__name__} is not allowed in an expression")

    return build(tree.body, 0)


@dataclasses.dataclass(frozen=True)
class Expressions:
    """A vector of restricted expressions as a hashable callable (see the module docstring).

    ``signature`` picks the call form: ``"q"`` → ``fn(q, params) -> (n,)`` (an explicit joint map,
    an ImplicitMap's ``independent`` or ``initial_guess``); ``"fq"`` → ``fn(f, q, params) -> (n,)``
    (an ImplicitMap's ``constraints``, where ``f[k]`` is joint variable k).

    Attributes:
        sources: one expression per output.
        coordinates: names bound to the entries of q.
        parameters: names of the entries of ``params`` the expressions may use.
        signature: ``"q"`` or ``"fq"``.
    """

    sources: tuple[str, ...]
    coordinates: tuple[str, ...]
    parameters: tuple[str, ...] = ()
    signature: str = "q"

    def __post_init__(self):
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "coordinates", tuple(self.coordinates))
        object.__setattr__(self, "parameters", tuple(sorted(self.parameters)))
        if self.signature not in ("q", "fq"):
            raise ExpressionError(f"signature must be 'q' or 'fq', got {self.signature!r}")
        if not self.sources:
            raise ExpressionError("an expression vector needs at least one expression")
        self._compiled()  # validate now: errors at load time, not at the first call

    def _compiled(self):
        return tuple(
            compile_expression(s, self.coordinates, self.parameters, self.signature == "fq")
            for s in self.sources
        )

    def _evaluate(self, q, f, params):
        q = jnp.asarray(q)
        params = {} if params is None else params
        outs = [jnp.asarray(c(q, f, params), dtype=q.dtype) for c in self._compiled()]
        for s, o in zip(self.sources, outs, strict=True):
            if o.shape != ():
                raise ExpressionError(f"expression {s!r} has shape {o.shape}, not a scalar")
        return jnp.stack(outs)

    def __call__(self, *args):
        if self.signature == "fq":
            f, q, params = args
            return self._evaluate(q, f, params)
        q, params = args
        return self._evaluate(q, None, params)


# ------------------------------------------------------------------------ named library functions
_REGISTRY: dict[str, Callable] = {}


def function_name(fn: Callable) -> str:
    """The dotted name under which :func:`serialisable` registers ``fn``."""
    return f"{fn.__module__}.{fn.__qualname__}"


def serialisable(fn: Callable) -> Callable:
    """Register a module-level library function so model files may name it; returns ``fn``."""
    name = function_name(fn)
    if not name.startswith("jaxmb.") or "<" in name:
        raise ValueError(f"only module-level jaxmb functions can be registered, not {name}")
    _REGISTRY[name] = fn
    return fn


def registered_function(name: str) -> Callable:
    """The library function registered as ``name`` (imports its jaxmb module first)."""
    if not isinstance(name, str) or not name.startswith("jaxmb.") or "<" in name:
        raise ExpressionError(f"{name!r} is not the dotted name of a jaxmb library function")
    if name not in _REGISTRY:
        module = name.rsplit(".", 1)[0]
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    if name in _REGISTRY:
        return _REGISTRY[name]
    module, _, qual = name.rpartition(".")
    mod = importlib.sys.modules.get(module)
    fn = getattr(mod, qual, None)
    if inspect.isfunction(fn) and qual in getattr(mod, "__all__", ()) and function_name(fn) == name:
        return fn  # a public function of a jaxmb module
    raise ExpressionError(
        f"{name!r} is neither a public function of a jaxmb module (listed in its __all__) nor "
        "registered with jaxmb.expressions.serialisable; only those can be named in a model file"
    )
