"""Threads and Ctrl-C fuzzer (no torch): python fuzz_threads.py START N [only] [--mode=threads|sigint|both]
    [--threaded-first] [--switch] [--alrm] [--how=pthread_kill|os_kill|interrupt_main|itimer|alrm_raise]

Attacks README "Reliability" (bullets "Ctrl-C" and "Threads") and "Semantics worth
knowing" ("Per-thread state") with random programs; the reference is the same program
run single-threaded and uninterrupted in this process, from a fresh ``setup()``.

threads mode: K = 2..6 programs (elementwise chains over square matrices, reductions,
matmuls, views, in-place writes through views of clones, small backward passes,
eager training loops with SGD/Adam/AdamW, ``nv.compile``d training steps called in
loops, a pure ``nv.compile``d function shared by threads, draws from per-thread
``nv.Generator``s, one thread drawing from the default generator (dropout, randn) after
``nv.manual_seed``, ``nv.no_grad``, ``nv.engine("interp")`` and ``nv.set_remat`` inside
one thread only). Threads share read-only inputs (some still pending when the threads
start), some run the same structure with their own data, some hand a pending tensor
to another thread, which realizes it; they are started and joined at random times,
one program may run on the main thread meanwhile; a thread may hold a pending value
while the others realize, and checks that none of them computed it. Every value must
equal the sequential run's bit for bit; the main thread's engine/remat/grad mode must
be the defaults afterwards. A ``glob`` case has several threads drawing ``nv.rand`` from the
process-wide generator at once: each draw must be the draw of one offset, no two draws
share one, and the generator advanced by exactly the number of draws.

sigint mode: the main thread runs a list of units (in-place updates that donate their
buffer, eager training iterations, calls of an ``nv.compile``d training step, fresh
pure computations), optionally while background threads run chain programs, and one
interrupt lands at a random moment (``pthread_kill`` of SIGINT from a timer thread,
``os.kill``, ``_thread.interrupt_main``, or ``setitimer`` whose SIGALRM handler raises
SIGINT). After the KeyboardInterrupt every state tensor (parameters, optimizer states,
the in-place targets) must equal its value before or after the interrupted unit
(each tensor on its own: Python may stop between two parameters' updates); if the
state as a whole is one of the two, the run goes on with the same objects (gradients
cleared) and must end bit-identical to the reference. Then the whole program runs
again uninterrupted from a fresh ``setup()`` (the executables and compiled functions
that were interrupted are cached) and must equal the reference. With ``--alrm`` the
interrupt is also raised by a SIGALRM handler directly (``raise KeyboardInterrupt``,
no SIGINT); every Python-level handler is deferred in a donating step (2026-12-08), so
those cases are judged as the others.

Failure keys in the final Counter: ``bad`` (a wrong value), ``err`` (raised where the
reference did not), ``hang`` (a join timed out), ``harness`` (the reference itself
failed: a bug here). Each distinct failure prints its case number and the case's
source (``setup``, the thread programs or units); a case depends on its number only:
``python fuzz_threads.py I 1 --mode=M`` replays case I (``START N only``: case ``only``).
Runtime: ~5 s a case (2-core VM, warm kernel cache); races make failures intermittent.

Found on 2026-12-07, all three fixed on 2026-12-08 with regression tests
(``tests/test_fault_injection.py``, ``tests/optim/test_optimizers.py``; every
Python-level signal handler is now held back in a donating step, so
``--how=alrm_raise`` cases are judged like the rest): a pending tensor shared by threads can fail another thread's
step with ``KeyError: 'buffer'`` (its graph is extracted, then waits for the one-at-a-
time compile lock while a third thread binds the shared node); an exception raised
by a non-SIGINT signal handler (``--how=alrm_raise``) applies a donating step twice.
An interrupt inside ``SGD.step`` (momentum) after the zero buffer is made leaves it in
the state, which the retry takes as a later step: with ``dampening`` the update is
scaled by ``1 - dampening``; the state check accepts such fresh zero buffers.
"""
import _thread
import contextvars
import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter

import numpy as np

import nova as nv

JOIN_TIMEOUT = float(os.environ.get("FUZZ_JOIN_TIMEOUT", "180"))
CASE_WATCHDOG = float(os.environ.get("FUZZ_WATCHDOG", "600"))

# ---------------------------------------------------------------- program text

HEADER = "import numpy as np\nimport nova as nv\n"


def _arr(rng_name, shape, dt="np.float32", scale=1.0):
    return f"nv.from_numpy(({rng_name}.standard_normal({shape}) * {scale}).astype({dt}))"


BIN = ["({x} + {y})", "({x} * {y})", "({x} - {y} * 0.5)", "nv.maximum({x}, {y})",
       "nv.where({x} > {y}, {x}, {y} * 2)", "({x} @ {y})", "({x} / ({y}.abs() + 1))",
       "({x} @ {y}.t())"]
