"""CPU autocast's op lists, op by op against PyTorch's: the dtype each op returns under
``nv.autocast("cpu", dtype=...)`` for bfloat16 and float16 (written here from torch
2.13's CPU autocast, so the table holds without torch), and where torch is importable
the values too. Ops PyTorch lowers get float32 inputs (they must come out in the half
type), ops it runs in float32 get half inputs (they must come out float32), ops it
does not autocast get float32 inputs (float32 out, and no product inside lowered: the
values are those without autocast). Every op of ``autocast_state.POLICIES`` is in the
table. Recorded on the interp engine (dtypes and host arithmetic are the point)."""
import numpy as np
import pytest

import nova as nv
from nova.tensor import autocast_state

RNG = np.random.default_rng(11)
F32, HALF = "float32", "half"        # the output dtype expected (HALF: the autocast one)


def _a(*shape, positive=False):
    a = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.5 if positive else a


def _spd(n):
    a = RNG.standard_normal((n, n)).astype(np.float32)
    return a @ a.T + n * np.eye(n, dtype=np.float32)


def _fn(L):
    return L.nn.functional


# policy name: (call(L, *tensors), arrays, inputs given as (f32 | half), output expected)
CASES = {
    # PyTorch's lower_precision_fp list
    "addmm": (lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0),
              [_a(4, 3), _a(4, 5), _a(5, 3)], F32, HALF),
    "baddbmm": (lambda L, c, a, b: L.baddbmm(c, a, b),
                [_a(2, 4, 3), _a(2, 4, 5), _a(2, 5, 3)], F32, HALF),
    "addbmm": (lambda L, c, a, b: L.addbmm(c, a, b), [_a(4, 3), _a(2, 4, 5), _a(2, 5, 3)],
               F32, HALF),
    "prelu": (lambda L, x, w: _fn(L).prelu(x, w), [_a(2, 3), np.full(1, 0.25, np.float32)],
              F32, HALF),
    "matmul": (lambda L, a, b: a @ b, [_a(4, 5), _a(5, 3)], F32, HALF),
    "linear": (lambda L, x, w, b: _fn(L).linear(x, w, b), [_a(4, 5), _a(3, 5), _a(3)], F32,
               HALF),
    # in no CPU list: float32 stays float32 (Nova's products inside must not lower)
    "mv": (lambda L, a, b: L.mv(a, b), [_a(4, 5), _a(5)], F32, F32),
    "addmv": (lambda L, c, a, b: L.addmv(c, a, b), [_a(4), _a(4, 5), _a(5)], F32, F32),
    "addr": (lambda L, c, a, b: L.addr(c, a, b), [_a(4, 3), _a(4), _a(3)], F32, F32),
    "dot": (lambda L, a, b: L.dot(a, b), [_a(5), _a(5)], F32, F32),
    "vdot": (lambda L, a, b: L.vdot(a, b), [_a(5), _a(5)], F32, F32),
    "linalg.lu_solve": (lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b),
                        [_spd(3), _a(3, 2)], F32, F32),
    "linalg.solve_triangular": (lambda L, a, b: L.linalg.solve_triangular(a, b, upper=False),
                                [np.tril(_spd(3)), _a(3, 2)], F32, F32),
    # PyTorch's CPU fp32 list: half in, float32 out
    "prod": (lambda L, x: x.prod(-1), [_a(3, 4)], HALF, F32),
    "trace": (lambda L, x: L.trace(x), [_a(3, 3)], HALF, F32),
    "quantile": (lambda L, x: L.quantile(x, 0.3), [_a(7)], HALF, F32),
    "nanquantile": (lambda L, x: L.nanquantile(x, 0.3), [_a(7)], HALF, F32),
    "cdist": (lambda L, a, b: L.cdist(a, b), [_a(3, 5), _a(4, 5)], HALF, F32),
    "kl_div": (lambda L, a, b: _fn(L).kl_div(a, b, reduction="batchmean"),
               [_a(3, 4), _a(3, 4, positive=True)], HALF, F32),
    "poisson_nll_loss": (lambda L, a, b: _fn(L).poisson_nll_loss(a, b),
                         [_a(3, 4), _a(3, 4, positive=True)], HALF, F32),
    "cosine_embedding_loss": (lambda L, a, b: _fn(L).cosine_embedding_loss(
        a, b, L.tensor([1, -1, 1])), [_a(3, 4), _a(3, 4)], HALF, F32),
    "triplet_margin_loss": (lambda L, a, b, c: _fn(L).triplet_margin_loss(a, b, c),
                            [_a(3, 4), _a(3, 4), _a(3, 4)], HALF, F32),
    "multi_margin_loss": (lambda L, a: _fn(L).multi_margin_loss(a, L.tensor([0, 1, 2])),
                          [_a(3, 4)], HALF, F32),
    "multilabel_margin_loss": (lambda L, a: _fn(L).multilabel_margin_loss(
        a, L.tensor([[0, 1, -1, 0]] * 3)), [_a(3, 4)], HALF, F32),
    "ctc_loss": (lambda L, lp: _fn(L).ctc_loss(lp, L.tensor([[1, 2]]), L.tensor([5]),
                                               L.tensor([2])),
                 [np.log(np.full((5, 1, 4), 0.25, np.float32))], HALF, F32),
    "grid_sample": (lambda L, x, g: _fn(L).grid_sample(x, g, align_corners=False),
                    [_a(1, 1, 4, 4), np.clip(_a(1, 2, 2, 2), -1, 1)], HALF, F32),
    "avg_pool3d": (lambda L, x: _fn(L).avg_pool3d(x, 2), [_a(1, 1, 4, 4, 4)], HALF, F32),
    "max_pool3d": (lambda L, x: _fn(L).max_pool3d(x, 2), [_a(1, 1, 4, 4, 4)], HALF, F32),
    "adaptive_avg_pool3d": (lambda L, x: _fn(L).adaptive_avg_pool3d(x, 2),
                            [_a(1, 1, 4, 4, 4)], HALF, F32),
    "adaptive_max_pool3d": (lambda L, x: _fn(L).adaptive_max_pool3d(x, 2),
                            [_a(1, 1, 4, 4, 4)], HALF, F32),
    "max_unpool1d": (lambda L, x: _fn(L).max_unpool1d(
        *_fn(L).max_pool1d(x, 2, return_indices=True), 2), [_a(1, 1, 4)], HALF, F32),
    "max_unpool2d": (lambda L, x: _fn(L).max_unpool2d(
        *_fn(L).max_pool2d(x, 2, return_indices=True), 2), [_a(1, 1, 4, 4)], HALF, F32),
    "max_unpool3d": (lambda L, x: _fn(L).max_unpool3d(
        *_fn(L).max_pool3d(x, 2, return_indices=True), 2), [_a(1, 1, 4, 4, 4)], HALF, F32),
    "reflection_pad1d": (lambda L, x: _fn(L).pad(x, (1, 1), mode="reflect"), [_a(1, 2, 4)],
                         HALF, F32),
    "reflection_pad2d": (lambda L, x: _fn(L).pad(x, (1, 1, 1, 1), mode="reflect"),
                         [_a(1, 2, 4, 4)], HALF, F32),
    "reflection_pad3d": (lambda L, x: _fn(L).pad(x, (1,) * 6, mode="reflect"),
                         [_a(1, 2, 4, 4, 4)], HALF, HALF),         # not in the list
    "replication_pad1d": (lambda L, x: _fn(L).pad(x, (1, 1), mode="replicate"),
                          [_a(1, 2, 4)], HALF, F32),
    "replication_pad2d": (lambda L, x: _fn(L).pad(x, (1, 1, 1, 1), mode="replicate"),
                          [_a(1, 2, 4, 4)], HALF, F32),
    "replication_pad3d": (lambda L, x: _fn(L).pad(x, (1,) * 6, mode="replicate"),
                          [_a(1, 2, 4, 4, 4)], HALF, F32),
    "linalg.inv": (lambda L, x: L.linalg.inv(x), [_spd(3)], HALF, F32),
    "linalg.cholesky": (lambda L, x: L.linalg.cholesky(x), [_spd(3)], HALF, F32),
    "linalg.solve": (lambda L, a, b: L.linalg.solve(a, b), [_spd(3), _a(3, 2)], HALF, F32),
    "linalg.lstsq": (lambda L, a, b: L.linalg.lstsq(a, b).solution, [_spd(3), _a(3, 2)],
                     HALF, F32),
    "linalg.qr": (lambda L, a: L.linalg.qr(a)[1], [_a(4, 3)], HALF, F32),
    "linalg.svd": (lambda L, a: L.linalg.svd(a)[1], [_a(4, 3)], HALF, F32),
    "linalg.svdvals": (lambda L, a: L.linalg.svdvals(a), [_a(4, 3)], HALF, F32),
    "linalg.eigh": (lambda L, a: L.linalg.eigh(a)[0], [_spd(3)], HALF, F32),
    "linalg.eigvalsh": (lambda L, a: L.linalg.eigvalsh(a), [_spd(3)], HALF, F32),
    "linalg.cond": (lambda L, a: L.linalg.cond(a), [_spd(3)], HALF, F32),
    "linalg.matrix_rank": (lambda L, a: L.linalg.matrix_rank(a), [_a(4, 3)], HALF, "int64"),
    # the same ops given float32: full float32 computations (nothing inside lowered)
    "linalg.inv-f32": (lambda L, x: L.linalg.inv(x), [_spd(3)], F32, F32),
    "linalg.eigh-f32": (lambda L, a: L.linalg.eigh(a)[0], [_spd(3)], F32, F32),
    "linalg.lstsq-f32": (lambda L, a, b: L.linalg.lstsq(a, b).solution, [_spd(3), _a(3, 2)],
                         F32, F32),
    # PyTorch's CPU promote list: mixed floats computed in the widest
    "index_copy": (lambda L, a, b: a.index_copy(0, L.tensor([0]), b.float()),
                   [_a(2, 3), _a(1, 3)], HALF, F32),
    # the lists written in nn.functional, for reference: CPU keeps softmax half
    "softmax": (lambda L, x: _fn(L).softmax(x, -1), [_a(3, 4)], HALF, HALF),
    "mse_loss": (lambda L, a, b: _fn(L).mse_loss(a, b), [_a(3, 4), _a(3, 4)], HALF, F32),
}
HALVES = {"bf16": "bfloat16", "f16": "float16"}


