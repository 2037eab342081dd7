"""``nv.einsum``: Einstein summation with ``torch.einsum``'s semantics.

Nothing here is a new primitive. An equation is lowered onto ops that already have
gradient rules and kernels, so autograd, fusion and both engines handle einsum for
free:

* a letter repeated within one operand (``ii->i``) takes the diagonal: the repeated dims
  are permuted to the end, merged by a reshape and read with one strided basic slice
  (the element ``(i, i, ..., i)`` of ``n**k`` sits at ``i * (1 + n + ... + n**(k-1))``),
  so no index tensor is built and the backward is the slice's own (a pad);
* a size-1 dim that broadcasts against a larger size of the same letter is squeezed
  away: a value constant along a letter is the same as the letter being absent;
* a letter that only one operand has and the output lacks is summed out first, while
  the operand is smallest;
* each pairwise contraction is a permute and reshape to ``(batch, M, K) @ (batch, K, N)``
  and one batched ``matmul`` (batch letters: in both operands and still needed; K: in
  both, needed by nobody else; M and N: the rest), or a broadcasting ``mul`` when
  nothing is contracted (a Hadamard or outer product gains nothing from a matmul with
  K = 1);
* the result is permuted into the output's order.

With more than two operands the pair to contract next is chosen greedily: the pair
whose result has the fewest elements, then the fewest multiply-adds, then the leftmost.
That is opt_einsum's simple greedy idea; it avoids the blow-up of strict left-to-right
order on chains such as ``ij,jk,k->i`` with a large ``k`` dim and costs only a scan over
pairs while recording. Results can differ from numpy's order of summation by rounding
only.

Differences from torch, on purpose: errors are ``ValueError`` (shapes, equation) and
``TypeError`` (operand types; bool operands a ``DTypeError``, a ``RuntimeError`` too, as
torch's), as everywhere in Nova, and always name einsum, the equation and the operand
shapes; an integer einsum keeps its dtype even when it only sums
(``torch.einsum('ij->', int32)`` is int64, the contraction ``'ij,ij->i'`` int32).
The sublist form ``einsum(op, [0, 1], ...)`` is not supported.
"""
from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any, Union

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.tensor import ops
from nova.tensor.movement import permute, reshape
from nova.tensor.tensor import Tensor

# A dim's label: a letter, or for the dims an ellipsis covers the position among all
# ellipsis dims (right-aligned, so broadcasting lines up as numpy's does).
Label = Union[str, int]

_LETTERS = frozenset(string.ascii_letters)
_ELLIPSIS = "..."


_SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist_equation(args: tuple) -> tuple[str, tuple]:
    """The equation and operands of the sublist form ``(op, dims, op, dims, ...[,
    output dims])``: dim ``i`` is the ``i``-th of A-Z then a-z (PyTorch's order)."""
    def letters(dims: Any, where: str) -> str:
        if not isinstance(dims, (list, tuple)):
            raise TypeError(f"einsum: the sublist form expects a list of dims after each "
                            f"operand and for the output; {where} is a "
                            f"{type(dims).__name__}")
        out = []
        for d in dims:
            if d is Ellipsis:
                out.append("...")
            elif isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 52:
                out.append(_SUBLIST_LETTERS[d])
            else:
                raise ValueError(f"einsum: sublist dims must be ints in [0, 52) or "
                                 f"Ellipsis, got {d!r} in {where}")
        return "".join(out)

    pairs = len(args) // 2
    tensors = args[0:2 * pairs:2]
    inputs = ",".join(letters(args[2 * k + 1], f"the sublist of operand {k}")
                      for k in range(pairs))
    if len(args) % 2:
        return f"{inputs}->{letters(args[-1], 'the output sublist')}", tensors
    return inputs, tensors


class _Equation:
    """A parsed equation: every operand's labels, the output's labels and each
    label's size after broadcasting."""

    __slots__ = ("inputs", "output", "sizes")

    def __init__(self, inputs: list[list[Label]], output: list[Label],
                 sizes: dict[Label, int]):
        self.inputs = inputs
        self.output = output
        self.sizes = sizes


