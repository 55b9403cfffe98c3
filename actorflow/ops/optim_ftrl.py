"""The FTRL update op (OneFlow's ``ftrl_update``, the math of ``flow.one_embedding.Ftrl``),
registered like the update ops of ``optim_ops.py``: (param, grad, lr, accumulator, z), no
outputs, param and state written in place, ``skip_if`` honoured.

With ``g = grad + weight_decay * p`` (OneFlow passes the weight decay as an L2 term), and
``q(a) = a ** lr_power``:

    acc' = acc + g^2,  sigma = (q(acc') - q(acc)) / lr,  z' = z + g - sigma * p,
    p' = 0 if |z'| < lambda1 else (sign(z') * lambda1 - z') / ((beta + q(acc')) / lr + lambda2)

exactly as OneFlow's kernel computes it (``lr_power`` applied to the accumulator as given).
"""
from __future__ import annotations

import numpy as np

from actorflow.ops.optim_ops import _regularized, _skippable, _update_op

ftrl_update = _update_op(
    "ftrl_update", (0, 3, 4), False, lambda attrs: 2,
    "FTRL (param, grad, lr, accumulator, z), OneFlow's: g = grad + weight_decay * p; "
    "acc' = acc + g^2; sigma = (acc'^lr_power - acc^lr_power) / lr; z += g - sigma * p; "
    "p = 0 where |z| < lambda1, else (sign(z) * lambda1 - z) / ((beta + acc'^lr_power) / lr "
    "+ lambda2). attrs: weight_decay, lr_power, lambda1, lambda2, beta.",
    elementwise=True)


def _ftrl(ins, outs, attrs):
    p, g, lr, acc, z = ins[0], ins[1], float(ins[2]), ins[3], ins[4]
    if lr <= 0:
        raise ValueError(f"ftrl_update: the learning rate must be > 0, got {lr}")
    g = _regularized(g, p, attrs.get("weight_decay", 0.0), False)
    power = attrs.get("lr_power", -0.5)
    before = np.power(acc, power)
    acc += g * g
    after = np.power(acc, power)
    z += g - (after - before) / lr * p
    l1, l2, beta = attrs.get("lambda1", 0.0), attrs.get("lambda2", 0.0), attrs.get("beta", 0.0)
    new = (np.copysign(l1, z) - z) / ((beta + after) / lr + l2)
    p[...] = np.where(np.abs(z) >= l1, new, 0.0)


ftrl_update.kernel("cpu")(_skippable(_ftrl))
