"""cumsum and cumprod on both engines: values on every dim against numpy (float64
accumulation, then one rounding; integers and bools in int64), gradients by float64
finite differences (cumprod with zeros: the first zero of a row, later zeros, both
directions), double backward, PyTorch where installed, the kernel's IR and plan on
both targets, and the errors."""
import re

import numpy as np
import pytest

import nova as nv
from nova.autograd.gradcheck import gradcheck
from nova.compiler.pipeline import compile_step, front
from nova.compiler.targets import get_target
from nova.tensor.realize import pending_graph
from nova.tensor.scan import scan_last

RNG = np.random.default_rng(3)
SHAPES = [((7,), 0), ((3, 9), 1), ((3, 9), 0), ((4, 5, 6), 1), ((2, 1000), -1), ((5, 1), -1),
          ((2, 3, 0), 2)]


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    with nv.engine(request.param):
        yield request.param


@pytest.mark.parametrize("shape,dim", SHAPES)
def test_cumsum_and_cumprod_match_float64_prefixes(shape, dim):
    x = (RNG.uniform(0.5, 1.5, shape) * RNG.choice([-1, 1], shape)).astype(np.float32)
    for name in ("cumsum", "cumprod"):
        want = getattr(np, name)(x.astype(np.float64), axis=dim).astype(np.float32)
        got = getattr(nv.tensor(x), name)(dim)
        assert got.dtype == nv.float32 and got.shape == shape
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
        np.testing.assert_array_equal(getattr(nv, name)(nv.tensor(x), dim=dim).numpy(), want)


def test_integer_bool_half_and_dtype_arguments():
    i = np.array([[3, -1, 4], [1, 5, -9]], np.int32)
    got = nv.tensor(i).cumsum(1)
    assert got.dtype == nv.int64                       # PyTorch's promotion for integers
    np.testing.assert_array_equal(got.numpy(), np.cumsum(i, 1))
    np.testing.assert_array_equal(nv.tensor(i).cumprod(0).numpy(), np.cumprod(i, 0))
    b = nv.tensor(np.array([True, False, True, True]))
    assert b.cumsum(0).dtype == nv.int64 and b.cumsum(0).tolist() == [1, 1, 2, 3]
    assert nv.tensor(i).cumsum(1, dtype=nv.float32).dtype == nv.float32
    h = RNG.standard_normal((3, 50)).astype(np.float32)
    got = nv.tensor(h).half().cumsum(1)
    ref = np.cumsum(h.astype(np.float16).astype(np.float64), 1).astype(np.float16)
    assert got.dtype == nv.float16
    np.testing.assert_array_equal(got.numpy(), ref)
    big = nv.tensor(np.full(4, 2 ** 62, np.int64)).cumsum(0)    # wraps, as in PyTorch
    np.testing.assert_array_equal(big.numpy(), np.cumsum(np.full(4, 2 ** 62, np.int64)))
    assert nv.tensor(2.5).cumsum(0).item() == 2.5 and nv.tensor(3.0).cumprod(-1).shape == ()


def test_nan_and_inf_propagate_along_the_prefix():
    x = nv.tensor(np.array([1.0, np.nan, 2.0, np.inf, -np.inf], np.float32))
    np.testing.assert_array_equal(x.cumsum(0).numpy(), [1.0, np.nan, np.nan, np.nan, np.nan])
    y = nv.tensor(np.array([2.0, np.inf, 0.0, 1.0], np.float32))
    np.testing.assert_array_equal(y.cumprod(0).numpy(), [2.0, np.inf, np.nan, np.nan])


def _with_zeros():
    x = RNG.standard_normal((4, 6))
    x[0, 2] = 0.0                      # one zero
    x[1, 1] = x[1, 4] = 0.0            # a first zero and a later one
    x[2, 0] = 0.0                      # a zero in front
    x[3, 5] = 0.0                      # a zero at the end
    return x


def test_gradients_match_finite_differences_with_zeros_both_directions():
    x = _with_zeros()
    assert gradcheck(lambda a: a.cumsum(1), [x])
    assert gradcheck(lambda a: a.cumsum(0) * a, [x])
    assert gradcheck(lambda a: a.cumprod(1), [x])
    assert gradcheck(lambda a: a.cumprod(0), [x])
    assert gradcheck(lambda a: scan_last("cumprod", a, reverse=True), [x])
    assert gradcheck(lambda a: scan_last("cumsum", a, reverse=True) * a, [x])


