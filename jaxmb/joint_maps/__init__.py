"""Joint maps: every joint variable as a smooth function f(q) of the generalized coordinates.

A joint map is the heart of the method (seed 001 §3-1, §3-3): the multibody has n_j one-degree-of-
freedom joints whose variables f_i are functions of n_q generalized coordinates. The kinematics and
dynamics need f, its Jacobian ``J[i, :] = ∇f_iᵀ`` and the Hessians ``H[i] = ∂²f_i/∂q²``.

Three kinds of map live here:

* explicit maps (:class:`IdentityMap`, :class:`LinearMap`, :class:`ExplicitMap`): a measured rhythm f(q) in closed form;
* :class:`ImplicitMap`: the holonomic constraints ``g(f, q) = 0`` of closed kinematic loops, solved
  by Newton's method inside JAX with derivatives by the implicit function theorem (§3-3);
* :class:`PremodelMap` (built by :func:`premodel`): the seed's pre-modeling, a spline fit of any map
  sampled over a grid of q.

:func:`joint_gradients` and :func:`joint_hessians` compute ∇f and H by four selectable routes:
``"autodiff"``, ``"projection"`` (the analytical projection method, Eqs. 101–120), ``"molecule"``
(central differences on the computational molecule of Fig. 2) and ``"premodel"``.

Extension point: subclass :class:`AbstractJointMap` and implement ``__call__``; the derivatives
default to forward-mode autodiff, and a subclass may override :meth:`AbstractJointMap.derivatives`
with something cheaper or exact in closed form.
"""

from .base import AbstractJointMap, ExplicitMap, IdentityMap, LinearMap, identity_map
from .coordinate_functions import OsimJointMap
from .derivatives import (
    METHODS,
    joint_gradients,
    joint_hessians,
    joint_values,
    molecule_derivatives,
    projection_derivatives,
    projection_solve,
)
from .implicit import ImplicitMap, ImplicitSolution
from .premodel import PremodelMap, premodel
