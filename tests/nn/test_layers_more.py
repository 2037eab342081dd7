"""Parameter containers, channel dropout, padding and rearranging modules, fold/unfold,
Bilinear, distances and instance/local response normalization against numpy."""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


class _Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.plist = nn.ParameterList([nv.ones(2), nn.Parameter(nv.zeros(3, 1))])
        self.pdict = nn.ParameterDict({"w": nv.ones(1), "b": nv.zeros(2)})
        self.act = nn.PReLU(2)


def test_parameter_containers_register_their_parameters():
    m = _Holder()
    assert list(m.state_dict()) == ["plist.0", "plist.1", "pdict.b", "pdict.w", "act.weight"]
    assert [p.shape for p in m.parameters()] == [(2,), (3, 1), (2,), (1,), (2,)]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    m.plist.append(nv.full((2,), 3.0))
    m.plist[0] = nv.full((2,), 5.0)
    m.pdict["c"] = nn.Parameter(nv.ones(4))
    m.pdict.update(OrderedDict([("z", nv.ones(1)), ("a", nv.ones(1))]))   # in its order
    assert len(m.plist) == 3 and m.plist[-1].tolist() == [3.0, 3.0]
    assert m.plist[0].tolist() == [5.0, 5.0] and len(m.plist[1:]) == 2
    assert list(m.pdict) == ["b", "w", "c", "z", "a"] and "c" in m.pdict
    del m.pdict["z"]
    assert m.pdict.pop("a").shape == (1,) and list(m.pdict.keys()) == ["b", "w", "c"]
    m.double()
    assert {p.dtype for p in m.parameters()} == {nv.float64}
    state = {k: v + 1.0 for k, v in m.state_dict().items()}
    m.load_state_dict(state)
    assert m.plist[0].tolist() == [6.0, 6.0] and m.pdict["c"].tolist() == [2.0] * 4
    loss = (m.plist[0] * m.pdict["w"]).sum()
    (g,) = nv.autograd.grad(loss, [m.pdict["w"]])
    assert g.tolist() == [12.0]
    assert repr(m.plist).splitlines()[1] == "  (0): Parameter containing: [float64 of size 2]"
    m.plist.append(3.0)           # kept as a plain attribute, not registered (torch)
    assert m.plist[-1] == 3.0 and "plist.3" not in m.state_dict()
    with pytest.raises(IndexError, match="ParameterList: index 5 is out of range"):
        m.plist[5]
    with pytest.raises(KeyError, match="must be non-empty and contain no '.'"):
        m.pdict["a.b"] = nv.ones(1)