UNA = ["nv.tanh({x})", "{x}.relu()", "{x}.t()", "{x}.flip(0)", "{x}.roll(1, 1)",
       "({x} * 3 - 1)", "{x}.softmax(-1)", "nv.sigmoid({x})",
       "({x} - {x}.mean(0, keepdim=True))", "{x}.cumsum(1)", "{x}.exp().clamp(max=10.0)",
       "{x}.abs().sqrt()", "{x}.transpose(0, 1).contiguous()", "({x} ** 2)"]
RED = ["{x}.sum(0)", "{x}.amax(1)", "{x}.mean()", "{x}.logsumexp(0)", "{x}.var(1)",
       "{x}.argmax(1)", "{x}[1:, ::2].sum(1)", "{x}.norm()", "{x}.diagonal()"]
INPL = ["{w}[{i}:{j}].add_(1.5)", "{w}[:, ::2].mul_(-2)", "{w}.t()[{i}].fill_(0.25)",
        "{w}.diagonal().zero_()", "{w}[{i}] = {y}[{jj}]", "{w}.clamp_(-1.0, 1.0)",
        "{w}.sub_({y})", "{w}.masked_fill_({w} > 0.5, -3.0)"]


def gen_chain(rng, n, names, lines, out_prefix, ind="    ", steps=None):
    """Append a random chain over square (n, n) tensors named in ``names`` (float32)."""
    names = list(names)
    steps = steps if steps is not None else int(rng.integers(3, 9))
    k0 = len(lines)
    for s in range(steps):
        nm = f"v{k0}_{s}"
        r = rng.random()
        x = str(rng.choice(names))
        y = str(rng.choice(names))
        if r < 0.35:
            e = str(rng.choice(BIN)).format(x=x, y=y)
            # matmul outputs grow: keep them tame
            if "@" in e:
                e = f"nv.tanh({e} * {1.0 / n:.6g})"
            lines.append(f"{ind}{nm} = {e}")
        elif r < 0.65:
            lines.append(f"{ind}{nm} = {str(rng.choice(UNA)).format(x=x)}")
        elif r < 0.8:
            i = int(rng.integers(0, n)); j = int(rng.integers(i, n + 1))
            lines.append(f"{ind}{nm} = {x}.clone()")
            for _ in range(int(rng.integers(1, 3))):
                lines.append(ind + str(rng.choice(INPL)).format(w=nm, y=y, i=i, j=j, jj=min(j, n - 1)))
        else:
            red = str(rng.choice(RED)).format(x=x)
            lines.append(f"{ind}{out_prefix}[\"{nm}\"] = {red}.numpy()")
            continue
        names.append(nm)
        if rng.random() < 0.3:
            lines.append(f"{ind}{out_prefix}[\"{nm}\"] = {nm}.numpy()")
        elif rng.random() < 0.1:
            lines.append(f"{ind}nv.realize({nm})")
    last = names[-1]
    lines.append(f"{ind}{out_prefix}[\"{last}_end\"] = {last}.numpy()")
    return names


ACTS = ["nv.nn.GELU()", "nv.nn.Tanh()", "nv.nn.ReLU()", "nv.nn.SiLU()"]
OPTS = ["nv.optim.SGD({p}, lr=0.05, momentum=0.9)", "nv.optim.Adam({p}, lr=1e-2)",
        "nv.optim.AdamW({p}, lr=1e-2, weight_decay=0.1)", "nv.optim.SGD({p}, lr=0.1)"]


class Case:
    def __init__(self):
        self.setup = []        # body lines of setup(E)
        self.progs = []        # (name, lines) for each program
        self.notes = []

    def source(self):
        out = [HEADER, "", "def setup():", "    E = {}"]
        out += self.setup
        out += ["    return E", ""]
        for name, lines in self.progs:
            out.append(f"def {name}(E, O):")
            out += lines or ["    pass"]
            out.append("")
        return "\n".join(out)


def model_setup(rng, case, tag, dropout_p=0.0):
    din, h, dout = (int(rng.choice([3, 4, 8])), int(rng.choice([5, 8, 16])),
                    int(rng.choice([2, 3])))
    act = str(rng.choice(ACTS))
    seed = int(rng.integers(0, 1000))
    layers = [f"nv.nn.Linear({din}, {h})", act]
    if dropout_p:
        layers.append(f"nv.nn.Dropout({dropout_p})")
    layers.append(f"nv.nn.Linear({h}, {dout})")
    case.setup.append(f"    nv.manual_seed({seed})")
    case.setup.append(f"    E['m{tag}'] = nv.nn.Sequential({', '.join(layers)})")
    opt = str(rng.choice(OPTS)).format(p=f"E['m{tag}'].parameters()")
    case.setup.append(f"    E['opt{tag}'] = {opt}")
    return din, dout


def step_fn_lines(tag, compiled):
    lines = [f"    def step{tag}(x, y, m=E['m{tag}'], opt=E['opt{tag}']):",
             "        loss = ((m(x) - y) ** 2).mean()",
             "        loss.backward()",
             "        opt.step()",
             "        opt.zero_grad()",
             "        return loss"]
    lines.append(f"    E['step{tag}'] = nv.compile(step{tag})" if compiled
                 else f"    E['step{tag}'] = step{tag}")
    return lines


