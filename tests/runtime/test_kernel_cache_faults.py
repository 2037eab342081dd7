"""Fault injection into the on-disk kernel caches and the debug directory (#17).

Every case damages a populated cache the way a crash, a disk, a careless copy or
another user could, runs a fresh process over it and checks that the results still
match numpy, that the damage is counted, and that the entry heals where it can: the
rewritten file is byte-for-byte the one a clean compile writes. Runs happen in
subprocesses, since the failures guarded against are a segfault, an LLVM abort and a
hang (each run has a timeout).
"""
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nova as nv
from nova.runtime import disk_cache, elf, kernel_cache
from nova.runtime.debug_dir import UnsafeDirectoryError, debug_directory, write_debug_file

X = (np.arange(15, dtype=np.float32).reshape(3, 5) - 7) / 4
EXPECTED = [np.sin(X) * 2 + 1, X.T @ X, X.sum(-1)]   # (5 rows: a GEMM, not a reduction)

SCRIPT = """
import json, warnings
import numpy as np, nova as nv
from nova.runtime.kernel_cache import KERNELS
warnings.simplefilter("always")
x = (np.arange(15, dtype=np.float32).reshape(3, 5) - 7) / 4
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t = nv.tensor(x)
    results = [(t.double().sin() * 2 + 1).numpy(), (t.T @ t).numpy(), t.sum(-1).numpy()]
print(json.dumps({"results": [r.tolist() for r in results], "stats": vars(KERNELS.stats),
                  "warnings": [str(w.message) for w in caught]}))
"""


