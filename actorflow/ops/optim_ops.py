"""Optimizer update ops.

Every update op has ZERO outputs: its CPU kernel writes the parameter and the optimizer state in
place, and the op lists those inputs in ``mutates``. Input layout (each op's doc repeats it):

    param, grad, lr, [step], state...

* ``lr`` is a 0-d float64 tensor (an input, not an attr, so a Graph can feed the scheduler's
  learning rate each iteration);
* ``step`` is a 0-d int64 state tensor counting finished updates; the kernel increments it first
  and uses the new value (bias correction, Adagrad's lr decay);
* state tensors have the parameter's shape and dtype. Some state is optional (AMSGrad's
  ``max_exp_avg_sq``, RMSprop's ``grad_avg``/``momentum_buffer``): an optional input is passed only
  when the attrs enable it, so ``mutates`` names every index the op *may* write and a call writes
  the ones it has.

Hyperparameters other than the learning rate are attrs. Update ops have no gradient rule.
With ``attrs["skip_if"] = True`` an update op takes one more input, last: a one-element
flag; a nonzero flag makes the call a no-op (nn.Graph's GradScaler skips non-finite steps).
Eager ``step()`` never sets it. ``mutated_inputs(n, attrs)`` never names the flag (it may sit at
an optional-state index of ``mutates``).
The clipping ops (``grad_norm``, ``clip_grad_by_norm``, ``clip_grad_by_value``) are in
``ops/clip_grad_ops.py``.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.boxing import B, Sig
from actorflow.ops.registry import fail, register
from actorflow.ops.update_form import UpdateForm


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _check_update(name: str, inputs: list, has_step: bool, n_state: int) -> None:
    """Shape/dtype checks shared by the update ops (they all return no outputs)."""
    n_fixed = 4 if has_step else 3
    if len(inputs) != n_fixed + n_state:
        fail(name, f"expected {n_fixed + n_state} inputs (param, grad, lr"
             f"{', step' if has_step else ''} and {n_state} state tensors), got {len(inputs)}")
    p, g, lr = inputs[0], inputs[1], inputs[2]
    if not p.dtype.is_floating_point:
        fail(name, f"the parameter must be a floating point tensor, got {p.dtype}")
    if tuple(g._shape) != tuple(p._shape):
        fail(name, "the gradient's shape differs from the parameter's", p._shape, g._shape)
    if _numel(lr._shape) != 1 or not lr.dtype.is_floating_point:
        fail(name, f"lr must be a one-element floating point tensor, got {lr.dtype}", lr._shape)
    if has_step:
        step = inputs[3]
        if _numel(step._shape) != 1 or step.dtype.is_floating_point or step.dtype is dt.bool_:
            fail(name, f"step must be a one-element integer tensor, got {step.dtype}", step._shape)
    for s in inputs[n_fixed:]:
        if tuple(s._shape) != tuple(p._shape):
            fail(name, "a state tensor's shape differs from the parameter's", p._shape, s._shape)
        if not s.dtype.is_floating_point:
            fail(name, f"state tensors must be floating point, got {s.dtype}")


def _update_op(name: str, mutates: tuple, has_step: bool, n_state, doc: str, *,
               elementwise: bool):
    """Register an update op; ``n_state(attrs)`` is the number of state inputs it takes;
    ``elementwise``: each element is updated from its own param/grad/state (the registry
    trait: multi_tensor_update may run several parameters as one array)."""

    def mutated(n_inputs: int, attrs: dict) -> tuple:  # never the skip flag
        n = n_inputs - 1 if attrs.get("skip_if", False) else n_inputs
        return tuple(i for i in mutates if i < n)

    op = register(name, mutates=mutates, mutates_fn=mutated, optimizer_update=True,
                  elementwise=elementwise, doc=doc + _SKIP_DOC)

    @op.infer
    def _(inputs, attrs):
        if attrs.get("skip_if", False):
            inputs = _check_skip_flag(name, inputs)
        _check_update(name, inputs, has_step, n_state(attrs))
        return []

    @op.sbp
    def _(inputs, attrs):
        # on global tensors: an elementwise update runs on the shards of a split parameter,
        # its gradient and state laid out alike, lr/step/skip flag broadcast (a broadcast
        # parameter takes the all-broadcast signature every op has)
        p = inputs[0].sbp[0].attr()
        if not elementwise or p[0] != "S":
            return
        n_fixed = 4 if has_step else 3
        n_flag = 1 if attrs.get("skip_if", False) else 0
        yield Sig((p, p) + (B,) * (n_fixed - 2) + (p,) * (len(inputs) - n_fixed - n_flag)
                  + (B,) * n_flag, ())

    _UPDATE_OPS.append(op)
    return op


_UPDATE_OPS: list = []  # to wrap their kernels with the skip flag, below
_SKIP_DOC = (" With attrs skip_if=True a last input, a one-element flag, is appended; the update "
             "does nothing (param and state unchanged) when the flag is nonzero (nn.Graph's "
             "GradScaler skips a step whose gradients are not finite).")


def _check_skip_flag(name: str, inputs: list) -> list:
    """The inputs without the trailing skip flag (checked to be one element)."""
    if not inputs or _numel(inputs[-1]._shape) != 1:
        fail(name, "skip_if=True needs a one-element flag as the last input",
             *([inputs[-1]._shape] if inputs else []))
    return inputs[:-1]


def _skippable(kernel):
    """Wrap an update kernel: with attrs ``skip_if`` the last input is a flag; nonzero skips."""
    def run(ins, outs, attrs):
        if attrs.get("skip_if", False):
            if bool(ins[-1].reshape(())):
                return
            ins = ins[:-1]
        kernel(ins, outs, attrs)

    run.__doc__ = kernel.__doc__
    return run


def _advance(step: np.ndarray) -> int:
    """Increment the step counter in place; returns the new count."""
    step[...] += 1
    return int(step.reshape(()))


def _regularized(g, p, weight_decay: float, negate: bool):
    """``(-g if negate else g) + weight_decay * p`` (``g`` itself when there is nothing to do)."""
    if weight_decay:
        out = np.multiply(p, weight_decay)
        if negate:
            out -= g
        else:
            out += g
        return out
    return np.negative(g) if negate else g


def _regularized_c(weight_decay: float, negate: bool) -> str:
    """``_regularized`` for one element, as a C statement defining ``gg`` (scalar ``wd``)."""
    if weight_decay:
        return "T gg = p * wd " + ("- g;" if negate else "+ g;")
    return "T gg = " + ("-g;" if negate else "g;")


# ---- SGD ----------------------------------------------------------------------------------------

sgd_update = _update_op(
    "sgd_update", (0,), False, lambda attrs: 0,
    "Plain SGD (param, grad, lr): p -= lr * (g + weight_decay * p).",
    elementwise=True)


@sgd_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr = ins[0], ins[1], float(ins[2])
    wd = attrs.get("weight_decay", 0.0)
    if wd:
        p *= 1.0 - lr * wd
    p -= np.multiply(g, lr)


def _sgd_c(attrs: dict) -> UpdateForm:
    wd = attrs.get("weight_decay", 0.0)
    body = ("p = p * decay; " if wd else "") + "p = p - g * lr;"
    return UpdateForm(body, ("decay", "lr"), lambda lr, t, a: (1.0 - lr * wd, lr), 0, False,
                      ("p",))


sgd_update.c_update = _sgd_c


momentum_update = _update_op(
    "momentum_update", (0, 3), False, lambda attrs: 1,
    "SGD with momentum (param, grad, lr, momentum_buffer); the buffer starts at zero: "
    "buf = momentum * buf + (1 - dampening) * (g + weight_decay * p); "
    "d = g + momentum * buf (nesterov) or buf; p -= lr * d (p += lr * d when maximize).",
    elementwise=True)


@momentum_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr, buf = ins[0], ins[1], float(ins[2]), ins[3]
    m, damp = attrs["momentum"], attrs.get("dampening", 0.0)
    g = _regularized(g, p, attrs.get("weight_decay", 0.0), False)
    buf *= m
    if damp:
        buf += np.multiply(g, 1.0 - damp)
    else:
        buf += g
    scale = lr if attrs.get("maximize", False) else -lr
    if attrs.get("nesterov", False):
        d = np.multiply(buf, m)
        d += g
        d *= scale
    else:
        d = np.multiply(buf, scale)
    p += d


def _momentum_c(attrs: dict) -> UpdateForm:
    """The momentum kernel's operations, one element: ``s0`` is the buffer."""
    wd, damp = attrs.get("weight_decay", 0.0), attrs.get("dampening", 0.0)
    body = [_regularized_c(wd, False), "s0 = s0 * m;",
            "s0 = s0 + gg * keep;" if damp else "s0 = s0 + gg;"]
    if attrs.get("nesterov", False):
        body.append("T d = s0 * m; d = d + gg; d = d * scale;")
    else:
        body.append("T d = s0 * scale;")
    body.append("p = p + d;")
    maximize = attrs.get("maximize", False)
    return UpdateForm(" ".join(body), ("wd", "m", "keep", "scale"),
                      lambda lr, t, a: (wd, a["momentum"], 1.0 - damp,
                                        lr if maximize else -lr), 1, False, ("p", "s0"))


