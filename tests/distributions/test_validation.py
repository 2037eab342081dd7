"""Argument and sample validation (``validate_args``): what is checked (Python numbers,
tensors made from data or realized, constants and their broadcasts), what is not (values
still pending in the lazy graph: checking them would force a step), the error messages,
the switches; and the constraints, whose lazy and host checks agree."""
import math
import warnings

import numpy as np
import pytest

import nova as nv
import nova.distributions as D
from nova.distributions import constraints


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


BAD_PARAMETERS = [
    (lambda: D.Normal(0.0, -1.0), r"parameter scale \(Tensor of shape \(\)\) of distribution "
                                  r"Normal\(loc: 0.0, scale: -1.0\) to satisfy the constraint "
                                  r"GreaterThan\(lower_bound=0.0\)"),
    (lambda: D.Normal(math.nan, 1.0), r"parameter loc .* Real\(\)"),
    (lambda: D.Normal(f64([0.0, 1.0]), f64([1.0, -1.0])),
     r"parameter scale \(Tensor of shape \(2,\)\).*found invalid values:\n\[ 1. -1.\]"),
    (lambda: D.Normal(nv.zeros(2), nv.full((2,), -1.0)), "parameter scale"),   # constants
    (lambda: D.Normal(f64([[0.0], [1.0]]), -1.0), "parameter scale"),          # broadcast
    (lambda: D.Uniform(1.0, 0.0), r"parameter low .* LessThan\(upper_bound=0.0\)"),
    (lambda: D.Exponential(f64([0.0])), "parameter rate"),
    (lambda: D.Laplace(0.0, 0.0), "parameter scale"),
    (lambda: D.Cauchy(0.0, -2.0), "parameter scale"),
    (lambda: D.Gumbel(0.0, -2.0), "parameter scale"),
    (lambda: D.LogNormal(0.0, -2.0), "parameter scale"),
    (lambda: D.Bernoulli(1.5), r"parameter probs .* Interval\(lower_bound=0.0, "
                               r"upper_bound=1.0\)"),
    (lambda: D.Bernoulli(logits=math.nan), "parameter logits"),
    (lambda: D.Categorical(f64([-1.0, 2.0])), r"parameter probs .* Simplex\(\)"),
    (lambda: D.Categorical(f64([0.0, 0.0])), r"parameter probs .* Simplex\(\)"),   # 0 / 0
    (lambda: D.Categorical(logits=f64([math.inf, 0.0])), r"parameter logits .* "
                                                         r"IndependentConstraint\(Real\(\), 1\)"),
    (lambda: D.OneHotCategorical(f64([-0.5, 1.5])), "parameter probs"),
    (lambda: D.MultivariateNormal(f64([0.0, 0.0]), scale_tril=f64([[1.0, 0.5], [0.0, 1.0]])),
     r"parameter scale_tril .* LowerCholesky\(\)"),
    (lambda: D.MultivariateNormal(f64([0.0, 0.0]), scale_tril=f64([[1.0, 0.0], [0.5, 0.0]])),
     "parameter scale_tril"),
]


@pytest.mark.parametrize("make, message", BAD_PARAMETERS)
def test_known_bad_parameters_raise(make, message):
    with pytest.raises(ValueError, match="Expected " + message):
        make()


def test_bad_samples_raise():
    cases = [
        (D.Exponential(1.0), f64(-1.0), r"\(Tensor of shape \(\)\) to be within the support "
                                        r"\(GreaterThanEq\(lower_bound=0.0\)\)"),
        (D.Bernoulli(0.3), f64(0.5), r"support \(Boolean\(\)\)"),
        (D.Categorical(f64([0.2, 0.3, 0.5])), nv.tensor([0, 3]),
         r"IntegerInterval\(lower_bound=0, upper_bound=2\)"),
        (D.Uniform(f64([0.0]), f64([1.0])), f64([1.5]), r"Interval\(lower_bound=\[0.\]"),
        (D.LogNormal(0.0, 1.0), f64(0.0), r"GreaterThan\(lower_bound=0.0\)"),
        (D.OneHotCategorical(f64([0.5, 0.5])), f64([1.0, 1.0]), r"OneHot\(\)"),
        (D.Independent(D.Exponential(f64([1.0, 2.0])), 1), f64([1.0, -1.0]), "support"),
    ]
    for d, value, message in cases:
        with pytest.raises(ValueError, match="Expected value argument .*" + message):
            d.log_prob(value)
    with pytest.raises(ValueError, match="Expected value argument"):
        D.Exponential(1.0).cdf(f64(-1.0))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)