def _run(cache: Path, script: str = SCRIPT, **env) -> dict:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NOVA_CACHE_DIR": str(cache),
                                           "NOVA_ENGINE": "cpu", "NOVA_DEBUG": "0", **env})
    assert out.returncode == 0, f"run failed ({out.returncode}):\n{out.stderr[-3000:]}"
    report = json.loads(out.stdout.splitlines()[-1])
    for got, want in zip(report["results"], EXPECTED):
        np.testing.assert_allclose(np.array(got, np.float32), want, rtol=1e-5, atol=1e-5)
    return report


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.rglob("nova_k_*.o"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A cache populated by one clean run: three kernels."""
    cache = tmp_path_factory.mktemp("pristine")
    report = _run(cache)
    assert report["stats"]["compiled"] == 3 and len(_entries(cache)) == 3
    return cache


@pytest.fixture
def cache(pristine, tmp_path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(pristine, copy)
    return copy


def _calling_libm(cache: Path) -> Path:
    """The entry calling libm (float64 ``sin``; float32 math is inline, no call)."""
    (entry,) = [p for p in _entries(cache) if b"\0sin\0" in p.read_bytes()]
    return entry


def _rewrite_payload(entry: Path, change) -> None:
    header, payload = disk_cache.decode_entry(entry.read_bytes())
    entry.write_bytes(disk_cache.encode_entry(header, change(payload)))


def _truncate(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _flip_a_bit(entry: Path) -> None:
    blob = bytearray(entry.read_bytes())
    blob[len(blob) * 2 // 3] ^= 0x10
    entry.write_bytes(bytes(blob))


def _random_payload(entry: Path) -> None:
    rng = np.random.default_rng(0)
    _rewrite_payload(entry, lambda p: rng.integers(0, 256, len(p), np.uint8).tobytes())


def _unresolvable_symbol(entry: Path) -> None:
    """A well-formed object whose external call no longer resolves: MCJIT aborts."""
    _rewrite_payload(entry, lambda p: p.replace(b"\0sin\0", b"\0siX\0"))


HEALING = {"truncated": (_truncate, "corrupted"), "bit-flipped": (_flip_a_bit, "corrupted"),
           "random payload, good header": (_random_payload, "rejected"),
           "unresolvable external": (_unresolvable_symbol, "rejected")}


@pytest.mark.parametrize("damage", HEALING)
def test_a_damaged_entry_is_recompiled_and_healed(pristine, cache, damage):
    change, counter = HEALING[damage]
    entry = _calling_libm(cache)
    change(entry)
    stats = _run(cache)["stats"]
    assert (stats[counter], stats["compiled"], stats["disk_hits"]) == (1, 1, 2)
    assert entry.read_bytes() == (pristine / entry.relative_to(cache)).read_bytes()


SUPPORT = {"thread pool": "support_nova_pool.o", "GEMM driver": "support_nova_sgemm_*.o"}


def _support(cache: Path, which: str = "thread pool") -> Path:
    (entry,) = cache.rglob(SUPPORT[which])
    return entry


def test_the_thread_pool_and_driver_load_from_the_cache_once_compiled(pristine, cache):
    """The runtime's own native code (thread pool and step driver; the tiled GEMMs'
    shared driver, which ``X.T @ X`` calls) is compiled once and then read from the
    cache like a kernel: no process compiles it again."""
    first = _run(pristine.parent / "fresh")["stats"]
    assert (first["support_compiled"], first["support_hits"]) == (2, 0)
    again = _run(cache)["stats"]
    assert (again["support_compiled"], again["support_hits"]) == (0, 2)
    assert all(_support(cache, which).is_file() for which in SUPPORT)


def test_a_lost_gemm_driver_is_compiled_while_its_kernel_loads_from_the_cache(cache):
    """The GEMM kernel's entry is intact but the driver it calls is gone: the kernel's
    object is accepted (the driver's symbol is promised, linked before the kernel is
    loaded), only the driver compiles, and the product is right."""
    _support(cache, "GEMM driver").unlink()
    stats = _run(cache)["stats"]
    assert (stats["compiled"], stats["disk_hits"], stats["rejected"]) == (0, 3, 0)
    assert (stats["support_compiled"], stats["support_hits"]) == (1, 1)
    assert _support(cache, "GEMM driver").is_file()


def test_a_cached_gemm_driver_is_found_without_building_its_ir(cache):
    """The driver's entry is keyed by what its IR is made from (its register tile, the
    target and Nova's source), so a warm process links it without building and
    printing the IR (~0.1 s of a warm first step): here building it would fail."""
    forbid = ("import nova.compiler.targets.cpu.llvm as llvm\n"
              "def _refuse(*args):\n"
              "    raise AssertionError('the GEMM driver was built on a warm start')\n"
              "llvm.driver_module = _refuse\n")
    stats = _run(cache, forbid + SCRIPT)["stats"]
    assert (stats["support_compiled"], stats["support_hits"]) == (0, 2)


# external functions each support object calls, one of which a test renames
_EXTERNALS = {"thread pool": (b"\0nanosleep\0", b"\0sched_yield\0", b"\0syscall\0",
                              b"\0clock_gettime\0"),
              "GEMM driver": (b"\0aligned_alloc\0", b"\0free\0")}


@pytest.mark.parametrize("which", SUPPORT)
@pytest.mark.parametrize("damage", HEALING)
def test_a_damaged_support_entry_is_recompiled_and_healed(pristine, cache, damage, which):
    change, counter = HEALING[damage]
    entry = _support(cache, which)
    if damage == "unresolvable external":     # neither calls libm: break another
        header, payload = disk_cache.decode_entry(entry.read_bytes())
        names = [n for n in _EXTERNALS[which] if n in payload]
        assert names, f"the {which}'s object names none of {_EXTERNALS[which]}"
        _rewrite_payload(entry, lambda p: p.replace(names[0], names[0][:-2] + b"X\0"))
    else:
        change(entry)
    stats = _run(cache)["stats"]
    assert (stats[counter], stats["support_compiled"], stats["support_hits"]) == (1, 1, 1)
    assert entry.read_bytes() == (pristine / entry.relative_to(cache)).read_bytes()


def test_an_entry_copied_under_another_kernels_name_is_rejected_and_healed(pristine, cache):
    a, b = _entries(cache)[:2]
    shutil.copyfile(a, b)
    stats = _run(cache)["stats"]
    assert (stats["rejected"], stats["compiled"], stats["disk_hits"]) == (1, 1, 2)
    assert b.read_bytes() == (pristine / b.relative_to(cache)).read_bytes()


def test_a_symlink_at_an_entry_path_is_replaced_not_followed(pristine, cache, tmp_path):
    entry = _calling_libm(cache)
    target = tmp_path / "elsewhere.o"
    shutil.copyfile(entry, target)
    entry.unlink()
    entry.symlink_to(target)
    stats = _run(cache)["stats"]
    assert (stats["corrupted"], stats["compiled"]) == (1, 1)
    assert not entry.is_symlink()
    assert entry.read_bytes() == (pristine / entry.relative_to(cache)).read_bytes()
    assert target.read_bytes() == entry.read_bytes()   # the link's target was not written


def test_a_fifo_at_an_entry_path_is_bypassed_without_hanging(cache):
    entry = _calling_libm(cache)
    entry.unlink()
    os.mkfifo(entry)
    report = _run(cache)                 # a read that opened the FIFO would block here
    assert (report["stats"]["bypassed"], report["stats"]["compiled"]) == (1, 1)
    (warning,) = [w for w in report["warnings"] if "FIFO" in w]
    assert str(entry) in warning and "bypassed" in warning
    assert stat.S_ISFIFO(os.lstat(entry).st_mode)
    assert not list(cache.rglob(".tmp-*"))


def test_a_directory_at_an_entry_path_is_bypassed_and_leaks_no_temp_files(cache):
    entry = _calling_libm(cache)
    entry.unlink()
    entry.mkdir()
    for _ in range(2):
        report = _run(cache)
        assert (report["stats"]["bypassed"], report["stats"]["disk_hits"]) == (1, 2)
        assert sum("is a directory" in w for w in report["warnings"]) == 1
    assert entry.is_dir() and not any(entry.iterdir())
    # the three kernels, the thread pool's and the GEMM driver's entries, no temp files
    assert len(list(entry.parent.iterdir())) == 5


# ----------------------------------------------------------------- keys and validation

def test_the_key_hashes_novas_source(tmp_path, monkeypatch):
    files = kernel_cache.package_sources()
    assert {"compiler/targets/cpu/llvm.py", "compiler/targets/cpu/pool.py",
            "runtime/kernel_cache.py"} <= set(files)
    # the file whose presence says "this is a source install" must exist, or the disk
    # cache silently turns itself off (it did when the CPU codegen moved to targets/)
    assert kernel_cache._CODEGEN in files and kernel_cache.source_fingerprint() is not None
    package = tmp_path / "nova"
    for name in ("compiler/targets/cpu/llvm.py", "compiler/lowering/plan.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(kernel_cache._PACKAGE) / name, package / name)
    names = ["compiler/targets/cpu/llvm.py", "compiler/lowering/plan.py"]
    before = kernel_cache.fingerprint(str(package), names)
    with open(package / names[0], "a") as f:
        f.write("# a codegen change that forgot to bump FORMAT_VERSION\n")
    assert kernel_cache.fingerprint(str(package), names) != before
    jit = kernel_cache.KERNELS.jit
    key = jit.host_key()
    monkeypatch.setattr(kernel_cache, "source_fingerprint", lambda: "another compiler")
    assert jit.host_key() != key


def _object() -> tuple[bytes, str]:
    from nova.compiler.lowering import plan_kernels
    from nova.compiler.passes.fusion import fuse
    from nova.compiler.irgen import build_module
    from nova.tensor.realize import pending_graph
    (plan,) = plan_kernels(fuse(build_module(pending_graph(nv.tensor(X).double().sin() * 2.0))))
    return kernel_cache.KERNELS._compile(plan), plan.name


def test_object_validation_names_what_is_wrong():
    jit = kernel_cache.KERNELS.jit
    if jit.object_format() is None:
        pytest.skip(f"objects for {jit.triple} are not validated (no disk cache)")
    machine, elf_class, little, relocations = jit.object_format()
    obj, name = _object()

    def check(data: bytes, defines=(name,)) -> str | None:
        return elf.check_object(data, machine=machine, file_type=elf.ET_REL,
                                elf_class=elf_class, little=little, defines=defines,
                                only_these=True,
                                resolves=lambda s: s in ("sin", "aligned_alloc", "free"),
                                relocation_types=relocations)

    assert check(obj) is None
    assert "not an ELF file" in check(b"\0" * len(obj))
    assert "runs past the end" in check(obj[: len(obj) // 2])
    assert check(obj, defines=("nova_k_other",)) == f"defines {name!r}, which it should not"
    assert "does not resolve" in check(obj.replace(b"\0sin\0", b"\0siX\0"))
    wrong_machine = obj[:18] + (elf.EM_386).to_bytes(2, "little") + obj[20:]
    assert "machine 3" in check(wrong_machine)


# ----------------------------------------------------------------- NVRTC's cubin cache

NVRTC_SOURCE = 'extern "C" __global__ void {name}(int* x) {{ x[0] = 42; }}'
NVRTC_SCRIPT = f"""
import json, warnings
from nova.runtime import nvrtc
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    outs = [nvrtc.compile({NVRTC_SOURCE!r}.format(name=n), "sm_80", entry=n) for n in "fg"]
print(json.dumps({{"from_cache": [o.from_cache for o in outs],
                  "warnings": [str(w.message) for w in caught]}}))
