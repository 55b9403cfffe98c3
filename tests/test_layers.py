"""The package's layers hold: a module imports, at import time, only from its own layer's unit
or from lower layers. The order is written once, here and in docs/architecture.md.

Imports inside functions and classes, and ``importlib.import_module("actorflow...")`` calls,
follow the same order: an upward one is a late binding and must be on ``ALLOWED_UPWARD`` (at
most six, each with its reason). Counting all imports, the packages form no cycle but
nn <-> nn.graph.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "actorflow"

# lowest first; a unit may import any unit of an earlier layer
LAYERS = [
    ["framework", "errors", "settings", "scope", "random", "profiler", "backends", "boxing", "cuda",
     "process"],                 # process: rank, world size, MPI groups, the watchdog
    ["ops"],                     # op registry and kernels
    ["vm"],                      # eager virtual machine
    ["tensor", "tensor_blob", "tensor_str"],  # Tensor, its storage handles, its printing
    ["autograd", "tensor_types"],
    ["job"],                     # logical IR, schedule, executor protocol, reference executor
    ["compiler"],                # Job -> Plan
    ["runtime"],                 # actors running a Plan
    ["passes"],                  # Job -> Job (what traces is in nn.graph)
    ["dispatch"],                # interpreters: eager-local, lazy
    ["functional"],
    ["linalg", "fft", "special", "serialization_torch", "comm"],  # over functional
    ["optim", "amp", "autocast_mode"],  # optimizers, lr schedulers, clipping, loss scalers,
                                        # flow.autocast
    ["nn"],                      # includes nn.graph, which drives passes, compiler, runtime
    ["utils", "serialization", "asyncs", "sysconfig", "env", "jit", "_utils", "oneflow_compat",
     "distributions", "distributed",  # flow.distributed: process facts, plan checks, launcher
     "one_embedding"],
    ["__init__"],
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


# The upward imports the layering allows, each a late binding: (importing module, imported
# module) -> why. At most six; every entry must still be needed.
ALLOWED_UPWARD = {
    ("actorflow.ops._common", "actorflow.functional"):
        "F: gradient rules (and the autograd engine) call the functional API, so one rule runs "
        "eagerly or emits lazy ops while a Graph traces",
    ("actorflow.ops._common", "actorflow.autograd"):
        "autograd: the double-backward rules of gelu(tanh) and the pointwise losses "
        "differentiate a composite of functional ops with the engine",
    ("actorflow.ops.fused", "actorflow.tensor"):
        "a fused program's inference runs its steps' infer functions, which take tensors, on "
        "value-less tensors",
    ("actorflow.process.world", "actorflow.vm"):
        "simulate_rank drains the VM before and after it swaps the world",
    ("actorflow.optim.swa_utils", "actorflow.nn.optimizer.swa_utils"):
        "flow.optim.swa_utils (PyTorch's name) forwards to AveragedModel, an nn.Module",
}


def _import_module_target(node) -> str | None:
    """The module an ``importlib.import_module(...)`` call names: its literal argument,
    "<dynamic>" for any other argument, None for other nodes."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    f = node.func
    if not (isinstance(f, ast.Attribute) and f.attr == "import_module"
            or isinstance(f, ast.Name) and f.id == "import_module"):
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
        else "<dynamic>"


def _all_imports(path: pathlib.Path):
    """``(line, imported module)`` for every import of the file: module level, inside
    functions and classes, and ``importlib.import_module`` calls."""
    for node in ast.walk(ast.parse(path.read_text())):
        target = _import_module_target(node)
        names = [target] if target is not None else _imported(node)
        for name in names:
            yield node.lineno, name


def _upward(path: pathlib.Path) -> list:
    me = _module_name(path)
    mine = LEVEL[_unit(me)]
    out = []
    for line, name in _all_imports(path):
        if name == "<dynamic>":
            out.append((line, name))
        elif name.startswith("actorflow") and _unit(name) != _unit(me) \
                and LEVEL[_unit(name)] > mine:
            out.append((line, name))
    return out


def _dynamic_ok(me: str) -> bool:
    # the pass manager imports the pass modules its PASSES table names (checked below)
    return me == "actorflow.passes"


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_every_import_goes_downward(path):
    """Function-local imports and import_module calls too: an upward one must be allowed."""
    me = _module_name(path)
    bad = [f"line {line}: imports {name}" for line, name in _upward(path)
           if (me, name) not in ALLOWED_UPWARD and not (name == "<dynamic>" and _dynamic_ok(me))]
    assert not bad, f"{me} (layer {LEVEL[_unit(me)]}) imports upward: {bad}"


def test_allowed_upward_imports_are_few_and_needed():
    assert len(ALLOWED_UPWARD) <= 6, "at most six upward imports: fix the layering instead"
    used = {(_module_name(p), name) for p in _files() for _, name in _upward(p)}
    stale = [k for k in ALLOWED_UPWARD if k not in used]
    assert not stale, f"allowed upward imports that no longer exist (remove them): {stale}"
    assert all(isinstance(why, str) and len(why) > 20 for why in ALLOWED_UPWARD.values())


def test_pass_modules_belong_to_passes():
    """Every pass the table names is in actorflow.passes; the one caller-provided step (no
    module) is nn.graph's optimizer emission, which traces."""
    from actorflow.passes import PASSES

    outside = [m for _, m, _ in PASSES if m is not None and _unit(m) != "passes"]
    assert not outside, f"PASSES names modules outside actorflow.passes: {outside}"
    provided = [name for name, m, _ in PASSES if m is None]
    assert provided == ["optimizer"], f"caller-provided steps: {provided}"


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[1:3] == ["nn", "graph"]:
        return "nn.graph"
    return _unit(module)


def _cycles(edges: dict) -> list:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_package_import_cycle():
    """Counting every import (function-local ones too, but not the allowed late bindings), the
    packages form no cycle except nn <-> nn.graph."""
    edges = {}
    for p in _files():
        me = _module_name(p)
        for _, name in _all_imports(p):
            if not name.startswith("actorflow") or (me, name) in ALLOWED_UPWARD:
                continue
            if _package(name) != _package(me):
                edges.setdefault(_package(me), set()).add(_package(name))
    assert _cycles(edges) in ([], [["nn", "nn.graph"]]), _cycles(edges)
