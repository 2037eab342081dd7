"""The step cache: a later process loads a compiled step from disk instead of building,
optimizing, fusing and planning it again, with bit-identical results; a damaged entry,
or an intact one under another step's name, is compiled again; the digest changes with
what the step depends on."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import nova as nv
from nova.core.graph import signature_id
from nova.runtime import step_cache
from nova.tensor.realize import pending_graph

ROOT = Path(__file__).resolve().parents[2]

TRAIN = """
import numpy as np, nova as nv
from models.gpt import GPT, preset
from nova.runtime import step_cache
import nova.compiler.pipeline as pipeline
built = []
front = pipeline.front
pipeline.front = lambda *a, **k: built.append(1) or front(*a, **k)
import importlib
importlib.import_module("nova.tensor.realize").front = pipeline.front
nv.manual_seed(0)
model = GPT(preset("tiny", block=8, dropout=0.1))
opt = nv.optim.AdamW(model.parameters(), lr=1e-2)
rng = np.random.default_rng(0)
losses = []
for _ in range(3):
    x = nv.tensor(rng.integers(0, 256, (2, 9)))
    _, loss = model(x[:, :-1], x[:, 1:])
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
w = model.state_dict()["h.0.attn.c_attn.weight"].numpy()
print("FROM_DISK", str(nv.debug.cache_stats()).count("step from disk"))
print("RESULT", repr(losses), float(np.abs(w).sum()).hex(), step_cache.STATS.hits,
      step_cache.STATS.stored, len(built))
"""


def _run(cache: Path) -> tuple[str, str, int, int, int, int]:
    env = {**os.environ, "NOVA_CACHE_DIR": str(cache), "NOVA_ENGINE": "cpu",
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", TRAIN], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT")][0].split(" ", 1)[1]
    losses, weights, hits, stored, built = line.rsplit(" ", 4)
    shown = int([ln for ln in out.splitlines() if ln.startswith("FROM_DISK")][0].split()[1])
    return losses, weights, int(hits), int(stored), int(built), shown


def test_a_warm_process_loads_its_steps_and_trains_bit_identically(tmp_path):
    losses1, w1, hits1, stored1, built1, shown1 = _run(tmp_path)
    small = built1 - stored1               # steps under MIN_OPS ops: built every time
    assert hits1 == 0 and stored1 >= 1 and shown1 == 0
    losses2, w2, hits2, stored2, built2, shown2 = _run(tmp_path)
    assert (hits2, stored2, built2) == (stored1, 0, small)  # the rest all from disk
    assert shown2 == stored1                                # cache_stats says so
    assert (losses2, w2) == (losses1, w1)
    entries = sorted((tmp_path / "steps").glob("*.step"))
    assert len(entries) == stored1
    for entry in entries:                     # damage every entry: compiled again
        blob = bytearray(entry.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        entry.write_bytes(bytes(blob))
    losses3, w3, hits3, stored3, built3, _ = _run(tmp_path)
    assert hits3 == 0 and built3 == built1 and (losses3, w3) == (losses1, w1)
    # an intact entry copied over another step's name: its header names another key
    entries = sorted((tmp_path / "steps").glob("*.step"), key=lambda p: p.stat().st_size)
    entries[0].write_bytes(entries[-1].read_bytes())
    losses4, w4, hits4, _, built4, _ = _run(tmp_path)
    assert (hits4, built4) == (stored1 - 1, small + 1) and (losses4, w4) == (losses1, w1)


def test_the_digest_names_the_structure_and_what_compiling_it_depends_on(monkeypatch):
    monkeypatch.setattr(step_cache, "MIN_OPS", 0)
    x = nv.tensor(np.ones((4, 8), np.float32))
    key = pending_graph((x * 2).sum()).key
    same = pending_graph((nv.tensor(np.zeros((4, 8), np.float32)) * 2).sum()).key
    other = pending_graph((x * 3).sum()).key
    name = step_cache.digest(key, "cpu")
    assert name == step_cache.digest(same, "cpu")          # data does not count
    assert name != step_cache.digest(other, "cpu")         # a constant does
    assert name != step_cache.digest(key, "cpu, remat=off")
    monkeypatch.setenv("NOVA_ROW_CHUNK_MB", "1")
    assert name != step_cache.digest(key, "cpu")


def test_a_key_that_prints_an_object_address_or_a_small_step_is_not_cached(monkeypatch):
    class Opaque:
        pass
    x = nv.tensor(np.ones((4, 8), np.float32))
    assert step_cache.digest(pending_graph((x * 2).sum()).key, "cpu") is None   # 3 ops
    monkeypatch.setattr(step_cache, "MIN_OPS", 0)
    # a node whose attribute is an object without a stable repr (keys hold interned
    # signature ids: the digest spells them out, object addresses included)
    sid = signature_id(("op", (("attr", Opaque()),), (2,), "float32"))
    assert step_cache.digest(((), (sid,), (0,), (), (0,)), "cpu") is None


def test_the_directory_stays_under_its_limit_least_recently_used_first(tmp_path, monkeypatch):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NOVA_STEP_DISK_CACHE_MB", str(50_000 / 2**20))    # 50 kB
    blob = "x" * 9_000                                   # entries of ~9.1 kB
    for k in range(3):
        step_cache.store(f"{k:064x}", blob, k)
        os.utime(tmp_path / "steps" / f"{k:064x}.step", (1e9 + k, 1e9 + k))   # old
    assert step_cache.load(f"{0:064x}") == (blob, 0)     # a hit touches entry 0
    before = step_cache.STATS.evicted
    for k in range(3, 6):            # the sixth entry passes 50 kB: down to 3/4 of it
        step_cache.store(f"{k:064x}", blob, k)
    names = sorted(p.name[:64] for p in (tmp_path / "steps").glob("*.step"))
    total = sum(p.stat().st_size for p in (tmp_path / "steps").glob("*.step"))
    assert total <= 50_000 * 3 // 4 and step_cache.STATS.evicted - before == 2
    assert names == [f"{k:064x}" for k in (0, 3, 4, 5)]  # 1 and 2 were used least
