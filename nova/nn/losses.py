"""Loss modules: PyTorch's classes over ``nv.nn.functional``'s losses, with the same
arguments (``reduction``; ``weight``, ``ignore_index``, ``label_smoothing``, ``beta``,
``delta`` and ``pos_weight`` where PyTorch has them). Class weights are buffers, so
they move with ``.to()`` and appear in ``state_dict`` as PyTorch's do."""
from __future__ import annotations

from nova.nn import functional as F
from nova.nn.loss_functions import legacy_reduction
from nova.nn.module import Module
from nova.tensor.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    """``size_average``/``reduce``: PyTorch's deprecated pair, keywords here (mapped to
    ``reduction``, with PyTorch's warning: ``legacy_reduction``)."""

    def __init__(self, reduction: str = "mean", *, size_average: bool | None = None,
                 reduce: bool | None = None):
        super().__init__()
        reduction = legacy_reduction(size_average, reduce, reduction)
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        self.reduction = reduction



class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, reduction: str = "mean", *,
                 size_average: bool | None = None, reduce: bool | None = None):
        super().__init__(reduction, size_average=size_average, reduce=reduce)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0, *,
                 size_average: bool | None = None, reduce: bool | None = None):
        super().__init__(weight, reduction, size_average=size_average, reduce=reduce)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", *, size_average: bool | None = None,
                 reduce: bool | None = None):
        super().__init__(weight, reduction, size_average=size_average, reduce=reduce)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction: str = "mean", beta: float = 1.0, *,
                 size_average: bool | None = None, reduce: bool | None = None):
        super().__init__(reduction, size_average=size_average, reduce=reduce)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, self.reduction, self.delta)


class BCELoss(_WeightedLoss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None, *, size_average: bool | None = None,
                 reduce: bool | None = None):
        super().__init__(weight, reduction, size_average=size_average, reduce=reduce)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                  self.pos_weight)


class _LegacyLoss(_Loss):
    """A loss whose PyTorch constructor still takes the deprecated ``size_average`` and
    ``reduce`` ahead of ``reduction`` (mapped to it, with PyTorch's warning)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean"):
        super().__init__(legacy_reduction(size_average, reduce, reduction))


class KLDivLoss(_Loss):
    """``reduction`` may also be ``'batchmean'`` (the sum over the batch size)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False):
        reduction = legacy_reduction(size_average, reduce, reduction)
        # _Loss checks the three common reductions; 'batchmean' is KL's own
        super().__init__("mean" if reduction == "batchmean" else reduction)
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _MarginLoss(_LegacyLoss):
    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin



class CosineEmbeddingLoss(_MarginLoss):
    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    def __init__(self, margin: float = 1.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class SoftMarginLoss(_LegacyLoss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_LegacyLoss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_LegacyLoss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got {p!r}")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be 1-D (one per class), got "
                             f"shape {weight.shape}")
        self.p, self.margin = p, margin
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                   reduction=self.reduction)



class TripletMarginLoss(_LegacyLoss):
    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin}")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p,
                                     self.eps, self.swap, reduction=self.reduction)



class PoissonNLLLoss(_LegacyLoss):
    def __init__(self, log_input: bool = True, full: bool = False,
                 size_average: bool | None = None, eps: float = 1e-8,
                 reduce: bool | None = None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, self.log_input, self.full,
                                  eps=self.eps, reduction=self.reduction)



class GaussianNLLLoss(_Loss):
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)



__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "CosineEmbeddingLoss",
           "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
           "PoissonNLLLoss", "GaussianNLLLoss"]
