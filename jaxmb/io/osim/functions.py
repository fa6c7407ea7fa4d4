"""OpenSim's XML function elements to the JAX-traceable functions of :mod:`jaxmb.math.functions`.

:func:`parse_function` reads ``<SimmSpline>``, ``<LinearFunction>``, ... (or a wrapper holding one)
into the class of the same name and raises :class:`~jaxmb.math.UnsupportedFunctionError` naming the
element for any other type. The function classes are re-exported here because this module is also
the 0.1 module path ``jaxmb.io.functions`` (see ``jaxmb.MOVED_MODULES``), whose users read both.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from ...math.functions import (
    FUNCTION_TYPES,
    AbstractFunction,
    Constant,
    LinearCombination,
    LinearFunction,
    MultiplierFunction,
    MultivariatePolynomialFunction,
    NaturalCubicSpline,
    PiecewiseLinearFunction,
    PolynomialFunction,
    SimmSpline,
    UnsupportedFunctionError,
    natural_cubic_spline,
)

__all__ = [
    "parse_function",
    "FUNCTION_TYPES",
    "AbstractFunction",
    "Constant",
    "LinearCombination",
    "LinearFunction",
    "MultiplierFunction",
    "NaturalCubicSpline",
    "PiecewiseLinearFunction",
    "PolynomialFunction",
    "SimmSpline",
    "UnsupportedFunctionError",
    "natural_cubic_spline",
]


def _floats(text: str | None, what: str) -> np.ndarray:
    try:
        return np.array([float(v) for v in (text or "").split()], dtype=float)
    except ValueError:
        raise UnsupportedFunctionError(f"{what}: cannot read numbers from {text!r}") from None


def _child_text(el: ET.Element, tag: str) -> str | None:
    c = el.find(tag)
    return None if c is None else c.text


def parse_function(el: ET.Element, where: str = "", dimension: int = 1):
    """Build a function from an OpenSim XML element such as ``<SimmSpline>…</SimmSpline>``.

    ``el`` may also be a wrapper holding exactly one function element (3.0's ``<function>``,
    ``<coupled_coordinates_function>``). ``where`` names the owner in error messages.
    ``dimension``: the number of arguments (a CoordinateCouplerConstraint's independent
    coordinates); above 1 only a ``MultivariatePolynomialFunction`` of that dimension is read
    (a :class:`~jaxmb.math.MultivariatePolynomialFunction`, called with a vector).

    Raises:
        UnsupportedFunctionError: for any type not in :data:`FUNCTION_TYPES` (GCVSpline, Sine,
            StepFunction, ...), naming the type and ``where``.
    """
    if el.tag == "MultivariatePolynomialFunction":
        label = f"{where}: {el.tag}"
        dim = int(_floats(_child_text(el, "dimension") or "2", label)[0])
        order = int(_floats(_child_text(el, "order") or "1", label)[0])
        if dim != dimension:
            raise UnsupportedFunctionError(
                f"{label}: dimension {dim}, but it is a function of {dimension} coordinates"
            )
        return MultivariatePolynomialFunction(
            _floats(_child_text(el, "coefficients"), label), dim, order
        )
    if dimension != 1 and el.tag in FUNCTION_TYPES:
        raise UnsupportedFunctionError(
            f"{where}: {el.tag} is a function of one coordinate, given {dimension} (OpenSim reads"
            " MultivariatePolynomialFunction for several)"
        )
    if el.tag not in FUNCTION_TYPES:
        children = [c for c in el if isinstance(c.tag, str)]
        if len(children) == 1 and el.tag in (
            "function",
            "coupled_coordinates_function",
            "x_location",
            "y_location",
            "z_location",
        ):
            return parse_function(children[0], where, dimension)
        if el.tag in ("function",) and not children:
            raise UnsupportedFunctionError(f"{where}: empty <function> element")
        raise UnsupportedFunctionError(
            f"{where}: unsupported OpenSim function type {el.tag!r}"
            f" (supported: {', '.join(FUNCTION_TYPES)})"
        )
    name = el.get("name")
    label = f"{where}: {el.tag}" + (f" {name!r}" if name else "")
    if el.tag == "Constant":
        v = _floats(_child_text(el, "value"), label)
        if v.shape != (1,):
            raise UnsupportedFunctionError(f"{label}: <value> must be one number")
        return Constant(v[0])
    if el.tag == "LinearFunction":
        c = _floats(_child_text(el, "coefficients"), label)
        if c.shape != (2,):
            raise UnsupportedFunctionError(
                f"{label}: <coefficients> must be 'slope intercept', got {c.tolist()}"
            )
        return LinearFunction(c[0], c[1])
    if el.tag == "PolynomialFunction":
        c = _floats(_child_text(el, "coefficients"), label)
        if c.size == 0:
            raise UnsupportedFunctionError(f"{label}: no <coefficients>")
        return PolynomialFunction(c)
    if el.tag == "MultiplierFunction":
        inner = el.find("function")
        if inner is None:
            raise UnsupportedFunctionError(f"{label}: missing <function>")
        scale = _floats(_child_text(el, "scale") or "1", label)
        return MultiplierFunction(parse_function(inner, label), scale[0])
    x = _floats(_child_text(el, "x"), label)
    y = _floats(_child_text(el, "y"), label)
    cls = {
        "SimmSpline": SimmSpline,
        "NaturalCubicSpline": NaturalCubicSpline,
        "PiecewiseLinearFunction": PiecewiseLinearFunction,
    }[el.tag]
    try:
        return cls(x, y)
    except UnsupportedFunctionError as e:
        raise UnsupportedFunctionError(f"{label}: {e}") from None
