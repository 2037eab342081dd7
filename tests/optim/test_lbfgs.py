"""LBFGS against a plain numpy L-BFGS written here from the published algorithm (minFunc's
two-loop recursion and strong-Wolfe line search, as PyTorch runs them): the loss each
``step`` returns, the parameters after it, and the evaluation and iteration counts,
with and without the line search, on a quadratic and on Rosenbrock's function in
float64. Then a least-squares fit converging, a state_dict round trip that continues
identically, the errors, and (when torch is installed) PyTorch's own trajectory."""
import numpy as np
import pytest

import nova as nv
from nova.optim.lbfgs import LBFGS


# ---------------------------------------------------------------- the numpy reference

def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimizer of the cubic Hermite interpolant of two points, clamped to bounds."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 ** 2 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2
    d2 = np.sqrt(disc)
    if x1 <= x2:
        t = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        t = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(t, lo), hi)


def _wolfe(fg, x, t, d, f, g, gtd, max_ls, c1=1e-4, c2=0.9, tol=1e-9):
    """Strong-Wolfe line search: returns (f, g, t, evaluations)."""
    def at(step):
        fn, gn = fg(x + step * d)
        return fn, gn, float(gn @ d)

    f_new, g_new, gtd_new = at(t)
    evals, it = 1, 0
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, br = False, None
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            br = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, done = [[t, f_new, g_new, gtd_new]], True
            break
        if gtd_new >= 0:
            br = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                            (t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new, gtd_new = at(t)
        evals, it = evals + 1, it + 1
    if br is None:
        br = [[0.0, f, g, gtd], [t, f_new, g_new, gtd_new]]
    lo, hi = (0, 1) if br[0][1] <= br[-1][1] else (1, 0)
    stuck = False
    while not done and it < max_ls:
        if abs(br[1][0] - br[0][0]) * np.abs(d).max() < tol:
            break
        t = _cubic_min(br[0][0], br[0][1], br[0][3], br[1][0], br[1][1], br[1][3])
        a, b = min(br[0][0], br[1][0]), max(br[0][0], br[1][0])
        eps = 0.1 * (b - a)
        if min(b - t, t - a) < eps:
            if stuck or t >= b or t <= a:
                t = b - eps if abs(t - b) < abs(t - a) else a + eps
                stuck = False
            else:
                stuck = True
        else:
            stuck = False
        f_new, g_new, gtd_new = at(t)
        evals, it = evals + 1, it + 1
        if f_new > f + c1 * t * gtd or f_new >= br[lo][1]:
            br[hi] = [t, f_new, g_new, gtd_new]
            lo, hi = (0, 1) if br[0][1] <= br[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[hi][0] - br[lo][0]) >= 0:
                br[hi] = br[lo]
            br[lo] = [t, f_new, g_new, gtd_new]
    return br[lo][1], br[lo][2], br[lo][0], evals


class NumpyLBFGS:
    """L-BFGS on a numpy vector ``x``; ``fg(x) -> (f, g)``."""

    def __init__(self, x, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        self.x = np.array(x, np.float64)
        self.lr, self.max_iter = lr, max_iter
        self.max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        self.tol_g, self.tol_c, self.m = tolerance_grad, tolerance_change, history_size
        self.ls = line_search_fn
        self.func_evals = self.n_iter = 0
        self.d = self.t = self.prev_g = self.prev_f = None
        self.ys, self.ss, self.rho, self.h = [], [], [], 1.0

    def step(self, fg):
        f0, g = fg(self.x)
        f, evals = f0, 1
        self.func_evals += 1
        if np.abs(g).max() <= self.tol_g:
            return f0
        for k in range(1, self.max_iter + 1):
            self.n_iter += 1
            if self.n_iter == 1:
                d, self.ys, self.ss, self.rho, self.h = -g, [], [], [], 1.0
            else:
                y, s = g - self.prev_g, self.d * self.t
                ys = y @ s
                if ys > 1e-10:
                    if len(self.ys) == self.m:
                        self.ys, self.ss, self.rho = self.ys[1:], self.ss[1:], self.rho[1:]
                    self.ys, self.ss = self.ys + [y], self.ss + [s]
                    self.rho = self.rho + [1 / ys]
                    self.h = ys / (y @ y)
                q, al = -g, [0.0] * len(self.ys)
                for i in reversed(range(len(self.ys))):
                    al[i] = (self.ss[i] @ q) * self.rho[i]
                    q = q - al[i] * self.ys[i]
                d = q * self.h
                for i in range(len(self.ys)):
                    d = d + (al[i] - (self.ys[i] @ d) * self.rho[i]) * self.ss[i]
            self.d, self.prev_g, self.prev_f = d, g, f
            t = min(1.0, 1.0 / np.abs(g).sum()) * self.lr if self.n_iter == 1 else self.lr
            gtd = g @ d
            if gtd > -self.tol_c:
                self.t = t
                break
            used, opt = 0, False
            if self.ls == "strong_wolfe":
                f, g, t, used = _wolfe(fg, self.x, t, d, f, g, gtd, self.max_eval - evals)
                self.x = self.x + t * d
                opt = np.abs(g).max() <= self.tol_g
            else:
                self.x = self.x + t * d
                if k != self.max_iter:
                    f, g = fg(self.x)
                    opt, used = np.abs(g).max() <= self.tol_g, 1
            self.t = t
            evals += used
            self.func_evals += used
            if k == self.max_iter or evals >= self.max_eval or opt:
                break
            if np.abs(d * t).max() <= self.tol_c or abs(f - self.prev_f) < self.tol_c:
                break
        return f0


# ---------------------------------------------------------------- problems

A = np.array([[4.0, 1.0, 0.5, 0.0], [1.0, 3.0, 0.2, 0.1], [0.5, 0.2, 2.0, 0.3],
              [0.0, 0.1, 0.3, 1.0]])
B = np.array([1.0, -2.0, 0.5, 3.0])


def quad_np(x):
    return 0.5 * x @ A @ x - B @ x, A @ x - B


def quad_nv(x):
    return 0.5 * (x * (nv.tensor(A) @ x)).sum() - (nv.tensor(B) * x).sum()


def rosen_np(x):
    f = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
    g = np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2),
                  200 * (x[1] - x[0] ** 2)])
    return f, g