def gen_threads_case(seed, i):
    """A threads-mode case: (Case, K, schedule, main_prog, meta)."""
    rng = np.random.default_rng([i])
    case = Case()
    K = int(rng.integers(2, 7))
    n = int(rng.choice([3, 5, 8, 16, 33]))
    glob = rng.random() < 0.15
    case.setup.append(f"    r = np.random.default_rng({int(rng.integers(0, 10**6))})")
    case.setup.append(f"    E['S0'] = {_arr('r', (n, n))}")
    case.setup.append(f"    E['S1'] = {_arr('r', (n, n))} * 2 + 1"
                      + ("" if rng.random() < 0.5 else "\n    nv.realize(E['S1'])"))
    case.setup.append("    E['S2'] = E['S0'].t() * 0.5")     # a pending view-like value
    # a pure compiled function threads may share
    case.setup.append("    E['pure'] = nv.compile(lambda a, b: (nv.tanh(a @ b * 0.1) + a).sum(0))")
    case.setup.append("    E['box'] = {}")
    case.setup.append(f"    E['ev'] = [__import__('threading').Event() for _ in range({K})]")
    templates = {}             # chain templates shared by several threads
    kinds = []
    global_user = None         # the one thread allowed to draw from the default generator
    for j in range(K):
        r = rng.random()
        if glob and r < 0.5:
            kind = "glob"
        elif r < 0.35:
            kind = "chain"
        elif r < 0.55:
            kind = "train"
        elif r < 0.7:
            kind = "compiled"
        elif r < 0.82:
            kind = "rng"
        elif r < 0.9:
            kind = "pure"
        else:
            kind = "grad"
        kinds.append(kind)
    if "pure" in kinds and K > 2 and rng.random() < 0.6:
        kinds[int(rng.integers(0, K))] = "pure"      # one compiled function, two threads
    handoffs = {}              # consumer -> producer
    if K >= 3 and rng.random() < 0.4:
        p = int(rng.integers(0, K - 1)); c = int(rng.integers(p + 1, K))
        handoffs[c] = p
    producers = set(handoffs.values())
    case.setup.append(f"    nv.manual_seed({int(rng.integers(0, 10**6))})")
    for j, kind in enumerate(kinds):
        L = []
        L.append(f"    rng = np.random.default_rng({1000 + j})")
        wrap = rng.random()
        ind = "    "
        if wrap < 0.12:
            L.append('    with nv.engine("interp"):')
            ind = "        "
            case.notes.append(f"t{j}: interp")
        elif wrap < 0.22 and kind in ("train", "compiled", "grad"):
            L.append(f'    nv.set_remat("{rng.choice(["aggressive", "off"])}")')
        elif wrap < 0.3 and kind in ("chain", "pure", "rng"):
            L.append("    with nv.no_grad():")
            ind = "        "
        if j in handoffs:
            p = handoffs[j]
            L.append(f"{ind}assert E['ev'][{p}].wait(60), 'producer never came'")
            L.append(f"{ind}h = E['box'][{p}]")
        if kind in ("chain", "glob"):
            own = ["a", "b"]
            L.append(f"{ind}{own[0]} = {_arr('rng', (n, n))}")
            L.append(f"{ind}{own[1]} = {_arr('rng', (n, n))}")
            if rng.random() < 0.3:
                # others realize meanwhile: none of them may compute this thread's value
                L.append(f"{ind}own = E['S0'] * 7 + 1")
                L.append(f"{ind}__import__('time').sleep(0.02)")
                L.append(f"{ind}O['own_still_pending'] = np.array(not own.node.realized)")
            names = ["E['S0']", "E['S1']", "E['S2']"] + own
            if j in handoffs:
                names.append("h")
            tkey = int(rng.integers(0, 3))
            if tkey in templates and j not in handoffs and rng.random() < 0.6:
                L += [ind + ln for ln in templates[tkey]]  # same structure, own data
            else:
                body = []
                gen_chain(rng, n, names, body, "O", ind="")
                # an inner loop: same structure each iteration (cache hits)
                if rng.random() < 0.5:
                    R = int(rng.integers(2, 6))
                    body.append(f"x = {own[0]}")
                    body.append(f"for it in range({R}):")
                    body.append(f"    x = nv.tanh(x @ {own[1]} * {1.0 / n:.6g} + E['S0'])")
                    body.append("    O[f'loop{it}'] = x.sum(1).numpy()")
                templates.setdefault(tkey, body) if j not in handoffs else None
                L += [ind + ln for ln in body]
            if kind == "glob":
                for d in range(int(rng.integers(2, 8))):
                    L.append(f"{ind}O['g:rand{d}'] = nv.rand({n}, {n}).numpy()")
                    if rng.random() < 0.3:
                        L.append(f"{ind}O['c{d}'] = ({own[0]} * {d} + E['S1']).sum(0).numpy()")
        elif kind in ("train", "compiled"):
            dp = 0.0
            if kind == "train" and global_user is None and not glob and rng.random() < 0.4:
                dp = float(rng.choice([0.1, 0.5]))
                global_user = j
            tag = f"{j}"
            din, dout = model_setup(rng, case, tag, dp)
            case.setup += step_fn_lines(tag, kind == "compiled")
            R = int(rng.integers(2, 7))
            B = int(rng.choice([4, 7, 16]))
            L.append(f"{ind}for it in range({R}):")
            L.append(f"{ind}    x = {_arr('rng', (B, din))}")
            L.append(f"{ind}    y = {_arr('rng', (B, dout))}")
            if j in handoffs:
                L.append(f"{ind}    x = x + h[:{B}, :{din}].sum() * 0.01 if h.shape[0] >= {B} and h.shape[1] >= {din} else x + h.mean() * 0.01")
            L.append(f"{ind}    loss = E['step{tag}'](x, y)")
            if rng.random() < 0.7:
                L.append(f"{ind}    O[f'loss{{it}}'] = loss.numpy()")
            if rng.random() < 0.4:
                L.append(f"{ind}with nv.no_grad():")
                L.append(f"{ind}    O['eval'] = E['m{tag}'](nv.ones(3, {din})).numpy()")
            L.append(f"{ind}for k, p in enumerate(E['m{tag}'].parameters()):")
            L.append(f"{ind}    O[f'p{{k}}'] = p.numpy()")
        elif kind == "rng":
            if global_user is None and not glob and rng.random() < 0.3:
                global_user = j
                gen = ""
                case.notes.append(f"t{j}: default generator")
            else:
                L.append(f"{ind}g = nv.Generator({int(rng.integers(0, 4))})")
                gen = ", generator=g"
            for d in range(int(rng.integers(2, 6))):
                c = rng.random()
                if c < 0.4:
                    L.append(f"{ind}z{d} = nv.randn({n}, {n}{gen})")
                elif c < 0.7:
                    L.append(f"{ind}z{d} = nv.rand({n}, {n}{gen}) * E['S0']")
                else:
                    L.append(f"{ind}z{d} = nv.randint(0, 7, ({n}, {n}){gen}).float() - E['S2']")
                if rng.random() < 0.6:
                    L.append(f"{ind}O['z{d}'] = z{d}.numpy()")
                else:
                    L.append(f"{ind}O['z{d}s'] = (z{d} @ E['S1']).sum(0).numpy()")
            if gen == "" and rng.random() < 0.5:
                L.append(f"{ind}O['drop'] = nv.nn.functional.dropout(E['S1'], 0.3).numpy()")
        elif kind == "pure":
            for d in range(int(rng.integers(2, 6))):
                L.append(f"{ind}x = {_arr('rng', (n, n))}")
                L.append(f"{ind}O['pure{d}'] = E['pure'](x, E['S{d % 3}']).numpy()")
        elif kind == "grad":
            L.append(f"{ind}p = {_arr('rng', (n, n))}.requires_grad_()")
            L.append(f"{ind}q = {_arr('rng', (n,))}.requires_grad_()")
            for d in range(int(rng.integers(1, 4))):
                L.append(f"{ind}loss = (nv.tanh(p @ E['S0'] * 0.2 + q) * E['S1']).sum() + (p * q).pow(2).mean()")
                L.append(f"{ind}loss.backward()")
                L.append(f"{ind}O['l{d}'] = loss.numpy()")
                L.append(f"{ind}O['gp{d}'] = p.grad.numpy()")
                L.append(f"{ind}O['gq{d}'] = q.grad.numpy()")
                if rng.random() < 0.5:
                    L.append(f"{ind}with nv.no_grad():")
                    L.append(f"{ind}    p.sub_(p.grad * 0.1)")
                    L.append(f"{ind}    p.grad = None")
        if j in producers:
            # hand a pending value to the consumer, keep computing with it here too
            L.append(f"{ind}hp = (E['S0'] * {j + 2} + E['S1']).relu()")
            L.append(f"{ind}E['box'][{j}] = hp * 0.5 + 1")
            L.append(f"{ind}E['ev'][{j}].set()")
            if rng.random() < 0.5:
                L.append(f"{ind}O['hp'] = (hp * 0.5 + 1).sum().numpy()")
        if j in handoffs:
            L.append(f"{ind}O['hand'] = (h * 2 + E['S0']).sum(0).numpy()")
        case.progs.append((f"t{j}", L))
    # schedule: starts, joins, sleeps, the main thread's own program
    main_prog = None
    cand = [j for j in range(K) if j not in handoffs and j not in producers]
    if cand and rng.random() < 0.4:
        main_prog = int(rng.choice(cand))
    order = [j for j in range(K) if j != main_prog]
    rng.shuffle(order)
    sched, started, joined = [], [], set()
    pending_starts = list(order)
    main_done = main_prog is None
    while pending_starts or len(joined) < len(order) or not main_done:
        c = rng.random()
        if pending_starts and c < 0.5:
            j = pending_starts.pop(0)
            sched.append(("start", j)); started.append(j)
        elif c < 0.65:
            sched.append(("sleep", float(rng.choice([0.0, 0.001, 0.01, 0.05]))))
        elif not main_done and c < 0.75:
            sched.append(("main", main_prog)); main_done = True
        else:
            can = [j for j in started if j not in joined and
                   (j not in handoffs or handoffs[j] in started or handoffs[j] == main_prog)]
            if can:
                j = int(rng.choice(can))
                sched.append(("join", j)); joined.add(j)
            elif not pending_starts and main_done and len(joined) < len(order):
                # only consumers left whose producers are... started by now
                j = [x for x in started if x not in joined][0]
                sched.append(("join", j)); joined.add(j)
    meta = dict(K=K, kinds=kinds, glob=glob, handoffs=handoffs, main=main_prog, n=n)
    return case, K, sched, main_prog, meta