def einsum(equation: Any, *operands: Any) -> Tensor:
    """Sum of products over the letters of ``equation``, as ``torch.einsum``.

    ``einsum("ij,jk->ik", a, b)`` is ``a @ b``; ``einsum("ij,jk", [a, b])`` (a single
    list of operands) the same, and so is the sublist form ``einsum(a, [0, 1], b, [1,
    2], [0, 2])`` (numpy's and PyTorch's: each operand followed by its dims as ints in
    [0, 52) and ``...``, then optionally the output's). Without ``->`` the output is
    ``...`` followed by the letters that appear exactly once, sorted (upper case before
    lower case). ``...`` stands for broadcast dims; ellipsis dims missing from an
    explicit output are summed, as in torch. Operands of different dtypes are
    promoted, as torch does.
    """
    if isinstance(equation, Tensor):
        equation, operands = _sublist_equation((equation,) + operands)
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a str (or the first operand of the "
                        f"sublist form), got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for k, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum({equation!r}): operand {k} must be a Tensor, got "
                            f"{type(t).__name__}")
    tensors = list(operands)
    eq = _parse(equation, tensors)   # (an equation names at least one operand)
    common = ops.promote("einsum", *tensors)
    if common == dt.bool_:
        raise DTypeError(f"einsum({equation!r}): bool operands are not supported (as in "
                         f"torch); cast them, e.g. with .int() (shapes {_shapes(tensors)})")
    tensors = [ops.cast(t, common) for t in tensors]

    needed_out = set(eq.output)
    work = [_prepare(t, labels, eq, [set(o) for j, o in enumerate(eq.inputs) if j != k],
                     needed_out)
            for k, (t, labels) in enumerate(zip(tensors, eq.inputs))]
    while len(work) > 1:
        i, j = _next_pair(work, eq)
        keep = needed_out.union(*(set(w[1]) for k, w in enumerate(work) if k not in (i, j)))
        merged = _contract(work[i], work[j], keep, eq.sizes)
        work[i] = merged
        del work[j]
    x, labels = work[0]
    x, labels = _sum_out(x, labels, needed_out)
    x = _permute_to(x, labels, eq.output)
    if any(x is t for t in operands):
        # Nothing was recorded (``ij->ij``): return a view, as torch does, not the
        # operand's own handle.
        x = permute(x, *range(x.ndim))
    return x


# ---------------------------------------------------------------- parsing

def _shapes(tensors: Sequence[Tensor]) -> str:
    return ", ".join(str(tuple(t.shape)) for t in tensors) or "none"


def _fail(equation: str, tensors: Sequence[Tensor], msg: str) -> ValueError:
    return ValueError(f"einsum({equation!r}): {msg} (operand shapes: {_shapes(tensors)})")


def _scan(equation: str, tensors: Sequence[Tensor], term: str, where: str) -> list[str]:
    """``term`` as a list of letters and ``...`` markers, checking its characters."""
    out: list[str] = []
    k = 0
    while k < len(term):
        c = term[k]
        if c in _LETTERS:
            out.append(c)
            k += 1
        elif term.startswith(_ELLIPSIS, k):
            if _ELLIPSIS in out:
                raise _fail(equation, tensors, f"{where} has more than one ellipsis '...'")
            out.append(_ELLIPSIS)
            k += 3
        elif c == ".":
            raise _fail(equation, tensors, f"{where} has a '.' that is not part of an "
                                           "ellipsis '...'")
        else:
            raise _fail(equation, tensors, f"invalid character {c!r} in {where}; subscripts "
                                           "must be letters a-z or A-Z, or '...'")
    return out


