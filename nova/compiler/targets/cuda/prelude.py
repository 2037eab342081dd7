"""Device helpers every generated CUDA module starts with.

Self-contained on purpose: no ``#include``, so NVRTC needs no CUDA headers (a pip-only
machine has ``libnvrtc`` but no toolkit include directory). float16/bfloat16 are stored as
``unsigned short`` and converted with PTX ``cvt`` (round to nearest even), which is what
``cuda_fp16.h``/``cuda_bf16.h`` do underneath; arithmetic is in float, rounded after every
op as in the reference interpreter.

``nova_error_flag`` is a module global the runtime reads back (``cuModuleGetGlobal``)
after a step: kernels set it when an index is out of range or an integer division by
zero happens, where the CPU kernels return 1 — the argument lists stay identical.
"""

from nova.core.philox import MULTIPLIERS, ROUNDS, WEYL

(M0, M1), (W0, W1) = MULTIPLIERS, WEYL

FLOAT_MIN_MAX = r"""
/* maximum/minimum are IEEE 754-2019's: NaN propagates (fmaxf would drop it) and -0 < +0
   (fmaxf may return either zero), as llvm.maximum on the CPU and the interpreter. Shared
   with the emulator (tests/compiler/cuda_emulator.py), which defines nv_signbit itself. */
template <typename T> __device__ __forceinline__ T nv_fmax(T a, T b) {
  if (a != a || b != b) return a + b;
  if (a == b) return nv_signbit(a) ? b : a;
  return a > b ? a : b;
}
template <typename T> __device__ __forceinline__ T nv_fmin(T a, T b) {
  if (a != a || b != b) return a + b;
  if (a == b) return nv_signbit(b) ? b : a;
  return a < b ? a : b;
}
__device__ __forceinline__ float nv_max(float a, float b) { return nv_fmax(a, b); }
__device__ __forceinline__ float nv_min(float a, float b) { return nv_fmin(a, b); }
__device__ __forceinline__ double nv_max(double a, double b) { return nv_fmax(a, b); }
__device__ __forceinline__ double nv_min(double a, double b) { return nv_fmin(a, b); }
"""

INT_DIV_POW = r"""
/* Integer division truncates toward zero; by zero it flags the error and yields a. The
   divisor -1 negates in unsigned arithmetic: the smallest integer over -1 wraps to itself,
   as PyTorch's (a / -1 overflows there: undefined in C++, a SIGFPE on the emulator's x86).
   x ** y for y < 0 is PyTorch's truncated 1 / x ** -y: 1 for x = 1, +-1 for x = -1 (by
   the parity of y), 0 otherwise. Products wrap (unsigned). Shared with the emulator. */
template <typename T> __device__ __forceinline__ T nv_idiv(T a, T b) {
  if (b == 0) { nv_fail(); return a; }
  if (b == -1) return (T)(0ull - (u64)a);
  return a / b;
}
template <typename T> __device__ __forceinline__ T nv_ipow(T x, T y) {
  if (y < 0) return (x == 1 || x == -1) ? ((y & 1) ? x : (T)1) : (T)0;
  u64 acc = 1, base = (u64)x;
  while (y > 0) { if (y & 1) acc *= base; base *= base; y >>= 1; }
  return (T)acc;
}
"""

PRELUDE = r"""
typedef long long i64;
typedef unsigned long long u64;

__device__ int nova_error_flag;

__device__ __forceinline__ void nv_fail() { atomicOr(&nova_error_flag, 1); }

__device__ __forceinline__ float nv_f16_load(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short nv_f16_store(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float nv_bf16_load(unsigned short h) {
  return __uint_as_float(((unsigned)h) << 16);
}
__device__ __forceinline__ unsigned short nv_bf16_store(float f) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float nv_f16_round(float f) { return nv_f16_load(nv_f16_store(f)); }
__device__ __forceinline__ float nv_bf16_round(float f) { return nv_bf16_load(nv_bf16_store(f)); }

__device__ __forceinline__ bool nv_signbit(float a) { return __float_as_int(a) < 0; }
__device__ __forceinline__ bool nv_signbit(double a) { return __double_as_longlong(a) < 0; }
""" + FLOAT_MIN_MAX + r"""
__device__ __forceinline__ int nv_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int nv_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ i64 nv_max(i64 a, i64 b) { return a > b ? a : b; }
__device__ __forceinline__ i64 nv_min(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ bool nv_max(bool a, bool b) { return a || b; }
__device__ __forceinline__ bool nv_min(bool a, bool b) { return a && b; }
""" + INT_DIV_POW

# Philox's round constants come from nova.core.philox, which the interpreter and the LLVM
# emitter also read: the three implementations cannot drift apart.
PRELUDE += f"""/* Philox4x32-{ROUNDS} of counter (i, offset) and key seed, as nova/core/philox.py. */
struct nv_philox_out {{ unsigned w0, w1; }};
__device__ __forceinline__ nv_philox_out nv_philox(u64 i, u64 offset, u64 seed) {{
  unsigned c0 = (unsigned)i, c1 = (unsigned)(i >> 32);
  unsigned c2 = (unsigned)offset, c3 = (unsigned)(offset >> 32);
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
#pragma unroll
  for (int r = 0; r < {ROUNDS}; ++r) {{
    unsigned hi0 = __umulhi(0x{M0:08X}u, c0), lo0 = 0x{M0:08X}u * c0;
    unsigned hi1 = __umulhi(0x{M1:08X}u, c2), lo1 = 0x{M1:08X}u * c2;
    unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x{W0:08X}u; k1 += 0x{W1:08X}u;
  }}
  nv_philox_out o; o.w0 = c0; o.w1 = c1; return o;
}}

"""

PRELUDE += r"""/* Tensor cores and asynchronous copies (sm_80+). */
__device__ __forceinline__ unsigned nv_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
/* 16 bytes global -> shared; bytes = 0 fills zeros (tile edges) without reading. */
__device__ __forceinline__ void nv_cp_async16(void* smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::
               "r"(nv_smem_addr(smem)), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void nv_cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void nv_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
/* float -> tf32 rounding to nearest (ties away), the operand format of the mma. */
__device__ __forceinline__ unsigned nv_tf32(float x) {
  unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r;
}
/* D = A(16x8, row) * B(8x8, col) + C, tf32 inputs, f32 accumulate. */
__device__ __forceinline__ void nv_mma_tf32(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
"""
