"""``nn.Graph`` and its parts: proxies, GraphModule options, GraphConfig, the compile cache."""
from actorflow.nn.graph.config import GraphConfig
from actorflow.nn.graph.graph import CompiledGraph, Graph
from actorflow.nn.graph.proxy import GraphModule, GraphTensor, Proxy, ProxyModule, ProxyTensor

__all__ = ["Graph", "GraphModule", "GraphTensor", "GraphConfig", "Proxy", "ProxyModule",
           "ProxyTensor", "CompiledGraph"]