def _run(L, name, half, autocast=True):
    call, arrays, given, _ = CASES[name]
    half_type = getattr(L, half)
    ts = [L.tensor(a) for a in arrays]
    if given == HALF:
        ts = [t.to(half_type) for t in ts]
    with L.autocast("cpu", dtype=half_type, enabled=autocast):
        return call(L, *ts)


def _expected(name, half):
    out = CASES[name][3]
    return getattr(nv, half if out == HALF else out)


@pytest.mark.parametrize("half", list(HALVES.values()), ids=list(HALVES))
@pytest.mark.parametrize("name", list(CASES))
def test_output_dtype_follows_pytorchs_cpu_lists(name, half):
    with nv.engine("interp"):
        assert _run(nv, name, half).dtype == _expected(name, half)


@pytest.mark.parametrize("half", list(HALVES.values()), ids=list(HALVES))
@pytest.mark.parametrize("name", list(CASES))
def test_dtypes_and_values_match_torch(name, half):
    """torch's dtype (the table above is torch's); float32 results to float32
    accuracy (a product lowered inside would be ~1e-3 off), half ones to an ulp
    (torch's addbmm rounds each batch's product, Nova's one product over them)."""
    torch = pytest.importorskip("torch")
    want = _run(torch, name, half)
    assert str(want.dtype).split(".")[-1] == str(_expected(name, half)).split(".")[-1]
    with nv.engine("interp"):
        got = _run(nv, name, half)
        got_values = got.float().numpy() if got.dtype.is_floating_point else got.numpy()
    want_values = want.detach().float().numpy() if want.is_floating_point() else want.numpy()
    if got.dtype == nv.float32:
        np.testing.assert_allclose(got_values, want_values, rtol=3e-5, atol=2e-5)
    elif got.dtype.is_floating_point:
        eps = 2.0 ** -7 if half == "bfloat16" else 2.0 ** -10
        np.testing.assert_allclose(got_values, want_values, rtol=eps, atol=eps)
    else:
        np.testing.assert_array_equal(got_values, want_values)


def test_every_policy_has_a_case():
    named = {name.split("-")[0] for name in CASES}
    assert set(autocast_state.POLICIES) <= named, set(autocast_state.POLICIES) - named
    with pytest.raises(KeyError, match="no autocast policy for 'nonesuch'"):
        autocast_state.autocast_op("nonesuch")


def test_cuda_blocks_take_the_cuda_column():
    """Under ``autocast("cuda")`` (recorded on the CPU) ``mv`` is lowered (PyTorch's
    CUDA list has it), ``dot`` is not, ``prod`` and ``kl_div`` run in float32."""
    a, v = nv.tensor(_a(4, 5)), nv.tensor(_a(5))
    with nv.engine("interp"), nv.autocast("cuda", dtype=nv.bfloat16):
        assert nv.mv(a, v).dtype == nv.bfloat16
        assert nv.dot(v, v).dtype == nv.float32
        assert a.bfloat16().prod(-1).dtype == nv.float32
        assert nv.nn.functional.kl_div(a.bfloat16(), a.bfloat16().exp(),
                                       reduction="batchmean").dtype == nv.float32
