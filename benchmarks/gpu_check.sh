#!/usr/bin/env bash
# One prepared GPU check for Nova's CUDA backend, under 8 minutes on an H200:
#   1. install Nova from this working tree without network (PYTHONPATH, no pip
#      resolution) and its pure-Python needs from a wheel folder when missing or of
#      another version (xdsl==0.75.0 and its deps, llvmlite==0.50.0);
#   2. run the tests marked `cuda` (pytest -m cuda) against the interpreter/CPU engine;
#   3. benchmark TF32 GEMM and a GPT training step (benchmarks/bench_gpu.py).
# Writes into OUT (argument 1, else $OUT, else benchmarks/results/gpu-<date>):
#   pytest_cuda.log, pytest_cuda.xml, gpu_bench.json, gpu_bench.md, gpu_check.log
# Without a GPU every step still runs: the cuda tests skip, the benchmarks write why.
#
# Usage:   bash benchmarks/gpu_check.sh [OUT] [WHEELS]
#   WHEELS (argument 2, else $NOVA_WHEELS, else ./.whl): a folder of wheels, made on a
#   machine with network (from the repository root):
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#       xdsl==0.75.0 immutabledict==4.3.1 ordered-set==4.1.0 llvmlite==0.50.0
#   (about 64 MB; the device tool carries it with carry=[".whl"]).
# Time limits (worst case about 7.5 min): tests 170 s, benchmarks 230 s of work
# (bench_gpu --budget; it saves its files after every item) killed at 270 s.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/benchmarks/results/gpu-$(date -u +%Y%m%d-%H%M)}}"
WHEELS="${2:-${NOVA_WHEELS:-$ROOT/.whl}}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
exec > >(tee -a "$LOG") 2>&1
cd "$ROOT"
echo "gpu_check: $(date -u) in $ROOT, writing $OUT_DIR"
export PYTHONUNBUFFERED=1 CUPY_TF32=1
export NOVA_CACHE_DIR="${NOVA_CACHE_DIR:-/tmp/nova-gpu-check-cache}"

# ---- 1. dependencies: what is missing comes from the wheel folder, or we stop here
SITE=/tmp/nova-gpu-check-site
need() {   # need MODULE VERSION: prints the module if absent or of another version
  "$PY" - "$1" "$2" <<'PYEOF'
import importlib, sys
mod, want = sys.argv[1], sys.argv[2]
try:
    m = importlib.import_module(mod)
    have = str(getattr(m, "__version__", ""))
except Exception:
    have = None
if have is None or (want != "any" and not have.startswith(want)):
    print(f"{mod} (have {have}, want {want})")
PYEOF
}
missing="$(need xdsl 0.75.0; need llvmlite 0.50.; need ml_dtypes any; need numpy any; need scipy any; need tqdm any; need pytest any)"
if [ -n "$missing" ]; then
  echo "gpu_check: missing or other versions: $(echo $missing | tr '\n' ' ')"
  if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "gpu_check: ERROR: no wheels in $WHEELS to install them from (see the header of this script for the pip download command)"
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$WHEELS"/*.whl || { echo "gpu_check: ERROR: installing wheels from $WHEELS failed"; exit 2; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  still="$(need xdsl 0.75.0; need llvmlite 0.50.; need ml_dtypes any; need numpy any; need scipy any; need tqdm any; need pytest any)"
  if [ -n "$still" ]; then
    echo "gpu_check: ERROR: still missing after installing $WHEELS: $(echo $still | tr '\n' ' ')"
    exit 2
  fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import nova, sys; print('gpu_check: nova', nova.__version__, 'from', nova.__file__, '| cuda:', nova.cuda.is_available(), nova.cuda.unavailable_reason() or '')" \
  || { echo "gpu_check: ERROR: nova does not import"; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# ---- 2. the cuda tests (skipped without a GPU)
# in 8 processes where pytest-xdist is there (the H200 machine has 16 cores): each
# test compiles its kernels with NVRTC, about 1 s of CPU per test run serially
XDIST=""
"$PY" -c "import xdist" 2>/dev/null && XDIST="-n 8"
echo "gpu_check: pytest -m cuda $XDIST"
timeout 170 "$PY" -m pytest -q -m cuda -p no:cacheprovider -o addopts="" $XDIST \
    --junitxml="$OUT_DIR/pytest_cuda.xml" tests 2>&1 | tee "$OUT_DIR/pytest_cuda.log" | tail -40
test_rc=${PIPESTATUS[0]}
echo "gpu_check: cuda tests exit status $test_rc (124: stopped at the 170 s limit)"

# ---- 3. benchmarks (write why, and nothing else, without a GPU)
timeout 270 "$PY" -m benchmarks.bench_gpu --out "$OUT_DIR" --budget 230
bench_rc=$?
echo "gpu_check: benchmarks exit status $bench_rc"
[ -f "$OUT_DIR/gpu_bench.md" ] && cat "$OUT_DIR/gpu_bench.md"
echo "gpu_check: done $(date -u); results in $OUT_DIR"
# exit non-zero when tests failed (5 = none collected counts as success here)
if [ "$test_rc" -ne 0 ] && [ "$test_rc" -ne 5 ]; then exit 1; fi
exit "$bench_rc"
