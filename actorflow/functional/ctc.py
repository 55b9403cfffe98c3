"""``ctc_loss`` (PyTorch's ``nn.functional.ctc_loss``) over the ops of ``actorflow/ops/ctc.py``;
the reductions are functional ops on the per-sequence losses."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional.creation import tensor
from actorflow.functional.elementwise import div
from actorflow.functional.reduce import mean, sum
from actorflow.ops import registry
from actorflow.tensor import Tensor

__all__ = ["ctc_loss", "ctc_loss_grad"]

_CTC = registry.get("ctc_loss")
_CTC_GRAD = registry.get("ctc_loss_grad")


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tensor(list(x), dtype=dt.int64)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """CTC loss of ``log_probs`` (T, N, C) or (T, C) against ``targets`` ((N, S) padded or
    1-d concatenated); ``reduction`` "mean" divides each loss by its target length and
    averages, "sum" adds, "none" keeps (N,). ``zero_infinity`` turns impossible alignments'
    infinite losses (and their gradients) into zeros."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ctc_loss: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    input_lengths = _as_tensor(input_lengths)
    target_lengths = _as_tensor(target_lengths)
    unbatched = len(log_probs._shape) == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if len(targets._shape) == 1 else targets
        input_lengths, target_lengths = input_lengths.reshape(1), target_lengths.reshape(1)
    nll = apply(_CTC, [log_probs, targets, input_lengths, target_lengths],
                {"blank": int(blank), "zero_infinity": bool(zero_infinity)})[0]
    if reduction == "sum":
        return sum(nll)
    if reduction == "mean":
        return mean(div(nll, target_lengths.clamp(min=1).to(nll.dtype)))
    return nll.reshape(()) if unbatched else nll


def ctc_loss_grad(dnll: Tensor, log_probs: Tensor, targets: Tensor, input_lengths: Tensor,
                  target_lengths: Tensor, nll: Tensor, log_alpha: Tensor, blank: int,
                  zero_infinity: bool) -> Tensor:
    """The gradient of ``ctc_loss``'s per-sequence losses with respect to ``log_probs``."""
    return apply(_CTC_GRAD, [dnll, log_probs, targets, input_lengths, target_lengths, nll,
                             log_alpha], {"blank": int(blank),
                                          "zero_infinity": bool(zero_infinity)})[0]
