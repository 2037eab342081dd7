"""Memory when the shapes keep changing: a small MLP trained one AdamW step per batch
size, each size a new structure (a new compile), with the step cache at its default
limit and at a small one, each in its own process.

    python -m benchmarks.bench_shapes              # 60 batch sizes
    python -m benchmarks.bench_shapes --shapes 20

Prints, per run, the RSS growth from after the first step to after the last (MiB) and
the step cache's line (entries, bytes charged, evictions). Before the compile worker and
the bounded caches (#17) the default run grew 327 MiB on the 2-core VM.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r'''
import gc, json, sys, warnings
import nova as nv
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
limit, shapes = int(sys.argv[1]), int(sys.argv[2])
if limit >= 0:
    nv.debug.set_step_cache_limit(limit)
model = nv.nn.Sequential(nv.nn.Linear(32, 64), nv.nn.GELU(), nv.nn.Linear(64, 10))
opt = nv.optim.AdamW(model.parameters(), lr=1e-3)
def step(b):
    x, y = nv.randn(b, 32), nv.randint(0, 10, (b,))
    loss = nv.nn.functional.cross_entropy(model(x), y)
    loss.backward(); opt.step(); opt.zero_grad()
    return loss.item()
step(2)
start = rss()
warnings.simplefilter("ignore")
for b in range(3, 3 + shapes):
    step(b)
gc.collect()
print(json.dumps({"growth_mib": rss() - start,
                  "cache": str(nv.debug.cache_stats()).splitlines()[0]}))
'''


def run(limit: int, shapes: int) -> dict:
    """One child process: RSS growth over ``shapes`` new structures (limit -1: default)."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(limit), str(shapes)],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=int, default=60, help="batch sizes (new structures)")
    args = ap.parse_args(argv)
    if args.shapes < 1:
        ap.error("--shapes must be at least 1")
    for label, limit in (("default step-cache limit", -1), ("1 MB step-cache limit", 2**20)):
        r = run(limit, args.shapes)
        print(f"{label}: RSS growth {r['growth_mib']:.1f} MiB over {args.shapes} shapes; "
              f"{r['cache']}")


if __name__ == "__main__":
    main()
