"""The training command line's reliability: non-finite losses stop the run and never
reach a checkpoint, metrics survive a kill and a resume does not repeat steps, bad flags
fail before the first step as one line, and a schedule change on --resume is announced
and followed consistently."""
import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nova as nv
from models.train import (NonFiniteError, Trainer, _resume_warning, build_parser, main,
                          make_schedule, nonfinite_entries, parse_args)

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["--preset", "tiny", "--quiet", "--max-bytes", "200000", "--eval-interval", "100"]


def _run(tmp_path, *extra, out="run"):
    return main(COMMON + ["--out", str(tmp_path / out)] + [str(x) for x in extra])


def _strict_records(path):
    """The metrics lines parsed as strict JSON (no NaN/Infinity tokens)."""
    def reject(token):
        raise ValueError(f"non-JSON number {token} in {path}")
    return [json.loads(line, parse_constant=reject) for line in Path(path).read_text()
            .splitlines()]


# ----------------------------------------------------------------- non-finite losses

def test_nan_loss_stops_with_the_step_and_keeps_the_good_checkpoint(tmp_path, capsys):
    ck = tmp_path / "ck.safetensors"
    _run(tmp_path, "--steps", 2, "--save", ck)
    good = ck.read_bytes()
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        _run(tmp_path, "--steps", 12, "--lr", 1e6, "--resume", ck, "--save", ck)
    records = _strict_records(tmp_path / "run" / "metrics.jsonl")
    first_bad = next(r["step"] for r in records if r["loss"] is None)
    assert records[-1]["step"] == first_bad < 12      # stopped at the first NaN
    message = stop.value.code
    assert isinstance(message, str)    # Python prints it to stderr and exits with status 1
    assert re.match(rf"train: error: loss is (nan|inf) at step {first_bad} ", message)
    assert "--allow-nonfinite" in message and "\n" not in message
    assert ck.read_bytes() == good


def test_allow_nonfinite_continues_but_never_saves_nonfinite_state(tmp_path, capsys):
    ck = tmp_path / "ck.safetensors"
    _run(tmp_path, "--steps", 2, "--save", ck)
    summary = _run(tmp_path, "--steps", 10, "--lr", 1e6, "--resume", ck, "--save", ck,
                   "--save-every", 1, "--allow-nonfinite")
    assert summary["steps"] == 10 and math.isnan(summary["final_loss"])
    records = _strict_records(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, 11))
    assert records[-1]["loss"] is None and records[-1]["val_loss"] is None
    first_bad = next(r["step"] for r in records if r["loss"] is None)
    err = capsys.readouterr().err
    assert "continuing (--allow-nonfinite)" in err
    assert "not saving" in err and "NaN or infinity" in err
    state = nv.load(ck)           # the last checkpoint written is from before the NaN
    assert int(state["step"]) < first_bad
    assert nonfinite_entries({"model": state["model"], "optimizer": state["optimizer"]}) == []


def test_save_refuses_a_nan_parameter_even_with_a_finite_loss(tmp_path):
    """Fault injection: the state goes bad between two loss reads (e.g. an inf gradient
    after a finite loss); the checkpoint on disk must stay the good one."""
    trainer = Trainer(parse_args(COMMON + ["--out", str(tmp_path), "--steps", "2"]))
    assert math.isfinite(trainer.train_step())
    ck = tmp_path / "ck.safetensors"
    trainer.save(str(ck))
    good = ck.read_bytes()
    w = trainer.model.h[1].mlp.c_fc.weight
    poisoned = w.numpy()
    poisoned[3, 5] = np.inf
    w.data = nv.tensor(poisoned)
    with pytest.raises(NonFiniteError, match=r"after step 1, model\.h\.1\.mlp\.c_fc\.weight "
                                             r"holds NaN or infinity"):
        trainer.save(str(ck))
    assert ck.read_bytes() == good


# ----------------------------------------------------------------- metrics.jsonl

def test_metrics_survive_sigkill_and_a_resume_does_not_repeat_steps(tmp_path):
    ck, metrics = tmp_path / "ck.safetensors", tmp_path / "metrics.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "models.train", *COMMON, "--steps", "100000",
                             "--out", str(tmp_path), "--save", str(ck), "--save-every", "5"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300    # a hang guard, not a timing assertion
        while not ck.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no checkpoint after 300 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    saved_step = int(nv.load(ck)["step"])
    steps = [r["step"] for r in _strict_records(metrics)]
    assert saved_step >= 5 and steps == list(range(1, len(steps) + 1))
    assert len(steps) >= saved_step       # every step up to the checkpoint was on disk

    main(COMMON + ["--out", str(tmp_path), "--resume", str(ck), "--steps",
                   str(saved_step + 2)])
    steps = [r["step"] for r in _strict_records(metrics)]
    assert steps == list(range(1, saved_step + 3))


def test_resume_and_rerun_in_the_same_out_keep_one_line_per_step(tmp_path, capsys):
    ck = tmp_path / "ck.safetensors"
    metrics = tmp_path / "run" / "metrics.jsonl"
    _run(tmp_path, "--steps", 3, "--save", ck, "--warmup", 2)
    first = _strict_records(metrics)
    assert first[0]["lr"] == pytest.approx(3e-3 * 0.01)     # the rate step 1 used
    assert first[2]["lr"] == pytest.approx(3e-3)
    _run(tmp_path, "--steps", 6, "--resume", ck, "--warmup", 2)
    once = _strict_records(metrics)
    _run(tmp_path, "--steps", 6, "--resume", ck, "--warmup", 2)   # the same resume again
    twice = _strict_records(metrics)
    assert [r["step"] for r in twice] == list(range(1, 7))
    assert [r["loss"] for r in twice] == [r["loss"] for r in once]
    assert "dropped 3 line(s)" in capsys.readouterr().err
    with open(metrics, "a") as f:
        f.write('{"step": 7, "lo')                             # torn by a kill
    _run(tmp_path, "--steps", 2)                               # a fresh run restarts the file
    assert [r["step"] for r in _strict_records(metrics)] == [1, 2]