def _parse(equation: str, tensors: list[Tensor]) -> _Equation:
    """Check ``equation`` against the operands and resolve every label and size."""
    text = "".join(equation.split())          # spaces are allowed anywhere
    if text.count("->") > 1:
        raise _fail(equation, tensors, "more than one '->'")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(tensors):
        raise _fail(equation, tensors, f"the equation has {len(terms)} operand"
                                       f"{'s' * (len(terms) != 1)} but {len(tensors)} "
                                       f"{'was' if len(tensors) == 1 else 'were'} given")
    scanned = [_scan(equation, tensors, term, f"operand {k}") for k, term in enumerate(terms)]

    ell_rank = []
    for k, (tokens, t) in enumerate(zip(scanned, tensors)):
        letters = sum(tok != _ELLIPSIS for tok in tokens)
        if _ELLIPSIS in tokens:
            if letters > t.ndim:
                raise _fail(equation, tensors, f"operand {k} has {letters} subscripts "
                                               f"besides '...' but only {t.ndim} dims")
            ell_rank.append(t.ndim - letters)
        else:
            if letters != t.ndim:
                raise _fail(equation, tensors, f"operand {k} has {letters} subscripts but "
                                               f"{t.ndim} dims, and no ellipsis '...'")
            ell_rank.append(0)
    n_ell = max(ell_rank, default=0)

    inputs: list[list[Label]] = []
    sizes: dict[Label, int] = {}
    for k, (tokens, t) in enumerate(zip(scanned, tensors)):
        labels: list[Label] = []
        for tok in tokens:
            if tok == _ELLIPSIS:
                labels.extend(range(n_ell - ell_rank[k], n_ell))
            else:
                labels.append(tok)
        mine: dict[Label, int] = {}
        for label, n in zip(labels, t.shape):
            if label in mine and mine[label] != n:   # a diagonal needs a square
                raise _fail(equation, tensors, f"subscript {label} is repeated in operand "
                                               f"{k} with different sizes {mine[label]} "
                                               f"and {n}")
            mine[label] = n
        for label, n in mine.items():
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label] = n
            elif n not in (1, seen):
                what = (f"subscript {label}" if isinstance(label, str)
                        else f"ellipsis dim {label - n_ell}")
                raise _fail(equation, tensors, f"{what} has size {n} in operand {k}, which "
                                               f"does not broadcast with size {seen} "
                                               "in an earlier operand")
        inputs.append(labels)

    if arrow:
        out_tokens = _scan(equation, tensors, rhs, "the output")
        output: list[Label] = []
        for tok in out_tokens:
            if tok == _ELLIPSIS:
                output.extend(range(n_ell))
            elif tok in output:
                raise _fail(equation, tensors, f"output subscript {tok} appears more than "
                                               "once")
            elif tok not in sizes:
                raise _fail(equation, tensors, f"output subscript {tok} does not appear in "
                                               "any operand")
            else:
                output.append(tok)
    else:
        counts: dict[str, int] = {}
        for labels in inputs:
            for label in labels:
                if isinstance(label, str):
                    counts[label] = counts.get(label, 0) + 1
        output = list(range(n_ell)) + sorted(c for c, m in counts.items() if m == 1)
    return _Equation(inputs, output, sizes)


# ---------------------------------------------------------------- lowering

def _permute_to(x: Tensor, labels: list[Label], order: list[Label]) -> Tensor:
    """``x`` with its dims (named by ``labels``) in ``order``; no op when already so."""
    perm = [labels.index(label) for label in order]
    return x if perm == list(range(len(perm))) else permute(x, *perm)


def _reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return x if tuple(x.shape) == shape else reshape(x, shape)


def _sum_out(x: Tensor, labels: list[Label], needed: set[Label]) -> tuple[Tensor, list[Label]]:
    """Sum the dims whose labels nobody needs any more (the operand's dtype kept)."""
    dims = [k for k, label in enumerate(labels) if label not in needed]
    if not dims:
        return x, labels
    return (ops.sum(x, tuple(dims), dtype=x.dtype),
            [label for label in labels if label in needed])


