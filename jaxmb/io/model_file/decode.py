"""Reading a model file: the format's dictionary (or JSON text, or file) to a :class:`~jaxmb.Model`.

Every element is validated and named by its JSON path and line; classes are looked up only under
``jaxmb.`` and ``interpax.``, by the module path the file gives, and module paths of the 0.1 layout
(``jaxmb.coupling.LinearMap``, ``jaxmb.io.functions.SimmSpline``) resolve through
``jaxmb.MOVED_MODULES``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ... import forces as fmod
from ... import muscles as mu
from ...joint_maps import AbstractJointMap, ExplicitMap, ImplicitMap, LinearMap, identity_map
from ...model import Body, Model, ModelError, build_model
from ...muscles import with_muscles
from .format import FORMAT, MUSCLE_ELEMENTS, VERSION, ModelFileError, join_path
from .reading import FileReader, line_table

__all__ = ["model_from_dict", "loads_model", "load_model"]


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


def _sugar(r: FileReader, spec, path, coords, params: dict, k: int) -> str:
    """A joint entry of an explicit map: text, or a polynomial / spline object (sugar)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in ("polynomial", "spline"):
        kind = next(iter(spec))
        body = r.obj(spec[kind], join_path(path, kind))
        p = join_path(path, kind)
        if kind == "polynomial":
            r.obj(body, p, ("coordinate", "coefficients"), ("coordinate", "coefficients"))
        else:
            r.obj(body, p, ("coordinate", "knots", "values"), ("coordinate", "knots", "values"))
        c = r.string(body["coordinate"], join_path(p, "coordinate"))
        if c not in coords:
            raise r.error(
                join_path(p, "coordinate"), f"unknown coordinate {c!r}; coordinates {coords}"
            )
        if kind == "polynomial":
            co = r.array(body["coefficients"], join_path(p, "coefficients"))
            if co.ndim != 1 or co.size < 1:
                raise r.error(join_path(p, "coefficients"), "expected a non-empty list of numbers")
            params[f"poly{k}"] = jnp.asarray(co)
            return f"polyval(poly{k}, {c})"
        kn = r.array(body["knots"], join_path(p, "knots"))
        va = r.array(body["values"], join_path(p, "values"))
        if kn.ndim != 1 or kn.shape != va.shape or kn.size < 2:
            raise r.error(
                p,
                f"knots and values must be lists of equal length >= 2, got "
                f"{kn.shape} and {va.shape}",
            )
        if np.any(np.diff(kn) <= 0):
            raise r.error(join_path(p, "knots"), "spline knots must be strictly increasing")
        params[f"knots{k}"], params[f"values{k}"] = jnp.asarray(kn), jnp.asarray(va)
        return f"spline(knots{k}, values{k}, {c})"
    raise r.error(
        path, "a joint entry is an expression string, {'polynomial': ...} or {'spline': ...}"
    )


def _callable(r: FileReader, v, path, coords, params, signature, allow_none=True):
    if v is None and allow_none:
        return None
    if isinstance(v, dict) and "function" in v:
        r.obj(v, path, ("function",))
        return r.function(v["function"], join_path(path, "function"))
    cs = coords
    if isinstance(v, dict) and "expressions" in v:
        r.obj(v, path, ("expressions", "coordinates"))
        cs = r.strings(v.get("coordinates", coords), join_path(path, "coordinates"))
        path, v = join_path(path, "expressions"), v["expressions"]
    sources = r.strings(v, path)
    if not sources:
        raise r.error(path, "needs at least one expression")
    return r.make_expressions(sources, cs, _param_names(params), signature, path)


_PROBES = (0.0, 0.1, -0.1, 0.5, -0.5, 1.0, -1.0, 2.0)


def _probe_expressions(r: FileReader, jm: ExplicitMap, sources, path) -> None:
    """Refuse an expression that is not finite at any of a few probe poses (``log(-1.0) + q``):
    such a map loads but gives an all-NaN model."""
    qs = jnp.asarray(np.outer(_PROBES, np.ones(jm.nq)))
    try:
        f = np.asarray(jax.vmap(jm)(qs))
    except Exception:  # an evaluation error is reported where the map is used
        return
    dead = np.flatnonzero(~np.any(np.isfinite(f), axis=0))
    if dead.size:
        k = int(dead[0])
        raise r.error(
            join_path(path, k),
            f"expression {sources[k]!r} is not finite (NaN or inf) at any probed q (every"
            f" coordinate at {', '.join(f'{x:g}' for x in _PROBES)}): e.g. a log or sqrt of a"
            " negative number",
        )


