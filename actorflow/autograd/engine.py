"""The autograd engine: records one Node per differentiable op call and runs backward.

Gradient rules are the ``grad`` functions of registered ops. They call functional ops, so the
same rule computes gradients eagerly, or, while ``nn.Graph`` traces, emits backward ops into the
Job. There is one engine for all modes.
"""
from __future__ import annotations

import threading
import weakref

from actorflow.autograd import grad_mode
from actorflow import scope
from actorflow.ops._common import F as _late_F
from actorflow.tensor import EagerBlob, Tensor, register_tensor_methods


class Node:
    """One recorded op call; it is also the ``ctx`` a gradient rule receives.

    ``ctx.inputs`` / ``ctx.outputs`` give the saved tensors (checked against in-place changes),
    ``ctx.attrs`` the op's attrs, ``ctx.input_metas`` shapes and dtypes of the inputs and
    ``ctx.needs_input_grad`` which inputs want a gradient.
    """

    __slots__ = ("op", "attrs", "_inputs", "_outputs", "_versions", "input_metas",
                 "output_metas", "next_edges", "needs_input_grad", "freed", "pre_hooks",
                 "module_path", "__weakref__")

    def __init__(self, op, attrs, inputs, outputs, module_path=""):
        self.op = op
        self.attrs = attrs
        self.module_path = module_path
        self.input_metas = [(t._shape, t.dtype) for t in inputs]
        self.output_metas = [(t._shape, t.dtype) for t in outputs]
        edges = []
        needs = []
        for t in inputs:
            if t.requires_grad:
                fn = t.grad_fn
                edges.append((fn, t._out_idx) if fn is not None else (t, -1))
                needs.append(True)
            else:
                edges.append(None)
                needs.append(False)
        self.next_edges = edges
        self.needs_input_grad = tuple(needs)
        self._inputs = inputs
        self._outputs = None
        self._versions = [t._vc[0] for t in inputs]
        keep = op.grad_uses_outputs if op is not None else False
        if keep:  # True: every output; a tuple: those outputs (the others are not checked)
            self._outputs = [_alias(t) if keep is True or i in keep else None
                             for i, t in enumerate(outputs)]
            self._versions += [None if t is None else t._vc[0] for t in self._outputs]
        self.freed = False
        self.pre_hooks = None

    @classmethod
    def from_edges(cls, in_metas: list, out_metas: list, edges: list,
                   module_path: str = "") -> "Node":
        """A node of no registered op (``op`` None; the subclass's ``apply`` and ``name`` give
        the gradients) whose inputs' histories are ``edges`` (``None``: needs no gradient),
        saving nothing."""
        n = cls.__new__(cls)
        n.op, n.attrs, n.module_path = None, {}, module_path
        n.input_metas, n.output_metas, n.next_edges = in_metas, out_metas, edges
        n.needs_input_grad = tuple(e is not None for e in edges)
        n._inputs, n._outputs, n._versions = [], None, []
        n.freed, n.pre_hooks = False, None
        return n

    def name(self) -> str:
        return f"{self.op.name}_backward"

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    # -- what gradient rules read ---------------------------------------------------------------
    @property
    def inputs(self) -> list:
        self._check_saved()
        return self._inputs

    @property
    def outputs(self) -> list:
        self._check_saved()
        if self._outputs is None:
            raise RuntimeError(f"{self.op.name}: the gradient rule reads outputs, but the op is "
                               f"not registered with grad_uses_outputs=True")
        if grad_mode._state.enabled:  # create_graph: saved outputs rejoin the graph via self
            return [None if t is None else _alias(t, self, i)
                    for i, t in enumerate(self._outputs)]
        return self._outputs

    def _check_saved(self) -> None:
        if self.freed:
            raise RuntimeError(
                f"{self.name()}: trying to backward through the graph a second time (or to read "
                f"saved tensors after they were freed). Pass retain_graph=True to the first "
                f"backward() if you need to backward twice.")
        saved = self._inputs + (self._outputs or [])
        mutated = self.op.mutates if self.op is not None else ()
        for i, (t, v) in enumerate(zip(saved, self._versions)):
            if i in mutated or t is None:  # state the op itself updates (running stats), not
                continue                      # read by grads; an output the grad does not read
            if t._vc[0] != v:
                raise RuntimeError(
                    f"{self.name()}: one of the tensors needed for gradient computation has been "
                    f"modified by an in-place operation: a tensor of shape {tuple(t._shape)} is at "
                    f"version {t._vc[0]}; expected version {v}"
                    + (f" (op in module {self.module_path})" if self.module_path else ""))

    # -- backward -------------------------------------------------------------------------------
    def apply(self, douts: list) -> tuple:
        # a released node still runs: only a gradient rule that reads its freed saved tensors
        # (ctx.inputs / ctx.outputs) fails, as in PyTorch (add's rule, reading none, does not)
        grads = self.op.grad_fn(self, *douts)
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        if len(grads) != len(self.next_edges):
            raise RuntimeError(f"{self.name()}: gradient rule returned {len(grads)} gradients "
                               f"for {len(self.next_edges)} inputs")
        return grads

    def release(self) -> None:
        self.freed = True
        self._inputs = []
        self._outputs = None
        self._versions = []


