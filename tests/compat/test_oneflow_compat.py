"""The OneFlow-internal surfaces (``actorflow.oneflow_compat``), imported under OneFlow's module
names as OneFlow's tests import them."""
from __future__ import annotations

import numpy as np

import actorflow as flow
from actorflow.framework.args_tree import ArgsTree


def test_args_tree_names_iterates_and_maps():
    t = flow.tensor(np.arange(2, dtype=np.float32))
    tree = ArgsTree(((None, "s", [t, {"k": t}]), {"kw": 3}), True, "G", None)
    named = dict(tree.iter_named_nodes())
    kinds = [n.kind() for n in named.values()]
    assert kinds[:3] == ["TUPLE", "TUPLE", "NONE"] and kinds.count("TENSOR") == 2
    assert named["G.0.2.1.0_k"].value() is t and named["G.1.0_kw"].value() == 3
    mapped = tree.map_leaf(lambda a: "S" if isinstance(a.value(), str) else a.value())
    assert mapped[0][1] == "S" and mapped[0][2][1]["k"] is t and mapped[1] == {"kw": 3}
    plain = ArgsTree([t, (t, 1)])
    assert plain.map_tuple_leaf(lambda v: v) == [t, (t, 1)]
    assert len(list(plain.iter_nodes())) == 5


def test_the_surfaces_are_importable_under_oneflow_names():
    import actorflow.framework.graph_build_util as gbu
    import actorflow.framework.scope_util as su
    from actorflow.framework import args_tree

    assert not gbu.lazy_mode.is_enabled()
    s = su.current_scope()
    assert s.path == "" and not s.is_lazy and s.stage_id is None
    assert gbu.scope_to_proto(s).attr_name2attr_value["checkpointing"].at_bool is False
    assert args_tree.ArgsTree is ArgsTree
