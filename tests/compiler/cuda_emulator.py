"""Run generated CUDA kernels on the CPU, to check their arithmetic without a GPU.

The kernel text is compiled by the host C++ compiler against an emulation prelude in
place of ``targets.cuda.prelude.PRELUDE``: every CUDA thread of a block is an OS thread,
``__syncthreads`` a ``std::barrier`` of the block, ``__shfl_xor_sync`` an exchange
through a per-warp slot array between two warp barriers, and the tensor-core
``mma.sync.m16n8k8`` a warp-cooperative step that gathers the 32 lanes' fragments and
rebuilds A (16x8) and B (8x8) with the PTX ISA's fragment layout before each lane
computes its four accumulators. ``cp.async`` copies synchronously (the emulation checks
indices, layouts and fragment mapping, not asynchronous hazards). Blocks run one after
another on the same threads, so ``__shared__`` arrays are plain statics.

What this cannot see: timing, races between asynchronous copies and compute, device
libm differences, and anything ptxas does. The GPU tests (``test_cuda_launch.py``) do.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from nova.compiler.targets.cuda.codegen import CudaKernel
from nova.compiler.targets.cuda.emit import STORAGE
from nova.compiler.targets.cuda.prelude import FLOAT_MIN_MAX, INT_DIV_POW
from nova.compiler.lowering.plan import KernelPlan

EMU_PRELUDE = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
using namespace std;
typedef long long i64;
typedef unsigned long long u64;
struct emu_dim3 { unsigned x, y, z; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;
static thread_local int emu_lane, emu_warp;
static float* emu_dyn_smem;
static std::barrier<>* emu_block_barrier;
struct emu_warp_state {
  std::barrier<> bar{32};
  u64 slot[32];
  unsigned a[32][4], b[32][2];
};
static std::vector<emu_warp_state*> emu_warps;
static std::atomic<int> nova_error_flag{0};
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warps[emu_warp]->bar.arrive_and_wait(); }
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) {
  emu_warp_state* w = emu_warps[emu_warp];
  u64 bits = 0; memcpy(&bits, &v, sizeof(T));
  w->slot[emu_lane] = bits;
  w->bar.arrive_and_wait();
  u64 other = w->slot[emu_lane ^ o];
  w->bar.arrive_and_wait();
  T r; memcpy(&r, &other, sizeof(T)); return r;
}
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline long long __double_as_longlong(double f) { long long u; memcpy(&u, &f, 8); return u; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((u64)a * b) >> 32); }

inline void nv_fail() { nova_error_flag.fetch_or(1); }
inline float nv_f16_load(unsigned short h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
inline unsigned short nv_f16_store(float f) {
  _Float16 h = (_Float16)f; unsigned short r; memcpy(&r, &h, 2); return r;
}
inline float nv_bf16_load(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
inline unsigned short nv_bf16_store(float f) {
  if (f != f) return 0x7FC0;
  unsigned bits; memcpy(&bits, &f, 4);
  return (unsigned short)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
inline float nv_f16_round(float f) { return nv_f16_load(nv_f16_store(f)); }
inline float nv_bf16_round(float f) { return nv_bf16_load(nv_bf16_store(f)); }
inline bool nv_signbit(float a) { return std::signbit(a); }
inline bool nv_signbit(double a) { return std::signbit(a); }
""" + FLOAT_MIN_MAX + r"""
inline int nv_max(int a, int b) { return a > b ? a : b; }
inline int nv_min(int a, int b) { return a < b ? a : b; }
inline i64 nv_max(i64 a, i64 b) { return a > b ? a : b; }
inline i64 nv_min(i64 a, i64 b) { return a < b ? a : b; }
inline bool nv_max(bool a, bool b) { return a || b; }
inline bool nv_min(bool a, bool b) { return a && b; }
""" + INT_DIV_POW + r"""
struct nv_philox_out { unsigned w0, w1; };
inline nv_philox_out nv_philox(u64 i, u64 offset, u64 seed) {
  unsigned c0 = (unsigned)i, c1 = (unsigned)(i >> 32);
  unsigned c2 = (unsigned)offset, c3 = (unsigned)(offset >> 32);
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  nv_philox_out o; o.w0 = c0; o.w1 = c1; return o;
}
inline void nv_cp_async16(void* smem, const void* g, int bytes) {
  if (bytes) memcpy(smem, g, 16); else memset(smem, 0, 16);
}
inline void nv_cp_async_commit() {}
template <int N> inline void nv_cp_async_wait() {}
inline unsigned nv_tf32(float x) {   /* cvt.rna.tf32.f32: nearest, ties away */
  unsigned u; memcpy(&u, &x, 4);
#ifdef EMU_EXACT_TF32
  return u;                           /* float32 operands: checks the algorithm alone */
#endif
  if ((u & 0x7f800000u) == 0x7f800000u) return u;
  return (u + 0x1000u) & 0xffffe000u;
}
inline void nv_mma_tf32(float* c, const unsigned* a, const unsigned* b) {
  emu_warp_state* w = emu_warps[emu_warp];
  for (int q = 0; q < 4; ++q) w->a[emu_lane][q] = a[q];
  for (int q = 0; q < 2; ++q) w->b[emu_lane][q] = b[q];
  w->bar.arrive_and_wait();
  float A[16][8], B[8][8];
  for (int L = 0; L < 32; ++L) {   /* PTX ISA fragment layouts, m16n8k8 .tf32 */
    int g = L >> 2, t = L & 3;
    A[g][t] = __uint_as_float(w->a[L][0]); A[g + 8][t] = __uint_as_float(w->a[L][1]);
    A[g][t + 4] = __uint_as_float(w->a[L][2]); A[g + 8][t + 4] = __uint_as_float(w->a[L][3]);
    B[t][g] = __uint_as_float(w->b[L][0]); B[t + 4][g] = __uint_as_float(w->b[L][1]);
  }
  w->bar.arrive_and_wait();
  int g = emu_lane >> 2, t = emu_lane & 3;
  for (int q = 0; q < 4; ++q) {
    int row = g + (q >> 1) * 8, col = 2 * t + (q & 1);
    float s = c[q];
    for (int k = 0; k < 8; ++k) s += A[row][k] * B[k][col];
    c[q] = s;
  }
}

static int emu_run(emu_dim3 grid, emu_dim3 block, long smem_bytes, const std::function<void()>& kernel) {
  nova_error_flag = 0;
  gridDim = grid; blockDim = block;
  int n = block.x * block.y * block.z;
  std::vector<float> smem((smem_bytes + 3) / 4 + 16);
  emu_dyn_smem = smem.data();
  std::barrier<> bar(n);
  emu_block_barrier = &bar;
  emu_warps.clear();
  for (int w = 0; w < (n + 31) / 32; ++w) emu_warps.push_back(new emu_warp_state());
  /* One OS thread per CUDA thread of a block, reused for every block in turn; a
     barrier after each block keeps blocks apart (shared memory is reused). */
  std::vector<std::thread> threads;
  for (int tid = 0; tid < n; ++tid)
    threads.emplace_back([&, tid]() {
      threadIdx = {(unsigned)(tid % block.x), (unsigned)((tid / block.x) % block.y),
                   (unsigned)(tid / (block.x * block.y))};
      emu_lane = tid & 31; emu_warp = tid >> 5;
      for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
          for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = {bx, by, bz};
            kernel();
            bar.arrive_and_wait();
          }
    });
  for (auto& t : threads) t.join();
  for (auto* w : emu_warps) delete w;
  emu_warps.clear();
  return nova_error_flag.load();
}
"""


