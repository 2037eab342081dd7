"""nv.einsum against numpy.einsum (always), float64 finite differences, torch.einsum
(where installed) and its error messages, on both engines."""
import re

import numpy as np
import pytest

import nova as nv
from nova.autograd.gradcheck import gradcheck
from nova.tensor import einsum as einsum_mod
from tests.helpers import assert_close


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    """Overrides the package conftest's fixture of the same name (so each test runs once
    per engine, not twice) and keeps this file self-contained."""
    with nv.engine(request.param):
        yield request.param


# (equation, operand shapes): each is checked against numpy.einsum.
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),                       # matmul
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),              # batched matmul
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),        # bilinear
    ("i,j->ij", [(3,), (4,)]),                             # outer
    ("i,i->", [(5,), (5,)]),                               # dot
    ("i,i->i", [(5,), (5,)]),                              # Hadamard
    ("ii->", [(4, 4)]),                                    # trace
    ("ii", [(4, 4)]),                                      # trace, implicit
    ("ii->i", [(4, 4)]),                                   # diagonal
    ("bii->bi", [(2, 3, 3)]),                              # batched diagonal
    ("iji->j", [(3, 2, 3)]),                               # repeat, not adjacent
    ("iii->i", [(3, 3, 3)]),                               # three copies
    ("ii,i->i", [(3, 3), (3,)]),
    ("ij->ji", [(3, 4)]),                                  # transpose
    ("ji", [(3, 4)]),                                      # transpose, implicit
    ("ij->", [(3, 4)]),                                    # sum
    ("ij->j", [(3, 4)]),                                   # column sum
    ("ij,kl->", [(2, 3), (4, 5)]),                         # lone letters both sides
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),     # ellipsis broadcasting
    ("...ij,...jk", [(2, 3, 4), (4, 5)]),                  # ellipsis, implicit
    ("i...->...", [(3, 2, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),     # attention scores
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),     # attention output
    ("ij,jk", [(3, 4), (4, 5)]),                           # implicit matmul
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),            # three operands
    ("ij,jk,k->i", [(3, 4), (4, 50), (50,)]),              # greedy: jk,k first
    ("aij,ajk,akl->ail", [(2, 3, 4), (2, 4, 2), (2, 2, 3)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 2), (2, 3)]),  # four operands
    ("i,i->i", [(1,), (5,)]),                              # size-1 broadcasting
    ("ij,ij->i", [(3, 1), (3, 4)]),                        # broadcast, then summed
    ("Ab,bA->A", [(3, 4), (4, 3)]),                        # upper case
    ("aB,Ba", [(3, 4), (4, 3)]),                           # implicit: upper first
    ("i,,j->ij", [(3,), (), (4,)]),                        # a 0-d operand
    (",->", [(), ()]),
    ("ij,jk->ik", [(3, 0), (0, 2)]),                       # empty contraction: zeros
]