momentum_update.c_update = _momentum_c


# ---- Adam / AdamW -------------------------------------------------------------------------------

adam_update = _update_op(
    "adam_update", (0, 3, 4, 5, 6), True, lambda attrs: 3 if attrs.get("amsgrad") else 2,
    "Adam/AdamW (param, grad, lr, step, exp_avg, exp_avg_sq[, max_exp_avg_sq when amsgrad]). "
    "attrs: beta1, beta2, eps, weight_decay, decoupled (AdamW: p *= 1 - lr * weight_decay; "
    "otherwise L2: g += weight_decay * p), amsgrad, bias_correction, maximize.",
    elementwise=True)


@adam_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr, m, v = ins[0], ins[1], float(ins[2]), ins[4], ins[5]
    t = _advance(ins[3])
    b1, b2, eps = attrs["beta1"], attrs["beta2"], attrs["eps"]
    wd = attrs.get("weight_decay", 0.0)
    decoupled = attrs.get("decoupled", False)
    g = _regularized(g, p, 0.0 if decoupled else wd, attrs.get("maximize", False))
    if decoupled and wd:
        p *= 1.0 - lr * wd
    tmp = np.multiply(g, 1.0 - b1)
    m *= b1
    m += tmp
    np.multiply(g, g, out=tmp)
    tmp *= 1.0 - b2
    v *= b2
    v += tmp
    if attrs.get("amsgrad", False):
        np.maximum(ins[6], v, out=ins[6])
        v = ins[6]
    inv_bc2, lr_bc1 = _adam_corrections(lr, t, attrs)
    np.sqrt(v, out=tmp)
    tmp *= inv_bc2
    tmp += eps
    np.divide(m, tmp, out=tmp)
    tmp *= lr_bc1
    p -= tmp


