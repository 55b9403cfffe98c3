"""``flow.one_embedding.Optimizer``: OneFlow's wrapper of an optimizer that trains
one_embedding embeddings eagerly.

In actorflow the wrapped optimizer itself updates the embeddings' rows (through their shadow
parameters, see ``one_embedding/embedding.py``), so the wrapper checks that each embedding's
shadow is among the optimizer's parameters and forwards everything to it.
"""
from __future__ import annotations

from actorflow.optim.optimizer import Optimizer as _Optimizer
from actorflow.vm import scheduler


class Optimizer(_Optimizer):
    """``Optimizer(optimizer, embeddings)``: ``optimizer`` (SGD, Adam, Adagrad or
    ``one_embedding.Ftrl``) with the one_embedding modules ``embeddings`` it trains."""

    def __init__(self, optimizer: _Optimizer, embeddings: list):
        if not isinstance(optimizer, _Optimizer):
            raise TypeError(f"one_embedding.Optimizer: expected an optimizer, got "
                            f"{type(optimizer).__name__}")
        self.__dict__["optimizer"] = optimizer
        self.__dict__["embeddings"] = list(embeddings)
        params = {id(p) for g in optimizer.param_groups for p in g["params"]}
        for e in self.embeddings:
            shadow = getattr(e, "shadow", None)
            if shadow is None or id(shadow) not in params:
                name = getattr(e, "embedding_name", type(e).__name__)
                raise ValueError(f"one_embedding.Optimizer: embedding {name!r} must be in the "
                                 f"optimizer's param groups")

    def __getattr__(self, name: str):
        return getattr(self.__dict__["optimizer"], name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.__dict__["optimizer"], name, value)

    def step(self, closure=None):
        """The wrapped optimizer's step (it updates the embeddings' looked-up rows too)."""
        return self.optimizer.step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The wrapped optimizer's ``zero_grad``, and the embeddings' pending row gradients
        dropped (also those of embeddings whose shadow had no gradient yet)."""
        self.optimizer.zero_grad(set_to_none)
        scheduler.synchronize()  # (pending pushes are kernels: let them land first)
        for e in self.embeddings:
            e.store.clear_pending()

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.optimizer.load_state_dict(state_dict)

    def __repr__(self) -> str:
        return f"one_embedding.Optimizer({self.optimizer!r})"


def _forward(name: str):
    def method(self, *args, **kwargs):
        return getattr(self.__dict__["optimizer"], name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"The wrapped optimizer's ``{name}``."
    return method


# the base class's methods the wrapper would otherwise inherit (nn.Graph's optimizer pass calls
# _lr_tensor, _attrs and _update)
for _name in ("_attrs", "_update", "_lr_tensor", "_apply_update", "_grads", "_targets",
              "add_param_group", "clip_grad"):
    setattr(Optimizer, _name, _forward(_name))
