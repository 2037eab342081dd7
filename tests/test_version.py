"""``nv.version`` (``nova/version.py``): torch.version's fields."""
import os
import subprocess
import sys

import pytest

import nova as nv
from nova.runtime import cuda_runtime


def test_version_fields_are_torchs():
    assert nv.version.__version__ == nv.__version__
    assert nv.version.debug is False and nv.version.hip is None
    from nova.version import cuda, git_version    # (module __getattr__: from-imports too)
    expected_cuda = None if cuda_runtime.unavailable_reason() else cuda
    assert cuda == expected_cuda                  # None without CUDA, as torch's CPU build
    assert git_version == nv.version.git_version
    assert git_version == "Unknown" or (len(git_version) == 40 and
                                        int(git_version, 16) >= 0)


def _head(root):
    return subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_git_version_is_the_checkouts_head():
    root = os.path.dirname(os.path.dirname(nv.__file__))
    if not os.path.exists(os.path.join(root, ".git")):
        assert nv.version.git_version == "Unknown"          # an installed copy
        return
    try:
        before = _head(root)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git here")
    # a fresh process (git_version is read once per process); HEAD may move meanwhile
    out = subprocess.run([sys.executable, "-c", "import nova; print(nova.version.git_version)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out in (before, _head(root))
