"""NVRTC through ctypes: CUDA C -> cubin (and PTX), with ptxas statistics and a disk cache.

The library comes from the ``nvidia-cuda-nvrtc`` wheel (``site-packages/nvidia/cu13/lib/
libnvrtc.so.13``, with ``libnvrtc-builtins.so.13.0`` beside it), else from a CUDA toolkit
(``$CUDA_HOME``, ``/usr/local/cuda``); ``NOVA_NVRTC`` names a library file explicitly.
Nothing here needs a GPU or a driver, so CI compiles generated kernels for every target
architecture.

Compiling for a real architecture (``sm_90``) makes NVRTC run ptxas itself; with
``--ptxas-options=-v`` its report (registers, spill bytes, stack frame, shared memory)
lands in the program log, which ``PtxasInfo.parse`` reads.

Cubins are cached under ``$NOVA_CACHE_DIR/cuda-<nvrtc version>/`` (default
``~/.cache/nova``; ``NOVA_CACHE=0`` disables) keyed by a hash of the source, the
architecture, the options and the NVRTC library itself (its version, path, size and
modification time: ``nvrtcVersion`` does not tell patch releases apart). Entries are
``nova.runtime.disk_cache`` entries, as the CPU kernel cache's: the checksummed header
names the full key, and a hit's cubin must be a CUDA ELF executable that defines the
requested entry function; anything else is compiled again and rewritten, and a
directory or FIFO at an entry path is reported once and bypassed. The ptxas figures of a
hit are parsed from its stored log for the entry asked for now.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from nova import config
from nova.runtime import elf
from nova.runtime.disk_cache import Lookup, read_entry, write_entry

ENTRY_KIND = "nova-cubin"
DEFAULT_OPTIONS = ("--std=c++17",)


class NvrtcUnavailable(RuntimeError):
    """No NVRTC library could be loaded (install the ``cuda`` or ``test`` extra)."""


class NvrtcError(RuntimeError):
    """NVRTC rejected a program; the message holds its log."""


def _site_dirs() -> list[str]:
    dirs = list(sys.path)
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:   # some virtualenvs
        pass
    return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def _wheel_dirs(sub: str) -> list[str]:
    """``nvidia/cu13/<sub>`` (CUDA 13 wheels) and ``nvidia/cuda_nvrtc/<sub>`` (older
    layout) under every site directory."""
    out = []
    for base in _site_dirs():
        for layout in ("cu13", "cuda_nvrtc"):
            path = os.path.join(base, "nvidia", layout, sub)
            if os.path.isdir(path):
                out.append(path)
    return out


def _toolkit_dirs(sub: str) -> list[str]:
    roots = [config.CUDA_HOME.get(), config.CUDA_PATH.get(), "/usr/local/cuda"]
    return [os.path.join(r, sub) for r in roots if r and os.path.isdir(os.path.join(r, sub))]


def find_library() -> str | None:
    """Path of ``libnvrtc.so``: ``$NOVA_NVRTC``, the pip wheel, then a toolkit."""
    explicit = config.NVRTC.get()
    if explicit:
        return explicit if os.path.exists(explicit) else None
    for d in _wheel_dirs("lib") + _toolkit_dirs("lib64"):
        hits = sorted(glob.glob(os.path.join(d, "libnvrtc.so*")))
        hits = [h for h in hits if "alt" not in os.path.basename(h)]
        if hits:
            return hits[0]
    return None


class _Lib:
    def __init__(self, path: str):
        directory = os.path.dirname(path)
        # libnvrtc dlopens libnvrtc-builtins at compile time; the wheel's library has no
        # RPATH, so unless that directory is on the loader path every compile fails with
        # NVRTC_ERROR_BUILTIN_OPERATION_FAILURE. Loading it first (global) fixes that.
        for builtins in sorted(glob.glob(os.path.join(directory, "libnvrtc-builtins.so*"))):
            if "alt" not in os.path.basename(builtins):
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                break
        self.path = path
        lib = ctypes.CDLL(path)
        self.lib = lib
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = (major.value, minor.value)

    def check(self, rc: int, what: str, log: str = "") -> None:
        if rc != 0:
            msg = self.lib.nvrtcGetErrorString(rc).decode()
            raise NvrtcError(f"{what} failed: {msg}" + (f"\n{log}" if log else ""))


@lru_cache(maxsize=1)
def _lib() -> _Lib:
    path = find_library()
    if path is None:
        raise NvrtcUnavailable("NVRTC not found: pip install 'nvidia-cuda-nvrtc==13.0.*' "
                               "(the 'test' or 'cuda' extra) or set CUDA_HOME/NOVA_NVRTC")
    return _Lib(path)


def available() -> bool:
    try:
        _lib()
        return True
    except (NvrtcUnavailable, OSError):
        return False


def version() -> tuple[int, int]:
    return _lib().version


@dataclass(frozen=True)
class PtxasInfo:
    """What ptxas reported for one kernel."""

    registers: int = 0
    spill_stores: int = 0      # bytes
    spill_loads: int = 0       # bytes
    stack_bytes: int = 0
    smem_bytes: int = 0        # static shared memory

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads

    @staticmethod
    def parse(log: str, entry: str | None = None) -> PtxasInfo:
        """Read ``ptxas -v`` lines; with ``entry``, only that function's block."""
        blocks = re.split(r"(?=ptxas info\s*: Compiling entry function)", log)
        if entry is not None:
            blocks = [b for b in blocks if f"'{entry}'" in b] or blocks
        text = "".join(blocks)

        def num(pattern: str) -> int:
            m = re.search(pattern, text)
            return int(m.group(1)) if m else 0

        return PtxasInfo(registers=num(r"Used (\d+) registers"),
                         spill_stores=num(r"(\d+) bytes spill stores"),
                         spill_loads=num(r"(\d+) bytes spill loads"),
                         stack_bytes=num(r"(\d+) bytes stack frame"),
                         smem_bytes=num(r"(\d+) bytes smem"))