# ---------------------------------------------------------------- running

class Failure(Exception):
    pass


def _copy(v):
    return np.array(v, copy=True)


def exec_case(src):
    ns = {"__name__": "fuzz_case"}
    exec(compile(src, "<case>", "exec"), ns)
    return ns


def run_sequential(ns, K):
    E = ns["setup"]()
    outs = [{} for _ in range(K)]
    for j in range(K):
        contextvars.copy_context().run(ns[f"t{j}"], E, outs[j])
    return outs, E


def run_threaded(ns, K, sched):
    E = ns["setup"]()
    outs = [{} for _ in range(K)]
    errs = [None] * K

    def guarded(j):
        try:
            ns[f"t{j}"](E, outs[j])
        except BaseException:
            errs[j] = traceback.format_exc()
    ths = {}
    for ev, arg in sched:
        if ev == "start":
            ths[arg] = threading.Thread(target=guarded, args=(arg,), daemon=True)
            ths[arg].start()
        elif ev == "sleep":
            time.sleep(arg)
        elif ev == "main":       # (its own context: a set_remat there is its own)
            contextvars.copy_context().run(guarded, arg)
        elif ev == "join":
            ths[arg].join(JOIN_TIMEOUT)
            if ths[arg].is_alive():
                raise Failure(f"hang: thread t{arg} still running after {JOIN_TIMEOUT} s")
    for j, t in ths.items():
        t.join(JOIN_TIMEOUT)
        if t.is_alive():
            raise Failure(f"hang: thread t{j} still running after {JOIN_TIMEOUT} s")
    return outs, errs, E


