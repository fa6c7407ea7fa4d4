"""The seed's matrix calculus and the functions evaluated at run time.

- :mod:`.matcalc`: Definition 1, Theorems 1-4, vec, skew, the commutation matrix (seed §2).
- :mod:`.functions`: OpenSim's function types (constants, polynomials, SIMM and natural cubic
  splines, piecewise-linear) as JAX-traceable modules.
- :mod:`.expressions`: a safe expression language for joint maps written in model files.
- :mod:`.linalg`: linear algebra on batch-last stacks (the batched Cholesky solve).
"""

from .expressions import (
    FUNCTIONS,
    MAX_DEPTH,
    MAX_SOURCE,
    ExpressionError,
    Expressions,
    compile_expression,
    function_name,
    registered_function,
    serialisable,
)
from .functions import (
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
from .matcalc import (
    commutation_matrix,
    differential_a,
    differential_b,
    elementary,
    kron,
    kron_rule,
    kron_to_tensor,
    partial,
    product_rule,
    scalar_product_rule,
    skew,
    tensor_to_kron,
    unskew,
    unvec,
    vec,
)
