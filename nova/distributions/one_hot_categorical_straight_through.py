"""``OneHotCategoricalStraightThrough(probs=None, logits=None)``: a one-hot draw whose
gradient is the straight-through estimator's."""
from __future__ import annotations

from typing import Any

from nova.distributions.one_hot_categorical import OneHotCategorical
from nova.tensor.tensor import Tensor

__all__ = ["OneHotCategoricalStraightThrough"]


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` made reparameterizable by the straight-through estimator
    (Bengio et al., 2013): ``rsample`` is the one-hot draw in value, and its gradient
    is that of ``probs`` (``sample + probs - probs.detach()``), as PyTorch's."""

    has_rsample = True

    def expand(self, batch_shape: Any, _instance: Any = None
               ) -> OneHotCategoricalStraightThrough:
        new = self._get_checked_instance(OneHotCategoricalStraightThrough, _instance)
        return super().expand(batch_shape, _instance=new)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