def compare(ref, got, where):
    """First difference between two output dicts (exact, NaN == NaN), or None."""
    if set(ref) != set(got):
        return f"{where}: outputs {sorted(set(ref) ^ set(got))} missing on one side"
    for k in ref:
        a, b = np.asarray(ref[k]), np.asarray(got[k])
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{where}[{k}]: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            with np.errstate(all="ignore"):
                d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            return (f"{where}[{k}]: max |diff| {np.nanmax(d):.3g} "
                    f"({int((d != 0).sum())}/{d.size} elements differ); ref {a.ravel()[:4]} got {b.ravel()[:4]}")
    return None


def check_glob(outs_thr, draws_before, draws_after, n, seed_state):
    """The threads' nv.rand draws from the process-wide generator: each the draw of one
    offset, none shared, the generator advanced once per draw."""
    got = [(j, k, v) for j, o in enumerate(outs_thr) for k, v in o.items() if k.startswith("g:")]
    s0, off0 = seed_state
    g = nv.Generator()
    table = {}
    for o in range(off0, draws_after + 1):
        g.set_state((s0, o))
        table[nv.rand(n, n, generator=g).numpy().tobytes()] = o
    used = {}
    for j, k, v in got:
        o = table.get(v.tobytes())
        if o is None:
            return f"t{j}[{k}]: a draw that is no offset's value in [{off0}, {draws_after}]"
        if o in used:
            return f"t{j}[{k}] and {used[o]} drew the same offset {o}"
        used[o] = f"t{j}[{k}]"
    return None


def strip_glob(outs):
    return [{k: v for k, v in o.items() if not k.startswith("g:")} for o in outs]


def check_thread_defaults():
    if nv.get_engine() != "cpu" or nv.get_remat() != "default" or not nv.is_grad_enabled():
        return (f"main thread settings leaked: engine {nv.get_engine()}, remat "
                f"{nv.get_remat()}, grad {nv.is_grad_enabled()}")
    return None