def _is_readonly_view(t: Tensor) -> bool:
    h = t._h
    return isinstance(h, EagerBlob) and not h.raw.flags.writeable


def _alias(t: Tensor, node: Node | None = None, idx: int = 0) -> Tensor:
    """A tensor sharing ``t``'s storage and version counter; outside autograd, or output
    ``idx`` of ``node`` when one is given."""
    a = Tensor._from_handle(t._h, t._shape, t.dtype)
    a._vc = t._vc
    if node is not None and t.dtype.is_differentiable:
        a.requires_grad, a.grad_fn, a._out_idx = True, node, idx
    return a


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, hook):
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def register_hook(t: Tensor, hook) -> RemovableHandle:
    if not t.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't "
                           "require gradient")
    if t.grad_fn is None:
        if t._hooks is None:
            t._hooks = []
        hooks = t._hooks
    else:
        node = t.grad_fn
        if node.pre_hooks is None:
            node.pre_hooks = {}
        hooks = node.pre_hooks.setdefault(t._out_idx, [])
    if hooks and getattr(hooks[-1], "retains_grad", False):
        hooks.insert(len(hooks) - 1, hook)  # retain_grad stores the grad after every hook
    else:
        hooks.append(hook)
    return RemovableHandle(hooks, hook)


def retain_grad(t: Tensor) -> None:
    if not t.requires_grad:
        raise RuntimeError("retain_grad: can't retain_grad on a tensor that has "
                           "requires_grad=False")
    if t.grad_fn is None or t._retains_grad:
        return
    ref = weakref.ref(t)

    def keep(g):
        target = ref()
        if target is not None:
            target._grad = g.detach() if target._grad is None else (target._grad + g).detach()
        return None

    keep.retains_grad = True
    t._retains_grad = True
    register_hook(t, keep)


# -- running backward ---------------------------------------------------------------------------

def _F():
    # the functional API sits above autograd (it records through it): reached through the op
    # layer's late binding, as gradient rules reach it
    return _late_F


def _run_hooks(hooks, g):
    for h in list(hooks):
        r = h(g)
        if r is not None:
            g = r
    return g


def _prepare_roots(tensors, grads, op_name, create_graph=False):
    """(output, seed gradient) pairs; with ``create_graph`` a given seed stays in the autograd
    graph, so the gradients can be differentiated with respect to it."""
    F = _F()
    roots = []
    for i, (t, g) in enumerate(zip(tensors, grads)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op_name}: expected Tensors, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError(f"{op_name}: element {i} of tensors does not require grad and "
                               f"does not have a grad_fn")
        grad_mode._state.grad_root = True  # a Graph's trace tags the seed's op grad_root
        try:
            if g is None:
                if t.numel() != 1:
                    raise RuntimeError(f"{op_name}: grad can be implicitly created only for "
                                       f"scalar outputs; this output has shape {tuple(t._shape)}")
                g = F.ones_like(t)
            else:
                if not isinstance(g, Tensor):
                    g = F.tensor(g, dtype=t.dtype)
                if tuple(g._shape) != tuple(t._shape):
                    raise RuntimeError(f"{op_name}: gradient of shape {tuple(g._shape)} does not "
                                       f"match the output's shape {tuple(t._shape)}")
                # with create_graph a grad_output that requires grad stays in the graph, so
                # the result can be differentiated with respect to it (double backward)
                g = F.clone(g) if create_graph and g.requires_grad else g.detach().clone()
        finally:
            grad_mode._state.grad_root = False
        roots.append((t, g))
    return roots


