"""The memory plan of a 42M-parameter GPT training step (``gpt-42m``: vocabulary 50,304,
context 1,024), planned from shapes alone: no logits-sized value is stored whole, and
the planned peak stays under a bound computed from the parameter and activation sizes
(#24)."""
import time

import numpy as np

import nova as nv
import nova.optim.optimizer as optimizer_module
from models.gpt import GPT, preset
from nova.compiler.pipeline import front
from nova.runtime.program import PlannedOnly
from nova.tensor.realize import pending_graph

BATCH = 2


def _compiled_step_outputs(monkeypatch):
    """The outputs of one AdamW training step as ``nv.compile`` realizes it (the loss,
    the parameters and the moments; the logits and gradients are dropped by then),
    recorded but not realized."""
    cfg = preset("gpt-42m")
    nv.manual_seed(0)
    model = GPT(cfg)
    opt = nv.optim.AdamW(model.parameters(), lr=1e-3)
    monkeypatch.setattr(optimizer_module, "end_of_step", lambda: None)
    rs = np.random.RandomState(0)
    x, y = (nv.tensor(rs.randint(0, cfg.vocab, (BATCH, cfg.block))) for _ in range(2))
    logits, loss = model(x, y)
    del logits
    loss.backward()
    opt.step()
    opt.zero_grad()
    params = list(model.parameters())
    moments = [opt.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq")]
    return cfg, params, [loss, *params, *moments]


def test_the_gpt_42m_step_stores_no_logits_sized_value_and_fits_its_bound(monkeypatch):
    t0 = time.perf_counter()
    cfg, params, outputs = _compiled_step_outputs(monkeypatch)
    program = PlannedOnly(front(pending_graph(*outputs)))
    report = nv.debug.memory_report(*outputs)
    n = BATCH * cfg.block
    wide = n * cfg.vocab * 4                                    # (B*T, V) float32: 393 MiB
    # no (B*T, V) value is ever stored whole: the head and its loss run by row chunks
    sizes = {st.out: np.prod(st.shape) * st.np_dtype.itemsize for st in program.steps}
    stored = [sizes[s] for s in program.memory_plan.lifetimes]
    assert max(stored) < wide / 2
    # peak <= parameters and both moments, one more parameter-sized set (gradients
    # alive while their updates wait), 16 (N, d) float32 values saved per layer
    # (generous: LN outputs, q/k/v, attention output and its log-sum-exp, the residual
    # stream, the 4d MLP hidden), and one (B*T, V) buffer's worth of head chunks
    p_bytes = sum(int(np.prod(p.shape)) * 4 for p in params)
    activations = cfg.layers * 16 * n * cfg.d * 4
    bound = 4 * p_bytes + activations + wide
    # parameters, moments, the int64 batch and a few runtime scalars (lr, keys...)
    assert 0 <= report.argument_bytes - (3 * p_bytes + 2 * n * 8) < 1024
    assert report.peak_bytes < bound, (report.peak_bytes / 2**20, bound / 2**20, str(report))
    print(f"planned {report.peak_bytes / 2**20:.0f} MiB (bound {bound / 2**20:.0f} MiB) "
          f"in {time.perf_counter() - t0:.1f} s")
