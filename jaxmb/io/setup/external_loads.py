"""OpenSim ``ExternalLoads`` files: the ExternalForce elements and their data, sampled as OpenSim
samples them, as :class:`jaxmb.analyses.ExternalLoad` arrays.

Each ExternalForce names the body it is applied to (``applied_to_body``), the bodies its force and
point are expressed in, and identifiers: the prefixes of three data columns each
(``Storage::getColumnIndicesForIdentifier``: every label that starts with the identifier). The
``datafile`` is relative to the ExternalLoads file's folder. OpenSim fits each column with a
natural cubic GCV spline (``GCVSpline(3, ...)``, interpolating; piecewise linear for 2–3 samples,
constant for 1) and evaluates it at the state's time; so does :func:`sample_external_loads`.
``lowpass_cutoff_frequency_for_load_kinematics`` and ``external_loads_model_kinematics_file`` are
read and reported: OpenSim 4.x ignores both (with a warning), and so does jaxmb.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np

from ...analyses import GROUND, ExternalLoad, Frame, natural_spline_matrix
from ..motion import MotionFileError, read_storage
from ..osim import OsimImport
from .xml import SetupError, SetupXml

__all__ = ["ExternalForceSpec", "ExternalLoadsSpec", "read_external_loads", "sample_external_loads"]


@dataclasses.dataclass(frozen=True)
class ExternalForceSpec:
    name: str
    applied_to_body: str
    force_expressed_in_body: str
    point_expressed_in_body: str
    force_identifier: str | None
    point_identifier: str | None
    torque_identifier: str | None
    where: str


@dataclasses.dataclass(frozen=True)
class ExternalLoadsSpec:
    path: Path
    name: str
    forces: tuple[ExternalForceSpec, ...]
    datafile: Path
    load_kinematics_cutoff: float | None


def _ident(x: SetupXml, el, tag):
    s = x.text(el, tag)
    return None if s is None or s == "Unassigned" else s


def read_external_loads(path: str | Path) -> ExternalLoadsSpec:
    """An ``ExternalLoads`` file: its enabled ExternalForces and its data file."""
    x = SetupXml(path)
    el = x.tool(("ExternalLoads",))
    forces = []
    objs = el.find("objects")
    for f in list(objs) if objs is not None else []:
        if f.tag != "ExternalForce":
            raise x.error(f, "only ExternalForce elements are supported in ExternalLoads")
        disabled = x.flag(f, "isDisabled", False) or not x.flag(f, "appliesForce", True)
        if disabled:
            continue
        body = x.text(f, "applied_to_body")
        if body is None:
            raise x.error(f, "<applied_to_body> is empty")
        spec = ExternalForceSpec(
            name=f.get("name") or "ExternalForce",
            applied_to_body=body,
            force_expressed_in_body=x.text(f, "force_expressed_in_body", "ground"),
            point_expressed_in_body=x.text(f, "point_expressed_in_body", "ground"),
            force_identifier=_ident(x, f, "force_identifier"),
            point_identifier=_ident(x, f, "point_identifier"),
            torque_identifier=_ident(x, f, "torque_identifier"),
            where=x.where(f),
        )
        if spec.force_identifier is None and spec.torque_identifier is None:
            raise x.error(f, "applies neither a force nor a torque")
        if spec.force_identifier is None and spec.point_identifier is not None:
            raise x.error(f, "a point is specified for no applied force")
        forces.append(spec)
    data = x.file(el, "datafile")
    if data is None:
        raise x.error(el, "<datafile> is empty: the ExternalForces need a data source")
    kin = x.file(el, "external_loads_model_kinematics_file")
    cut = x.number(el, "lowpass_cutoff_frequency_for_load_kinematics", None)
    if kin is not None:
        warnings.warn(
            f"{x.where(el)}: external_loads_model_kinematics_file is ignored (as OpenSim 4.x "
            "ignores it)",
            stacklevel=2,
        )
    return ExternalLoadsSpec(x.path, el.get("name") or x.path.stem, tuple(forces), data, cut)


def _columns(spec: ExternalForceSpec, labels: list[str], ident: str, datafile) -> list[int]:
    found = [i for i, lab in enumerate(labels) if lab.startswith(ident)]
    if len(found) != 3:
        raise SetupError(
            f"{spec.where}: identifier {ident!r} matches {len(found)} columns of {datafile} "
            f"({[labels[i] for i in found]}); it must match exactly 3"
        )
    return found


def _frame(imp: OsimImport, body: str, where: str, what: str) -> Frame:
    if body == "ground":
        return GROUND
    name = body.split("/")[-1]
    if name not in imp.body_frames:
        raise SetupError(f"{where}: {what} {body!r} is not a body of {imp.path}")
    b, T = imp.body_frames[name]
    return Frame(b, T)


def _sampler(t_data: np.ndarray, times: np.ndarray) -> np.ndarray:
    n = t_data.shape[0]
    if n == 1:
        return np.ones((times.shape[0], 1))
    if n <= 3:  # PiecewiseLinearFunction (constant beyond the ends)
        W = np.zeros((times.shape[0], n))
        for j, t in enumerate(times):
            if t <= t_data[0]:
                W[j, 0] = 1.0
            elif t >= t_data[-1]:
                W[j, -1] = 1.0
            else:
                i = int(np.searchsorted(t_data, t, side="right") - 1)
                u = (t - t_data[i]) / (t_data[i + 1] - t_data[i])
                W[j, i], W[j, i + 1] = 1.0 - u, u
        return W
    return natural_spline_matrix(t_data, times, 3, 0)


def sample_external_loads(
    spec: ExternalLoadsSpec, imp: OsimImport, times
) -> tuple[ExternalLoad, ...]:
    """The ExternalForces of ``spec`` on the model of ``imp`` at ``times`` (s)."""
    times = np.asarray(times, dtype=float)
    try:
        st = read_storage(spec.datafile)
    except (MotionFileError, OSError) as e:
        raise SetupError(f"{spec.path}: cannot read its datafile {spec.datafile}: {e}") from None
    labels = list(st.columns)
    data = np.asarray(st.data, dtype=float)
    W = _sampler(np.asarray(st.time, dtype=float), times)
    out = []
    for f in spec.forces:
        body = _frame(imp, f.applied_to_body, f.where, "applied_to_body")

        def block(ident):
            if ident is None:
                return None
            return W @ data[:, _columns(f, labels, ident, spec.datafile)]

        out.append(
            ExternalLoad(
                body=body.body,
                body_frame=body,
                force=block(f.force_identifier),
                force_frame=_frame(
                    imp, f.force_expressed_in_body, f.where, "force_expressed_in_body"
                ),
                point=block(f.point_identifier),
                point_frame=_frame(
                    imp, f.point_expressed_in_body, f.where, "point_expressed_in_body"
                ),
                torque=block(f.torque_identifier),
                name=f.name,
            )
        )
    return tuple(out)
