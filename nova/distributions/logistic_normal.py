"""``LogisticNormal(loc, scale)``: a normal vector pushed onto the simplex by stick
breaking."""
from __future__ import annotations

from typing import Any

from nova.distributions import constraints
from nova.distributions.normal import Normal
from nova.distributions.transformed_distribution import TransformedDistribution
from nova.distributions.transforms import StickBreakingTransform
from nova.tensor.tensor import Tensor

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """``StickBreakingTransform`` of ``Normal(loc, scale)`` over the last dim: a draw
    of K normals is a point of the (K + 1)-simplex, and ``log(x / (1 -
    x.cumsum(-1)))[..., :-1]`` of a point is normal. A scalar ``loc``/``scale`` is one
    normal (a 2-simplex), as in PyTorch."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 validate_args: bool | None = None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> LogisticNormal:
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale
