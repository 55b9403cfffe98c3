"""The package's layers hold: a module imports, at import time, only from its own layer's unit
or from lower layers. The order is written once, here and in docs/architecture.md.

A function-local import of a higher layer is the exception (a late binding, e.g. gradient rules
calling the functional API, or a pass emitting ops); each such import carries a comment saying
why, on its line or the line above.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "actorflow"

# lowest first; a unit may import any unit of an earlier layer
LAYERS = [
    ["framework", "errors", "settings", "scope", "random", "profiler", "backends", "cuda"],
    ["ops"],                     # op registry and kernels
    ["vm"],                      # eager virtual machine
    ["tensor", "tensor_blob", "tensor_str"],  # Tensor, its storage handles, its printing
    ["distributed"],             # the process group over MPI, the watchdog, the launcher
    ["autograd", "tensor_types"],
    ["job"],                     # logical IR, schedule, executor protocol, reference executor
    ["compiler"],                # Job -> Plan
    ["runtime"],                 # actors running a Plan
    ["dispatch"],                # interpreters: eager-local, lazy
    ["functional"],
    ["linalg", "fft", "serialization_torch", "passes"],  # passes emit functional ops
    ["optim"],
    ["nn"],                      # includes nn.graph, which drives passes, compiler, runtime
    ["utils", "serialization", "asyncs", "sysconfig", "comm", "env", "jit", "_utils",
     "distributions"],
    ["oneflow_compat", "__init__"],
]
LEVEL = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    p = ROOT.parent.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _imported(node) -> list:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        out = []
        for a in node.names:
            full = f"{node.module}.{a.name}"
            out.append(full if _is_module(full) else node.module)
        return out
    return []


def _files():
    return sorted(p for p in ROOT.rglob("*.py"))


def test_every_unit_has_a_layer():
    units = {_unit(_module_name(p)) for p in _files()}
    assert not units - set(LEVEL), f"add these to LAYERS: {sorted(units - set(LEVEL))}"


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_top_level_imports_go_downward(path):
    me = _module_name(path)
    mine = LEVEL[_unit(me)]
    tree = ast.parse(path.read_text())
    bad = []
    for node in tree.body:  # import time: module level (also inside if/try at that level)
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            for name in _imported(sub):
                if not name.startswith("actorflow") or _unit(name) == _unit(me):
                    continue
                if LEVEL[_unit(name)] > mine:
                    bad.append(f"line {sub.lineno}: imports {name}")
    assert not bad, f"{me} (layer {mine}) imports upward: {bad}"


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_upward_local_imports_say_why(path):
    me = _module_name(path)
    mine = LEVEL[_unit(me)]
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    top = set()
    for node in tree.body:
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            top.add(id(sub))
    bad = []
    for node in ast.walk(tree):
        if id(node) in top:
            continue
        for name in _imported(node):
            if not name.startswith("actorflow") or _unit(name) == _unit(me):
                continue
            if LEVEL[_unit(name)] > mine:
                here = lines[node.lineno - 1]
                above = lines[node.lineno - 2] if node.lineno > 1 else ""
                if "#" not in here and not above.strip().startswith("#"):
                    bad.append(f"line {node.lineno}: {here.strip()}")
    assert not bad, f"{me}: upward function-local imports without a reason: {bad}"
