"""``nv.distributions``: probability distributions with ``torch.distributions``' names,
constructor arguments and semantics (batch and event shapes, ``sample``/``rsample``,
``log_prob``, ``entropy``, ``cdf``/``icdf``, ``expand``, ``kl_divergence``), the
transforms they are built from (``transforms``, every one also exported here, as
PyTorch's) and ``biject_to``/``transform_to``, which map a constraint to a transform
from the unconstrained reals.

Sampling draws from Nova's generator (``nv.manual_seed`` makes it reproducible) inside
the lazy graph; ``rsample`` is differentiable with respect to the parameters (Gamma,
Chi2, Beta, Dirichlet and StudentT by exact implicit reparameterization). The rejection
samplers (Gamma and the families built on it, Poisson, Binomial, NegativeBinomial)
realize their draw at once, reading back an "all accepted" flag, so that no element is
ever left with a rejected proposal (``nova/tensor/sampling_ops.py``).
Validation (``validate_args``) checks the values the host already knows and leaves
pending ones unchecked (see ``distribution.py``)."""
from nova.distributions import constraints, transforms
from nova.distributions.bernoulli import Bernoulli
from nova.distributions.beta import Beta
from nova.distributions.binomial import Binomial
from nova.distributions.categorical import Categorical
from nova.distributions.cauchy import Cauchy
from nova.distributions.chi2 import Chi2
from nova.distributions.constraint_registry import biject_to, transform_to
from nova.distributions.continuous_bernoulli import ContinuousBernoulli
from nova.distributions.dirichlet import Dirichlet
from nova.distributions.distribution import Distribution
from nova.distributions.exp_family import ExponentialFamily
from nova.distributions.exponential import Exponential
from nova.distributions.fishersnedecor import FisherSnedecor
from nova.distributions.gamma import Gamma
from nova.distributions.generalized_pareto import GeneralizedPareto
from nova.distributions.geometric import Geometric
from nova.distributions.gumbel import Gumbel
from nova.distributions.half_cauchy import HalfCauchy
from nova.distributions.half_normal import HalfNormal
from nova.distributions.independent import Independent
from nova.distributions.inverse_gamma import InverseGamma
from nova.distributions.kl import kl_divergence, register_kl
from nova.distributions.kumaraswamy import Kumaraswamy
from nova.distributions.laplace import Laplace
from nova.distributions.lkj_cholesky import LKJCholesky
from nova.distributions.log_normal import LogNormal
from nova.distributions.logistic_normal import LogisticNormal
from nova.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from nova.distributions.mixture_same_family import MixtureSameFamily
from nova.distributions.multinomial import Multinomial
from nova.distributions.multivariate_normal import MultivariateNormal
from nova.distributions.negative_binomial import NegativeBinomial
from nova.distributions.normal import Normal
from nova.distributions.one_hot_categorical import (
    OneHotCategorical, OneHotCategoricalStraightThrough,
)
from nova.distributions.pareto import Pareto
from nova.distributions.poisson import Poisson
from nova.distributions.relaxed_bernoulli import RelaxedBernoulli
from nova.distributions.relaxed_categorical import RelaxedOneHotCategorical
from nova.distributions.student_t import StudentT
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import (
    AbsTransform, AffineTransform, CatTransform, ComposeTransform, CorrCholeskyTransform,
    CumulativeDistributionTransform, ExpTransform, IndependentTransform,
    LowerCholeskyTransform, PositiveDefiniteTransform, PowerTransform, ReshapeTransform,
    SigmoidTransform, SoftmaxTransform, SoftplusTransform, StackTransform,
    StickBreakingTransform, TanhTransform, Transform, identity_transform,
)
from nova.distributions.uniform import Uniform
from nova.distributions.von_mises import VonMises
from nova.distributions.weibull import Weibull
from nova.distributions.wishart import Wishart
# ``torch.distributions.studentT`` is a module there: the same name here
from nova.distributions import studentT  # noqa: F401

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform",
    "Categorical", "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "Dirichlet", "Distribution",
    "ExpTransform", "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma",
    "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent",
    "IndependentTransform", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace",
    "LogNormal", "LogisticNormal", "LowRankMultivariateNormal", "LowerCholeskyTransform",
    "MixtureSameFamily", "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal",
    "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson",
    "PositiveDefiniteTransform", "PowerTransform", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
    "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT",
    "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "VonMises",
    "Weibull", "Wishart", "biject_to", "constraints", "identity_transform", "kl_divergence",
    "register_kl", "transform_to", "transforms",
]
