"""Elementwise differential fuzzer: python fuzz_elem.py SEED N [opfilter]"""
import sys
import numpy as np
import torch
import nova as nv
from common import *  # noqa

BIN = [
    "a + b", "a - b", "a * b", "a / b", "a // b", "a % b", "a ** b",
    "a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b",
    "a & b", "a | b", "a ^ b", "a << b", "a >> b",
    "L.logical_and(a, b)", "L.logical_or(a, b)", "L.logical_xor(a, b)",
    "L.maximum(a, b)", "L.minimum(a, b)", "L.fmax(a, b)", "L.fmin(a, b)",
    "L.atan2(a, b)", "L.hypot(a, b)", "L.copysign(a, b)", "L.remainder(a, b)",
    "L.fmod(a, b)", "L.floor_divide(a, b)", "L.true_divide(a, b)",
    "L.add(a, b, alpha=2)", "L.sub(a, b, alpha=3)", "L.pow(a, b)",
    "L.div(a, b, rounding_mode='trunc')", "L.div(a, b, rounding_mode='floor')",
    "L.mul(a, b)", "L.eq(a, b)", "L.ne(a, b)", "L.gt(a, b)", "L.le(a, b)",
    "L.bitwise_and(a, b)", "L.bitwise_or(a, b)", "L.bitwise_xor(a, b)",
    "L.bitwise_left_shift(a, b)", "L.bitwise_right_shift(a, b)",
    "L.clamp(a, min=b)", "L.clamp(a, max=b)", "L.clamp_min(a, b)", "L.clamp_max(a, b)",
    "L.xlogy(a, b)", "L.nextafter(a, b)", "L.ldexp(a, b)", "L.float_power(a, b)",
    "L.logaddexp(a, b)", "L.logaddexp2(a, b)", "L.lerp(a, b, 0.3)", "L.isclose(a, b)",
    "L.heaviside(a, b)", "L.gcd(a, b)", "L.lcm(a, b)", "L.rsub(a, b)",
]
TERN = ["L.where(c, a, b)", "L.clamp(a, b, c2)", "L.addcmul(a, b, c2, value=0.5)",
        "L.addcdiv(a, b, c2, value=2)", "L.lerp(a, b, c2)"]
UN = [
    "L.abs(a)", "L.neg(a)", "-a", "L.sign(a)", "L.sgn(a)", "L.round(a)", "L.round(a, decimals=1)",
    "L.round(a, decimals=-1)", "L.round(a, decimals=2)", "L.trunc(a)", "L.floor(a)", "L.ceil(a)",
    "L.frac(a)", "L.reciprocal(a)", "L.sqrt(a)", "L.rsqrt(a)", "L.exp(a)", "L.expm1(a)",
    "L.log(a)", "L.log1p(a)", "L.log2(a)", "L.log10(a)", "L.sigmoid(a)", "L.logit(a)",
    "L.logit(a, eps=0.1)", "L.nan_to_num(a)", "L.nan_to_num(a, nan=1.5, posinf=2.0, neginf=-3.0)",
    "L.clamp(a, min=-1.5, max=2)", "L.clamp(a, min=0)", "L.clamp(a, max=-1)", "L.clamp(a, 2, 1)",
    "L.bitwise_not(a)", "~a", "L.logical_not(a)", "L.square(a)", "L.exp2(a)", "L.sin(a)",
    "L.cos(a)", "L.tan(a)", "L.tanh(a)", "L.sinh(a)", "L.cosh(a)", "L.asin(a)", "L.acos(a)",
    "L.atan(a)", "L.asinh(a)", "L.acosh(a)", "L.atanh(a)", "L.erf(a)", "L.erfc(a)",
    "L.signbit(a)", "L.isnan(a)", "L.isinf(a)", "L.isfinite(a)", "L.isposinf(a)",
    "L.isneginf(a)", "L.positive(a)", "L.fix(a)", "L.deg2rad(a)", "L.rad2deg(a)",
    "L.relu(a)", "a.abs().sqrt()", "L.lgamma(a)", "L.digamma(a)", "L.erfinv(a)", "L.sinc(a)",
    "L.nn.functional.softplus(a)", "L.nn.functional.gelu(a)", "L.nn.functional.silu(a)",
    "L.nn.functional.elu(a)", "L.nn.functional.hardtanh(a)", "L.nn.functional.relu6(a)",
    "L.nn.functional.leaky_relu(a, 0.1)", "L.nn.functional.hardsigmoid(a)",
    "L.nn.functional.hardswish(a)", "L.nn.functional.mish(a)", "L.nn.functional.selu(a)",
    "L.nn.functional.logsigmoid(a)", "L.nn.functional.softsign(a)", "L.nn.functional.tanhshrink(a)",
    "L.nn.functional.threshold(a, 0.5, -2.0)", "L.nn.functional.hardshrink(a)",
    "L.nn.functional.softshrink(a, 0.5)", "L.nn.functional.celu(a)",
    "a.float()", "a.double()", "a.half()", "a.int()", "a.long()", "a.short()", "a.char()",
    "a.byte()", "a.bool()", "a.bfloat16()",
    "a + 1", "a - 2.5", "a * True", "2 - a", "3 / a", "a ** 2", "a ** 0.5", "2 ** a",
    "a ** -1", "a ** 3", "a // 3", "a % 3", "a % -3", "-7 // a", "7 % a", "a > 0.5", "a == 1",
    "a ** 0", "a * 1.5", "a / 2", "a // -2.5", "a % 2.5", "a & 3", "a | True", "a << 2", "a >> 1",
    "a.clamp(min=-2.5)", "L.where(a > 0, a, 0.5)", "L.where(a > 0, 2, a)", "L.where(a > 1, 1, 0)",
    "L.where(a > 1, 1.5, 0)", "a.masked_fill(a > 0, 7)", "a.masked_fill(a > 0, -1.5)",
    "L.fmod(a, 2.5)", "L.remainder(a, -1.5)", "L.fmod(a, 3)", "L.atan2(a, 1.0)",
    "L.copysign(a, -1)", "L.pow(a, 2.5)", "L.float_power(a, 2)", "L.clip(a, -1, 1)",
    "L.sub(a, 1, alpha=2)", "L.add(a, 1.5, alpha=2)", "L.maximum(a, L.tensor(0.5))",
    "L.trunc(a * 3.7)", "a.sum() + a", "L.xlogy(a, 2.0)", "L.nn.functional.relu(a)",
]