def test_channel_dropout_masks_whole_channels():
    nv.manual_seed(0)
    x = nv.ones(40, 30, 2, 3)
    y2 = F.dropout2d(x, 0.25)
    y1 = nn.Dropout1d(0.5)(nv.ones(30, 4))          # unbatched (C, L)
    y3 = F.dropout3d(nv.ones(10, 8, 2, 2, 2), 0.5)
    ya = F.alpha_dropout(nv.tensor(RNG.standard_normal(100000).astype(np.float32)), 0.3, True)
    yf = nn.FeatureAlphaDropout(0.3)(nv.tensor(RNG.standard_normal((5000, 20, 2))))
    nv.realize(y2, y1, y3, ya, yf)
    a2, a1, a3 = y2.numpy(), y1.numpy(), y3.numpy()
    assert np.all(a2 == a2[:, :, :1, :1]) and set(np.unique(a2)) == {0.0, np.float32(1 / 0.75)}
    assert abs((a2[:, :, 0, 0] == 0).mean() - 0.25) < 0.03
    assert np.all(a1 == a1[:, :1]) and np.all(a3 == a3[:, :, :1, :1, :1])
    # alpha dropout keeps zero mean and unit variance; dropped units take one value
    a = 1 / math.sqrt((1.7580993408473766**2 * 0.3 + 1) * 0.7)
    dropped = a * 1.7580993408473766 * (0.3 - 1)
    for v in (ya.numpy(), yf.numpy()):
        assert abs(v.mean()) < 0.03 and abs(v.std() - 1) < 0.03
        assert abs(np.isclose(v, dropped, rtol=1e-6).mean() - 0.3) < 0.03
    hit = np.isclose(yf.numpy(), dropped, rtol=1e-6)
    assert np.all(hit == hit[:, :, :1])                 # whole channels dropped
    t3 = nv.ones(4, 3, 5)
    assert F.dropout1d(t3, 0.5, training=False) is t3 and F.dropout3d(x, 0.0) is x
    assert F.alpha_dropout(x, 0.5) is x                 # training=False by default
    with pytest.warns(UserWarning, match="dropout2d: Received a 3D input"):
        y = F.dropout2d(nv.ones(4, 6, 5), 0.5)
    assert np.all(y.numpy() == y.numpy()[:, :, :1])
    with pytest.raises(ValueError, match=r"dropout1d: expected a 2-D or 3-D input"):
        F.dropout1d(nv.ones(2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"dropout2d: expected a 4-D input \(N, C, H, W\)"):
        nn.Dropout2d()(nv.ones(2, 3))
    with pytest.raises(ValueError, match=r"Dropout3d: probability must be in \[0, 1\]"):
        nn.Dropout3d(1.5)
    assert repr(nn.Dropout2d(0.2, inplace=True)) == "Dropout2d(p=0.2, inplace=True)"


def test_padding_modules_match_numpy_pad():
    x = RNG.standard_normal((2, 3, 4, 5))
    t = nv.tensor(x)
    cases = [
        (nn.ZeroPad2d((1, 2, 0, 3)), np.pad(x, [(0, 0), (0, 0), (0, 3), (1, 2)])),
        (nn.ConstantPad1d(2, 1.5), np.pad(x, [(0, 0)] * 3 + [(2, 2)], constant_values=1.5)),
        (nn.ReflectionPad2d(2), np.pad(x, [(0, 0), (0, 0), (2, 2), (2, 2)], mode="reflect")),
        (nn.ReplicationPad1d((3, 1)), np.pad(x[0], [(0, 0)] * 2 + [(3, 1)], mode="edge")),
        (nn.CircularPad2d((1, 0, 2, 1)), np.pad(x, [(0, 0), (0, 0), (2, 1), (1, 0)], mode="wrap")),
        (nn.ReflectionPad3d(1), np.pad(x, [(0, 0), (1, 1), (1, 1), (1, 1)], mode="reflect")),
        (nn.ZeroPad3d((0, 1, 0, 0, 1, 0)), np.pad(x, [(0, 0), (1, 0), (0, 0), (0, 1)])),
    ]
    outs = [m(t[0] if isinstance(m, nn.ReplicationPad1d) else t) for m, _ in cases]
    nv.realize(*outs)
    for out, (_, want) in zip(outs, cases):
        assert_close(out, want, rtol=0, atol=0)
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert repr(nn.ConstantPad1d((1, 2), 3.5)) == "ConstantPad1d(padding=(1, 2), value=3.5)"
    with pytest.raises(ValueError, match=r"ReflectionPad2d: expected a 3-D or 4-D input"):
        nn.ReflectionPad2d(1)(nv.ones(3, 4))
    with pytest.raises(ValueError, match="ZeroPad2d: padding must be an int or a tuple of 4"):
        nn.ZeroPad2d((1, 2, 3))


def test_pixel_and_channel_shuffle():
    x = RNG.standard_normal((2, 8, 3, 4))
    t = nv.tensor(x, requires_grad=True)
    up = F.pixel_shuffle(t, 2)
    back = nn.PixelUnshuffle(2)(up)
    shuffled = nn.ChannelShuffle(4)(t)
    (g,) = nv.autograd.grad((up * nv.tensor(np.arange(up.numel()).reshape(up.shape) * 1.0))
                            .sum(), [t])
    nv.realize(up, back, shuffled, g)
    # out[n, c, h*r + i, w*r + j] = in[n, c*r*r + i*r + j, h, w]
    want = x.reshape(2, 2, 2, 2, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 8)
    assert_close(up, want, rtol=0, atol=0)
    assert_close(back, x, rtol=0, atol=0)
    assert_close(shuffled, x.reshape(2, 4, 2, 3, 4).transpose(0, 2, 1, 3, 4).reshape(x.shape),
                 rtol=0, atol=0)
    weights = np.arange(up.numel()).reshape(2, 2, 6, 8) * 1.0
    assert_close(g, F.pixel_unshuffle(nv.tensor(weights), 2).numpy(), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"pixel_shuffle: the channel dim \(size 7\)"):
        F.pixel_shuffle(nv.ones(1, 7, 2, 2), 2)
    with pytest.raises(ValueError, match=r"pixel_unshuffle: height and width \(3, 4\)"):
        F.pixel_unshuffle(nv.ones(1, 1, 3, 4), 2)
    with pytest.raises(ValueError, match=r"channel_shuffle: the number of channels \(6\)"):
        F.channel_shuffle(nv.ones(1, 6, 2), 4)
    with pytest.raises(ValueError, match="pixel_shuffle: expects a positive int upscale"):
        nn.PixelShuffle(0)(nv.ones(1, 4, 2, 2))


def _np_unfold(x, k, d, p, s):
    n, c, h, w = x.shape
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.zeros((n, c, k[0], k[1], oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                                  j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
    return cols.reshape(n, c * k[0] * k[1], oh * ow)


def _np_fold(cols, size, k, d, p, s):
    n = cols.shape[0]
    c = cols.shape[1] // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, hp, wp))
    blocks = cols.reshape(n, c, k[0], k[1], oh, ow)
    for i in range(k[0]):
        for j in range(k[1]):
            for a in range(oh):
                for b in range(ow):
                    out[:, :, a * s[0] + i * d[0], b * s[1] + j * d[1]] += blocks[:, :, i, j, a, b]
    return out[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]


def test_unfold_and_fold_against_loops():
    k, d, p, s = (2, 3), (1, 2), (1, 0), (2, 1)
    x = RNG.standard_normal((2, 3, 5, 7))
    cols = RNG.standard_normal((2, 3 * 6, 3 * 3))
    u = nn.Unfold(k, d, p, s)(nv.tensor(x))
    f = F.fold(nv.tensor(cols), (5, 7), k, d, p, s)
    unbatched = F.fold(nv.tensor(cols[0]), (5, 7), k, d, p, s)
    overlap = nn.Fold(4, 3, stride=1)(nv.ones(1, 9, 4))      # each pixel counts its blocks
    nv.realize(u, f, unbatched, overlap)
    assert_close(u, _np_unfold(x, k, d, p, s), rtol=0, atol=0)
    assert_close(f, _np_fold(cols, (5, 7), k, d, p, s), rtol=1e-14)
    assert_close(unbatched, _np_fold(cols[:1], (5, 7), k, d, p, s)[0], rtol=1e-14)
    assert overlap.numpy()[0, 0].tolist() == [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2],
                                              [1, 2, 2, 1]]
    assert gradcheck(lambda v: F.unfold(v, 2, padding=1, stride=2), [x[:1, :2, :3, :4]])
    assert gradcheck(lambda v: F.fold(v, (3, 5), 2, dilation=(1, 2), padding=(1, 0), stride=2),
                     [cols[:1, :4, :4]])
    with pytest.raises(ValueError, match=r"fold: output_size \(5, 7\), kernel_size \(2, 3\).* "
                                         r"give 3 \* 3 = 9 blocks, but dim -1 of input"):
        F.fold(nv.ones(2, 18, 8), (5, 7), k, d, p, s)
    with pytest.raises(ValueError, match=r"fold: dim 1 of input \(2, 17, 9\) \(size 17\) must "
                                         r"be divisible"):
        F.fold(nv.ones(2, 17, 9), (5, 7), k, d, p, s)
    with pytest.raises(ValueError, match="unfold: expected a 3-D .* or 4-D"):
        F.unfold(nv.ones(1, 1, 1, 4, 4), 2)


def test_bilinear_upsampling_and_repr():
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 5))
    m = nn.Bilinear(4, 5, 6).double()
    y = m(nv.tensor(a), nv.tensor(b))
    img = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    near = nn.UpsamplingNearest2d(scale_factor=2)(nv.tensor(img))
    bil = nn.UpsamplingBilinear2d(size=(5, 7))(nv.tensor(img))
    nv.realize(y, near, bil)
    w, bias = m.weight.numpy(), m.bias.numpy()
    assert_close(y, np.einsum("nti,oij,ntj->nto", a, w, b) + bias, rtol=1e-12)
    assert np.abs(w).max() <= 0.5 and np.abs(bias).max() <= 0.5     # 1/sqrt(in1)
    assert_close(near, img.repeat(2, 2).repeat(2, 3), rtol=0, atol=0)
    # align_corners=True: output pixel i reads source position i * (in - 1) / (out - 1)
    r, c = np.arange(5) * 2 / 4, np.arange(7) * 3 / 6
    r0, c0 = np.minimum(np.floor(r).astype(int), 1), np.minimum(np.floor(c).astype(int), 2)
    tr, tc = (r - r0)[:, None], (c - c0)[None, :]
    g = img[0, :, :, :].astype(np.float64)
    want = (g[:, r0][:, :, c0] * (1 - tr) * (1 - tc) + g[:, r0 + 1][:, :, c0] * tr * (1 - tc)
            + g[:, r0][:, :, c0 + 1] * (1 - tr) * tc + g[:, r0 + 1][:, :, c0 + 1] * tr * tc)
    assert_close(bil, want[None], rtol=1e-5, atol=1e-6)
    assert gradcheck(lambda u, v, ww, bb: F.bilinear(u, v, ww, bb),
                     [a[0, :2], b[0, :2], w[:2], bias[:2]])
    assert repr(m) == "Bilinear(in1_features=4, in2_features=5, out_features=6, bias=True)"
    with pytest.raises(ValueError, match=r"bilinear: inputs \(2, 4\) and \(3, 5\) must be"):
        F.bilinear(nv.ones(2, 4), nv.ones(3, 5), nv.ones(6, 4, 5))


def test_cosine_similarity_pairwise_distance_pdist():
    x1, x2 = RNG.standard_normal((3, 4)), RNG.standard_normal((1, 4))
    z = x1.copy()
    z[1] = 0.0
    pts = RNG.standard_normal((4, 3))
    pts[2] = pts[0]                                    # coincident rows: distance 0
    zt = nv.tensor(z, requires_grad=True)
    pt = nv.tensor(pts, requires_grad=True)
    cos = F.cosine_similarity(zt, nv.tensor(x2), dim=1)
    dist = nn.PairwiseDistance(p=3.0, keepdim=True)(nv.tensor(x1), nv.tensor(x2))
    inf = F.pairwise_distance(nv.tensor(x1), nv.tensor(x2), p=math.inf)
    pd = F.pdist(pt)
    gz, = nv.autograd.grad(cos.sum(), [zt])
    gp, = nv.autograd.grad(pd.sum(), [pt])
    nv.realize(cos, dist, inf, pd, gz, gp)
    n1 = np.maximum(np.linalg.norm(z, axis=1), 1e-8)
    n2 = np.linalg.norm(x2, axis=1)
    assert_close(cos, (z * x2).sum(1) / (n1 * n2), rtol=1e-12)
    assert_close(dist, (np.abs(x1 - x2 + 1e-6) ** 3).sum(1, keepdims=True) ** (1 / 3),
                 rtol=1e-12)
    assert_close(inf, np.abs(x1 - x2 + 1e-6).max(1), rtol=1e-12)
    i, j = np.triu_indices(4, 1)
    assert_close(pd, np.linalg.norm(pts[i] - pts[j], axis=1), rtol=1e-12)
    # a zero vector gets a finite gradient: x2/(eps |x2|), PyTorch's
    assert_close(gz.numpy()[1], x2[0] / (1e-8 * n2[0]), rtol=1e-9)
    assert np.all(np.isfinite(gp.numpy()))
    assert gradcheck(lambda a, b: (F.cosine_similarity(a, b, dim=-1),
                                   F.pairwise_distance(a, b, 1.5), F.pdist(a, 2.0)),
                     [x1, x2.repeat(3, 0)])
    # as PyTorch: neither module prints its arguments
    assert repr(nn.CosineSimilarity(dim=0)) == "CosineSimilarity()"
    assert repr(nn.PairwiseDistance(p=1.0)) == "PairwiseDistance()"
    with pytest.raises(ValueError, match=r"pdist: only supports 2-D tensors \(N, M\), got "
                                         r"shape \(2, 3, 4\)"):
        F.pdist(nv.ones(2, 3, 4))