def _arrays(shapes, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy(equation, shapes):
    arrays = _arrays(shapes)
    got = nv.einsum(equation, *[nv.tensor(a) for a in arrays])
    want = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
    assert got.dtype == nv.float32
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_list_of_operands_and_spaces():
    a, b = _arrays([(3, 4), (4, 5)])
    want = a.astype(np.float64) @ b
    assert_close(nv.einsum("ij,jk->ik", [nv.tensor(a), nv.tensor(b)]), want, rtol=1e-5)
    assert_close(nv.einsum(" i j , j k -> i k ", (nv.tensor(a), nv.tensor(b))), want,
                 rtol=1e-5)


def test_sublist_form_is_the_equation_with_dims_as_letters():
    """numpy's and PyTorch's ``einsum(a, [0, 1], b, [1, 2], [0, 2])``: dims 0-25 are
    A-Z, 26-51 a-z; the output sublist is optional (then the implicit output), and
    ``...`` may stand among the dims."""
    a, b = _arrays([(3, 4), (4, 5)])
    c = _arrays([(2, 3, 4)])[0]
    assert_close(nv.einsum(nv.tensor(a), [0, 1], nv.tensor(b), [1, 2], [0, 2]),
                 np.einsum(a, [0, 1], b, [1, 2], [0, 2]), rtol=1e-5)
    assert_close(nv.einsum(nv.tensor(a), [30, 1], nv.tensor(b), [1, 2]),
                 np.einsum(a, [30, 1], b, [1, 2]), rtol=1e-5)      # implicit: C then e
    assert_close(nv.einsum(nv.tensor(c), [Ellipsis, 0], [Ellipsis]), c.sum(-1), rtol=1e-5)
    assert_close(nv.einsum(nv.tensor(c), [0, Ellipsis], [Ellipsis, 0]),
                 np.einsum(c, [0, Ellipsis], [Ellipsis, 0]), rtol=1e-5)


def test_dtypes():
    i32 = nv.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    out = nv.einsum("ij,kj->ik", i32, i32)
    assert out.dtype == nv.int32
    np.testing.assert_array_equal(out.numpy(), i32.numpy() @ i32.numpy().T)
    total = nv.einsum("ij->", i32)
    assert total.dtype == nv.int32 and total.item() == 66
    a, b = _arrays([(3, 4), (4,)])
    mixed = nv.einsum("ij,j->i", nv.tensor(a), nv.tensor(b.astype(np.float64),
                                                          dtype=nv.float64))
    assert mixed.dtype == nv.float64
    assert_close(mixed, a.astype(np.float64) @ b, rtol=1e-6)


def test_result_is_a_new_handle():
    x = nv.tensor(_arrays([(3, 4)])[0])
    same = nv.einsum("ij->ij", x)
    assert same is not x
    assert_close(same, x.numpy())


def test_greedy_order_contracts_the_small_pair_first():
    """``ij,jk,k->i``: left to right would build a (3, 50) intermediate first; the greedy
    order contracts ``jk,k`` to a (4,) vector."""
    eq = einsum_mod._parse("ij,jk,k->i", [nv.ones(3, 4), nv.ones(4, 50), nv.ones(50)])
    work = [(None, labels) for labels in eq.inputs]
    assert einsum_mod._next_pair(work, eq) == (1, 2)


def test_gradient_flows_to_every_operand():
    a = nv.tensor(_arrays([(3, 4)])[0], requires_grad=True)
    b = nv.tensor(_arrays([(4, 5)], seed=1)[0], requires_grad=True)
    nv.einsum("ij,jk->ik", a, b).sum().backward()
    assert_close(a.grad, np.ones((3, 5)) @ b.numpy().T, rtol=1e-5)
    assert_close(b.grad, a.numpy().T @ np.ones((3, 5)), rtol=1e-5)


GRAD_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("bn,anm,bm->ba", [(2, 2), (2, 2, 3), (2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iji->j", [(2, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (2, 3, 2)]),
    ("i,i->i", [(1,), (3,)]),
    ("ij,kl->", [(2, 2), (2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
]


@pytest.mark.parametrize("equation,shapes", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck(equation, shapes):
    arrays = _arrays(shapes, seed=2, dtype=np.float64)
    assert gradcheck(lambda *ts: nv.einsum(equation, *ts), arrays)


TORCH_CASES = CASES + [
    ("...i->i", [(2, 3, 4)]),          # ellipsis dims not in the output are summed
    ("i->...i", [(3,)]),               # an output ellipsis with no input one is empty
    ("i,i->", [(1,), (5,)]),           # a broadcast letter, summed
]


@pytest.mark.parametrize("equation,shapes", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_torch(equation, shapes):
    torch = pytest.importorskip("torch")
    arrays = _arrays(shapes, seed=3, dtype=np.float64)
    ours = [nv.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    got, want = nv.einsum(equation, *ours), torch.einsum(equation, *theirs)
    assert tuple(got.shape) == tuple(want.shape)
    assert_close(got, want.detach().numpy(), rtol=1e-10, atol=1e-10)
    if got.numel() == 0:
        return
    weight = np.random.default_rng(4).uniform(0.5, 1.5, size=tuple(want.shape))
    (got * nv.tensor(weight)).sum().backward()
    (want * torch.tensor(weight)).sum().backward()
    for o, t in zip(ours, theirs):
        assert_close(o.grad, t.grad.numpy(), rtol=1e-10, atol=1e-10)


ERRORS = [
    ("ij,jk->ik", [(2, 3)], "the equation has 2 operands but 1 was given"),
    ("ij", [(2, 3), (3, 2)], "the equation has 1 operand but 2 were given"),
    ("ij,jk->ik", [(2, 3), (4, 2)], "subscript j has size 4 in operand 1, which does not "
                                    "broadcast with size 3"),
    ("ii->i", [(2, 3)], "subscript i is repeated in operand 0 with different sizes 2 and 3"),
    ("...i,...i->...i", [(2, 3), (4, 3)], "ellipsis dim -1 has size 4 in operand 1"),
    ("i#->i", [(2, 2)], "invalid character '#' in operand 0"),
    ("ij->i1", [(2, 2)], "invalid character '1' in the output"),
    ("i.j", [(2, 2)], "'.' that is not part of an ellipsis"),
    ("...i...", [(2, 2)], "more than one ellipsis"),
    ("ij->k", [(2, 2)], "output subscript k does not appear in any operand"),
    ("ij->ii", [(2, 2)], "output subscript i appears more than once"),
    ("ij", [(2,)], "operand 0 has 2 subscripts but 1 dims, and no ellipsis"),
    ("ijk...", [(2, 2)], "operand 0 has 3 subscripts besides '...' but only 2 dims"),
    ("i->i->i", [(2,)], "more than one '->'"),
]


@pytest.mark.parametrize("equation,shapes,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_einsum_equation_and_shapes(equation, shapes, message):
    tensors = [nv.ones(*s) for s in shapes]
    with pytest.raises(ValueError) as info:
        nv.einsum(equation, *tensors)
    text = str(info.value)
    assert text.startswith(f"einsum({equation!r}): "), text
    assert message in text, text
    assert "operand shapes: " + ", ".join(str(s) for s in shapes) in text, text


def test_type_errors():
    with pytest.raises(TypeError, match=re.escape("einsum('ij->ji'): operand 0 must be a "
                                                  "Tensor, got ndarray")):
        nv.einsum("ij->ji", np.ones((2, 2)))
    with pytest.raises(TypeError, match="einsum: the equation must be a str"):
        nv.einsum(3, nv.ones(2))
    with pytest.raises(TypeError, match="the sublist of operand 0 is a int"):
        nv.einsum(nv.ones(2), 0)
    with pytest.raises(ValueError, match=r"sublist dims must be ints in \[0, 52\).*52"):
        nv.einsum(nv.ones(2), [52])
    flags = nv.ones(2, 2).bool()
    with pytest.raises(TypeError, match=re.escape("einsum('ij,jk->ik'): bool operands")):
        nv.einsum("ij,jk->ik", flags, flags)