@dataclass(frozen=True)
class CompiledCuda:
    arch: str
    cubin: bytes
    ptx: str | None
    log: str
    ptxas: PtxasInfo
    from_cache: bool = False


def _cache_dir() -> str | None:
    root = config.cache_root()
    if root is None:
        return None
    major, minor = version()
    return os.path.join(root, f"cuda-nvrtc{major}.{minor}")


def _key(source: str, arch: str, options: tuple[str, ...]) -> str:
    lib = _lib()
    st = os.stat(lib.path)
    identity = f"{lib.version}|{os.path.realpath(lib.path)}|{st.st_size}|{st.st_mtime_ns}"
    raw = "\0".join((source, arch, *options, identity))
    return hashlib.sha256(raw.encode()).hexdigest()


def _read_cache(path: str, key: str, arch: str, entry: str | None) -> Lookup:
    def validate(header: Any, cubin: bytes) -> str | None:
        if not isinstance(header.get("log"), str) or not isinstance(header.get("ptx"),
                                                                    (str, type(None))):
            return "its header lacks the log or the PTX"
        problem = elf.check_object(cubin, machine=elf.EM_CUDA, file_type=elf.ET_EXEC,
                                   elf_class=2, little=True, defines=(entry,) if entry else ())
        return None if problem is None else f"its cubin is unusable: {problem}"
    return read_entry(path, {"kind": ENTRY_KIND, "key": key, "arch": arch}, validate)


def _write_cache(path: str, key: str, out: CompiledCuda) -> None:
    write_entry(path, {"kind": ENTRY_KIND, "key": key, "arch": out.arch, "ptx": out.ptx,
                       "log": out.log}, out.cubin)


def _get(lib: _Lib, prog: ctypes.c_void_p, size_fn: str, get_fn: str) -> bytes | None:
    size = ctypes.c_size_t()
    if getattr(lib.lib, size_fn)(prog, ctypes.byref(size)) != 0:
        return None
    buf = ctypes.create_string_buffer(size.value)
    if getattr(lib.lib, get_fn)(prog, buf) != 0:
        return None
    return buf.raw[:size.value]


def compile(source: str, arch: str = "sm_90", name: str = "kernel.cu",
            options: tuple[str, ...] = DEFAULT_OPTIONS, entry: str | None = None,
            cache: bool = True) -> CompiledCuda:
    """Compile CUDA C for ``arch`` (``sm_80``, ``sm_86``, ``sm_90``, ...) to a cubin.

    Raises ``NvrtcError`` with NVRTC's log (which names the file ``name``) when the
    source does not compile, and ``NvrtcUnavailable`` when there is no NVRTC."""
    lib = _lib()
    opts = (f"--gpu-architecture={arch}", "--ptxas-options=-v", *options)
    directory = _cache_dir() if cache else None
    key = _key(source, arch, opts) if directory else ""
    path = os.path.join(directory, key + ".bin") if directory else None
    found = _read_cache(path, key, arch, entry) if path else Lookup("missing")
    if found.status == "hit":
        log = found.header["log"]
        return CompiledCuda(arch, found.payload, found.header["ptx"], log,
                            PtxasInfo.parse(log, entry), from_cache=True)
    prog = ctypes.c_void_p()
    lib.check(lib.lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0,
                                         None, None), "nvrtcCreateProgram")
    try:
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.lib.nvrtcCompileProgram(prog, len(opts), arr)
        log = (_get(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog") or b"")
        log_text = log.rstrip(b"\0").decode(errors="replace")
        lib.check(rc, f"NVRTC compiling {name} for {arch}", log_text)
        cubin = _get(lib, prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
        ptx = _get(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX")
    finally:
        lib.lib.nvrtcDestroyProgram(ctypes.byref(prog))
    if not cubin:
        raise NvrtcError(f"NVRTC produced no cubin for {name} ({arch}); log:\n{log_text}")
    out = CompiledCuda(arch, cubin, ptx.rstrip(b"\0").decode() if ptx else None, log_text,
                       PtxasInfo.parse(log_text, entry))
    if path and found.writable:
        _write_cache(path, key, out)
    return out


def find_tool(name: str) -> str | None:
    """A CUDA binary tool (``cuobjdump``, ``nvdisasm``): the pip wheel's
    ``nvidia/cu13/bin``, then a toolkit, then ``$PATH``."""
    for d in _wheel_dirs("bin") + _toolkit_dirs("bin"):
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def sass(cubin: bytes) -> str:
    """The SASS of a cubin, from ``nvdisasm`` (the ``nvidia-cuda-nvdisasm`` wheel or a
    toolkit; ``cuobjdump -sass`` needs it too). FileNotFoundError without one."""
    tool = find_tool("nvdisasm")
    if tool is None:
        raise FileNotFoundError("nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        res = subprocess.run([tool, f.name], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"nvdisasm failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout
