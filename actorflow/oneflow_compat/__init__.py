"""OneFlow-internal surfaces that OneFlow code and OneFlow's own tests import, in one place.

They are registered under OneFlow's module names (``oneflow.framework.X`` is imported as
``actorflow.framework.X``), each a thin view over the part of actorflow that owns the concept:

* ``actorflow.framework.graph_build_util``: ``lazy_mode.is_enabled()`` (a Graph's ``build`` is
  being traced on this thread), ``lazy_mode.guard(False)`` (run eagerly inside ``build``: ops
  there compute values and add nothing to the Job), ``scope_to_proto(scope)`` (a scope's
  attributes in the shape of OneFlow's scope proto);
* ``actorflow.framework.scope_util``: ``current_scope()``, the scope of the code running now
  (module path, activation checkpointing, pipeline stage, lazy or not), read from
  ``actorflow.scope``;
* ``actorflow.framework.args_tree``: ``ArgsTree``, a nested argument seen as a named tree;
* ``actorflow._oneflow_internal``: ``flags.cuda_version()`` (0: no CUDA build),
  ``flags.with_cuda()``, ``TensorTuple`` (the tuples of tensors autograd hands to hooks) and
  ``Tensor``.
"""
from __future__ import annotations

import sys
import types

from actorflow import framework
from actorflow.oneflow_compat.args_tree import ArgsTree, NamedArg
from actorflow.oneflow_compat.graph_build import (AttrValue, Scope, ScopeProto, current_scope,
                                                  lazy_mode, scope_to_proto)


def _register(name: str, **attrs) -> None:
    module = types.ModuleType(f"actorflow.framework.{name}")
    module.__dict__.update(attrs)
    sys.modules[module.__name__] = module
    setattr(framework, name, module)


_register("graph_build_util", lazy_mode=lazy_mode, scope_to_proto=scope_to_proto,
          ScopeProto=ScopeProto, AttrValue=AttrValue)
_register("scope_util", Scope=Scope, current_scope=current_scope)
_register("args_tree", ArgsTree=ArgsTree, NamedArg=NamedArg)


def _register_internal() -> None:
    from actorflow.tensor import Tensor

    flags = types.SimpleNamespace(cuda_version=lambda: 0, with_cuda=lambda: False)
    module = types.ModuleType("actorflow._oneflow_internal")
    module.__dict__.update(flags=flags, TensorTuple=tuple, Tensor=Tensor)
    sys.modules[module.__name__] = module
    sys.modules["actorflow"]._oneflow_internal = module  # the package root, importing us


_register_internal()