def _dec_joint_map(r: FileReader, v, path, coords, nb) -> AbstractJointMap:
    r.obj(v, path)
    if "__module__" in v and "kind" not in v:
        v = {"kind": "module", **v}
    kind = r.string(v.get("kind"), join_path(path, "kind")) if "kind" in v else None
    if kind not in _MAP_KEYS:
        raise r.error(
            join_path(path, "kind"),
            f"unknown joint map kind {kind!r} (one of {', '.join(_MAP_KEYS)})",
        )
    r.obj(v, path, _MAP_KEYS[kind])
    nq = len(coords)
    if kind == "identity":
        return identity_map(nb)
    if kind == "linear":
        r.obj(v, path, required=("A",))
        A = r.array(v["A"], join_path(path, "A"))
        if A.ndim != 2:
            raise r.error(
                join_path(path, "A"), f"A must be a matrix (nj rows, nq columns), got {A.shape}"
            )
        b = None if v.get("b") is None else r.array(v["b"], join_path(path, "b"), ((A.shape[0],),))
        return LinearMap(A, b)
    if kind == "module":
        jm = r.module(v, path)
        if not isinstance(jm, AbstractJointMap):
            raise r.error(join_path(path, "__module__"), "not a joint map class")
        return jm
    params = r.params(v.get("parameters"), join_path(path, "parameters"))
    if kind == "explicit":
        if "function" in v:
            r.obj(v, path, required=("nq", "nj"))
            fn = r.function(v["function"], join_path(path, "function"))
            return ExplicitMap(
                fn,
                r.integer(v["nq"], join_path(path, "nq")),
                r.integer(v["nj"], join_path(path, "nj")),
                params,
            )
        r.obj(v, path, required=("expressions",))
        ep = join_path(path, "expressions")
        if not isinstance(v["expressions"], list) or not v["expressions"]:
            raise r.error(ep, "expected a list with one entry per joint")
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise r.error(join_path(path, "parameters"), "expected an object {name: value}")
        cs = r.strings(v.get("coordinates", coords), join_path(path, "coordinates"))
        sources = [
            _sugar(r, s, join_path(ep, k), cs, params, k) for k, s in enumerate(v["expressions"])
        ]
        fn = r.make_expressions(sources, cs, _param_names(params), "q", ep)
        jm = ExplicitMap(fn, len(cs), len(sources), params)
        _probe_expressions(r, jm, sources, ep)
        return jm
    # implicit
    r.obj(v, path, required=("constraints", "dependent", "reference"))
    dep = v["dependent"]
    if not isinstance(dep, list):
        raise r.error(join_path(path, "dependent"), "expected a list of joint indices")
    dep = [r.integer(x, join_path(path, f"dependent[{k}]")) for k, x in enumerate(dep)]
    nj = r.integer(v.get("nj", nb), join_path(path, "nj"))
    ws = v.get("warm_start")
    kw = {
        "independent": _callable(
            r, v.get("independent"), join_path(path, "independent"), coords, params, "q"
        ),
        "initial_guess": _callable(
            r, v.get("initial_guess"), join_path(path, "initial_guess"), coords, params, "q"
        ),
        "warm_start": None
        if ws is None
        else _dec_joint_map(r, ws, join_path(path, "warm_start"), coords, nb),
    }
    for key, conv in (("iterations", r.integer), ("tol", r.number), ("rcond", r.number)):
        if key in v:
            kw[key] = conv(v[key], join_path(path, key))
    if "check" in v:
        if not isinstance(v["check"], bool):
            raise r.error(join_path(path, "check"), "expected true or false")
        kw["check"] = v["check"]
    cons = _callable(
        r, v["constraints"], join_path(path, "constraints"), coords, params, "fq", False
    )
    reference = r.array(v["reference"], join_path(path, "reference"), ((len(dep),),))
    try:
        return ImplicitMap(cons, nq, nj, dep, jnp.asarray(reference), params, **kw)
    except (ValueError, TypeError) as e:
        raise r.error(path, str(e)) from None


