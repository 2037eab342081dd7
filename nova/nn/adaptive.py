"""``nn.AdaptiveLogSoftmaxWithLoss``: Grave et al.'s adaptive softmax, with PyTorch's
arguments, parameter names (``head``, ``tail.{i}.{0,1}``: a torch ``state_dict``
loads), values and errors.

The classes below ``cutoffs[0]`` (the shortlist) are scored by the ``head``, which also
scores one entry per tail cluster; a class of cluster ``i`` has the log-probability of
cluster ``i`` in the head plus its own in the cluster's two-layer projection.

**Static shapes.** PyTorch's ``forward`` runs each cluster only on the rows whose
target falls in it (a ``nonzero`` of data-dependent size). Nova's shapes are fixed
when a step is recorded, so every cluster runs on every row and each row keeps its
own cluster's value by a mask: the same values and gradients, at the cost of the
full ``log_prob`` (every tail projection for the whole batch). ``predict`` likewise
computes the full log-probabilities of every row and keeps the head's choice where
that is a shortlist class, as PyTorch does.

A target outside ``[0, n_classes)`` raises PyTorch's RuntimeError at the call when its
values are on the host (a tensor made from data); a computed target is checked when
the step runs, by the head's gather (its index is pushed out of range for such a row).
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.nn import functional as F
from nova.nn.layers import Linear, ModuleList, Sequential
from nova.nn.lazy import _reset_parameters
from nova.nn.module import Module
from nova.tensor import movement, ops
from nova.tensor.tensor import Tensor

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax over ``n_classes`` classes sorted by decreasing frequency
    (``torch.nn.AdaptiveLogSoftmaxWithLoss``; module docstring for Nova's static-shape
    evaluation). ``forward(input, target)`` gives ``(output, loss)``: each row's
    log-probability of its target and their negated mean."""

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int],
                 div_value: float = 4.0, head_bias: bool = False, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError(f"cutoffs should be a sequence of unique, positive integers "
                             f"sorted in an increasing order, where each value is between "
                             f"1 and n_classes-1 ({n_classes - 1}), got {cutoffs}")
        made = {"device": device, "dtype": dtype}
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **made)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **made),
                                        Linear(hsz, osz, bias=False, **made)))

    def reset_parameters(self) -> None:
        """The parameters drawn again as ``__init__`` draws them (``Linear``'s
        initialization, in the same order)."""
        for linear in (self.head, *(layer for pair in self.tail for layer in pair)):
            _reset_parameters(linear.weight, linear.bias)

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        """``(output, loss)``: ``output[n]`` is the log-probability of ``target[n]``
        (``(N,)``, or 0-d for an unbatched ``(in_features,)`` input and 0-d target),
        ``loss`` the mean of ``-output``."""
        ops._check_tensor("AdaptiveLogSoftmaxWithLoss input", input_)
        ops._check_tensor("AdaptiveLogSoftmaxWithLoss target", target_)
        if target_.ndim == 1:
            if input_.ndim == 0 or input_.shape[0] != target_.shape[0]:
                raise RuntimeError(f"Input and target should have the same size in the "
                                   f"batch dimension (input {input_.shape}, target "
                                   f"{target_.shape}).")
            if input_.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input_.shape}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input_.shape}")
        else:
            raise RuntimeError(f"0D or 1D target tensor expected, multi-target not "
                               f"supported (target {target_.shape})")
        if target_.dtype not in (dt.int32, dt.int64):
            raise DTypeError(f"AdaptiveLogSoftmaxWithLoss: target must hold class indices "
                             f"(int64 or int32), got {target_.dtype.name}")
        self._check_known_targets(target_)
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = (target_ if batched else target_.unsqueeze(0)).to(dt.int64)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = None
        head_index = target                  # shortlist rows: their class in the head
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            member = ops.logical_and(ops.ge(target, low), ops.lt(target, high))
            relative = ops.clamp(ops.sub(target, low), 0, high - low - 1)
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            local = ops.gather(cluster_logprob, 1, relative.unsqueeze(1)).squeeze(1)
            kept = ops.where(member, local, 0.0)
            output = kept if output is None else ops.add(output, kept)
            head_index = ops.where(member, self.shortlist_size + i, head_index)
        # a target at or above n_classes gathers past the head's end: the step fails
        beyond = ops.ge(target, self.n_classes)
        head_index = ops.where(beyond, ops.add(target, self.head_size - self.n_classes),
                               head_index)
        head_part = ops.gather(head_logprob, 1, head_index.unsqueeze(1)).squeeze(1)
        output = head_part if output is None else ops.add(output, head_part)
        loss = ops.mean(ops.neg(output))
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _check_known_targets(self, target: Tensor) -> None:
        """PyTorch's RuntimeError for a target (known on the host) outside
        ``[0, n_classes)``."""
        values = ops.known_index_values(target)
        if values is None or values.size == 0:
            return
        if values.min() < 0 or values.max() >= self.n_classes:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{values.min()}, {values.max()}] were "
                               f"found. ")

    def _full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        """The ``(N, n_classes)`` log-probabilities: the shortlist's from the head, each
        cluster's its own plus the cluster's entry in the head."""
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            column = self.shortlist_size + i
            parts.append(ops.add(cluster_logprob, head_logprob[:, column:column + 1]))
        return movement.cat(parts, 1)

    def _check_batch(self, op: str, input: Tensor) -> None:
        ops._check_tensor(f"AdaptiveLogSoftmaxWithLoss.{op}", input)
        if input.ndim != 2 or input.shape[1] != self.in_features:
            raise ValueError(f"AdaptiveLogSoftmaxWithLoss.{op}: expected an input of shape "
                             f"(N, {self.in_features}), got {input.shape}")

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of all ``n_classes`` classes, ``(N, n_classes)``."""
        self._check_batch("log_prob", input)
        return self._full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """Each row's most likely class, ``(N,)``: the head's choice where it is a
        shortlist class, else the argmax of the full log-probabilities (computed for
        every row: static shapes)."""
        self._check_batch("predict", input)
        head_output = self.head(input)
        choice = ops.argmax(head_output, 1)
        full = ops.argmax(self._full_log_prob(input, head_output), 1)
        return ops.where(ops.lt(choice, self.shortlist_size), choice, full)


__all__ = ["AdaptiveLogSoftmaxWithLoss"]
