"""``GPT.generate``: token for token what nanoGPT's loop gives (the whole context
re-run every step, compiling one step function per length) with the same seed, while
compiling a fixed number of step functions whatever the length; sampling helpers."""
import numpy as np
import pytest

import nova as nv
from models.gpt import GPT, GPTConfig, next_token

# block 8: a prompt of 3 and 9 new tokens cover the cached steps and the moving window
CFG = GPTConfig(vocab=64, block=8, d=16, layers=2, heads=2)


def _model(seed=0):
    nv.manual_seed(seed)
    model = GPT(CFG)
    model.eval()
    return model


def _reference(model, idx, n, temperature, top_k):
    """nanoGPT's generate: crop to the last block tokens, run the model, sample."""
    with nv.no_grad():
        for _ in range(n):
            cond = idx if idx.shape[1] <= CFG.block else idx[:, -CFG.block:]
            logits = model(cond)[0][:, -1, :]
            idx = nv.cat([idx, next_token(logits, temperature, top_k)], dim=1)
    return idx.numpy()


@pytest.mark.parametrize("temperature,top_k", [(0.8, 10), (0.0, None)])
def test_generate_equals_the_whole_context_loop_token_for_token(temperature, top_k):
    model = _model()
    prompt = nv.tensor([[5, 17, 3], [9, 9, 60]])
    nv.manual_seed(11)
    got = model.generate(prompt, 9, temperature=temperature, top_k=top_k).numpy()
    nv.manual_seed(11)
    want = _reference(model, prompt, 9, temperature, top_k)
    assert got.shape == (2, 12) and got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[:, :3], prompt.numpy())
    if temperature:   # sampled: not one token repeated
        assert len(set(got[:, 3:].ravel())) > 3


def test_a_replayed_generation_reads_the_weights_as_they_are_now():
    """generate's steps replay under nv.compile: after the weights change (a training
    step would rebind them), a generation must use the new ones."""
    model = _model(2)
    prompt = nv.tensor([[7, 8]])
    for _ in range(3):                                   # past nv.compile's recording
        nv.manual_seed(5)
        before = model.generate(prompt, 4, top_k=8).numpy()
    with nv.no_grad():
        model.h[0].mlp.c_fc.weight.mul_(3.0)
        model.wte.weight.add_(0.5 * nv.randn(*model.wte.weight.shape))
    nv.realize(*model.parameters())
    nv.manual_seed(5)
    got = model.generate(prompt, 4, top_k=8).numpy()
    nv.manual_seed(5)
    np.testing.assert_array_equal(got, _reference(model, prompt, 4, 1.0, 8))
    assert not np.array_equal(got, before)               # the change shows in the tokens


def test_generation_compiles_a_fixed_number_of_steps_whatever_its_length():
    model = _model(1)
    prompt = nv.tensor([[1, 2]])
    model.generate(prompt, 3, top_k=5)                  # compiles what generation needs
    before = nv.debug.cache_stats().misses
    model.generate(prompt, 20, top_k=5)                 # 2..22 tokens: cached and window steps
    model.generate(nv.tensor([[4, 4, 4, 4]]), 6, top_k=5)   # another prompt length
    assert nv.debug.cache_stats().misses - before <= 1  # (only the window step is new)


def test_next_token_samples_what_the_logits_say_and_refuses_bad_arguments():
    logits = nv.tensor([[0.0, 50.0, 0.0], [50.0, 0.0, 0.0]])
    assert next_token(logits, 1.0).numpy().tolist() == [[1], [0]]
    assert next_token(logits, 0.0).numpy().tolist() == [[1], [0]]
    # top_k=1 keeps only the largest even at a high temperature
    assert next_token(nv.tensor([[1.0, 1.1, 0.9]]), 100.0, top_k=1).numpy().tolist() == [[1]]
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        next_token(logits, -1.0)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        next_token(logits, 1.0, top_k=0)


def test_generate_refuses_what_is_not_a_batch_of_tokens():
    model = _model()
    with pytest.raises(ValueError, match=r"generate: idx must be \(batch, length\) integer"):
        model.generate(nv.tensor([1, 2, 3]), 2)
    with pytest.raises(ValueError, match="at least one token"):
        model.generate(nv.tensor(np.zeros((1, 0), np.int64)), 2)
