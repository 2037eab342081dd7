"""nova.config: every environment variable in one table, read nowhere else, and a bad
value named with its variable."""
import ast
import pathlib
import subprocess
import sys

import pytest

import nova
from nova import config

ROOT = pathlib.Path(nova.__file__).parent


def test_no_module_but_config_reads_the_environment():
    readers = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "config.py" and path.parent == ROOT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                readers.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert readers == []


@pytest.mark.parametrize("setting, raw", [
    (config.SPIN_US, "fast"), (config.SPIN_US, "-1"), (config.STEP_CACHE_MB, "abc"),
    (config.COMPILE_WORKER_MB, "0"), (config.CACHE, "yes"), (config.DEBUG, "2"),
])
def test_a_bad_value_names_the_variable_and_what_is_valid(monkeypatch, setting, raw):
    monkeypatch.setenv(setting.name, raw)
    with pytest.raises(ValueError, match=rf"^{setting.name}={raw!r}: expected .*\("):
        setting.get()


def test_unset_or_empty_means_the_default(monkeypatch):
    monkeypatch.delenv("NOVA_SPIN_US", raising=False)
    assert config.SPIN_US.get() is None
    monkeypatch.setenv("NOVA_SPIN_US", "")
    assert config.SPIN_US.get() is None
    monkeypatch.setenv("NOVA_SPIN_US", "250")
    assert config.SPIN_US.get() == 250.0
    monkeypatch.setenv("NOVA_CACHE", "0")
    assert config.cache_root() is None
    monkeypatch.setenv("NOVA_CACHE", "1")
    monkeypatch.setenv("NOVA_CACHE_DIR", "/some/where")
    assert config.cache_root() == "/some/where"


def test_a_bad_value_read_at_import_fails_the_import_with_the_name():
    run = subprocess.run([sys.executable, "-c", "import nova"], capture_output=True,
                         text=True, env={"NOVA_STEP_CACHE_MB": "lots", "PATH": "/usr/bin"})
    assert run.returncode != 0
    assert "NOVA_STEP_CACHE_MB='lots'" in run.stderr


def test_the_table_lists_every_setting():
    table = config.describe()
    assert all(s.name in table for s in config.SETTINGS)
    assert len({s.name for s in config.SETTINGS}) == len(config.SETTINGS) >= 15


def test_overridden_sets_a_value_for_a_block_and_restores_it(monkeypatch):
    monkeypatch.delenv("NOVA_FUSED_ATTENTION", raising=False)
    with config.FUSED_ATTENTION.overridden("0"):
        assert config.FUSED_ATTENTION.get() is False
        with config.FUSED_ATTENTION.overridden("1"):
            assert config.FUSED_ATTENTION.get() is True
        assert config.FUSED_ATTENTION.get() is False
    assert not config.FUSED_ATTENTION.is_set()
    with pytest.raises(ValueError):
        with config.FUSED_ATTENTION.overridden("maybe"):
            pass
    assert not config.FUSED_ATTENTION.is_set()