# ----------------------------------------------------------------- flags

def _short_file(tmp_path):
    path = tmp_path / "short.txt"
    path.write_bytes(b"x" * 300)    # validation split: 30 bytes < a 32-byte context + 2
    return path


def _text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a checkpoint")
    return path


BAD_FLAGS = [
    (lambda t: ["--save", t], "--save .* is a directory"),
    (lambda t: ["--data", _short_file(t)], "validation split has 30 bytes .* context of 32"),
    (lambda t: ["--max-bytes", 200], "validation split has 20 bytes"),
    (lambda t: ["--eval-interval", 0], "--eval-interval must be at least 1, got 0"),
    (lambda t: ["--eval-batches", 0], "--eval-batches must be at least 1, got 0"),
    (lambda t: ["--block", 0], "--block must be at least 1, got 0"),
    (lambda t: ["--save-every", -2, "--save", t / "ck"], "--save-every must be non-negative"),
    (lambda t: ["--save-every", 5], "--save-every 5 needs --save"),
    (lambda t: ["--steps", -1], "--steps must be at least 1"),
    (lambda t: ["--batch-size", 0], "--batch-size must be at least 1"),
    (lambda t: ["--lr", 0], "--lr must be positive"),
    (lambda t: ["--lr", "nan"], "--lr must be a finite number"),
    (lambda t: ["--min-lr", 0.1], "--min-lr must be between 0 and --lr"),
    (lambda t: ["--dropout", 1], r"--dropout must be in \[0, 1\)"),
    (lambda t: ["--max-bytes", 0], "--max-bytes must be at least 1"),
    (lambda t: ["--seed", -1], "--seed must be non-negative"),
    (lambda t: ["--data", t / "missing.txt"], "--data .*missing.txt: no such file"),
    (lambda t: ["--resume", t / "missing.ck"], "--resume .*missing.ck: no such file"),
    (lambda t: ["--resume", _text_file(t)], "resume: .*notes.txt"),
    (lambda t: ["--out", _text_file(t)], "--out .* exists and is not a directory"),
]


@pytest.mark.parametrize("flags, message", BAD_FLAGS, ids=[m for _, m in BAD_FLAGS])
def test_bad_flags_fail_before_training_as_one_line(tmp_path, capsys, flags, message):
    argv = ["--preset", "tiny", "--quiet", "--max-bytes", "200000", "--steps", "2",
            "--out", str(tmp_path / "run")] + [str(x) for x in flags(tmp_path)]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("train: error: ") and len(err.splitlines()) == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()   # no step was run


def test_resume_with_another_model_is_a_one_line_error(tmp_path, capsys):
    ck = tmp_path / "ck.safetensors"
    _run(tmp_path, "--steps", 1, "--save", ck)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        _run(tmp_path, "--steps", 2, "--resume", ck, "--block", 16)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.splitlines()) == 1
    assert "was trained with config" in err


# ----------------------------------------------------------------- --steps on resume

def test_steps_help_says_it_counts_from_the_original_start():
    text = " ".join(build_parser().format_help().split())
    assert "the total number of optimizer steps, counted from step 0 of the original run" in text


def test_resume_with_another_schedule_warns_and_follows_the_new_one(tmp_path, capsys):
    argv = COMMON + ["--out", str(tmp_path)]
    first = Trainer(parse_args(argv + ["--steps", "40"]))     # warmup 2
    for _ in range(4):
        first.train_step()
    ck = tmp_path / "ck.safetensors"
    first.save(str(ck))
    assert nv.load(ck)["schedule"] == {"steps": 40, "warmup": 2, "lr": 3e-3,
                                       "min_lr": pytest.approx(3e-4), "weight_decay": 0.1}

    same = Trainer(parse_args(argv + ["--steps", "40", "--resume", str(ck)]))
    assert same.resume_changes == {}
    assert same.sched.get_last_lr() == first.sched.get_last_lr()
    for _ in range(3):           # the same schedule continues the run's rates exactly
        assert [g["lr"] for g in same.opt.param_groups] == \
            [g["lr"] for g in first.opt.param_groups]
        same.sched.step()
        first.sched.step()

    longer = Trainer(parse_args(argv + ["--steps", "80", "--weight-decay", "0.05",
                                        "--resume", str(ck)]))     # warmup 4
    assert longer.resume_changes == {"steps": (40, 80), "warmup": (2, 4),
                                     "weight_decay": (0.1, 0.05)}
    ref_opt = nv.optim.AdamW([nv.nn.Parameter(nv.zeros(1))], lr=3e-3)
    ref = make_schedule(ref_opt, 80, 4, 3e-3, 3e-4)
    for _ in range(4):
        ref.step()
    # the whole lr curve from step 4 on is the --steps 80 schedule, not a mix of the two
    for _ in range(6):
        assert longer.sched.get_last_lr()[0] == pytest.approx(ref.get_last_lr()[0])
        longer.sched.step()
        ref.step()
    assert [g["weight_decay"] for g in longer.opt.param_groups] == [0.05, 0.0]

    capsys.readouterr()
    main(argv + ["--steps", "5", "--resume", str(ck)])
    err = capsys.readouterr().err
    assert "with different training arguments: --steps 40 -> 5, --warmup 2 -> 1" in err
    assert _resume_warning(same, str(ck)) is None
