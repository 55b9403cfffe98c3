"""``actorflow.optim``: optimizers (their update math is registered ops, see
``actorflow/ops/optim_ops.py``; LBFGS, closure-driven, uses functional ops) and
``lr_scheduler``; ``swa_utils`` (defined in ``nn.optimizer``)."""
from actorflow.optim import lr_scheduler, swa_utils  # noqa: F401
from actorflow.optim.adam import LAMB, Adam, AdamW
from actorflow.optim.adaptive import Adadelta, Adagrad, RMSprop
from actorflow.optim.lbfgs import LBFGS
from actorflow.optim.optimizer import Optimizer
from actorflow.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "LAMB", "RMSprop", "Adagrad", "Adadelta",
           "LBFGS", "lr_scheduler", "swa_utils"]
