"""torch.linalg differential fuzzer: torch vs nova, values and gradients.

usage: python fuzz_linalg.py START N [case,case...]
Matrices are built with chosen spectra (well-conditioned, distinct eigen/singular values
unless a case says otherwise), batched or not, float32 or float64. Decompositions are
compared through what they determine: reconstructions, projections U U^T, V * V,
eigenvalues (sorted by the library's convention), |R|^2; never raw eigen/singular vectors
(their signs are free). Gradients are those of fixed random weights times the outputs.
float32 is compared to 1e-4 of each output's largest magnitude, float64 to 1e-9
(gradients 10x). Not generated (Nova's accepted deviations): det's gradient at rank n-1
(the cofactor matrix, PyTorch zeros), svd/qr gradients of exactly rank-deficient
matrices (NaN as in exact arithmetic), vector_norm of integer input.
"""
import numpy as np
from common import Cases, program_main

CASES = Cases()
case = CASES.add


def dt(r):
    return r.choice([np.float32, np.float32, np.float64])


def batch(r):
    return tuple(r.randint(1, 3) for _ in range(r.choice([0, 0, 1, 2])))


def N(r):
    return r.randint(1, 9)


def orth(rng, b, n):
    q, rr = np.linalg.qr(rng.standard_normal(b + (n, n)))
    return q * np.sign(np.diagonal(rr, axis1=-2, axis2=-1))[..., None, :]


def spectrum(rng, b, k, lo=0.5, hi=2.0):
    """k values spread over [lo, hi] (distinct by ~(hi-lo)/k), shuffled per matrix."""
    if k == 1:
        return np.ones(b + (1,))
    s = np.linspace(lo, hi, k) + rng.uniform(-0.02, 0.02, size=b + (k,))
    return rng.permuted(s, axis=-1)


def general(rng, b, m, n, rank=None):
    k = min(m, n)
    s = spectrum(rng, b, k)
    if rank is not None:
        s = np.sort(s, axis=-1)[..., ::-1].copy()
        s[..., rank:] = 0
    return (orth(rng, b, m)[..., :, :k] * s[..., None, :]) @ np.swapaxes(orth(rng, b, n)[..., :, :k], -1, -2)


def spd(rng, b, n):
    q = orth(rng, b, n)
    return (q * spectrum(rng, b, n)[..., None, :]) @ np.swapaxes(q, -1, -2)


def sym(rng, b, n):
    """symmetric indefinite, eigenvalues spread over [-2, 2]"""
    q = orth(rng, b, n)
    s = np.linspace(-2, 2, n) + rng.uniform(-0.02, 0.02, size=b + (n,)) if n > 1 else np.ones(b + (1,))
    return (q * s[..., None, :]) @ np.swapaxes(q, -1, -2)


