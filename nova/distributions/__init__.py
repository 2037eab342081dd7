"""``nv.distributions``: probability distributions with ``torch.distributions``' names,
constructor arguments and semantics (batch and event shapes, ``sample``/``rsample``,
``log_prob``, ``entropy``, ``cdf``/``icdf``, ``expand``, ``kl_divergence``), the
transforms they are built from (``transforms``, every one also exported here, as
PyTorch's) and ``biject_to``/``transform_to``, which map a constraint to a transform
from the unconstrained reals.

Sampling draws from Nova's generator (``nv.manual_seed`` makes it reproducible) inside
the lazy graph; ``rsample`` is differentiable with respect to the parameters.
Validation (``validate_args``) checks the values the host already knows and leaves
pending ones unchecked (see ``distribution.py``)."""
from nova.distributions import constraints, transforms
from nova.distributions.bernoulli import Bernoulli
from nova.distributions.categorical import Categorical
from nova.distributions.cauchy import Cauchy
from nova.distributions.constraint_registry import biject_to, transform_to
from nova.distributions.distribution import Distribution
from nova.distributions.exponential import Exponential
from nova.distributions.gumbel import Gumbel
from nova.distributions.independent import Independent
from nova.distributions.kl import kl_divergence, register_kl
from nova.distributions.laplace import Laplace
from nova.distributions.log_normal import LogNormal
from nova.distributions.multivariate_normal import MultivariateNormal
from nova.distributions.normal import Normal
from nova.distributions.one_hot_categorical import OneHotCategorical
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import (
    AbsTransform, AffineTransform, CatTransform, ComposeTransform,
    CumulativeDistributionTransform, ExpTransform, IndependentTransform,
    LowerCholeskyTransform, PositiveDefiniteTransform, PowerTransform, ReshapeTransform,
    SigmoidTransform, SoftmaxTransform, SoftplusTransform, StackTransform,
    StickBreakingTransform, TanhTransform, Transform, identity_transform,
)
from nova.distributions.uniform import Uniform

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "CatTransform", "Categorical", "Cauchy",
    "ComposeTransform", "CumulativeDistributionTransform", "Distribution", "ExpTransform",
    "Exponential", "Gumbel", "Independent", "IndependentTransform", "Laplace", "LogNormal",
    "LowerCholeskyTransform", "MultivariateNormal", "Normal", "OneHotCategorical",
    "PositiveDefiniteTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform",
    "SoftmaxTransform", "SoftplusTransform", "StackTransform", "StickBreakingTransform",
    "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "biject_to",
    "constraints", "identity_transform", "kl_divergence", "register_kl", "transform_to",
    "transforms",
]
