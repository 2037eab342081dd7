"""``nova.nn.modules``: PyTorch's submodule names for the layer classes (ported code
imports ``_Loss`` from ``torch.nn.modules.loss`` and tests ``isinstance(m,
nn.modules.batchnorm._NormBase)``), and ``nn.modules.utils``."""
from collections import OrderedDict

import pytest

import nova as nv
from nova.nn.modules import SUBMODULES
from nova.nn.modules.utils import (_list_with_default, _ntuple, _pair, _quadruple,
                                   _reverse_repeat_tuple, _single, _triple,
                                   consume_prefix_in_state_dict_if_present)


def test_the_idioms_ported_code_uses():
    from nova.nn.modules.batchnorm import _BatchNorm, _NormBase
    from nova.nn.modules.conv import _ConvNd
    from nova.nn.modules.loss import _Loss, _WeightedLoss
    from nova.nn.modules.module import Module
    assert Module is nv.nn.Module and nv.nn.modules.Conv2d is nv.nn.Conv2d
    assert issubclass(nv.nn.CrossEntropyLoss, _WeightedLoss) and issubclass(_WeightedLoss, _Loss)
    assert isinstance(nv.nn.Conv2d(1, 1, 1), _ConvNd)
    norms = [nv.nn.BatchNorm2d(3), nv.nn.SyncBatchNorm(3), nv.nn.InstanceNorm1d(3),
             nv.nn.LazyBatchNorm1d()]
    assert all(isinstance(m, _NormBase) for m in norms)
    assert isinstance(norms[0], _BatchNorm) and not isinstance(norms[2], _BatchNorm)
    assert not isinstance(nv.nn.LayerNorm(3), _NormBase)


def test_every_name_is_where_pytorch_files_it():
    """Without torch: the table's names exist; with torch: each is in torch's
    submodule of that name too."""
    for sub, groups in SUBMODULES.items():
        module = getattr(nv.nn.modules, sub)
        for _, names in groups:
            for name in names:
                assert getattr(module, name) is not None
    try:
        import torch.nn.modules as tm
    except ImportError:
        return
    import importlib
    for sub in SUBMODULES:
        theirs = importlib.import_module(f"torch.nn.modules.{sub}")
        mine = getattr(nv.nn.modules, sub)
        for name in dir(mine):
            if not name.startswith("__") and isinstance(getattr(mine, name), type):
                assert hasattr(theirs, name), (sub, name)
    assert tm is not None


def test_argument_helpers():
    assert _single(3) == (3,) and _pair(3) == (3, 3) and _triple(2) == (2, 2, 2)
    assert _quadruple(0) == (0, 0, 0, 0) and _pair((1, 2)) == (1, 2) and _pair([4]) == (4,)
    assert _ntuple(2, "_pair")(5) == (5, 5) and _pair.__name__ == "_pair"
    assert _reverse_repeat_tuple((1, 2, 3), 2) == (3, 3, 2, 2, 1, 1)
    assert _list_with_default([None, 4], [1, 2, 7, 9]) == [7, 4]
    assert _list_with_default(5, [1, 2]) == 5
    with pytest.raises(ValueError, match="Input dimension should be at least 3"):
        _list_with_default([None, 4], [1, 2])


def test_consume_prefix_strips_a_data_parallel_checkpoint():
    state = OrderedDict([("module.fc.weight", 1), ("module.fc.bias", 2), ("other", 3)])
    state._metadata = OrderedDict([("", {"version": 1}), ("module", {"version": 1}),
                                   ("module.fc", {"version": 1})])
    consume_prefix_in_state_dict_if_present(state, "module.")
    assert list(state) == ["other", "fc.weight", "fc.bias"]
    assert set(state._metadata) == {"", "fc"}