def _tensor_list(fn: str, what: str, value) -> list:
    """``value`` (a Tensor or a sequence of Tensors) as a list; anything else (None, a number,
    a sequence holding a non-Tensor) is a TypeError naming ``fn`` and the argument."""
    if isinstance(value, Tensor):
        return [value]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{fn}: {what} must be a Tensor or a sequence of Tensors, got "
                        f"{type(value).__name__}") from None
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {what}[{i}] must be a Tensor, got {type(t).__name__}")
    return items


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves they depend on."""
    tensors = _tensor_list("autograd.backward", "tensors", tensors)
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    roots = _prepare_roots(tensors, list(grad_tensors), "backward", create_graph)
    only = None
    if inputs is not None:
        inputs = _tensor_list("autograd.backward", "inputs", inputs)
        only = {id(t) for t in inputs}
    _execute(roots, retain_graph if retain_graph is not None else create_graph, create_graph,
             capture=None, accumulate_only=only)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused):
    """``grad`` once per entry of the grad_outputs' first dim, the results stacked."""
    sizes = set()
    for i, (o, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(g, Tensor) or tuple(g._shape[1:]) != tuple(o._shape):
            got = "None" if g is None else f"shape {tuple(g._shape)}"
            raise RuntimeError(
                "autograd.grad: If `is_grads_batched=True`, we interpret the first dimension of "
                "each grad_output as the batch dimension. The sizes of the remaining dimensions "
                f"are expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has {got} and output[{i}] has shape "
                f"{tuple(o._shape)}")
        sizes.add(g._shape[0])
    if len(sizes) != 1:
        raise RuntimeError(f"autograd.grad: is_grads_batched=True needs one batch size for every "
                           f"grad_output, got {sorted(sizes)}")
    n = sizes.pop()
    if n == 0:
        raise RuntimeError("autograd.grad: is_grads_batched=True with an empty batch")
    per = []
    for b in range(n):
        keep = True if b < n - 1 else retain_graph
        per.append(grad(outputs, inputs, [g[b] for g in grad_outputs], keep, create_graph,
                        allow_unused))
    F = _F()
    return tuple(None if per[0][i] is None else F.stack([p[i] for p in per], 0)
                 for i in range(len(inputs)))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False, is_grads_batched=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` without touching ``.grad``.
    ``is_grads_batched``: the first dim of every grad_output is a batch of vectors; the result
    stacks one gradient per vector (one backward each)."""
    outputs = _tensor_list("autograd.grad", "outputs", outputs)
    inputs = _tensor_list("autograd.grad", "inputs", inputs)
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    if is_grads_batched:
        return _batched_grad(list(outputs), inputs, list(grad_outputs), retain_graph,
                             create_graph, allow_unused)
    roots = _prepare_roots(list(outputs), list(grad_outputs), "autograd.grad", create_graph)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("autograd.grad: one of the inputs does not require grad")
    capture = {}
    for i, t in enumerate(inputs):
        key = (t.grad_fn, t._out_idx) if t.grad_fn is not None else (t, -1)
        capture.setdefault(key, []).append(i)
    results = [None] * len(inputs)
    _execute(roots, retain_graph if retain_graph is not None else create_graph, create_graph,
             capture=(capture, results), accumulate_only=set())
    for i, r in enumerate(results):
        if r is None and not allow_unused:
            raise RuntimeError(f"autograd.grad: input {i} was not used in the graph; pass "
                               f"allow_unused=True if this is intended")
    return tuple(results)


def _execute(roots, retain_graph, create_graph, capture, accumulate_only):
    F = _F()
    buffers: dict = {}
    deps: dict = {}
    leaf_deps: dict = {}  # id(leaf) -> edges into it from nodes not yet run
    root_nodes = []

    def add_to(store, key, idx, g):
        slot = store.get(key)
        if slot is None:
            store[key] = slot = {}
        prev = slot.get(idx)
        slot[idx] = g if prev is None else F.add(prev, g)

    leaf_grads: dict = {}
    leaves: dict = {}
    for t, g in roots:
        if t.grad_fn is None:
            add_to(leaf_grads, id(t), 0, g)
            leaves[id(t)] = t
        else:
            add_to(buffers, t.grad_fn, t._out_idx, g)
            root_nodes.append(t.grad_fn)

    # count, for every reachable node and leaf, how many edges point at it
    seen = set()
    stack = list(dict.fromkeys(root_nodes))
    for n in stack:
        seen.add(n)
    while stack:
        n = stack.pop()
        for e in n.next_edges:
            if e is None:
                continue
            m = e[0]
            if not isinstance(m, Node):
                leaf_deps[id(m)] = leaf_deps.get(id(m), 0) + 1
                continue
            deps[m] = deps.get(m, 0) + 1
            if m not in seen:
                seen.add(m)
                stack.append(m)

    ready = [n for n in dict.fromkeys(root_nodes) if deps.get(n, 0) == 0]
    processed = []
    stored: set = set()  # one gradient tensor object must not become two leaves' .grad
    walk = _Walk(buffers, deps, leaf_deps, leaf_grads, leaves, add_to, capture,
                 accumulate_only, create_graph, stored)
    grad_mode._state.backward_depth += 1
    outer = getattr(_tls, "callbacks", None)
    _tls.callbacks = callbacks = []
    try:
        with grad_mode.set_grad_enabled(create_graph):
            walk.run(ready, processed)
            for key in list(leaf_grads):  # leaves no node leads to (roots themselves)
                walk.finish_leaf(key)
        for fn in callbacks:  # (a callback may queue another: it runs too)
            fn()
    finally:
        _tls.callbacks = outer
        grad_mode._state.backward_depth -= 1
    if not retain_graph:
        for node in processed:
            node.release()


_tls = threading.local()


def queue_callback(fn) -> None:
    """Call ``fn()`` once the running backward has stored every leaf gradient (PyTorch's
    ``Variable._execution_engine.queue_callback``); only from inside a backward (a hook)."""
    callbacks = getattr(_tls, "callbacks", None)
    if callbacks is None:
        raise RuntimeError("queue_callback: no backward is running on this thread (call it "
                           "from a hook)")
    callbacks.append(fn)


def _in_leaf_layout(g: Tensor, leaf: Tensor) -> Tensor:
    """A global leaf's gradient boxed to the leaf's placement and SBP, as OneFlow accumulates
    it (``AccGrad4LeafTensor``): a broadcast parameter gets a broadcast ``grad``, a split(1)
    one a split(1) ``grad``; eager only, as there (a graph's optimizer reads its gradients
    in the SBP the graph's pass gave them)."""
    if not (leaf.is_global and g.is_global) or g.is_lazy or leaf.is_lazy:
        return g
    if g.placement == leaf.placement and tuple(g.sbp) == tuple(leaf.sbp):
        return g
    return g.to_global(placement=leaf.placement, sbp=leaf.sbp)


class _Walk:
    """One backward walk: runs ready nodes, routes their gradients, and finishes a leaf (its
    hooks, ``.grad`` accumulation, post-accumulation hooks) as soon as its last contribution
    arrived, while the rest of backward is still to be issued."""

    def __init__(self, buffers, deps, leaf_deps, leaf_grads, leaves, add_to, capture,
                 accumulate_only, create_graph, stored):
        self.buffers, self.deps, self.leaf_deps = buffers, deps, leaf_deps
        self.leaf_grads, self.leaves, self.add_to = leaf_grads, leaves, add_to
        self.capture, self.accumulate_only = capture, accumulate_only
        self.create_graph, self.stored = create_graph, stored

    def run(self, ready, processed):
        buffers, deps, capture = self.buffers, self.deps, self.capture
        while ready:
            node = ready.pop()
            processed.append(node)
            slot = buffers.pop(node, {})
            n_out = len(node.output_metas)
            douts = [slot.get(i) for i in range(n_out)]
            if node.pre_hooks:
                for idx, hooks in node.pre_hooks.items():
                    if douts[idx] is not None:
                        douts[idx] = _run_hooks(hooks, douts[idx])
            if capture is not None:
                for idx in range(n_out):
                    hit = capture[0].get((node, idx))
                    if hit is not None:
                        for i in hit:
                            capture[1][i] = douts[idx]
            if all(d is None for d in douts):
                grads = (None,) * len(node.next_edges)
            else:
                path = node.module_path
                if path:  # the rule's ops belong to the module the forward op ran in
                    with scope.module_scope(path):
                        grads = node.apply(douts)
                else:
                    grads = node.apply(douts)
            for edge, g, meta in zip(node.next_edges, grads, node.input_metas):
                if edge is None:
                    continue
                target, idx = edge
                if g is not None:
                    if tuple(g._shape) != tuple(meta[0]):
                        raise RuntimeError(
                            f"{node.name()}: gradient rule produced shape {tuple(g._shape)} "
                            f"for an input of shape {tuple(meta[0])}")
                    if g.dtype is not meta[1]:
                        g = g.to(meta[1])
                if isinstance(target, Node):
                    if g is not None:
                        self.add_to(buffers, target, idx, g)
                    deps[target] -= 1
                    if deps[target] == 0:
                        ready.append(target)
                    continue
                key = id(target)
                if g is not None:
                    self.add_to(self.leaf_grads, key, 0, g)
                    self.leaves[key] = target
                self.leaf_deps[key] -= 1
                if self.leaf_deps[key] == 0:
                    self.finish_leaf(key)

    def finish_leaf(self, key) -> None:
        """The leaf's gradient is final: run its hooks, accumulate it, run the
        post-accumulation hooks."""
        slot = self.leaf_grads.pop(key, None)
        if slot is None:  # every contribution was None
            return
        leaf = self.leaves[key]
        create_graph = self.create_graph
        g = slot[0]
        if leaf._hooks:
            g = _run_hooks(leaf._hooks, g)
        if self.capture is not None:
            hit = self.capture[0].get((leaf, -1))
            if hit is not None:
                for i in hit:
                    self.capture[1][i] = g
        if self.accumulate_only is not None and key not in self.accumulate_only:
            return
        g = _in_leaf_layout(g, leaf)
        if not create_graph:
            g = g.detach()
        if leaf._grad is None:
            # a .grad must own writable memory: optimizers and clipping update it in place
            if id(g) in self.stored or (not create_graph and _is_readonly_view(g)):
                g = _F().clone(g) if create_graph else g.clone()
            self.stored.add(id(g))
            leaf._grad = g
        else:
            leaf._grad = _F().add(leaf._grad, g)
            if not create_graph:
                leaf._grad = leaf._grad.detach()
        for hook in tuple(leaf.__dict__.get("_post_accumulate_grad_hooks", ())):
            hook(leaf)


# -- the Tensor methods that run the engine (attached from here: autograd sits above tensor) ----

def _tensor_retain_grad(self: Tensor) -> None:
    """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
    retain_grad(self)


def _tensor_register_hook(self: Tensor, hook) -> RemovableHandle:
    """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor
    replaces the gradient. Returns a handle with ``remove()``."""
    return register_hook(self, hook)


def _tensor_backward(self: Tensor, gradient=None, retain_graph=None, create_graph: bool = False,
                     inputs=None) -> None:
    """Accumulate the gradients of this tensor into the ``.grad`` of the leaves it depends on."""
    backward([self], [gradient], retain_graph=retain_graph, create_graph=create_graph,
             inputs=inputs)


register_tensor_methods({"retain_grad": _tensor_retain_grad,
                         "register_hook": _tensor_register_hook, "backward": _tensor_backward})
