"""``actorflow.nn.utils``: helpers for training modules."""
from actorflow.optim.clip_grad import clip_grad_norm_, clip_grad_value_
from actorflow.nn.utils import prune
from actorflow.nn.utils import rnn
from actorflow.nn.utils.weight_norm import remove_weight_norm, weight_norm
from actorflow.nn.utils.skip_init import skip_init

__all__ = ["clip_grad_norm_", "clip_grad_value_", "skip_init", "prune", "rnn",
           "weight_norm", "remove_weight_norm"]