def test_instance_norm_and_running_statistics():
    x = RNG.standard_normal((3, 2, 5))
    m = nn.InstanceNorm1d(2, affine=True, track_running_stats=True).double()
    with nv.no_grad():
        m.weight.copy_(nv.tensor([1.5, -0.5]))
    y = m(nv.tensor(x))
    mean, var = x.mean(2, keepdims=True), x.var(2, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * np.array([1.5, -0.5])[:, None]
    assert_close(y, want, rtol=1e-10)
    assert_close(m.running_mean, 0.1 * x.mean(2).mean(0), rtol=1e-12)
    assert_close(m.running_var, 0.9 + 0.1 * x.var(2, ddof=1).mean(0), rtol=1e-12)
    m.eval()
    rm, rv = m.running_mean.numpy()[:, None], m.running_var.numpy()[:, None]
    assert_close(m(nv.tensor(x[0])), (x[0] - rm) / np.sqrt(rv + 1e-5) * [[1.5], [-0.5]],
                 rtol=1e-10)
    assert sorted(m.state_dict()) == ["bias", "num_batches_tracked", "running_mean",
                                      "running_var", "weight"]
    plain = nn.InstanceNorm2d(4)
    assert list(plain.state_dict()) == [] and not plain.affine
    x4 = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    flat = x4.reshape(2, 4, 9)
    want4 = (flat - flat.mean(2, keepdims=True)) / np.sqrt(flat.var(2, keepdims=True) + 1e-5)
    assert_close(plain.eval()(nv.tensor(x4)), want4.reshape(x4.shape), rtol=1e-5, atol=1e-6)
    assert gradcheck(lambda v, w, b: F.instance_norm(v, weight=w, bias=b),
                     [x[:2], np.array([0.5, 2.0]), np.array([0.1, -0.3])])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        nn.InstanceNorm1d(3)(nv.ones(2, 2, 4))
    assert "does not match num_features (3)" in str(seen[0].message)
    with pytest.raises(ValueError, match="InstanceNorm1d: expected input's size at dim 1"):
        nn.InstanceNorm1d(3, affine=True)(nv.ones(2, 2, 4))
    with pytest.raises(ValueError, match="instance_norm: expected more than 1 spatial element"):
        F.instance_norm(nv.ones(2, 3, 1))
    with pytest.raises(ValueError, match=r"InstanceNorm2d: expected a 3-D \(unbatched\) or 4-D"):
        plain(nv.ones(2, 4))


def test_local_response_norm():
    x = RNG.standard_normal((2, 5, 3))
    y = nn.LocalResponseNorm(3, alpha=0.1, beta=0.6, k=2.0)(nv.tensor(x))
    sq = np.pad(x**2, [(0, 0), (1, 1), (0, 0)])
    avg = (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]) / 3
    assert_close(y, x / (2.0 + 0.1 * avg) ** 0.6, rtol=1e-12)
    x4 = RNG.standard_normal((1, 4, 2, 2))
    sq4 = np.pad(x4**2, [(0, 0), (2, 1), (0, 0), (0, 0)])
    avg4 = sum(sq4[:, j:j + 4] for j in range(4)) / 4
    assert_close(F.local_response_norm(nv.tensor(x4), 4), x4 / (1 + 1e-4 * avg4) ** 0.75,
                 rtol=1e-12)
    assert gradcheck(lambda v: F.local_response_norm(v, 2, alpha=0.5), [x[:1, :3]])
    with pytest.raises(ValueError, match="local_response_norm: expected an input of 3 or more"):
        F.local_response_norm(nv.ones(2, 3), 2)


def test_pairwise_distance_of_0d_inputs():
    """Two 0-d inputs give the 0-d ``|x1 - x2 + eps|`` (they raised); a 0-d input beside a
    vector broadcasts to it."""
    F = nv.nn.functional
    got = F.pairwise_distance(nv.tensor(1.0), nv.tensor(3.0))
    assert got.shape == () and abs(got.item() - (2.0 - 1e-6)) < 1e-7
    assert F.pairwise_distance(nv.tensor(1.0), nv.tensor(3.0), keepdim=True).shape == ()
    got = F.pairwise_distance(nv.tensor(1.0), nv.tensor([3.0, 4.0]), eps=0.0)
    assert got.shape == () and abs(got.item() - 13 ** 0.5) < 1e-6
    assert F.pairwise_distance(nv.tensor([1.0, 2.0]), nv.tensor(3.0), keepdim=True).shape == (1,)
