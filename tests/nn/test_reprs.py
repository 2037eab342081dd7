"""Module reprs match PyTorch 2.x's printed text (expected strings written out from
torch 2.13's output), the layout of ``Module.__repr__`` and the layers' ``extra_repr``."""
import pytest

import nova as nv
from nova import nn

LINEAR_2_2 = "Linear(in_features=2, out_features=2, bias=True)"


class _Extra(nn.Module):
    def __init__(self, extra: str, children: bool):
        super().__init__()
        self._extra = extra
        if children:
            self.l = nn.Linear(2, 2)

    def extra_repr(self) -> str:
        return self._extra


def test_multiline_extra_repr_with_children_one_item_a_line():
    assert repr(_Extra("a=1\nb=2", True)) == f"_Extra(\n  a=1\n  b=2\n  (l): {LINEAR_2_2}\n)"


def test_multiline_extra_repr_without_children():
    assert repr(_Extra("a=1\nb=2", False)) == "_Extra(\n  a=1\n  b=2\n)"


def test_single_line_extra_repr_with_and_without_children():
    assert repr(_Extra("a=1", False)) == "_Extra(a=1)"
    assert repr(_Extra("a=1", True)) == f"_Extra(\n  a=1\n  (l): {LINEAR_2_2}\n)"
    assert repr(_Extra("", False)) == "_Extra()"


def test_nested_children_indent_their_inner_lines():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), _Extra("a=1\nb=2", False)))
    assert repr(m) == ("Sequential(\n"
                       f"  (0): {LINEAR_2_2}\n"
                       "  (1): Sequential(\n"
                       "    (0): ReLU()\n"
                       "    (1): _Extra(\n"
                       "      a=1\n"
                       "      b=2\n"
                       "    )\n"
                       "  )\n"
                       ")")


def test_multihead_attention_repr_and_out_proj_class():
    m = nn.MultiheadAttention(32, 4)
    assert repr(m) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear("
                       "in_features=32, out_features=32, bias=True)\n)")
    assert isinstance(m.out_proj, nn.Linear)
    assert sorted(m.state_dict()) == ["in_proj_bias", "in_proj_weight", "out_proj.bias",
                                      "out_proj.weight"]


def test_module_list_compresses_repeated_neighbours():
    m = nn.ModuleList([nn.Linear(2, 3), nn.Linear(2, 3), nn.Linear(2, 3), nn.ReLU(),
                       nn.Linear(2, 3)])
    lin = "Linear(in_features=2, out_features=3, bias=True)"
    assert repr(m) == (f"ModuleList(\n  (0-2): 3 x {lin}\n  (3): ReLU()\n  (4): {lin}\n)")
    assert repr(nn.ModuleList()) == "ModuleList()"


def test_module_list_of_multiline_modules_indents_them():
    m = nn.ModuleList([nn.Sequential(nn.ReLU()), nn.Sequential(nn.ReLU())])
    assert repr(m) == "ModuleList(\n  (0-1): 2 x Sequential(\n    (0): ReLU()\n  )\n)"


