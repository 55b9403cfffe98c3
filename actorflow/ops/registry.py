"""The op registry: one record per op, shared by eager execution, tracing, passes and actors.

Behaviour, attached with decorators after ``register``:
  * ``infer(inputs, attrs) -> list[Meta]``: output shapes and dtypes from input metas,
  * ``kernel(device_type)``: ``kernels[device_type](ins, outs, attrs)`` writes into the output
    arrays it is given (``kernel_cpu`` is ``kernels["cpu"]``),
  * ``grad(ctx, *douts) -> tuple``: the gradient rule, written with functional ops so it runs
    eagerly or emits lazy ops,
  * ``sbp``: a generator of SBP signatures (for global tensors and the compiler),
  * ``view``: optional; returns an output that aliases the input (eager views share memory;
    the compiled runtime uses the kernel, which copies).
  * ``view_write(base, view, attrs, index) -> tensor``: optional, beside ``view``: ``base``
    with the elements output ``index`` views replaced by ``view``'s values, out of place, in
    functional ops (an nn.Graph trace writes an in-place write through a view back into its
    base with it: ``dispatch/lazy_views.py``); a view op without one can't be written through
    in a trace.

Traits, keyword arguments of ``register`` (every consumer - dispatch, autograd, the passes,
the compiler - reads them from the record; nothing keeps its own list of op names):
  * ``doc``: what the op computes and its input layout; ``Op.describe()`` shows it with the
    traits (``python -m actorflow.ops [name ...]`` prints the registry).
  * ``mutates``: indices of the inputs the kernel may write in place (optimizer updates, running
    stats, ``assign``); ``mutates_fn(n_inputs, attrs) -> indices`` for ops whose written inputs
    depend on the call. Ask ``Op.mutated_inputs(n_inputs, attrs)``, the one accessor;
    ``may_mutate`` (derived) says whether any call of the op writes an input.
  * ``grad_uses_outputs``: the gradient rule reads the outputs (True), or these output indices.
  * ``random``: the dispatcher draws ``attrs["seed"]`` from the global generator.
  * ``optional_outputs``: ``{bool attr: output index}`` for trailing outputs an attr switches on
    (gelu's saved Phi(x)); the unread_outputs pass switches them off where nothing reads them.
  * ``elementwise``: each output element depends only on the input elements at its (broadcast)
    index, and the fusion passes may run the op as a step of a fused program (fuse_elementwise;
    with one output, no in-place write and no randomness). On an optimizer update: each
    parameter element is updated from the elements at its index alone (no norms), so
    ``multi_tensor_update`` may run several parameters as one flat array.
  * ``alias_safe`` (elementwise ops): the kernel gives the same result when its output array is
    one of its inputs (same shape and dtype), so a program step may run in place.
  * ``activation`` (alias-safe ops): an activation function; fuse_matmul_bias_act may apply it
    in place to a product's result.
  * ``bias_act_epilogue``: a matrix product (matmul, linear) whose result fuse_matmul_bias_act
    may extend with a bias add over the last dim and an ``activation``.
  * ``bias_input``: the index of the op's own optional bias input (linear, convolutions); a
    call that has one takes no second bias add.
  * ``add_to_output``: fuse_add_to_output may fold an ``add`` of this op's result and another
    tensor into the op (OneFlow's ``_add_to_output``: matmul, linear, convolutions).
  * ``optimizer_update``: an optimizer update op - inputs ``(param, grad, lr, [step],
    state...)``, no outputs, param and state written in place, ``attrs["skip_if"]`` honoured
    (``ops/optim_ops.py``); fuse_model_update batches these, the GradScaler gates them.
  * ``amp``: the op's class under automatic mixed precision (OneFlow's white / black / gray
    lists): ``"allow"`` (runs in float16/bfloat16: matmuls, convolutions), ``"deny"`` (runs in
    float32: losses, softmax, norms, reductions, exp/log...) or ``"follow"`` (the default: its
    inputs' precision).
  * ``collective``: the kernel calls an MPI collective (the boxing ops that move data): every
    rank of the placement must run it, in the same order; the compiler puts it on the
    communication stream, whose actors act in a fixed order (``actorflow.runtime.collective``).
  * ``transfer``: the kernel sends to or receives from one other rank (``ops/transfer.py``):
    never folded or removed; the compiler makes it a send/recv task (``compiler/transfer.py``).
  * ``is_identity(attrs) -> bool`` (one input, one output): given a call whose output has its
    input's shape and dtype, whether it returns the input unchanged (reshape, expand and cast
    always, transpose for the identity permutation); identity_elimination removes such calls.
  * ``c_expr`` (elementwise single-output ops): how the op computes ONE element, as a C
    expression template the graph's code generator (``actorflow/compiler/codegen``) inlines.
    Values have C types: ``float`` for float32 / float16 / bfloat16, ``double`` for float64,
    ``_Bool`` for bool; ``{T}`` is the result's. ``{0}``, ``{1}``... are the inputs converted
    to ``{T}`` (what the NumPy kernels' ``dtype=out.dtype`` does), ``{r0}``, ``{r1}``... the
    inputs as they are (comparisons, ``where``'s condition), ``{scalar}`` (or any other numeric
    attr by its name) a literal of the computing type, rounded to the dtype NumPy would round
    it to. Math uses ``<tgmath.h>`` names (``exp``, ``tanh``...), so one template serves
    float and double. A string, or
    ``c_expr(attrs) -> str | None`` when it depends on the attrs (None: no C form for this
    call). It is set beside the NumPy kernel, which stays the reference: a test checks the
    two agree on every op that has both. Ask ``Op.c_form(attrs)``.
  * ``c_row`` (ops that work row by row over the trailing dims: normalisations, softmax,
    gelu...): how the op computes ONE row in generated C, a ``CRow`` (or
    ``c_row(attrs) -> CRow | None``; None: no C form for this call; ask ``Op.row_form``).
    ``CRow.kinds`` says per input, then per output, what it holds for a row of ``n`` elements
    (the trailing ``row_dims`` dims of input 0): ``"row"`` (its own ``n`` values),
    ``"stat"`` (one value per row, e.g. layer_norm's mean), ``"param"`` (``n`` values shared by
    every row: a weight) or, for an output, ``"sum"`` (``n`` values summed over all rows: a
    weight's gradient). ``CRow.body`` is C statements for one row (a ``string.Template``):
    ``X0(i)``, ``X1(i)``... load element ``i`` of an input's row as the computing type ``$T``
    (``float`` for float32 / float16 / bfloat16, ``double`` for float64); ``Y0(i, v)``...
    store ``v`` into an output's row (a ``"sum"`` output adds it); ``n`` is the row length;
    ``$name`` is a numeric attr as a ``$T`` literal. Reductions may say
    ``#pragma omp simd reduction(+:s)`` (the build allows reordering those sums, nothing else).
    More kinds: ``"index"`` (one integer per row, an integer array, loaded and stored as
    ``int64_t``: a class target, an argmax), for an input ``"scalar"`` (one value read by every
    row: a loss's incoming gradient), for an output ``"total"`` (one value: the sum over all
    rows of what each row stores with ``Y<j>(0, v)``, in double) and ``"mean"`` (that sum
    divided by the call's ``pre_total``). ``CRow.rows_of`` names the input whose trailing dims
    make the rows (default 0), ``CRow.max_ndim`` (if not 0) the most dims it may have (a loss
    whose classes are dim 1 is a row op only up to 2-D). ``CRow.pre`` is C statements for one
    row run over EVERY row of the call before the body, on one thread, writing nothing: they
    may ``REFUSE()`` (the call runs the NumPy kernel, which raises the op's error, e.g. for a
    target out of range) and ``PRE_ADD(v)`` to ``pre_total``, a double the body reads (the
    denominator of a mean). ``CRow.scratch`` rows of the computing type are the body's to use
    as ``S0(i)``, ``S1(i)``... (values kept between its loops over a row: exponentials computed
    once). ``"block"`` arrays hold a block of their own per row: their trailing ``row_dims``
    dims, whose size may differ from the row's (attention's (L, S) probabilities beside its
    (L, E) queries), with the row input's leading (batch) dims; ``CRow.dims`` names array dims
    the body reads as integer constants (``("S", 1, -2)``: ``$S`` is dim -2 of array 1, an
    input's index or ``n_inputs + j`` for output ``j``), and each scratch row then holds as
    many values as the call's longest row or block (the scratch rows are consecutive: k of
    them are one area of k times that many values). ``CRow.floats``, if set, limits the call
    to float arrays all of one of those dtypes (else the NumPy kernel runs). The NumPy kernel
    stays the reference; a test checks the two agree.
  * ``c_update`` (optimizer update ops): ``c_update(attrs) -> UpdateForm | None``, how the
    update computes one element in C (``ops/update_form.py``), beside its NumPy kernel.
  * ``grad_scale`` (ops that scale a gradient in place by a factor: ``clip_grad_by_norm``):
    ``grad_scale(values, attrs) -> float``, the factor the op multiplies its input 0 by (in
    the input's dtype, as NumPy's ``g *= factor``), from the values of its other inputs (each
    one element, as Python floats) and its attrs; the op does nothing else. A
    ``multi_tensor_update`` may do this scaling for its members' gradients (the
    ``fuse_clip_grad`` pass; its generated loop multiplies each gradient element it loads).
  * ``c_reduce`` (ops reducing every element of all their inputs to one 0-d value: the
    gradient norm of clipping): ``c_reduce(attrs) -> ReduceForm | None``, the reduction's
    accumulators and per-element C (``ops/reduce_form.py``), beside its NumPy kernel.
  * ``recompute_grad`` (activations): ``(grad op, fused op)``, their records. Where the graph
    compiler recomputes the op's output for the backward (``compiler/codegen/recompute.py``),
    a grad op call reading the same input (inputs ``(dout, x)``, the activation's attrs) may
    become one call of the fused op: inputs ``(dout, x)``, outputs (the recomputed value, the
    gradient), the same values as the two ops' own kernels give.
"""
from __future__ import annotations