"""


def _compile_f_and_g() -> list:
    from nova.runtime import nvrtc
    return [nvrtc.compile(NVRTC_SOURCE.format(name=n), "sm_80", entry=n) for n in "fg"]


def test_cubin_entries_are_validated_and_never_block(tmp_path, monkeypatch):
    from nova.runtime import nvrtc
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed")
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    assert [o.from_cache for o in _compile_f_and_g()] == [False, False]
    g, f = sorted(tmp_path.rglob("*.bin"), key=lambda p: b"f_param_0" in p.read_bytes())
    shutil.copyfile(g, f)                                  # g's cubin under f's key
    _rewrite_payload(g, lambda p: os.urandom(len(p)))      # a random cubin, good header
    outs = _compile_f_and_g()
    assert [o.from_cache for o in outs] == [False, False]
    assert min(o.ptxas.registers for o in outs) > 0
    assert [o.from_cache for o in _compile_f_and_g()] == [True, True]   # both healed
    g.unlink()
    os.mkfifo(g)
    out = subprocess.run([sys.executable, "-c", NVRTC_SCRIPT], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "NOVA_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]      # opening the FIFO would block
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["from_cache"] == [True, False]
    assert any("FIFO" in w for w in report["warnings"])
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob(".tmp-*"))


# ----------------------------------------------------------------- the debug directory

def test_nova_debug_makes_a_private_directory_and_ignores_planted_links(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "nova-debug").symlink_to(victim)          # the old fixed name
    env = {k: v for k, v in os.environ.items() if k != "NOVA_DEBUG_DIR"}
    out = subprocess.run([sys.executable, "-c", "import nova as nv; (nv.ones(3) * 2).sum().item()"],
                         env={**env, "NOVA_DEBUG": "1", "TMPDIR": str(tmp_path),
                              "NOVA_CACHE": "0"},
                         capture_output=True, text=True, timeout=120, check=True)
    assert not any(victim.iterdir())
    (line,) = [ln for ln in out.stderr.splitlines() if "NOVA_DEBUG wrote" in ln]
    written = Path(line.split("NOVA_DEBUG wrote ")[1].strip())
    root = written.parent
    assert root.parent == tmp_path and root.name.startswith("nova-debug-")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700 and not root.is_symlink()
    assert "nova_k_" in (written / "step.ll").read_text()


def test_a_named_debug_directory_must_be_a_real_directory_of_the_users(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(tmp_path / "link"))
    with pytest.raises(UnsafeDirectoryError, match=r"NOVA_DEBUG_DIR '.*link' is a symbolic "
                                                   r"link \(to '.*real'\)"):
        debug_directory()
    with pytest.raises(UnsafeDirectoryError, match="debug directory .* is a symbolic link"):
        nv.debug.dump(str(tmp_path / "link"), nv.ones(2) * 2)
    monkeypatch.setenv("NOVA_DEBUG_DIR", str(real))
    assert debug_directory() == str(real)
    uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    with pytest.raises(UnsafeDirectoryError, match=rf"is owned by uid {uid}, not by you"):
        debug_directory()


def test_debug_files_replace_links_planted_at_their_paths(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    directory = tmp_path / "dbg"
    directory.mkdir()
    (directory / "step.ll").symlink_to(victim)
    path = write_debug_file(str(directory), "step.ll", "; ir")
    assert victim.read_text() == "precious"
    assert not Path(path).is_symlink() and Path(path).read_text() == "; ir"
    assert [p.name for p in directory.iterdir()] == ["step.ll"]