@case
def square(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    A = general(rng, b, n, n) * r.choice([1, -1])
    fn = r.choice(["la.det(A)", "la.slogdet(A)", "la.inv(A)", "la.inv_ex(A)", "L.det(A)", "L.inverse(A)",
                   f"la.matrix_power(A, {r.randint(-3, 4)})", "la.matrix_exp(A * 0.5)", "la.cond(A)",
                   "la.cond(A, " + r.choice(["None", "'fro'", "'nuc'", "1", "-1", "2", "-2", "float('inf')"]) + ")"])
    return {"A": (A.astype(d), True)}, fn


@case
def logdet(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    return {"A": (spd(rng, b, n).astype(d), True)}, r.choice(
        ["la.slogdet(A)", "L.logdet(A)", "A.logdet()", "A.slogdet()", "A.det()"])


@case
def solve(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    A = general(rng, b, n, n)
    left = r.random() < 0.7
    vec = left and r.random() < 0.3
    bb = b[r.randint(0, len(b)):] if b and r.random() < 0.3 else b
    if r.random() < 0.2:
        bb = (2,) + b
    k = r.randint(1, 4)
    B = rng.standard_normal(bb + ((n,) if vec else (n, k) if left else (k, n)))
    fn = r.choice(["la.solve", "la.solve_ex"])
    return {"A": (A.astype(d), True), "B": (B.astype(d), True)}, f"{fn}(A, B{'' if left else ', left=False'})"


@case
def lstsq(r, rng):
    d, b = dt(r), batch(r)
    tall = r.random() < 0.7
    n = N(r)
    m = r.randint(n, 9)
    if not tall:
        b, (m, n) = (), (n, m)                 # wide: minimum-norm solutions
    A = general(rng, b, m, n)
    B = rng.standard_normal(b + (m, r.randint(1, 3)))
    drv = r.choice(["", ", driver='gelsd'", ", driver='gelss'", ", driver='gelsy'"] + [", driver='gels'"] * tall)
    return {"A": (A.astype(d), True), "B": (B.astype(d), True)}, f"la.lstsq(A, B{drv}).solution"


@case
def qr(r, rng):
    d, b, m, n = dt(r), batch(r), N(r), N(r)
    A = general(rng, b, m, n)
    mode = r.choice(["reduced", "complete", "r"])
    if mode == "r":
        code = "(lambda q, rr: rr * rr)(*la.qr(A, mode='r'))"
    else:
        code = f"(lambda q, rr: (q @ rr, q.mT @ q, rr * rr))(*la.qr(A, mode='{mode}'))"
    return {"A": (A.astype(d), True)}, code


@case
def svd(r, rng):
    d, b, m, n = dt(r), batch(r), N(r), N(r)
    k = min(m, n)
    A = general(rng, b, m, n)
    fm = r.random() < 0.4
    code = (f"(lambda U, S, Vh: (S, U[..., :, :{k}] @ U[..., :, :{k}].mT, Vh[..., :{k}, :].mT @ Vh[..., :{k}, :], "
            f"(U[..., :, :{k}] * S[..., None, :]) @ Vh[..., :{k}, :], U.mT @ U, Vh @ Vh.mT))(*la.svd(A, full_matrices={fm}))")
    if r.random() < 0.3:
        code = r.choice(["la.svdvals(A)", "L.svd(A)[1]", "A.svd()[1]"])
    return {"A": (A.astype(d), True)}, code, {"grad": not fm or m == n}


@case
def eigh(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    A = sym(rng, b, n)
    uplo = r.choice(["L", "U"])
    opts = {}
    if r.random() < 0.4:       # garbage in the triangle eigh does not read (values only)
        G = rng.standard_normal(A.shape) * 3
        other = np.triu(np.ones((n, n)), 1) if uplo == "L" else np.tril(np.ones((n, n)), -1)
        A = np.where(other.astype(bool), G, A)
        opts = {"grad": False}
    code = r.choice([f"la.eigvalsh(A, UPLO='{uplo}')",
                     f"(lambda w, V: (w, (V * w[..., None, :]) @ V.mT, V * V, V[..., :, :1] @ V[..., :, :1].mT))"
                     f"(*la.eigh(A, UPLO='{uplo}'))"])
    return {"A": (A.astype(d), True)}, code, opts


@case
def eig(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    if r.random() < 0.5:       # real distinct eigenvalues
        P = general(rng, b, n, n)
        lam = np.linspace(-2, 2, n) + rng.uniform(-0.05, 0.05, size=b + (n,))
        A = (P * lam[..., None, :]) @ np.linalg.inv(P)
    else:
        A = rng.standard_normal(b + (n, n))
    # (order of eig's values is unspecified: symmetric functions of them only)
    code = r.choice(["(lambda w: (w.sum(-1), (w * w).sum(-1), (w * w * w).sum(-1)))(la.eigvals(A))",
                     "(lambda w, V: ((w * w).sum(-1), w.abs().sum(-1), (V.abs() ** 2).sum(-2)))(*la.eig(A))",
                     "(lambda w, V: ((V * w[..., None, :]) @ la.inv(V)))(*la.eig(A))"])
    return {"A": (A.astype(d), True)}, code, {"tolmul": 10}


@case
def lu(r, rng):
    d, b, m, n = dt(r), batch(r), N(r), N(r)
    fn = r.choice(["la.lu(A)", "la.lu(A, pivot=True)", "la.lu_factor(A)", "la.lu_factor_ex(A)", "L.lu(A)"])
    if "factor" in fn or fn == "L.lu(A)":
        m = n
    A = rng.standard_normal(b + (m, n))
    if fn.startswith("la.lu("):
        fn = f"(lambda P, Lo, U: (P @ Lo @ U, Lo, U))(*{fn})"
    return {"A": (A.astype(d), True)}, fn


@case
def lu_solve(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    A = general(rng, b, n, n)
    left, adj = r.random() < 0.6, r.random() < 0.4
    k = r.randint(1, 3)
    B = rng.standard_normal(b + ((n, k) if left else (k, n)))
    return ({"A": (A.astype(d), True), "B": (B.astype(d), True)},
            f"(lambda LU, piv: la.lu_solve(LU, piv, B, left={left}, adjoint={adj}))(*la.lu_factor(A))")


@case
def cholesky(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    A = spd(rng, b, n)
    up = r.random() < 0.5
    if r.random() < 0.25:      # reads one triangle only
        other = np.tril(np.ones((n, n)), -1) if up else np.triu(np.ones((n, n)), 1)
        A = np.where(other.astype(bool), rng.standard_normal(A.shape), A)
        fn = f"la.cholesky(A, upper={up})"
    else:
        fn = r.choice([f"la.cholesky(A, upper={up})", f"la.cholesky_ex(A, upper={up})", f"L.cholesky(A, upper={up})",
                       f"L.cholesky_solve(B, la.cholesky(A, upper={up}), upper={up})",
                       f"L.cholesky_inverse(la.cholesky(A, upper={up}), upper={up})"])
    return {"A": (A.astype(d), True), "B": (rng.standard_normal(b + (n, 2)).astype(d), True)}, fn


@case
def triangular(r, rng):
    d, b, n = dt(r), batch(r), N(r)
    legacy = r.random() < 0.3
    if legacy:
        b = ()
    A = rng.standard_normal(b + (n, n)) * (0.3 / np.sqrt(n))
    idx = np.arange(n)
    A[..., idx, idx] = rng.uniform(1, 2, size=b + (n,)) * rng.choice([-1, 1], size=b + (n,))
    up, unit = r.random() < 0.5, r.random() < 0.3
    if legacy:
        B = rng.standard_normal((n, 2))
        code = f"L.triangular_solve(B, A, upper={up}, transpose={r.random() < 0.5}, unitriangular={unit})"
    else:
        left = r.random() < 0.6
        k = r.randint(1, 3)
        B = rng.standard_normal(b + ((n, k) if left else (k, n)))
        if r.random() < 0.5:
            A = np.triu(A) if up else np.tril(A)
        code = f"la.solve_triangular(A, B, upper={up}, left={left}, unitriangular={unit})"
    return {"A": (A.astype(d), True), "B": (B.astype(d), True)}, code


@case
def matrix_norm(r, rng):
    d, b, m, n = dt(r), batch(r), N(r), N(r)
    A = general(rng, b, m, n) if r.random() < 0.6 else rng.standard_normal(b + (m, n))
    o = r.choice(["'fro'", "'nuc'", "float('inf')", "-float('inf')", "1", "-1", "2", "-2"])
    nd = len(b) + 2
    dims = ""
    if r.random() < 0.4 and nd >= 3:
        d1, d2 = r.sample(range(nd), 2)
        dims = f", dim=({d1 - nd if r.random() < 0.5 else d1}, {d2})"
    kd = ", keepdim=True" if r.random() < 0.4 else ""
    return {"A": (A.astype(d), True)}, f"{r.choice(['la.matrix_norm', 'la.norm'])}(A, {o}{dims}{kd})"


@case
def vector_norm(r, rng):
    d = dt(r)
    sh = tuple(r.randint(1, 5) for _ in range(r.randint(1, 3)))
    A = rng.standard_normal(sh)
    if r.random() < 0.2:
        A[tuple(0 for _ in sh)] = 0.0
    o = r.choice(["2", "1", "0", "float('inf')", "-float('inf')", "3", "0.5", "-1", "-2", "1.5"])
    nd = len(sh)
    m = r.random()
    dims = ""
    if m < 0.3:
        dims = f", dim={r.randint(-nd, nd - 1)}"
    elif m < 0.6:
        ds = r.sample(range(nd), r.randint(1, nd))
        dims = f", dim={tuple(x - nd if r.random() < 0.5 else x for x in ds)}"
    kd = ", keepdim=True" if r.random() < 0.4 else ""
    dtp = ", dtype=L.float64" if r.random() < 0.15 else ""
    fn = r.choice(["la.vector_norm", "la.vector_norm", "la.norm"])
    if fn == "la.norm":
        dtp = ""
        if (dims == "" and nd > 2) or ("(" in dims and dims.count(",") > 2):
            dims = ", dim=-1"
        if nd == 2 and dims == "" and o in ("0", "3", "0.5", "-2", "1.5"):
            o = "'fro'"
    return {"A": (A.astype(d), True)}, f"{fn}(A, {o}{dims}{kd}{dtp})"


@case
def misc(r, rng):
    d, b = dt(r), batch(r)
    which = r.choice(["cross", "multi_dot", "tensorinv", "tensorsolve", "vander", "householder", "pinv",
                      "pinv_h", "vecdot", "diagonal"])
    if which == "cross":
        sh = b + (3,) + tuple(r.randint(1, 3) for _ in range(r.randint(0, 1)))
        dim = f", dim={len(b)}" if len(sh) > len(b) + 1 else r.choice(["", ", dim=-1"])
        return ({"x": (rng.standard_normal(sh).astype(d), True), "y": (rng.standard_normal(sh).astype(d), True)},
                f"la.cross(x, y{dim})")
    if which == "multi_dot":
        k = r.randint(2, 4)
        dims = [r.randint(1, 6) for _ in range(k + 1)]
        inp = {}
        for i in range(k):
            sh = (dims[i], dims[i + 1])
            if (i == 0 or i == k - 1) and r.random() < 0.3:
                sh = (dims[1],) if i == 0 else (dims[i],)
            inp[f"M{i}"] = (rng.standard_normal(sh).astype(d), True)
        return inp, f"la.multi_dot([{', '.join(inp)}])"
    if which == "tensorinv":
        i1 = r.choice([(2, 3), (6,), (3, 2), (2, 2)])
        p = int(np.prod(i1))
        o = r.choice([(p,), (2, p // 2)] if p % 2 == 0 else [(p,)])
        return {"A": (general(rng, (), p, p).reshape(o + i1).astype(d), True)}, f"la.tensorinv(A, ind={len(o)})"
    if which == "tensorsolve":
        bs = r.choice([(2, 3), (6,), (3, 2)])
        p = int(np.prod(bs))
        xs = r.choice([(p,), (2, p // 2)])
        A = general(rng, (), p, p).reshape(bs + xs)
        return {"A": (A.astype(d), True), "B": (rng.standard_normal(bs).astype(d), True)}, "la.tensorsolve(A, B)"
    if which == "vander":
        x = rng.uniform(-1.5, 1.5, size=b + (r.randint(1, 6),))
        n = r.choice([None, 1, 2, 4, 6])
        return {"x": (x.astype(d), True)}, f"la.vander(x{'' if n is None else f', N={n}'})"
    if which == "householder":
        m = r.randint(1, 7)
        n = r.randint(1, m)
        A, tau = rng.standard_normal(b + (m, n)), rng.uniform(0, 2, size=b + (r.randint(1, n),))
        return {"A": (A.astype(d), True), "tau": (tau.astype(d), True)}, "la.householder_product(A, tau)"
    if which == "pinv":
        A = general(rng, b, N(r), N(r))
        return {"A": (A.astype(d), True)}, r.choice(["la.pinv(A)", "L.pinverse(A)", "la.pinv(A, rtol=1e-3)"])
    if which == "pinv_h":
        A = sym(rng, b, N(r))
        return {"A": (A.astype(d), True)}, r.choice(["la.pinv(A, hermitian=True)", "la.matrix_rank(A, hermitian=True)",
                                                     "la.matrix_rank(A, hermitian=True, atol=1.0)"])
    if which == "vecdot":
        sh = b + (r.randint(1, 5),)
        return ({"x": (rng.standard_normal(sh).astype(d), True), "y": (rng.standard_normal(sh[-1:]).astype(d), True)},
                "la.vecdot(x, y, dim=-1)")
    sh = b + (r.randint(1, 4), r.randint(1, 4))
    return {"x": (rng.standard_normal(sh).astype(d), True)}, f"la.diagonal(x, offset={r.randint(-2, 2)})"


@case
def rank_deficient(r, rng):
    """exactly rank-deficient matrices: values only (their svd/qr gradients are NaN)"""
    d, b, m, n = dt(r), batch(r), N(r), N(r)
    rk = r.randint(0, min(m, n))
    A = general(rng, b, m, n, rank=rk)
    opt = r.choice(["", ", hermitian=False", ", atol=0.6", ", rtol=0.3", ", tol=0.7"])
    code = r.choice([f"la.matrix_rank(A{opt})", "la.pinv(A)", "la.pinv(A, atol=0.3)",
                     "la.lstsq(A, A[..., :1], driver='gelsd').solution", "la.svdvals(A)"])
    return {"A": (A.astype(d), False)}, code, {"tolmul": 10}


@case
def degenerate(r, rng):
    """exact repeated eigen/singular values and low rank, where the gradient of the values
    alone is still defined"""
    d = dt(r)
    n = r.randint(2, 5)
    kind = r.choice(["eye", "repeated", "lowrank", "zero"])
    if kind == "eye":
        A = np.eye(n) * r.choice([1.0, 2.0, -1.5])
    elif kind == "repeated":
        v = [r.choice([1.0, 2.0]) for _ in range(n)]
        q = orth(rng, (), n) if r.random() < 0.5 else np.eye(n)
        A = (q * np.array(v)) @ q.T
    elif kind == "lowrank":
        k = r.randint(0, n - 2)         # rank <= n-2: det's gradient is zero (n-1 is a deviation)
        A = rng.integers(-2, 3, size=(n, k)) @ rng.integers(-2, 3, size=(k, n)) if k else np.zeros((n, n))
    else:
        A = np.zeros((n, n))
    sym_ok = np.allclose(A, A.T)
    ops = ["la.det(A)", "la.matrix_norm(A)", "la.matrix_rank(A)"]
    if kind in ("eye", "repeated"):
        # (a single repeated value has no derivative, symmetric functions of the group do)
        sf = "(lambda s: (s.sum(-1), (s * s).sum(-1), (s ** 3).sum(-1)))"
        ops += [f"{sf}(la.svdvals(A))", f"{sf}(la.svd(A)[1])", "la.matrix_norm(A, 'nuc')", "la.slogdet(A)"]
        if sym_ok:
            ops += [f"{sf}(la.eigvalsh(A))", f"{sf}(la.eigh(A)[0])"]
            # (not V diag(w) V^T: its backward divides by the gaps between equal eigenvalues)
    return {"A": (A.astype(d), True)}, r.choice(ops), {"tolmul": 10}


if __name__ == "__main__":
    program_main(CASES, rtol32=1e-4, rtol64=1e-9)