def rosen_nv(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


PROBLEMS = {"quadratic": (quad_np, quad_nv, [0.3, -0.2, 1.0, 0.5]),
            "rosenbrock": (rosen_np, rosen_nv, [-1.5, 2.0])}


def _closure(opt, x, f):
    def closure():
        opt.zero_grad()
        loss = f(x)
        loss.backward()
        return loss
    return closure


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("problem,kw", [
    ("quadratic", dict(max_iter=4, history_size=3)),
    ("quadratic", dict(max_iter=5, history_size=3, line_search_fn="strong_wolfe")),
    ("rosenbrock", dict(lr=0.05, max_iter=6, history_size=3)),
    ("rosenbrock", dict(max_iter=7, history_size=3, line_search_fn="strong_wolfe",
                        tolerance_change=1e-12)),
])
def test_trajectory_matches_reference(problem, kw):
    """Loss, parameters, evaluations and iterations after every step; a history of 3
    fills and wraps within the run."""
    f_np, f_nv, x0 = PROBLEMS[problem]
    x = nv.tensor(x0, dtype=nv.float64, requires_grad=True)
    opt, ref = LBFGS([x], **kw), NumpyLBFGS(x0, **kw)
    closure = _closure(opt, x, f_nv)
    for _ in range(3):        # (a 4th step on Rosenbrock magnifies rounding past 1e-9)
        loss = opt.step(closure)
        want = ref.step(f_np)
        assert isinstance(loss, nv.Tensor)
        np.testing.assert_allclose(loss.item(), want, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(x.numpy(), ref.x, rtol=1e-9, atol=1e-12)
        state = opt.state[x]
        assert (state["func_evals"], state["n_iter"]) == (ref.func_evals, ref.n_iter)
        assert len(state["old_dirs"]) == len(ref.ys) <= 3
    assert ref.n_iter > 3                        # the history did wrap
    assert f_np(ref.x)[0] < f_np(np.array(x0))[0]


def test_least_squares_converges_float32():
    """A linear model in float32 with the default history (100 slots) and the line
    search reaches the normal equations' solution; the returned loss is the first."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 3)).astype(np.float32)
    Y = (X @ np.array([[1.5], [-2.0], [0.5]]) + 0.3
         + 0.01 * rng.standard_normal((32, 1))).astype(np.float32)
    model = nv.nn.Linear(3, 1)
    opt = LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    xs, ys = nv.tensor(X), nv.tensor(Y)

    def closure():
        opt.zero_grad()
        loss = ((model(xs) - ys) ** 2).mean()
        loss.backward()
        return loss

    first = opt.step(closure).item()
    opt.step(closure)
    sol, *_ = np.linalg.lstsq(np.c_[X.astype(np.float64), np.ones(32)],
                              Y.astype(np.float64), rcond=None)
    np.testing.assert_allclose(model.weight.numpy().ravel(), sol[:3, 0], rtol=0, atol=1e-4)
    np.testing.assert_allclose(model.bias.numpy(), sol[3], rtol=0, atol=1e-4)
    assert first > 1.0 > closure().item()
    assert model.weight.dtype == nv.float32


def test_state_dict_round_trip_continues_identically():
    x0 = PROBLEMS["rosenbrock"][2]
    kw = dict(max_iter=3, max_eval=8, history_size=3, line_search_fn="strong_wolfe")
    x = nv.tensor(x0, dtype=nv.float64, requires_grad=True)
    opt = LBFGS([x], **kw)
    closure = _closure(opt, x, rosen_nv)
    for _ in range(2):
        opt.step(closure)
    saved = opt.state_dict()
    assert {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
            "prev_flat_grad", "prev_loss"} <= set(saved["state"][0])
    assert saved["param_groups"][0]["max_eval"] == 8
    iterations = saved["state"][0]["n_iter"]
    assert iterations == 6

    y = nv.tensor(x.numpy().copy(), dtype=nv.float64, requires_grad=True)
    other = LBFGS([y], max_iter=9)
    other.load_state_dict(saved)
    assert other.param_groups[0]["max_iter"] == 3
    other_closure = _closure(other, y, rosen_nv)
    for _ in range(2):
        a, b = opt.step(closure).item(), other.step(other_closure).item()
        assert a == b
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert opt.state[x]["n_iter"] == other.state[y]["n_iter"]
    # the saved dict is a snapshot: later steps did not change it
    assert saved["state"][0]["n_iter"] == iterations < opt.state[x]["n_iter"]


def test_converged_start_returns_after_one_evaluation():
    """A gradient within tolerance_grad: the step returns before any iteration."""
    x = nv.tensor([1.0, 1.0], dtype=nv.float64, requires_grad=True)
    opt = LBFGS([x])
    assert opt.step(_closure(opt, x, rosen_nv)).item() == 0.0
    assert (opt.state[x]["func_evals"], opt.state[x]["n_iter"]) == (1, 0)
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])


def test_errors():
    a = nv.tensor([1.0], requires_grad=True)
    b = nv.tensor([2.0], requires_grad=True)
    msg = r"LBFGS doesn't support per-parameter options \(parameter groups\)"
    with pytest.raises(ValueError, match=msg):
        LBFGS([{"params": [a]}, {"params": [b]}])
    opt = LBFGS([a])
    with pytest.raises(ValueError, match=msg):
        opt.add_param_group({"params": [b]})
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        LBFGS([a], lr=-1)
    with pytest.raises(ValueError, match="history_size=0"):
        LBFGS([a], history_size=0)
    bad = LBFGS([a], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported.*'armijo'"):
        bad.step(_closure(bad, a, lambda x: (x * x).sum()))
    saved = opt.state_dict()
    saved["state"][0] = {"func_evals": 1, "n_iter": 1, "d": nv.zeros(3)}
    with pytest.raises(ValueError, match=r"state 'd' of parameter 0 must be a 1-D tensor of "
                                         r"the parameters' 1 elements, got \(3,\)"):
        opt.load_state_dict(saved)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_matches_pytorch(line_search_fn):
    """PyTorch's own LBFGS on two parameters (a matrix and a vector) with a history
    that wraps: the same losses and parameters step by step."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0, v0 = rng.standard_normal((2, 3)), rng.standard_normal(3)
    kw = dict(lr=0.5 if line_search_fn is None else 1, max_iter=5, history_size=4,
              line_search_fn=line_search_fn)

    def f(w, v):
        return ((w @ v - 1.0) ** 2).sum() + 0.1 * (v ** 4).sum() + (w ** 2).sum() * 0.05

    w, v = (nv.tensor(a, requires_grad=True) for a in (w0, v0))
    tw, tv = (torch.tensor(a, requires_grad=True) for a in (w0, v0))
    opt, topt = LBFGS([w, v], **kw), torch.optim.LBFGS([tw, tv], **kw)

    def closure():
        opt.zero_grad()
        loss = f(w, v)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = f(tw, tv)
        loss.backward()
        return loss

    for _ in range(3):
        np.testing.assert_allclose(opt.step(closure).item(), topt.step(tclosure).item(),
                                   rtol=1e-10)
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(v.numpy(), tv.detach().numpy(), rtol=1e-9, atol=1e-12)
        assert opt.state[w]["func_evals"] == topt.state[tw]["func_evals"]