def _adam_corrections(lr: float, t: int, attrs: dict) -> tuple:
    """``(1 / sqrt(1 - beta2^t), lr / (1 - beta1^t))`` (1 and lr without bias correction)."""
    bc1 = bc2 = 1.0
    if attrs.get("bias_correction", True):
        bc1, bc2 = 1.0 - attrs["beta1"] ** t, 1.0 - attrs["beta2"] ** t
    return 1.0 / math.sqrt(bc2), lr / bc1


def _adam_c(attrs: dict) -> UpdateForm:
    """The Adam kernel's operations, one element: ``s0`` exp_avg, ``s1`` exp_avg_sq, ``s2``
    max_exp_avg_sq (amsgrad; NumPy's maximum: NaN wins)."""
    wd = attrs.get("weight_decay", 0.0)
    decoupled, maximize = attrs.get("decoupled", False), attrs.get("maximize", False)
    amsgrad = attrs.get("amsgrad", False)
    body = [_regularized_c(0.0 if decoupled else wd, maximize)]
    if decoupled and wd:
        body.append("p = p * decay;")
    body += ["T tmp = gg * keep1; s0 = s0 * b1; s0 = s0 + tmp;",
             "tmp = gg * gg; tmp = tmp * keep2; s1 = s1 * b2; s1 = s1 + tmp;"]
    if amsgrad:
        body.append("s2 = (s2 >= s1 || isnan(s2)) ? s2 : s1; tmp = sqrt(s2);")
    else:
        body.append("tmp = sqrt(s1);")
    body.append("tmp = tmp * inv_bc2; tmp = tmp + eps; tmp = s0 / tmp; tmp = tmp * lr_bc1; "
                "p = p - tmp;")

    def scalars(lr, t, a):
        b1, b2 = a["beta1"], a["beta2"]
        return (wd, 1.0 - lr * wd, 1.0 - b1, b1, 1.0 - b2, b2, a["eps"],
                *_adam_corrections(lr, t, a))

    return UpdateForm(" ".join(body), ("wd", "decay", "keep1", "b1", "keep2", "b2", "eps",
                                       "inv_bc2", "lr_bc1"), scalars, 3 if amsgrad else 2,
                      True, ("p", "s0", "s1", "s2") if amsgrad else ("p", "s0", "s1"))


adam_update.c_update = _adam_c


# ---- RMSprop ------------------------------------------------------------------------------------