def threads_case(seed, i):
    case, K, sched, main_prog, meta = gen_threads_case(seed, i)
    src = case.source()
    ns = exec_case(src)
    rng = np.random.default_rng([i, 7])
    # cold compiles racing in threads (with a fresh NOVA_CACHE_DIR: kernels too)
    threaded_first = rng.random() < 0.4 or "--threaded-first" in sys.argv
    res = {}

    def seq():
        try:
            res["ref"], _ = run_sequential(ns, K)
        except Exception:
            raise Failure("harness: reference raised:\n" + traceback.format_exc()[-1500:])
        from nova.tensor.random import default_generator
        res["ref_off"] = default_generator.offset

    def thr():
        from nova.tensor.random import default_generator
        outs, errs, E = run_threaded(ns, K, sched)
        # the seed set inside setup: the state right after setup ran
        res["thr"], res["errs"] = outs, errs
        res["thr_off"] = default_generator.offset

    if threaded_first:
        thr(); seq()
    else:
        seq(); thr()
    msg = check_thread_defaults()
    if msg:
        nv.set_remat("default"); nv.set_engine("cpu"); nv.set_grad_enabled(True)
        return "bad", msg, src, sched, meta
    for j, e in enumerate(res["errs"]):
        if e is not None:
            return "err", f"t{j} raised (the sequential run did not):\n{e[-1500:]}", src, sched, meta
    ref, thr_o = strip_glob(res["ref"]), strip_glob(res["thr"])
    for j in range(K):
        d = compare(ref[j], thr_o[j], f"t{j}")
        if d:
            return "bad", d, src, sched, meta
    if meta["glob"]:
        # setup's manual_seed sets (seed, 0); draws after setup's own are the threads'
        ns2 = exec_case(src)
        from nova.tensor.random import default_generator
        ns2["setup"]()
        st = default_generator.get_state()
        ndraws = sum(1 for o in res["thr"] for k in o if k.startswith("g:"))
        # no other draws from the default generator in a glob case
        if res["thr_off"] - st[1] != ndraws:
            return "bad", (f"default generator advanced {res['thr_off'] - st[1]} for "
                           f"{ndraws} draws"), src, sched, meta
        d = check_glob(res["thr"], None, res["thr_off"], meta["n"], st)
        if d:
            return "bad", d, src, sched, meta
    return "ok", None, src, sched, meta


# ---------------------------------------------------------------- sigint mode

def gen_sigint_case(seed, i):
    rng = np.random.default_rng([i, 1])
    case = Case()
    n = int(rng.choice([8, 64, 200]))
    case.setup.append(f"    r = np.random.default_rng({int(rng.integers(0, 10**6))})")
    case.setup.append(f"    E['w'] = nv.zeros({n}, {n})")
    case.setup.append(f"    E['u'] = {_arr('r', (n, n))}")
    case.setup.append(f"    E['S0'] = {_arr('r', (n, n))}")
    case.setup.append("    E['O'] = {}")
    compiled = rng.random() < 0.6
    din, dout = model_setup(rng, case, "M")
    case.setup += step_fn_lines("M", compiled)
    B = int(rng.choice([8, 64]))
    U = int(rng.integers(4, 14))
    case.setup.append(f"    E['X'] = [{_arr('r', (B, din))} for _ in range({U})]")
    case.setup.append(f"    E['Y'] = [{_arr('r', (B, dout))} for _ in range({U})]")
    for k in range(U):
        c = rng.random()
        L = []
        if c < 0.3:
            op = str(rng.choice(["E['w'].sub_(E['u'])", "E['w'].add_(E['u'] * 0.5)",
                                 "E['w'][1:].mul_(0.5)", "E['w'].mul_(0.9).add_(1.0)",
                                 "E['w'][:, ::2].add_(E['S0'][:, ::2])"]))
            L.append(f"    {op}")
            L.append("    nv.realize(E['w'])")
        elif c < 0.75:
            L.append(f"    loss = E['stepM'](E['X'][{k}], E['Y'][{k}])")
            if rng.random() < 0.6:
                L.append(f"    E['O']['loss{k}'] = loss.numpy()")
        else:
            body = []
            gen_chain(rng, n, ["E['S0']", "E['u']"], body, "E['O']", ind="    ",
                      steps=int(rng.integers(2, 5)))
            L += [ln.replace('E[\'O\']["', f'E[\'O\']["u{k}_') for ln in body]
        case.progs.append((f"u{k}", L))
    # background threads: chain programs checked against their own sequential run
    nbg = int(rng.integers(0, 3)) if rng.random() < 0.5 else 0
    bg = []
    for j in range(nbg):
        L = [f"    rng = np.random.default_rng({2000 + j})",
             f"    a = {_arr('rng', (n, n))}", f"    b = {_arr('rng', (n, n))}",
             "    for it in range(6):"]
        L.append(f"        a = nv.tanh(a @ b * {1.0 / n:.6g} + E['S0'])")
        L.append("        O[f'bg{it}'] = a.sum(0).numpy()")
        case.progs.append((f"bg{j}", L))
        bg.append(f"bg{j}")
    how = str(rng.choice(["pthread_kill", "os_kill", "interrupt_main", "itimer"]
                         + (["alrm_raise"] if "--alrm" in sys.argv else [])))
    for a in sys.argv:
        if a.startswith("--how="):         # force one delivery
            how = a.split("=", 1)[1]
    frac = float(rng.uniform(0.0, 1.1))
    cold = rng.random() < 0.3
    return case, U, bg, how, frac, cold


def snapshot(E):
    s = {"w": E["w"].numpy().copy()}
    m, opt = E["mM"], E["optM"]
    for k, p in enumerate(m.parameters()):
        s[f"p{k}"] = p.numpy().copy()
        st = opt.state.get(p, {}) if hasattr(opt.state, "get") else {}
        for name, v in st.items():
            if isinstance(v, nv.Tensor):
                s[f"p{k}.{name}"] = v.numpy().copy()
            else:
                s[f"p{k}.{name}"] = np.array(v)
    return s