@pytest.mark.parametrize("make, text", [
    (lambda: nn.Dropout(0.1), "Dropout(p=0.1, inplace=False)"),
    (lambda: nn.Dropout(0.3, inplace=True), "Dropout(p=0.3, inplace=True)"),
    (lambda: nn.Dropout1d(), "Dropout1d(p=0.5, inplace=False)"),
    (lambda: nn.Dropout2d(), "Dropout2d(p=0.5, inplace=False)"),
    (lambda: nn.Dropout3d(), "Dropout3d(p=0.5, inplace=False)"),
    (lambda: nn.AlphaDropout(), "AlphaDropout(p=0.5, inplace=False)"),
    (lambda: nn.FeatureAlphaDropout(), "FeatureAlphaDropout(p=0.5, inplace=False)"),
    (lambda: nn.LayerNorm(4), "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"),
    (lambda: nn.LayerNorm((4, 5), elementwise_affine=False),
     "LayerNorm((4, 5), eps=1e-05, elementwise_affine=False, bias=False)"),
    (lambda: nn.LayerNorm(4, bias=False),
     "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=False)"),
    (lambda: nn.RMSNorm(4), "RMSNorm((4,), eps=None, elementwise_affine=True)"),
    (lambda: nn.GroupNorm(2, 4), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"),
    (lambda: nn.GroupNorm(2, 4, affine=False),
     "GroupNorm(2, 4, eps=1e-05, affine=False, bias=False)"),
    (lambda: nn.GroupNorm(2, 4, bias=False),
     "GroupNorm(2, 4, eps=1e-05, affine=True, bias=False)"),
    (lambda: nn.BatchNorm1d(4), "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, "
                                "bias=True, track_running_stats=True)"),
    (lambda: nn.BatchNorm2d(4, momentum=None), "BatchNorm2d(4, eps=1e-05, momentum=None, "
                                               "affine=True, bias=True, "
                                               "track_running_stats=True)"),
    (lambda: nn.BatchNorm3d(4, affine=False, track_running_stats=False),
     "BatchNorm3d(4, eps=1e-05, momentum=0.1, affine=False, bias=False, "
     "track_running_stats=False)"),
    (lambda: nn.InstanceNorm1d(4), "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=False, "
                                   "bias=False, track_running_stats=False)"),
    (lambda: nn.InstanceNorm2d(4, affine=True),
     "InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
     "track_running_stats=False)"),
    (lambda: nn.Upsample(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')"),
    (lambda: nn.Upsample(scale_factor=(2, 3), mode="bilinear"),
     "Upsample(scale_factor=(2.0, 3.0), mode='bilinear')"),
    (lambda: nn.Upsample(size=4), "Upsample(size=4, mode='nearest')"),
    (lambda: nn.UpsamplingNearest2d(scale_factor=2),
     "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"),
    (lambda: nn.MaxPool2d(2),
     "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"),
    (lambda: nn.MaxPool1d(3, 1), "MaxPool1d(kernel_size=3, stride=1, padding=0, dilation=1, "
                                 "ceil_mode=False)"),
    (lambda: nn.AvgPool2d(2), "AvgPool2d(kernel_size=2, stride=2, padding=0)"),
    (lambda: nn.AvgPool1d(2), "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"),
    (lambda: nn.Conv2d(2, 3, (3, 5), padding=1, dilation=2, bias=False,
                       padding_mode="reflect"),
     "Conv2d(2, 3, kernel_size=(3, 5), stride=(1, 1), padding=(1, 1), dilation=(2, 2), "
     "bias=False, padding_mode=reflect)"),
    (lambda: nn.Conv2d(2, 3, 3, padding="valid"),
     "Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=valid)"),
    (lambda: nn.RNNCell(3, 4, nonlinearity="relu"), "RNNCell(3, 4, nonlinearity=relu)"),
    (lambda: nn.ReLU(inplace=True), "ReLU(inplace=True)"),
    (lambda: nn.Linear(3, 4), "Linear(in_features=3, out_features=4, bias=True)"),
])
def test_layer_reprs_match_pytorch(make, text):
    assert repr(make()) == text


def test_transformer_encoder_layer_repr():
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    drop = "Dropout(p=0.1, inplace=False)"
    norm = "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert repr(m) == (
        "TransformerEncoderLayer(\n"
        "  (self_attn): MultiheadAttention(\n"
        "    (out_proj): NonDynamicallyQuantizableLinear(in_features=8, out_features=8, "
        "bias=True)\n"
        "  )\n"
        "  (linear1): Linear(in_features=8, out_features=16, bias=True)\n"
        f"  (dropout): {drop}\n"
        "  (linear2): Linear(in_features=16, out_features=8, bias=True)\n"
        f"  (norm1): {norm}\n"
        f"  (norm2): {norm}\n"
        f"  (dropout1): {drop}\n"
        f"  (dropout2): {drop}\n"
        ")")


def test_group_norm_without_bias_scales_only():
    m = nn.GroupNorm(1, 2, bias=False)
    assert m.bias is None and sorted(m.state_dict()) == ["weight"]
    x = nv.tensor([[1.0, 3.0]])
    with nv.no_grad():
        m.weight.fill_(2.0)
    # mean 2, biased variance 1: (x - 2) / sqrt(1 + eps) * 2
    got = m(x).tolist()[0]
    assert got == pytest.approx([-2.0 / (1 + 1e-5) ** 0.5, 2.0 / (1 + 1e-5) ** 0.5], rel=1e-5)


def test_reprs_agree_with_torch():
    torch = pytest.importorskip("torch")
    for name, args, kw in [("LayerNorm", (4,), {}), ("Dropout", (0.1,), {}),
                           ("BatchNorm2d", (4,), {}), ("GroupNorm", (2, 4), {}),
                           ("InstanceNorm3d", (4,), {}), ("MultiheadAttention", (8, 2), {}),
                           ("Upsample", (), {"scale_factor": 2}), ("AvgPool1d", (2,), {}),
                           ("MaxPool3d", (2,), {})]:
        assert repr(getattr(nn, name)(*args, **kw)) == \
            repr(getattr(torch.nn, name)(*args, **kw)), name
