"""``actorflow.nn.optimizer``: OneFlow's second home of the optimizers and schedulers.

OneFlow keeps ``oneflow.optim`` and ``oneflow.nn.optimizer.<module>`` side by side; here the
submodules re-export ``actorflow.optim`` (one definition each), and ``swa_utils`` (stochastic
weight averaging, which needs ``nn.Module``) lives in this package.
"""
from actorflow.nn.optimizer import lr_scheduler, multiplicative_lr, swa_utils

__all__ = ["lr_scheduler", "multiplicative_lr", "swa_utils"]