def test_pending_values_are_not_checked_and_not_realized():
    """A parameter or value still in the lazy graph is not read: no error (nothing is
    known yet) and nothing runs."""
    x = f64([1.0, 2.0])
    scale = x - 5.0                        # pending: -4, -3
    d = D.Normal(0.0, scale)
    value = -x                             # pending: outside Exponential's support
    lp = D.Exponential(f64([1.0, 1.0])).log_prob(value)
    probs = x - 3.0                        # pending: -2, -1
    D.Categorical(probs)
    D.Bernoulli(probs)
    assert not scale.node.realized and not value.node.realized and not lp.node.realized
    assert repr(d) == "Normal(loc: (2,), scale: (2,))"
    assert constraints.positive.check(scale).shape == (2,)   # the lazy check, on request


def test_switches():
    D.Normal(0.0, -1.0, validate_args=False)
    D.Exponential(1.0, validate_args=False).log_prob(f64(-1.0))
    with pytest.raises(ValueError, match="Expected value argument"):
        D.Normal(0.0, 1.0).expand((2,)).log_prob(f64([0.0, math.nan]))  # expand keeps it
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(0.0, -1.0)
        D.Categorical(f64([-1.0, 2.0]))
        with pytest.raises(ValueError, match="Expected parameter scale"):
            D.Normal(0.0, -1.0, validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="set_default_validate_args: expected True or False"):
        D.Distribution.set_default_validate_args("yes")

    class NoConstraints(D.Distribution):
        pass

    with pytest.warns(UserWarning, match="does not define `arg_constraints`"):
        NoConstraints()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NoConstraints(validate_args=False)


def test_argument_errors():
    with pytest.raises(ValueError, match="must all be instances of Number or nova Tensor"):
        D.Normal([0.0], 1.0)
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        D.MultivariateNormal(f64([0.0]))
    built = D.MultivariateNormal(f64([0.0, 0.0]), covariance_matrix=f64(np.eye(2) * 4.0))
    assert np.allclose(built.scale_tril.numpy(), np.eye(2) * 2.0)   # its Cholesky factor
    with pytest.raises(ValueError, match="disagree on the event size"):
        D.MultivariateNormal(f64([0.0, 0.0]), scale_tril=f64(np.eye(3)))
    with pytest.raises(ValueError, match="Independent: reinterpreted_batch_ndims"):
        D.Independent(D.Normal(0.0, 1.0), -1)


def test_lazy_and_host_checks_agree():
    """Each constraint's ``check`` on a tensor (recorded, then realized together) equals
    its check on the same values as a numpy array (what validation runs)."""
    v = np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, math.nan]])
    onehot = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    tril = np.array([[[1.0, 0.0], [2.0, 3.0]], [[1.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    cases = [(c, v) for c in (constraints.real, constraints.positive, constraints.nonnegative,
                              constraints.unit_interval, constraints.boolean,
                              constraints.greater_than(0.5), constraints.less_than(0.5),
                              constraints.half_open_interval(0.0, 1.0),
                              constraints.nonnegative_integer, constraints.positive_integer,
                              constraints.integer_interval(0, 1), constraints.real_vector,
                              constraints.simplex,
                              constraints.independent(constraints.positive, 1))]
    cases += [(constraints.one_hot, onehot), (constraints.simplex, onehot / 1.0),
              (constraints.lower_triangular, tril), (constraints.lower_cholesky, tril),
              (constraints.interval(f64([0.0, 0.0, 0.0]), f64([1.0, 3.0, 1.0])), v)]
    lazy = [c.check(f64(x)) for c, x in cases]
    nv.realize(*lazy)
    for (c, x), got in zip(cases, lazy):
        np.testing.assert_array_equal(got.numpy(), np.asarray(c.check(x)), err_msg=repr(c))
    np.testing.assert_array_equal(lazy[0].numpy(), ~np.isnan(v))
    np.testing.assert_array_equal(lazy[-2].numpy(), [True, False, False])   # lower_cholesky
    assert constraints.is_dependent(constraints.dependent)
    assert constraints.is_dependent(D.Uniform.support)
    assert not constraints.is_dependent(constraints.real)
    assert constraints.real_vector.event_dim == 1 and constraints.one_hot.is_discrete
    with pytest.raises(NotImplementedError, match="event_dim cannot be determined"):
        constraints.dependent.event_dim
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        constraints.dependent.check(f64(1.0))