def _kernel_text(k: CudaKernel, suffix: str) -> str:
    body = k.source[k.source.index('extern "C" __global__'):]
    body = body.replace("extern __shared__ __align__(16) float nv_smem[];",
                        "float* nv_smem = emu_dyn_smem;")
    body = body.replace("__shared__", "static")
    return body.replace(k.entry, k.entry + suffix)


def _launcher(k: CudaKernel, plan: KernelPlan, suffix: str) -> str:
    types = [f"const {STORAGE[d.mlir]}*" for _, d in plan.arg_types[:-1]]
    types.append(f"{STORAGE[plan.out[1].mlir]}*")
    if plan.scratch is not None:
        types.append(f"{STORAGE[plan.scratch[1].mlir]}*")
    args = ", ".join(f"({t})a[{i}]" for i, t in enumerate(types))
    g, b = k.grid, k.block
    return (f'extern "C" int emu_{k.entry}{suffix}(void** a) {{\n'
            f"  return emu_run({{{g[0]}u, {g[1]}u, {g[2]}u}}, {{{b[0]}u, {b[1]}u, {b[2]}u}}, "
            f"{k.shared_bytes}, [&]() {{ {k.entry}{suffix}({args}); }});\n}}\n")


class Emulator:
    """A shared library of emulated kernels, built once for a set of (kernel, plan)."""

    def __init__(self, kernels: list[tuple[str, CudaKernel, KernelPlan]], tf32: bool = True):
        """``tf32=False`` keeps the tensor cores' operands float32 (no rounding to
        TF32), so a kernel built on them can be checked to float32 accuracy."""
        if shutil.which("g++") is None:
            raise FileNotFoundError("g++ not found")
        parts = ([] if tf32 else ["#define EMU_EXACT_TF32"]) + [EMU_PRELUDE]
        for key, k, plan in kernels:
            parts.append(_kernel_text(k, key))
            parts.append(_launcher(k, plan, key))
        source = "\n".join(parts)
        digest = hashlib.sha256(source.encode()).hexdigest()[:24]
        root = os.environ.get("NOVA_CACHE_DIR") or tempfile.gettempdir()
        os.makedirs(os.path.join(root, "cuda-emulator"), exist_ok=True)
        lib = os.path.join(root, "cuda-emulator", f"emu-{digest}.so")
        if not os.path.exists(lib):
            with tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "emu.cpp")
                with open(src, "w") as f:
                    f.write(source)
                tmp = os.path.join(d, "emu.so")
                res = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC",
                                      "-pthread", src, "-o", tmp], capture_output=True,
                                     text=True, check=False)
                if res.returncode != 0:
                    raise RuntimeError(f"emulator build failed (g++ exit status "
                                       f"{res.returncode}):\n{res.stderr[:20000]}")
                shutil.move(tmp, lib)
        self.lib = ctypes.CDLL(lib)

    def run(self, key: str, k: CudaKernel, plan: KernelPlan, inputs: list[np.ndarray],
            out: np.ndarray, scratch: np.ndarray | None = None) -> int:
        """Launch the emulated kernel on contiguous storage arrays; returns the error flag."""
        bufs = [*inputs, out] + ([scratch] if scratch is not None else [])
        ptrs = (ctypes.c_void_p * len(bufs))(*[b.ctypes.data for b in bufs])
        fn = getattr(self.lib, f"emu_{k.entry}{key}")
        fn.restype = ctypes.c_int
        return fn(ptrs)