import textwrap
from typing import Callable, NamedTuple

from actorflow.framework.dtype import dtype

AMP_CLASSES = ("allow", "deny", "follow")


class Meta(NamedTuple):
    """Shape and dtype of a blob; what inference works on."""

    shape: tuple
    dtype: dtype


class CRow(NamedTuple):
    """How an op computes one row in generated C (see the module docstring: ``c_row``)."""

    body: str
    kinds: tuple      # per input, then per output: "row", "stat", "param" or (outputs) "sum"
    row_dims: int = 1  # how many trailing dims of input 0 make one row
    # (output, input) pairs of "row" arrays the body may compute in place: it reads element i
    # of that input before it writes element i of that output, and never reads it after
    in_place: tuple = ()
    rows_of: int = 0   # the input whose trailing row_dims dims make one row
    max_ndim: int = 0  # 0: any; else that input has at most this many dims
    pre: str = ""      # per-row C run over all rows first: REFUSE(), PRE_ADD(v) -> pre_total
    scratch: int = 0   # rows of the computing type the body may use as S0(i), S1(i)...
    # ("name", input or output index, axis) each: $name in the body is that array's dim size
    dims: tuple = ()
    floats: tuple = ()  # if set: every float array of the call has one dtype, named here


ROW_KINDS = ("row", "stat", "param", "sum", "index", "scalar", "total", "mean", "block")
ROW_OUTPUT_KINDS = ("sum", "total", "mean")  # kinds only an output may have
ROW_INPUT_KINDS = ("param", "scalar")        # kinds only an input may have