class Armed:
    on = False


def _handler(signum, frame):
    if Armed.on:
        raise KeyboardInterrupt


def _alrm_to_int(signum, frame):
    if Armed.on:
        signal.raise_signal(signal.SIGINT)


def deliver(how, delay):
    """Start the interrupt; return a cancel function."""
    main = threading.main_thread().ident
    if how == "itimer":
        signal.signal(signal.SIGALRM, _alrm_to_int)
        signal.setitimer(signal.ITIMER_REAL, max(delay, 1e-6))
        return lambda: signal.setitimer(signal.ITIMER_REAL, 0)
    if how == "alrm_raise":
        signal.signal(signal.SIGALRM, _handler)
        signal.setitimer(signal.ITIMER_REAL, max(delay, 1e-6))
        return lambda: signal.setitimer(signal.ITIMER_REAL, 0)
    fn = {"pthread_kill": lambda: signal.pthread_kill(main, signal.SIGINT),
          "os_kill": lambda: os.kill(os.getpid(), signal.SIGINT),
          "interrupt_main": lambda: _thread.interrupt_main()}[how]
    t = threading.Timer(delay, lambda: Armed.on and fn())
    t.daemon = True
    t.start()

    def cancel():
        t.cancel()
    return cancel


def run_units(ns, E, U, start=0, snaps=None):
    for k in range(start, U):
        ns[f"u{k}"](E, E["O"])
        if snaps is not None:
            snaps.append(snapshot(E))


def sigint_case(seed, i):
    case, U, bg, how, frac, cold = gen_sigint_case(seed, i)
    src = case.source()
    ns = exec_case(src)
    info = dict(U=U, bg=bg, how=how, frac=round(frac, 3), cold=cold)

    def reference():
        E = ns["setup"]()
        snaps = [snapshot(E)]
        t0 = time.perf_counter()
        run_units(ns, E, U, 0, snaps)
        bgo = {}
        for b in bg:
            bgo[b] = {}
            ns[b](E, bgo[b])
        return E, snaps, time.perf_counter() - t0, bgo
    if not cold:
        try:
            E_ref, ref, dur, ref_bg = reference()
        except Exception:
            return "harness", "reference raised:\n" + traceback.format_exc()[-1500:], src, info
        try:            # a warm run: how long the interrupted one will take
            E_w, warm, dur, _ = reference()
        except Exception:
            return "err", "a second uninterrupted run raised:\n" + traceback.format_exc()[-1500:], src, info
        d = compare(ref[U], warm[U], "second uninterrupted run")
        if d:
            return "bad", d, src, info
        del E_w, warm
        delay = frac * dur
    else:
        delay = frac * 1.5
    info["delay"] = round(delay, 4)
    # the interrupted run
    E = ns["setup"]()
    for p in E["mM"].parameters():
        p.numpy()
    bgo = {b: {} for b in bg}
    bgerr = {}

    def bgrun(b):
        try:
            ns[b](E, bgo[b])
        except BaseException:
            bgerr[b] = traceback.format_exc()
    ths = [threading.Thread(target=bgrun, args=(b,), daemon=True) for b in bg]
    prev_int = signal.signal(signal.SIGINT, _handler)
    done, hit, other = 0, False, None
    try:
        for t in ths:
            t.start()
        Armed.on = True
        cancel = lambda: None      # noqa: E731 (the signal may land while it is armed)
        try:
            cancel = deliver(how, delay)
            for k in range(U):
                ns[f"u{k}"](E, E["O"])
                done = k + 1
        except KeyboardInterrupt:
            hit = True
        except Exception:
            other = traceback.format_exc()
        finally:
            Armed.on = False
            cancel()
        time.sleep(0.002)          # a late signal lands on a disarmed handler
    finally:
        signal.signal(signal.SIGINT, prev_int)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    info["hit_at"] = done if hit else None
    for t in ths:
        t.join(JOIN_TIMEOUT)
        if t.is_alive():
            return "hang", "background thread did not finish", src, info
    if cold:
        try:
            E_ref, ref, dur, ref_bg = reference()
        except Exception:
            return "harness", "reference raised:\n" + traceback.format_exc()[-1500:], src, info
    cat_bad = "bad"
    for b in bg:
        if b in bgerr:
            return "err", f"{b} raised:\n{bgerr[b][-1500:]}", src, info
        d = compare(ref_bg[b], bgo[b], b)
        if d:
            return cat_bad, "background thread: " + d, src, info
    if other is not None:
        return "err", f"unit {done} raised (after interrupt? {hit}):\n{other[-1500:]}", src, info
    try:
        now = snapshot(E)
    except Exception:
        return "err", "realizing the state after the interrupt raised:\n" + traceback.format_exc()[-1500:], src, info
    k = done
    if not hit:
        d = compare(ref[U], now, "state (no interrupt landed)")
        if d:
            return cat_bad, d, src, info
    else:
        before, after = ref[k], ref[min(k + 1, U)]
        for name in now:
            a = now[name]
            if name not in before and name not in after:
                continue
            ok = any(name in r and r[name].shape == a.shape and
                     np.array_equal(r[name], a, equal_nan=True) for r in (before, after))
            if not ok and name not in before and not np.any(a):
                ok = True    # optimizer state made (zeros) before Python was stopped
            if not ok:
                d = compare({name: before.get(name, after.get(name))}, {name: a},
                            f"state after interrupt in unit {k} (vs before it)")
                d2 = compare({name: after.get(name, before.get(name))}, {name: a}, "(vs after it)")
                return cat_bad, f"{d}; {d2}", src, info
        whole = [r for r in (before, after) if compare(r, now, "") is None]
        if whole:
            nxt = k if whole[0] is before else k + 1
            for p in E["mM"].parameters():
                p.grad = None
            try:
                run_units(ns, E, U, nxt)
                fin = snapshot(E)
            except Exception:
                return "err", "continuing after the interrupt raised:\n" + traceback.format_exc()[-1500:], src, info
            d = compare(ref[U], fin, f"final state continuing from unit {nxt}")
            if d:
                return cat_bad, d, src, info
            outs_ref = {kk: v for kk, v in E_ref["O"].items()}
            for kk, v in E["O"].items():
                # outputs of units run after the interrupt
                if kk in outs_ref and not np.array_equal(v, outs_ref[kk], equal_nan=True):
                    u = int(''.join(ch for ch in kk.split('_')[0] if ch.isdigit()) or -1)
                    if u > k:
                        return cat_bad, compare({kk: outs_ref[kk]}, {kk: v}, "output"), src, info
        else:
            info["mixed"] = True
    # a fresh uninterrupted run over the same caches and compiled functions' executables
    try:
        E2 = ns["setup"]()
        run_units(ns, E2, U)
        fin2 = snapshot(E2)
    except Exception:
        return "err", "a fresh run after the interrupt raised:\n" + traceback.format_exc()[-1500:], src, info
    d = compare(ref[U], fin2, "fresh run after the interrupt")
    if d:
        return cat_bad, d, src, info
    d = compare(E_ref["O"], E2["O"], "fresh run outputs")
    if d:
        return cat_bad, d, src, info
    return ("ok_miss" if not hit else "ok_mixed" if info.get("mixed") else "ok_hit"), None, src, info