def rand_shape(rng, rank=None):
    if rank is None:
        rank = rng.integers(0, 4)
    dims = [1, 2, 3, 5, 7, 17, 33, 1, 0] if rng.random() < 0.1 else [1, 2, 3, 4, 5, 7, 9, 17, 33]
    return tuple(int(rng.choice(dims)) for _ in range(rank))


def bshape(rng, s):
    # a shape broadcastable with s
    k = rng.integers(0, len(s) + 1)
    t = list(s[k:])
    for i in range(len(t)):
        if rng.random() < 0.3:
            t[i] = 1
    if rng.random() < 0.2 and len(t) < 4:
        t = [1] + t
    return tuple(t)


def rand_scalar(rng, dt_hint):
    kind = rng.choice(["int", "float", "bool", "float"])
    if kind == "int":
        return int(rng.choice([0, 1, 2, 3, -1, -2, 5, 7, -3, 100]))
    if kind == "bool":
        return bool(rng.random() < 0.5)
    return float(rng.choice([0.5, -1.5, 2.0, 0.0, -0.0, 3.25, 1e-3, -7.75, 1e10, float("inf"), float("nan")]))


DIVOPS = ("//", "%", "fmod", "remainder", "floor_divide", "rounding_mode", "gcd", "lcm")


def make_operand(rng, kind, shape, dt, name, small):
    if kind == "s":
        return ("s", rand_scalar(rng, dt))
    if kind == "z":
        return ("t", gen_array(rng, (), dt, small=small), dt)
    return ("t", gen_array(rng, shape, dt, small=small), dt)


def build(op, L, ops):
    env = {"L": L}
    for k, v in ops.items():
        if v[0] == "s":
            env[k] = v[1]
        else:
            env[k] = (to_torch if L is torch else to_nova)(v[1], v[2])
    return eval(op, env)