rmsprop_update = _update_op(
    "rmsprop_update", (0, 3, 4, 5), False,
    lambda attrs: 1 + bool(attrs.get("centered")) + bool(attrs.get("momentum")),
    "RMSprop (param, grad, lr, square_avg[, grad_avg when centered][, momentum_buffer when "
    "momentum > 0]); OneFlow's form: eps inside the square root and lr inside the momentum "
    "buffer: sq = a*sq + (1-a)*g^2; denom = sqrt(sq [- grad_avg^2] + eps); "
    "buf = momentum*buf + lr*g/denom; p -= buf.",
    elementwise=True)


@rmsprop_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr, sq = ins[0], ins[1], float(ins[2]), ins[3]
    alpha, eps, momentum = attrs["alpha"], attrs["eps"], attrs.get("momentum", 0.0)
    g = _regularized(g, p, attrs.get("weight_decay", 0.0), attrs.get("maximize", False))
    denom = np.multiply(g, g)
    denom *= 1.0 - alpha
    sq *= alpha
    sq += denom
    nxt = 4
    if attrs.get("centered", False):
        avg = ins[nxt]
        nxt += 1
        avg *= alpha
        avg += np.multiply(g, 1.0 - alpha)
        np.multiply(avg, avg, out=denom)
        np.subtract(sq, denom, out=denom)
    else:
        np.copyto(denom, sq)
    denom += eps
    np.sqrt(denom, out=denom)
    np.divide(g, denom, out=denom)
    denom *= lr
    if momentum:
        buf = ins[nxt]
        buf *= momentum
        buf += denom
        p -= buf
    else:
        p -= denom


def _rmsprop_c(attrs: dict) -> UpdateForm:
    """The RMSprop kernel's operations, one element: ``s0`` square_avg, then grad_avg
    (centered), then the momentum buffer (momentum > 0)."""
    wd, momentum = attrs.get("weight_decay", 0.0), attrs.get("momentum", 0.0)
    centered = attrs.get("centered", False)
    body = [_regularized_c(wd, attrs.get("maximize", False)),
            "T d = gg * gg; d = d * keep; s0 = s0 * alpha; s0 = s0 + d;"]
    nxt = 1
    if centered:
        body.append("s1 = s1 * alpha; s1 = s1 + gg * keep; d = s1 * s1; d = s0 - d;")
        nxt = 2
    else:
        body.append("d = s0;")
    body.append("d = d + eps; d = sqrt(d); d = gg / d; d = d * lr;")
    if momentum:
        body.append(f"s{nxt} = s{nxt} * mom; s{nxt} = s{nxt} + d; p = p - s{nxt};")
    else:
        body.append("p = p - d;")
    n_state = nxt + bool(momentum)
    return UpdateForm(" ".join(body), ("wd", "keep", "alpha", "eps", "lr", "mom"),
                      lambda lr, t, a: (wd, 1.0 - a["alpha"], a["alpha"], a["eps"], lr,
                                        momentum), n_state, False,
                      ("p", *(f"s{i}" for i in range(n_state))))


rmsprop_update.c_update = _rmsprop_c


# ---- Adagrad / Adadelta -------------------------------------------------------------------------

adagrad_update = _update_op(
    "adagrad_update", (0, 3, 4), True, lambda attrs: 1,
    "Adagrad (param, grad, lr, step, sum): sum += g^2; "
    "p -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps).",
    elementwise=True)


@adagrad_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr, acc = ins[0], ins[1], float(ins[2]), ins[4]
    t = _advance(ins[3])
    g = _regularized(g, p, attrs.get("weight_decay", 0.0), attrs.get("maximize", False))
    clr = _adagrad_lr(lr, t, attrs)
    tmp = np.multiply(g, g)
    acc += tmp
    np.sqrt(acc, out=tmp)
    tmp += attrs["eps"]
    np.divide(g, tmp, out=tmp)
    tmp *= clr
    p -= tmp


def _adagrad_lr(lr: float, t: int, attrs: dict) -> float:
    """Adagrad's learning rate at step ``t`` (lr_decay)."""
    return lr / (1.0 + (t - 1) * attrs.get("lr_decay", 0.0))


def _adagrad_c(attrs: dict) -> UpdateForm:
    """The Adagrad kernel's operations, one element: ``s0`` is the sum of squares."""
    wd = attrs.get("weight_decay", 0.0)
    body = (_regularized_c(wd, attrs.get("maximize", False))
            + " T tmp = gg * gg; s0 = s0 + tmp; tmp = sqrt(s0); tmp = tmp + eps;"
              " tmp = gg / tmp; tmp = tmp * clr; p = p - tmp;")
    return UpdateForm(body, ("wd", "eps", "clr"),
                      lambda lr, t, a: (wd, a["eps"], _adagrad_lr(lr, t, a)), 1, True,
                      ("p", "s0"))


