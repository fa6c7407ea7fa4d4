"""Joint maps f(q): every joint variable as a smooth function of the coordinates q.

Linear, explicit, implicit (closed loops solved by Newton inside JAX, derivatives by the implicit
function theorem), fitted pre-models; ∇f and H by autodiff, analytical projection and the
computational molecule.
"""

from .coordinate_functions import (
    OsimJointMap,
)
from .maps import (
    METHODS,
    AbstractJointMap,
    ExplicitMap,
    ImplicitMap,
    ImplicitSolution,
    LinearMap,
    PremodelMap,
    identity_map,
    joint_gradients,
    joint_hessians,
    joint_values,
    molecule_derivatives,
    premodel,
    projection_derivatives,
    projection_solve,
)