# -- forces and muscles ---------------------------------------------------------------------------
def _dec_force(r: FileReader, v, path):
    r.obj(v, path)
    if "__module__" in v:
        return r.module(v, path)
    r.obj(v, path, required=("type",))
    name = r.string(v["type"], join_path(path, "type"))
    cls = getattr(fmod, name, None)
    if not (isinstance(cls, type) and issubclass(cls, fmod.AbstractForce)) or name.startswith("_"):
        known = [
            n
            for n in dir(fmod)
            if isinstance(getattr(fmod, n), type)
            and issubclass(getattr(fmod, n), fmod.AbstractForce)
            and getattr(fmod, n) is not fmod.AbstractForce
        ]
        raise r.error(join_path(path, "type"), f"unknown force type {name!r} (one of {known})")
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
                r.array(x, join_path(path, k), finite=False)
                if isinstance(x, float | list)
                else r.generic(x, join_path(path, k))
            )
            if isinstance(kwargs[k], np.ndarray) and not np.all(np.isfinite(kwargs[k])):
                raise r.error(join_path(path, k), "non-finite value")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise r.error(path, f"{name}: {e}") from None


_DEFAULT_TYPES = {"points": "PathPoint", "wraps": "PathWrap", "params": "MuscleParameters"}


def _dec_element(r: FileReader, v, path, expect=None, default=None):
    """A muscle element written by the encoder (points, wraps, parameters, muscles)."""
    if isinstance(v, dict) and "__module__" in v:
        return r.module(v, path)
    r.obj(v, path, required=() if default else ("type",))
    name = r.string(v.get("type", default), join_path(path, "type"))
    cls = getattr(mu, name, None) if name in MUSCLE_ELEMENTS else None
    if not (isinstance(cls, type) and issubclass(cls, eqx.Module)) or (
        expect is not None and not issubclass(cls, expect)
    ):
        kinds = [
            n
            for n in MUSCLE_ELEMENTS
            if isinstance(getattr(mu, n), type)
            and (expect is None or issubclass(getattr(mu, n), expect))
        ]
        raise r.error(join_path(path, "type"), f"unknown type {name!r} here (one of {kinds})")
    fields = [f.name for f in dataclasses.fields(cls)]
    r.obj(v, path, ["type"] + fields)
    kw = {}
    for k in fields:
        if k not in v:
            continue
        x, w = v[k], join_path(path, k)
        if k in ("body", "coordinate"):
            kw[k] = x if isinstance(x, int) else r.string(x, w)
        elif k == "coordinates":
            if not isinstance(x, list):
                raise r.error(w, "expected a list of coordinate names")
            kw[k] = tuple(
                c if isinstance(c, int) else r.string(c, join_path(w, j)) for j, c in enumerate(x)
            )
        elif isinstance(x, dict) and ("type" in x or k in _DEFAULT_TYPES):
            kw[k] = _dec_element(r, x, w, default=_DEFAULT_TYPES.get(k))
        elif k in ("points", "wraps") or (
            isinstance(x, list) and x and all(isinstance(y, dict) and "type" in y for y in x)
        ):
            if not isinstance(x, list):
                raise r.error(w, f"expected a list of {k}")
            d = _DEFAULT_TYPES.get(k)
            kw[k] = tuple(_dec_element(r, y, join_path(w, j), default=d) for j, y in enumerate(x))
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
    r = FileReader(source, lines or {})
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
        joint = r.string(b.get("joint", "revolute"), join_path(p, "joint"))
        if joint not in ("revolute", "prismatic"):
            raise r.error(
                join_path(p, "joint"), f"joint type {joint!r} is not 'revolute' or 'prismatic'"
            )
        unused = "theta" if joint == "revolute" else "d"
        if unused in b and r.number(b[unused], join_path(p, unused)) != 0.0:
            raise r.error(
                join_path(p, unused),
                f"a {joint} joint has no constant {unused} (its "
                f"joint variable is {unused}); leave it out",
            )
        parent = b.get("parent", "ground")
        if parent is not None and not isinstance(parent, int):
            parent = r.string(parent, join_path(p, "parent"))
        if joint == "prismatic" and "V_d" not in b:
            raise r.error(p, "a prismatic joint needs V_d (the sliding axis)")
        vd = r.array(b.get("V_d", [1.0, 0.0, 0.0]), join_path(p, "V_d"), ((3,),))
        inertia = r.array(
            b.get("inertia", [0.0, 0.0, 0.0]), join_path(p, "inertia"), ((3,), (3, 3))
        )
        inertias.append(_inertia(r, inertia, r.number(b["mass"], join_path(p, "mass")), p))
        try:
            bodies.append(
                Body(
                    name=r.string(b["name"], join_path(p, "name")),
                    parent=parent,
                    joint=joint,
                    axis=r.array(b["V_theta"], join_path(p, "V_theta"), ((3,),)),
                    offset_axis=vd,
                    offset=r.number(b.get("d", 0.0), join_path(p, "d"))
                    if joint == "revolute"
                    else 0.0,
                    angle=r.number(b.get("theta", 0.0), join_path(p, "theta")),
                    mass=r.number(b["mass"], join_path(p, "mass")),
                    com=r.array(b.get("com", [0.0, 0.0, 0.0]), join_path(p, "com"), ((3,),)),
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
        pp = join_path("points", k)
        r.obj(pv, pp, ("body", "position"), ("body", "position"))
        pb = (
            pv["body"]
            if isinstance(pv["body"], int)
            else r.string(pv["body"], join_path(pp, "body"))
        )
        points[k] = (pb, r.array(pv["position"], join_path(pp, "position"), ((3,),)))
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
            where = join_path("points", msg.split("'")[1])
        raise r.error(where, msg) from None
    model = eqx.tree_at(lambda m: m.inertia, model, jnp.asarray(np.stack(inertias)))
    for k, f in enumerate(forces):
        for attr in ("body", "body_a", "body_b", "joint"):
            if isinstance(getattr(f, attr, None), str | int):
                try:
                    model.body_index(getattr(f, attr))
                except ModelError as e:
                    raise r.error(join_path(f"forces[{k}]", attr), str(e)) from None
        if hasattr(f, "index"):
            try:
                model.coordinate_index(f.index)
            except ModelError as e:
                raise r.error(join_path(f"forces[{k}]", "index"), str(e)) from None
    ms = data.get("muscles")
    if ms is not None:
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


def _inertia(r: FileReader, inertia: np.ndarray, mass: float, p: str) -> np.ndarray:
    """Finite, symmetric, positive semi-definite (all zeros: a point mass or massless).

    Unlike :func:`jaxmb.build_model`, neither a strictly positive principal moment nor the triangle
    inequality is enforced: what OpenSim and :func:`jaxmb.io.load_osim` take must load again once
    saved — measured models (MoBL-ARMS's clavicle and scapula) violate the triangle inequality, and
    leg6dof9musc's patella has mass and two zero principal moments."""
    I = np.diag(inertia) if inertia.shape == (3,) else inertia
    w = join_path(p, "inertia")
    if np.abs(I - I.T).max() > 1e-12 * max(np.abs(I).max(), 1e-300):
        raise r.error(w, f"inertia tensor is not symmetric: {I.tolist()}")
    if np.any(I):
        ev = np.linalg.eigvalsh(I)
        if ev.min() < -1e-12 * max(np.abs(ev).max(), 1e-300):
            raise r.error(
                w, f"inertia tensor has a negative principal moment (eigenvalues {ev.tolist()})"
            )
    return I


def loads_model(text: str, source: str = "<string>") -> Model:
    """Build a model from the text of a model file (see :func:`load_model`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelFileError(
            f"{source}: line {e.lineno} column {e.colno}: invalid JSON: {e.msg}", "", e.lineno
        ) from None
    return model_from_dict(data, source=source, lines=line_table(text))


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
    if text.lstrip().startswith("<"):
        raise ModelFileError(
            f"{path}: an XML file, not a jaxmb model file (JSON); an OpenSim model (.osim) is read"
            " by jaxmb.io.load_osim"
        )
    return loads_model(text, str(path))