adagrad_update.c_update = _adagrad_c


adadelta_update = _update_op(
    "adadelta_update", (0, 3, 4), False, lambda attrs: 2,
    "Adadelta (param, grad, lr, square_avg, acc_delta): sq = rho*sq + (1-rho)*g^2; "
    "delta = sqrt(acc + eps) / sqrt(sq + eps) * g; acc = rho*acc + (1-rho)*delta^2; "
    "p -= lr * delta.",
    elementwise=True)


@adadelta_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr, sq, acc = ins[0], ins[1], float(ins[2]), ins[3], ins[4]
    rho, eps = attrs["rho"], attrs["eps"]
    g = _regularized(g, p, attrs.get("weight_decay", 0.0), attrs.get("maximize", False))
    tmp = np.multiply(g, g)
    tmp *= 1.0 - rho
    sq *= rho
    sq += tmp
    delta = np.add(acc, eps)
    np.sqrt(delta, out=delta)
    np.add(sq, eps, out=tmp)
    np.sqrt(tmp, out=tmp)
    delta /= tmp
    delta *= g
    np.multiply(delta, delta, out=tmp)
    tmp *= 1.0 - rho
    acc *= rho
    acc += tmp
    delta *= lr
    p -= delta


def _adadelta_c(attrs: dict) -> UpdateForm:
    """The Adadelta kernel's operations, one element: ``s0`` square_avg, ``s1`` acc_delta."""
    wd = attrs.get("weight_decay", 0.0)
    body = (_regularized_c(wd, attrs.get("maximize", False))
            + " T tmp = gg * gg; tmp = tmp * keep; s0 = s0 * rho; s0 = s0 + tmp;"
              " T delta = s1 + eps; delta = sqrt(delta); tmp = s0 + eps; tmp = sqrt(tmp);"
              " delta = delta / tmp; delta = delta * gg; tmp = delta * delta;"
              " tmp = tmp * keep; s1 = s1 * rho; s1 = s1 + tmp; delta = delta * lr;"
              " p = p - delta;")
    return UpdateForm(body, ("wd", "keep", "rho", "eps", "lr"),
                      lambda lr, t, a: (wd, 1.0 - a["rho"], a["rho"], a["eps"], lr), 2, False,
                      ("p", "s0", "s1"))


adadelta_update.c_update = _adadelta_c


# ---- LAMB ---------------------------------------------------------------------------------------

lamb_update = _update_op(
    "lamb_update", (0, 3, 4, 5), True, lambda attrs: 2,
    "LAMB (param, grad, lr, step, exp_avg, exp_avg_sq), OneFlow's form: u = m_hat / "
    "(sqrt(v_hat) + eps); trust = ||p|| / ||u|| (1 when either is 0); "
    "p -= lr * trust * (u + weight_decay * p) when adam_w_mode, else weight decay is L2 on g.",
    elementwise=False)


def _l2norm(a: np.ndarray) -> float:
    flat = a.reshape(-1)
    return math.sqrt(float(np.dot(flat, flat)))


@lamb_update.kernel("cpu")
def _(ins, outs, attrs):
    p, g, lr, m, v = ins[0], ins[1], float(ins[2]), ins[4], ins[5]
    t = _advance(ins[3])
    b1, b2, eps = attrs["beta1"], attrs["beta2"], attrs["eps"]
    wd = attrs.get("weight_decay", 0.0)
    adam_w = attrs.get("adam_w_mode", True)
    g = _regularized(g, p, 0.0 if adam_w else wd, False)
    tmp = np.multiply(g, 1.0 - b1)
    m *= b1
    m += tmp
    np.multiply(g, g, out=tmp)
    tmp *= 1.0 - b2
    v *= b2
    v += tmp
    bc1 = bc2 = 1.0
    if attrs.get("bias_correction", True):
        bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
    np.sqrt(v, out=tmp)
    tmp *= 1.0 / math.sqrt(bc2)
    tmp += eps
    np.divide(m, tmp, out=tmp)
    tmp *= 1.0 / bc1
    w_norm, u_norm = _l2norm(p), _l2norm(tmp)
    trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    if adam_w and wd:
        tmp += np.multiply(p, wd)
    tmp *= lr * trust
    p -= tmp


for _op in _UPDATE_OPS:  # every update op honours attrs["skip_if"] (eager never sets it)
    _op.kernel("cpu")(_skippable(_op.kernel_cpu))
