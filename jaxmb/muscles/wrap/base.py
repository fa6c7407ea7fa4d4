"""The wrap-object extension point: what the path kernel needs from a wrap shape.

A wrap object is a surface fixed in a body (its wrap frame: ``translation``, ``rotation``) that
musculotendon paths wrap over, as OpenSim's ``WrapObject``. The path kernel
(:mod:`jaxmb.muscles.path_kernel`) knows shapes only through :class:`AbstractWrapObject`: it packs
each object's sizes into three numbers (:meth:`~AbstractWrapObject.size_parameters`), and per pose
calls the shape's :meth:`~AbstractWrapObject.wrap_segment` (its OpenSim algorithm) and
:meth:`~AbstractWrapObject.screen_segment` (the cheap variant that chooses among candidate
segments), dispatching with ``lax.switch`` over the shape classes present in the model.

**A new wrap shape is one new file in this folder**: a subclass of :class:`AbstractWrapObject`
with its size fields, :meth:`~AbstractWrapObject.size_parameters`, :meth:`~AbstractWrapObject.check`
and :meth:`~AbstractWrapObject.wrap_segment` (and :meth:`~AbstractWrapObject.screen_segment` where
a cheaper screen exists), exported from :mod:`jaxmb.muscles.wrap`. Validation
(:func:`jaxmb.muscles.with_muscles`), lengths and moment arms then take it as they take the four
OpenSim shapes (:mod:`.cylinder`, :mod:`.sphere`, :mod:`.ellipsoid`, :mod:`.torus`).
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ...model import ModelError

__all__ = ["AbstractWrapObject", "check_positive"]


class AbstractWrapObject(eqx.Module):
    """A wrap surface in a body's frame; subclasses add the shape's sizes (m).

    Attributes:
        body: body index or name (``-1``/``"ground"`` for the ground); static.
        translation: (3,) m, wrap-frame origin in the body frame.
        rotation: (3, 3) wrap-frame axes in the body frame (columns).
        quadrant: OpenSim's allowed side ("all", "+x", "-x", "+y", ...); static.
        name: optional label (static).
    """

    body: Any = eqx.field(static=True)
    translation: Float[Array, " 3"]
    rotation: Float[Array, "3 3"]
    quadrant: str = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def _frame(self, body, translation, rotation, quadrant, name):
        self.body = body
        self.translation = jnp.asarray(translation, dtype=float)
        self.rotation = jnp.asarray(rotation, dtype=float)
        self.quadrant = quadrant
        self.name = name

    @abc.abstractmethod
    def size_parameters(self) -> tuple:
        """The shape's sizes as the three numbers :meth:`wrap_segment` receives as ``size`` (m;
        unused entries 1.0)."""

    @abc.abstractmethod
    def check(self, where: str) -> None:
        """Raise :class:`~jaxmb.model.ModelError` (message prefixed by ``where``) for sizes that
        cannot wrap (non-positive, non-finite, inconsistent)."""

    @staticmethod
    @abc.abstractmethod
    def wrap_segment(p1, p2, size, axis, sign, single):
        """Wrap the straight segment p1 → p2 over the shape.

        Args:
            p1, p2: (3,) segment ends in the wrap frame (m).
            size: (3,) :meth:`size_parameters` (m), traced.
            axis, sign: the quadrant, traced: axis 0, 1, 2 and sign ±1, or sign 0 for "all".
            single: True when the path has only this wrap object (OpenSim then skips its
                multi-object refinements): a Python bool, or a traced boolean scalar in the
                path kernel, where one program serves paths of one and of several objects.

        Returns:
            (code, r1 (3,), r2 (3,), wrap_length (m)): OpenSim's ``WrapAction`` code
            (:data:`~jaxmb.muscles.wrap.common.NO_WRAP`, ...), the tangent points near p1 and p2 in
            the wrap frame and the length of the path on the surface between them.
        """

    @classmethod
    def screen_segment(cls, p1, p2, size, axis, sign, single):
        """What choosing among a PathWrap's candidate segments needs: :meth:`wrap_segment`'s code,
        and its tangent points and length wherever that code is ``WRAPPED`` (only those enter the
        choice). The default is :meth:`wrap_segment` itself; a shape overrides it where less work
        gives the same choice."""
        return cls.wrap_segment(p1, p2, size, axis, sign, single)


def check_positive(size, where: str) -> None:
    """Raise :class:`~jaxmb.model.ModelError` unless every entry of ``size`` (m) is positive and
    finite."""
    size = np.asarray(size, dtype=float)
    if not np.all(np.isfinite(size)) or np.any(size <= 0):
        raise ModelError(f"{where}: sizes must be positive and finite, got {size}")