# ---------------------------------------------------------------- main

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    start, n = int(args[0]), int(args[1])
    only = int(args[2]) if len(args) > 2 else None
    mode = "both"
    for a in sys.argv:
        if a.startswith("--mode="):
            mode = a.split("=", 1)[1]
    print("start", start, "n", n, "mode", mode, flush=True)
    if "--switch" in sys.argv:          # switch Python threads far more often
        sys.setswitchinterval(1e-4)
    stats = Counter()
    seen = set()
    t_all = time.perf_counter()
    for i in range(start, start + n):
        if only is not None and i != only:
            continue
        modes = ["threads", "sigint"] if mode == "both" else [mode]
        for md in modes:
            faulthandler.dump_traceback_later(CASE_WATCHDOG, exit=True)
            t0 = time.perf_counter()
            try:
                if md == "threads":
                    st, msg, src, sched, meta = threads_case(start, i)
                    extra = f"schedule={sched}\n    meta={meta}"
                else:
                    st, msg, src, info = sigint_case(start, i)
                    extra = f"info={info}"
            except Failure as f:
                st = "hang" if str(f).startswith("hang") else "harness"
                msg, extra = str(f), ""
                src = (gen_threads_case(start, i)[0] if md == "threads"
                       else gen_sigint_case(start, i)[0]).source()
                if st == "hang":
                    faulthandler.dump_traceback(all_threads=True)
            except (Exception, KeyboardInterrupt):
                st, msg, src, extra = "harness", traceback.format_exc()[-2000:], "", ""
            finally:
                faulthandler.cancel_dump_traceback_later()
            dt_ = time.perf_counter() - t0
            stats[st] += 1
            if st.startswith("ok"):
                continue
            key = (st, md, (msg or "").split(":")[0][:60], (msg or "").splitlines()[-1][:80] if msg else "")
            print(f"=== case {i} [{st}] mode={md} ({dt_:.1f} s) {extra}", flush=True)
            msg = msg or ""
            if len(msg) > 1500:         # the head says where, the tail what was raised
                msg = msg[:300] + "\n ...\n" + msg[-1200:]
            print("   ", msg.replace("\n", "\n    "))
            if key not in seen:
                seen.add(key)
                print(f"    --- source (rerun: python fuzz_threads.py {i} 1 --mode={md}) ---")
                print("    " + src.replace("\n", "\n    "))
            if st == "hang":
                break
        else:
            continue
        break
    print(f"{time.perf_counter() - t_all:.1f} s")
    print(Counter({k: v for k, v in stats.items()}))


if __name__ == "__main__":
    main()