def snippet(op, ops):
    lines = ["import numpy as np, torch, nova as nv"]
    for k, v in ops.items():
        if v[0] == "s":
            lines.append(f"{k} = {v[1]!r}")
        else:
            arr = v[1]
            dt = v[2]
            nd = "float32" if dt == "bfloat16" else dt
            lines.append(f"{k}_np = np.array({arr.tolist()!r}, dtype=np.{nd}).reshape({arr.shape})")
    for L, nm in (("torch", "T"), ("nv", "N")):
        env = []
        for k, v in ops.items():
            if v[0] == "t":
                conv = f"{L}.tensor({k}_np)" + (f".to({L}.bfloat16)" if v[2] == "bfloat16" else "")
                env.append(f"{k}{nm} = {conv}")
        lines += env
    rep_t = op.replace("L.", "torch.")
    rep_n = op.replace("L.", "nv.")
    for k, v in ops.items():
        if v[0] == "t":
            import re
            rep_t = re.sub(rf"\b{k}\b", k + "T", rep_t)
            rep_n = re.sub(rf"\b{k}\b", k + "N", rep_n)
    lines.append(f"print({rep_t})")
    lines.append(f"print({rep_n})")
    return "\n".join(lines)


def main():
    seed = int(sys.argv[1])
    n = int(sys.argv[2])
    filt = sys.argv[3] if len(sys.argv) > 3 else None
    print("seed", seed)
    only = int(sys.argv[4]) if len(sys.argv) > 4 else None
    stats = {}
    fails = {}
    for i in range(n):
        if only is not None and i != only:
            continue
        rng = np.random.default_rng([seed, i])
        r = rng.random()
        if r < 0.55:
            op = str(rng.choice(BIN)); arity = 2
        elif r < 0.65:
            op = str(rng.choice(TERN)); arity = 3
        else:
            op = str(rng.choice(UN)); arity = 1
        if filt and filt != "-" and filt not in op:
            continue
        small = rng.random() < 0.5
        sa = rand_shape(rng)
        da = str(rng.choice(ALL))
        ops = {"a": make_operand(rng, "t" if rng.random() < 0.85 else "z", sa, da, "a", small)}
        if arity >= 2:
            kind = rng.choice(["t", "t", "s", "z"])
            db = str(rng.choice(ALL)) if rng.random() < 0.6 else da
            ops["b"] = make_operand(rng, kind, bshape(rng, sa), db, "b", small)
            if rng.random() < 0.15 and ops["b"][0] == "t" and "a" in ops:
                # swap so a scalar/0-d appears on the left sometimes
                pass
        if arity == 3:
            ops["c"] = ("t", gen_array(rng, bshape(rng, sa), "bool"), "bool")
            dc = str(rng.choice(ALL))
            ops["c2"] = make_operand(rng, rng.choice(["t", "s", "z"]), bshape(rng, sa), dc, "c2", small)
        if any(d in op for d in DIVOPS):
            for k, v in list(ops.items()):
                if v[0] == "t" and v[2] in ("int32", "int64"):
                    arr = v[1].copy()
                    mn = np.iinfo(arr.dtype).min
                    arr[arr == mn] = mn + 1
                    ops[k] = ("t", arr, v[2])
        res = run_both(lambda: build(op, torch, ops), lambda: build(op, nv, ops))
        if isinstance(res[0], str):
            st, msg = res
            if st == "both_raise":
                stats["both_raise"] = stats.get("both_raise", 0) + 1
                continue
            stats[st] = stats.get(st, 0) + 1
            if st == "torch_raise" and ("TypeError" in msg.split(":")[0] or "NotImplementedError" in msg.split(":")[0] or "did not match" in msg or "different dtypes" in msg or "expected dtype" in msg or "no longer supported" in msg):
                continue
            if st == "nova_raise" and "DTypeOverflowError" in msg:
                continue
        else:
            tr, nr = res
            msg = compare(tr, nr, check_signzero=True)
            if msg is None:
                stats["ok"] = stats.get("ok", 0) + 1
                continue
            st = "mismatch"
            stats[st] = stats.get(st, 0) + 1
        sig = (st, op, tuple(v[2] if v[0] == "t" else type(v[1]).__name__ for v in ops.values()), msg.split(":")[0][:30])
        if sig in fails:
            continue
        fails[sig] = 1
        print(f"=== case {i} [{st}] op={op} operands=" +
              ", ".join(f"{k}:{(v[2], v[1].shape) if v[0]=='t' else repr(v[1])}" for k, v in ops.items()))
        print("   ", msg)
        if only is not None:
            np.savez("case.npz", **{k: v[1] for k, v in ops.items() if v[0] == "t"})
            print({k: v for k, v in ops.items() if v[0] == "s"})
        if sum(1 for s in fails if s[1] == op) <= 2 and max((v[1].size for v in ops.values() if v[0] == 't'), default=0) <= 40:
            print("    ---- snippet ----")
            print("    " + snippet(op, ops).replace("\n", "\n    "))
    print("stats", stats)


if __name__ == "__main__":
    main()