class OpError(RuntimeError):
    """An op was called with inputs it cannot take (raised from shape/dtype inference)."""


class Op:
    """One registered op. See the module docstring for its parts."""

    __slots__ = ("name", "doc", "infer_fn", "kernels", "grad_fn", "sbp_fn", "view_fn",
                 "view_write_fn", "mutates", "mutates_fn", "may_mutate", "grad_uses_outputs",
                 "random", "optional_outputs", "elementwise", "alias_safe", "activation",
                 "bias_act_epilogue", "bias_input", "add_to_output", "optimizer_update", "amp",
                 "is_identity", "kernel_cpu", "collective", "transfer", "c_expr", "c_row",
                 "c_update", "c_reduce", "grad_scale", "recompute_grad")

    def __init__(self, name: str, *, doc: str = "", mutates: tuple = (),
                 mutates_fn: Callable | None = None,
                 grad_uses_outputs: bool | tuple[int, ...] = False, random: bool = False,
                 optional_outputs: dict | None = None, elementwise: bool = False,
                 alias_safe: bool = False, activation: bool = False,
                 bias_act_epilogue: bool = False, bias_input: int | None = None,
                 add_to_output: bool = False, optimizer_update: bool = False,
                 amp: str = "follow", is_identity: Callable | None = None,
                 collective: bool = False, transfer: bool = False,
                 c_expr: str | Callable | None = None, c_row=None,
                 c_update: Callable | None = None, c_reduce: Callable | None = None,
                 grad_scale: Callable | None = None, recompute_grad: tuple | None = None):
        if amp not in AMP_CLASSES:
            raise ValueError(f"op {name!r}: amp must be one of {AMP_CLASSES}, got {amp!r}")
        if alias_safe and not elementwise:
            raise ValueError(f"op {name!r}: alias_safe is a trait of elementwise ops")
        if activation and not alias_safe:
            raise ValueError(f"op {name!r}: an activation must be alias_safe (it is applied in "
                             f"place to a product's result)")
        self.name = name
        self.doc = doc
        self.infer_fn: Callable | None = None
        self.kernels: dict[str, Callable] = {}
        # kernels["cpu"], kept in a slot as well: every eager op and act reads it
        self.kernel_cpu: Callable | None = None
        self.grad_fn: Callable | None = None
        self.sbp_fn: Callable | None = None
        self.view_fn: Callable | None = None
        self.view_write_fn: Callable | None = None
        self.mutates = tuple(mutates)
        self.mutates_fn = mutates_fn
        # some call of the op writes an input in place (``mutates`` or ``mutates_fn``)
        self.may_mutate = bool(self.mutates) or mutates_fn is not None
        self.grad_uses_outputs = grad_uses_outputs
        self.random = random
        self.optional_outputs = dict(optional_outputs or {})
        self.elementwise = elementwise
        self.alias_safe = alias_safe
        self.activation = activation
        self.bias_act_epilogue = bias_act_epilogue
        self.bias_input = bias_input
        self.add_to_output = add_to_output
        self.optimizer_update = optimizer_update
        self.amp = amp
        self.is_identity = is_identity
        self.collective = collective
        self.transfer = transfer
        self.c_expr = c_expr
        self.c_row = c_row
        self.c_update = c_update
        self.c_reduce = c_reduce
        self.grad_scale = grad_scale
        self.recompute_grad = recompute_grad

    def mutated_inputs(self, n_inputs: int, attrs: dict) -> tuple:
        """Indices of the inputs one call with ``n_inputs`` inputs and ``attrs`` writes in
        place: ``mutates`` (those present), or what ``mutates_fn`` says for ops whose written
        inputs depend on the call (multi-tensor updates, the skip flag of updates)."""
        if self.mutates_fn is not None:
            return tuple(self.mutates_fn(n_inputs, attrs))
        return tuple(i for i in self.mutates if i < n_inputs)

    def c_form(self, attrs: dict) -> str | None:
        """The C expression template of one element of this call (``c_expr``), or None when
        the op has none for ``attrs``."""
        c = self.c_expr
        if c is None or isinstance(c, str):
            return c
        return c(attrs)

    def row_form(self, attrs: dict, n_inputs: int) -> "CRow | None":
        """How one call (``n_inputs`` inputs, ``attrs``) computes one row in C (``c_row``), or
        None when it has no row form."""
        c = self.c_row
        if c is None or isinstance(c, CRow):
            return c
        return c(attrs, n_inputs)

    def traits(self) -> list:
        """The traits that differ from a plain op, as short strings (for ``describe``)."""
        out = [t for t in ("elementwise", "alias_safe", "activation", "bias_act_epilogue",
                           "add_to_output", "optimizer_update", "random", "collective",
                           "transfer")
               if getattr(self, t)]
        if self.bias_input is not None:
            out.append(f"bias_input={self.bias_input}")
        if self.mutates_fn is not None:
            out.append(f"mutates={self.mutates} per call" if self.mutates else "mutates per call")
        elif self.mutates:
            out.append(f"mutates={self.mutates}")
        if self.grad_uses_outputs:
            out.append(f"grad_uses_outputs={self.grad_uses_outputs}")
        if self.optional_outputs:
            out.append(f"optional_outputs={self.optional_outputs}")
        if self.is_identity is not None:
            out.append("is_identity")
        if self.c_expr is not None:
            out.append("c_expr")
        if self.c_row is not None:
            out.append("c_row")
        if self.c_update is not None:
            out.append("c_update")
        if self.c_reduce is not None:
            out.append("c_reduce")
        if self.grad_scale is not None:
            out.append("grad_scale")
        if self.recompute_grad is not None:
            out.append(f"recompute_grad=({self.recompute_grad[0].name}, "
                       f"{self.recompute_grad[1].name})")
        if self.view_fn is not None:
            out.append("view")
        if self.amp != "follow":
            out.append(f"amp={self.amp}")
        return out

    def describe(self) -> str:
        """The op's name, doc, kernels, gradient and traits, as a few lines of text."""
        lines = textwrap.wrap(f"{self.name}: {self.doc or '(no description)'}", 100,
                              subsequent_indent="    ")
        grad = "yes" if self.grad_fn is not None else "no"
        lines.append(f"  kernels: {', '.join(self.kernels) or 'none'}; gradient rule: {grad}")
        traits = self.traits()
        if traits:
            lines += textwrap.wrap("traits: " + ", ".join(traits), 100, initial_indent="  ",
                                   subsequent_indent="    ")
        return "\n".join(lines)

    # decorators -------------------------------------------------------------------------------
    def infer(self, fn: Callable) -> Callable:
        """Set the shape/dtype inference (decorator)."""
        self.infer_fn = fn
        return fn

    def kernel(self, device_type: str = "cpu") -> Callable:
        """Set the kernel for ``device_type`` (decorator; registering again replaces it)."""
        def deco(fn):
            self.kernels[device_type] = fn
            if device_type == "cpu":
                self.kernel_cpu = fn
            return fn
        return deco

    def grad(self, fn: Callable) -> Callable:
        """Set the gradient rule (decorator; a second rule for one op raises)."""
        self._refuse_second("grad_fn", "@grad", fn)
        self.grad_fn = fn
        return fn

    def sbp(self, fn: Callable) -> Callable:
        """Set the SBP signature rule (decorator; a second rule for one op raises)."""
        self._refuse_second("sbp_fn", "@sbp", fn)
        self.sbp_fn = fn
        return fn

    def _refuse_second(self, slot: str, what: str, fn: Callable) -> None:
        # Two definitions of one rule are a merge mistake: the later one would silently win.
        old = getattr(self, slot, None)
        if old is not None and old is not fn:
            raise RuntimeError(
                f"op {self.name!r} already has a {what} rule ({old.__module__}.{old.__qualname__});"
                f" a second one ({fn.__module__}.{fn.__qualname__}) would replace it")

    def view(self, fn: Callable) -> Callable:
        self.view_fn = fn
        return fn

    def view_write(self, fn: Callable) -> Callable:
        self.view_write_fn = fn
        return fn

    def __repr__(self) -> str:
        return f"<op {self.name}>"


_REGISTRY: dict[str, Op] = {}


def register(name: str, **kw) -> Op:
    """Create and register a new op (``kw``: the traits of the module docstring); registering
    a name twice is an error."""
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    op = Op(name, **kw)
    _REGISTRY[name] = op
    return op


def get(name: str) -> Op:
    """Look up a registered op by name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} is registered") from None


def all_ops() -> dict[str, Op]:
    """A copy of the registry (name -> Op)."""
    return dict(_REGISTRY)


def fail(op_name: str, message: str, *shapes) -> None:
    """Raise an OpError naming the op and the shapes involved."""
    extra = ""
    if shapes:
        extra = " (shapes: " + ", ".join(str(tuple(s)) for s in shapes) + ")"
    raise OpError(f"{op_name}: {message}{extra}")