def _diagonal(x: Tensor, labels: list[Label], label: Label) -> tuple[Tensor, list[Label]]:
    """The diagonal over every dim labelled ``label``, as one last dim."""
    pos = [k for k, lab in enumerate(labels) if lab == label]
    rest = [k for k in range(len(labels)) if k not in pos]
    if rest + pos != list(range(len(labels))):
        x = permute(x, *rest, *pos)
    n, copies = x.shape[-1], len(pos)
    flat = _reshape(x, tuple(x.shape[:len(rest)]) + (n ** copies,))
    step = sum(n ** j for j in range(copies))   # offset of (i, ..., i) is i * step
    return flat[..., ::step], [labels[k] for k in rest] + [label]


def _prepare(x: Tensor, labels: list[Label], eq: _Equation, others: list[set[Label]],
             needed_out: set[Label]) -> tuple[Tensor, list[Label]]:
    """One operand reduced to what the contractions need: broadcast size-1 dims
    squeezed, diagonals taken, labels no one else has summed."""
    squeeze = [label for label, n in zip(labels, x.shape) if n == 1 and eq.sizes[label] != 1]
    if squeeze:
        labels = [label for label in labels if label not in squeeze]
        x = _reshape(x, tuple(eq.sizes[label] for label in labels))
    for label in dict.fromkeys(labels):
        if labels.count(label) > 1:
            x, labels = _diagonal(x, labels, label)
    needed = needed_out.union(*others)
    return _sum_out(x, labels, needed)


def _numel(labels: Any, sizes: dict[Label, int]) -> int:
    n = 1
    for label in labels:
        n *= sizes[label]
    return n


def _next_pair(work: list[tuple[Tensor, list[Label]]], eq: _Equation) -> tuple[int, int]:
    """The greedy choice: the pair whose result is smallest, then the cheapest to
    compute, then the leftmost (so equal sizes contract left to right)."""
    label_sets = [set(labels) for _, labels in work]
    out = set(eq.output)
    best: tuple[int, int, int, int] | None = None
    for i in range(len(work)):
        for j in range(i + 1, len(work)):
            keep = out.union(*(s for k, s in enumerate(label_sets) if k not in (i, j)))
            union = label_sets[i] | label_sets[j]
            key = (_numel(union & keep, eq.sizes), _numel(union, eq.sizes), i, j)
            if best is None or key < best:
                best = key
    assert best is not None
    return best[2], best[3]


def _contract(a: tuple[Tensor, list[Label]], b: tuple[Tensor, list[Label]], keep: set[Label],
              sizes: dict[Label, int]) -> tuple[Tensor, list[Label]]:
    """Two operands as one, keeping the labels in ``keep``: a batched matmul over the
    shared labels no one else needs, or a broadcasting mul when there are none."""
    (x, lx), (y, ly) = a, b
    x, lx = _sum_out(x, lx, keep | set(ly))
    y, ly = _sum_out(y, ly, keep | set(lx))
    shared = [label for label in lx if label in ly]
    batch = [label for label in shared if label in keep]
    inner = [label for label in shared if label not in keep]
    x_free = [label for label in lx if label not in ly]
    y_free = [label for label in ly if label not in lx]

    def dims(labels: list[Label]) -> tuple[int, ...]:
        return tuple(sizes[label] for label in labels)

    if not inner:   # nothing summed: a Hadamard / outer product, exactly, with no matmul
        xs = _reshape(_permute_to(x, lx, batch + x_free), dims(batch + x_free) +
                      (1,) * len(y_free))
        ys = _reshape(_permute_to(y, ly, batch + y_free), dims(batch) + (1,) * len(x_free) +
                      dims(y_free))
        return ops.mul(xs, ys), batch + x_free + y_free

    m, k, n = _numel(x_free, sizes), _numel(inner, sizes), _numel(y_free, sizes)
    lead = (_numel(batch, sizes),) if batch else ()
    xm = _reshape(_permute_to(x, lx, batch + x_free + inner), lead + (m, k))
    ym = _reshape(_permute_to(y, ly, batch + inner + y_free), lead + (k, n))
    out = ops.matmul(xm, ym)
    return _reshape(out, dims(batch + x_free + y_free)), batch + x_free + y_free
