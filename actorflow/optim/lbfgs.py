"""L-BFGS with an optional strong-Wolfe line search (OneFlow's ``optim.LBFGS``).

Unlike the other optimizers, L-BFGS re-evaluates the model through a closure several times per
step, so it runs eagerly with functional ops on the parameters seen as one flat vector; it has
no update op and does not enter an ``nn.Graph``. The direction comes from the two-loop
recursion over the last ``history_size`` (step, gradient change) pairs; the line search is the
bracketing + zoom search with quadratic interpolation OneFlow uses.
"""
from __future__ import annotations

from actorflow.autograd import enable_grad, no_grad
from actorflow.functional import cat, zeros
from actorflow.optim.optimizer import Optimizer
from actorflow.tensor import Tensor


def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum())


def _quadratic_min(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """Minimiser of the quadratic through (x1, f1) with slope g1 and (x2, f2), clipped to
    ``bounds`` (default: the interval between x1 and x2)."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    if x1 == 0:
        t = -(g1 * x2 ** 2) / (2 * (f2 - f1 - g1 * x2))
    else:
        curv = -(f1 - f2 - g1 * (x1 - x2)) / ((x1 - x2) ** 2)
        t = x1 - g1 / (2 * curv)
    return min(hi, max(lo, t))


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Step length along ``d`` satisfying the strong Wolfe conditions (or the best found):
    returns (loss, flat gradient, step, evaluations)."""
    d_norm = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals, gtd_new = 1, _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, it = False, 0
    bracket = None
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new > f_prev):
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, done = [[t, f_new, g_new, gtd_new]], True
            break
        if gtd_new >= 0:
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        bounds = (t + 0.01 * (t - t_prev), t * 10)
        t_next = _quadratic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds)
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals, gtd_new, it = evals + 1, _dot(g_new, d), it + 1
    if it == max_ls:
        bracket = [[0.0, f, g, gtd], [t, f_new, g_new, gtd_new]]
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1][0] - bracket[0][0]) * d_norm < tolerance_change:
            break
        (t0, f0, _, gd0), (t1, f1, _, gd1) = bracket
        t = _quadratic_min(t0, f0, gd0, t1, f1, gd1)
        f_new, g_new = evaluate(t)
        evals, gtd_new, it = evals + 1, _dot(g_new, d), it + 1
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = [t, f_new, g_new, gtd_new]
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        if abs(gtd_new) <= -c2 * gtd:
            done = True
        elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
            bracket[high] = list(bracket[low])
        bracket[low] = [t, f_new, g_new, gtd_new]
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals


class LBFGS(Optimizer):
    """Limited-memory BFGS over one parameter group; ``step(closure)`` needs a closure that
    zeroes the gradients, computes the loss, calls ``backward`` and returns the loss.

    ``max_eval`` defaults to ``max_iter * 1.25``; ``line_search_fn`` is None (fixed step
    ``lr``) or ``"strong_wolfe"``."""

    def __init__(self, params, lr: float = 0.001, max_iter: int = 20, max_eval=None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn=None, contiguous_params: bool = False):
        if max_eval is None:
            max_eval = max_iter * 1.25
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn,
                                      contiguous_params=contiguous_params))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS supports one parameter group only")
        self._params = list(self.param_groups[0]["params"])

    def _attrs(self, group: dict) -> dict:
        return {}

    # -- the parameters as one flat vector -------------------------------------------------------
    def _flat_grad(self) -> Tensor:
        parts = [zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1)
                 for p in self._params]
        return cat(parts, 0)

    def _move(self, step: float, direction: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].reshape(tuple(p.shape)) * step)
            offset += n

    def _state_key(self) -> Tensor:
        return self._targets(0)[0]

    def step(self, closure=None):
        """Up to ``max_iter`` L-BFGS iterations; returns the loss of the first evaluation."""
        if closure is None:
            raise ValueError("LBFGS.step needs a closure that re-evaluates the model")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history = group["history_size"]
        state = self.state[self._state_key()]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            first_loss = closure()
        with no_grad():
            return self._iterate(closure, first_loss, state, lr, max_iter, max_eval, tol_grad,
                                 tol_change, history, group["line_search_fn"])

    def _iterate(self, closure, first_loss, state, lr, max_iter, max_eval, tol_grad,
                 tol_change, history, line_search_fn):
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().max()) <= tol_grad:
            return first_loss
        d, t = state.get("d"), state.get("t")
        dirs, steps, ro = state.get("old_diffs"), state.get("old_step_size"), state.get("ro")
        h_diag, prev_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n = 0
        while n < max_iter:
            n += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, dirs, steps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                y, s = flat_grad - prev_grad, d * t
                ys = _dot(y, s)
                if ys > 1e-10:
                    if len(dirs) == history:
                        dirs.pop(0), steps.pop(0), ro.pop(0)
                    dirs.append(y), steps.append(s), ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                alpha = state.setdefault("alpha", [None] * history)
                q = -flat_grad
                for i in range(len(dirs) - 1, -1, -1):
                    alpha[i] = _dot(steps[i], q) * ro[i]
                    q = q - dirs[i] * alpha[i]
                d = q * h_diag
                for i in range(len(dirs)):
                    beta = _dot(dirs[i], d) * ro[i]
                    d = d + steps[i] * (alpha[i] - beta)
            prev_grad, prev_loss = flat_grad.clone(), loss
            t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
            gtd = _dot(flat_grad, d)
            if gtd > -tol_change:
                break
            ls_evals = 0
            if line_search_fn is None:
                self._move(t, d)
                if n != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    ls_evals = 1
            else:
                start = [p.detach().clone() for p in self._params]

                def evaluate(step, d=d, start=start):
                    self._move(step, d)
                    with enable_grad():
                        value = float(closure())
                    grad = self._flat_grad()
                    for p, s0 in zip(self._params, start):
                        p.copy_(s0)
                    return value, grad

                loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad,
                                                             gtd)
                self._move(t, d)
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n == max_iter or evals >= max_eval:
                break
            if float(flat_grad.abs().max()) <= tol_grad:
                break
            if float((d * t).abs().max()) <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_diffs=dirs, old_step_size=steps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_grad, prev_loss=prev_loss)
        return first_loss

    def load_state_dict(self, state_dict: dict) -> None:
        """Load group options and the L-BFGS history (flat vectors, copied)."""
        saved = dict(state_dict["state"])
        super().load_state_dict({"state": {}, "param_groups": state_dict["param_groups"]})
        if saved:
            value = next(iter(saved.values()))
            self.state[self._state_key()] = {k: _copy(v) for k, v in value.items()}


def _copy(value):
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