def test_second_derivatives_of_cumprod():
    x = RNG.uniform(0.5, 2.0, (2, 4))

    def grad_of(a):
        (g,) = nv.autograd.grad(a.cumprod(1).sum(), [a], create_graph=True)
        return g
    assert gradcheck(grad_of, [x])


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    x = _with_zeros().astype(np.float32)
    for name, dim in (("cumsum", 1), ("cumprod", 1), ("cumprod", 0)):
        a = nv.tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        w = RNG.standard_normal(x.shape).astype(np.float32)
        (getattr(a, name)(dim) * nv.tensor(w)).sum().backward()
        (getattr(t, name)(dim) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(getattr(a, name)(dim).numpy(),
                                   getattr(t, name)(dim).detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_the_scan_kernel_is_one_pass_per_row_with_its_producer_fused():
    """Input IR: one ``nova.cumsum``; output: a ``scan`` plan parallel over rows with
    the producer (x * 2) fused, no scratch, and on the CPU one loop per row carrying a
    double; on a CUDA spec a thread per row."""
    x = nv.tensor(np.zeros((6, 100), np.float32))
    module = front(pending_graph(nv.cumsum(x * 2.0, 1)))
    text = str(module)
    assert re.search(r"nova.cumsum %\d+ reverse = 0", text)
    step = compile_step(module, "cpu")
    (plan,) = step.plans
    assert plan.kind == "scan" and plan.schedule.strategy == "scan"
    assert plan.schedule.loops == (6, 100) and plan.schedule.parallel_dim == 0
    assert plan.scratch is None
    assert any(type(op).__name__ == "MulOp" for op in plan.fusion.body.block.ops)
    llvm = get_target("cpu").emit(plan)
    assert "scan.head" in llvm and "fadd double" in llvm
    from nova.compiler.targets.cuda.codegen import generate
    from nova.compiler.targets.cuda.device import SM80
    (cuda_plan,) = [p for p in compile_step(front(pending_graph(nv.cumprod(x, 0))),
                                            "cuda").plans if p.kind == "scan"]
    kernel = generate(cuda_plan, SM80)
    assert kernel.config.strategy == "thread_scan" and kernel.grid == (1, 1, 1)
    assert "acc = acc * " in kernel.source and "99LL - k" not in kernel.source


def test_bad_arguments_name_the_op():
    x = nv.zeros(2, 3)
    with pytest.raises(IndexError, match="cumsum"):
        x.cumsum(2)
    with pytest.raises(TypeError, match="cumprod: dim must be an int"):
        x.cumprod(None)
    with pytest.raises(TypeError, match="cumsum: expected a Tensor"):
        nv.cumsum([1, 2], 0)


def _running(x, dim, largest):
    """Reference cummax/cummin along ``dim`` by PyTorch's rule: a later element takes
    over when >= (<=) the best so far or NaN."""
    x = np.moveaxis(np.asarray(x), dim, -1)
    vals, idx = np.empty_like(x), np.zeros(x.shape, np.int64)
    for pos in np.ndindex(x.shape[:-1]):
        best, at = None, 0
        for j, v in enumerate(x[pos]):
            if best is None or np.isnan(v) or (v >= best if largest else v <= best):
                best, at = v, j
            vals[pos + (j,)], idx[pos + (j,)] = best, at
    return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)


def test_cummax_and_cummin_follow_the_latest_winner_and_propagate_nan():
    f = np.array([[1.0, 1.0, 3.0, 2.0, 3.0, np.nan, 5.0, np.nan, 1.0],
                  [-np.inf, 2.0, 2.0, -1.0, np.inf, 0.0, -0.0, 4.0, 4.0]], np.float32)
    i = np.array([[3, 1, 2, 1, 5, 0, 5]], np.int32)
    outs = [nv.cummax(nv.tensor(f), 1), nv.cummin(nv.tensor(f), 1), nv.cummax(nv.tensor(f), 0),
            nv.cummin(nv.tensor(i), -1), nv.cummax(nv.tensor([True, False, True]), 0),
            nv.cummax(nv.tensor(2.5), 0)]
    nv.realize(*[t for o in outs for t in o])
    for (got, (x, dim, largest)) in zip(outs, [(f, 1, True), (f, 1, False), (f, 0, True),
                                                (i, -1, False)]):
        vals, idx = _running(x, dim, largest)
        np.testing.assert_array_equal(got.values.numpy(), vals)
        np.testing.assert_array_equal(got.indices.numpy(), idx)
        assert got.values.dtype == nv.tensor(x).dtype and got.indices.dtype == nv.int64
    assert outs[4].values.tolist() == [True, True, True] and outs[4].indices.tolist() == [0, 0, 2]
    assert outs[5].values.item() == 2.5 and outs[5].indices.item() == 0
    assert type(outs[0]).__name__ == "cummax" and outs[0]._fields == ("values", "indices")


def test_logcumsumexp_keeps_small_terms_after_huge_ones():
    x = np.array([-1000.0, 0.0, -np.inf, 30.0, -30.0, np.inf, 1.0], np.float32)
    r = RNG.normal(size=(3, 37)).astype(np.float32) * 20
    got = [nv.logcumsumexp(nv.tensor(x), 0), nv.logcumsumexp(nv.tensor(r), 1),
           nv.logcumsumexp(nv.tensor([-np.inf, -np.inf]), 0), nv.tensor(r).logcumsumexp(0)]
    nv.realize(*got)
    with np.errstate(divide="ignore"):
        want = [np.logaddexp.accumulate(x.astype(np.float64)),
                np.logaddexp.accumulate(r.astype(np.float64), 1),
                np.array([-np.inf, -np.inf]), np.logaddexp.accumulate(r.astype(np.float64), 0)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.astype(np.float32), rtol=3e-7, atol=0)
    with pytest.raises(TypeError, match="logcumsumexp"):
        nv.logcumsumexp(nv.tensor([1, 2]), 0)


def test_running_extremes_and_logcumsumexp_differentiate():
    x = RNG.normal(size=(3, 6))
    assert gradcheck(lambda a: nv.cummax(a, 1).values, [x])
    assert gradcheck(lambda a: nv.cummin(a, 0).values * a, [x])
    assert gradcheck(lambda a: nv.logcumsumexp(a, 1), [x])


def test_running_extremes_name_the_op_on_bad_arguments():
    with pytest.raises(TypeError, match="cummax: dim must be an int"):
        nv.cummax(nv.ones(3), None)
    with pytest.raises(IndexError, match="cummin"):
        nv.cummin(nv.ones(3), 1)


def test_logcumsumexp_of_half_floats_rounds_once():
    got = nv.logcumsumexp(nv.tensor([1.0, 2.0, 3.0], dtype=nv.float16), 0)
    want = np.logaddexp.accumulate(np.array([1.0, 2.0, 3.0])).astype(np.float16)
    assert got.dtype == nv.float16 and got.numpy().tolist() == want.tolist()
