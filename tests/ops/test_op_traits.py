"""Op traits are data: what a pass needs to know about an op is a field of its registry record
(``actorflow/ops/registry.py``), set where the op is registered, never a list of op names
inside a pass. These tests check key traits of representative ops, that the passes act on the
fields (change a field, the pass changes), and scan the passes for hand-copied op names."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import actorflow as flow
import actorflow.functional as F
from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.ops import registry
from actorflow.ops.__main__ import main as ops_main
from actorflow.passes import amp, fuse_matmul, simplify

get = registry.get


# ---- key traits of representative ops ----------------------------------------------------------

def test_elementwise_and_alias_safe():
    for name in ("add", "scalar_mul", "relu", "gelu", "exp", "cast", "where", "masked_fill"):
        assert get(name).elementwise, name
    assert get("relu").alias_safe and get("add").alias_safe
    assert not get("where").alias_safe  # its kernel copies y into the output before reading x
    for name in ("matmul", "softmax", "sum", "reshape", "dropout", "layer_norm"):
        assert not get(name).elementwise, name


def test_activations_and_products():
    for name in ("relu", "gelu", "silu", "tanh", "sigmoid"):
        assert get(name).activation, name
    assert not get("exp").activation and not get("add").activation
    assert get("matmul").bias_act_epilogue and get("linear").bias_act_epilogue
    assert not get("conv2d").bias_act_epilogue
    for name in ("matmul", "linear", "conv1d", "conv2d", "conv3d"):
        assert get(name).add_to_output, name
    assert get("matmul").bias_input is None
    assert get("linear").bias_input == 2 and get("conv2d").bias_input == 2


def test_amp_classes():
    for name in ("matmul", "linear", "conv2d", "conv2d_grad_weight"):
        assert get(name).amp == "allow", name
    for name in ("softmax", "cross_entropy", "mse_loss_backward", "layer_norm", "sum", "exp",
                 "pow", "scaled_dot_product_attention", "grad_norm"):
        assert get(name).amp == "deny", name
    for name in ("add", "relu", "reshape", "gelu"):
        assert get(name).amp == "follow", name
    assert {op.amp for op in registry.all_ops().values()} == set(registry.AMP_CLASSES)


def test_optimizer_updates():
    updates = {n for n, op in registry.all_ops().items() if op.optimizer_update}
    assert updates == {"sgd_update", "momentum_update", "adam_update", "rmsprop_update",
                       "adagrad_update", "adadelta_update", "lamb_update", "ftrl_update"}
    assert get("adam_update").elementwise and not get("lamb_update").elementwise  # LAMB: norms
    assert not get("multi_tensor_update").optimizer_update  # the batched op is not batched again


def test_mutated_inputs_is_the_one_accessor():
    assert get("batch_norm").mutated_inputs(5, {}) == (1, 2)
    assert get("assign").mutated_inputs(2, {}) == (0,)
    assert get("add").mutated_inputs(2, {}) == ()
    adam = get("adam_update")  # param, grad, lr, step, exp_avg, exp_avg_sq[, max_exp_avg_sq]
    assert adam.mutated_inputs(6, {}) == (0, 3, 4, 5)
    assert adam.mutated_inputs(7, {"amsgrad": True}) == (0, 3, 4, 5, 6)
    assert adam.mutated_inputs(7, {"skip_if": True}) == (0, 3, 4, 5)  # never the skip flag
    # momentum blocks (param, grad, buf) after the shared lr: params and buffers are written
    multi = {"update": "momentum_update", "update_attrs": {}, "arity": 3}
    assert get("multi_tensor_update").mutated_inputs(7, multi) == (1, 3, 4, 6)


def test_is_identity():
    assert get("reshape").is_identity({"shape": (3, 4)})
    assert get("cast").is_identity({"dtype": flow.float32})
    assert get("transpose").is_identity({"perm": (0, 1, 2)})
    assert not get("transpose").is_identity({"perm": (1, 0, 2)})
    assert get("add").is_identity is None


def test_the_record_checks_its_traits():
    with pytest.raises(ValueError, match="amp must be one of"):
        registry.Op("x", amp="white")
    with pytest.raises(ValueError, match="alias_safe is a trait of elementwise ops"):
        registry.Op("x", alias_safe=True)
    with pytest.raises(ValueError, match="activation must be alias_safe"):
        registry.Op("x", elementwise=True, activation=True)
    with pytest.raises(TypeError):
        registry.Op("x", elemntwise=True)  # a misspelt trait is an error, not a silent default


def test_every_op_is_described():
    for name, op in registry.all_ops().items():
        assert op.doc, f"op {name} has no doc"
        assert op.kernel_cpu is op.kernels.get("cpu")
    text = get("softmax").describe()
    assert text.startswith("softmax: exp(x)") and "amp=deny" in text


def test_python_m_actorflow_ops_prints_records(capsys):
    assert ops_main(["relu", "adam_update"]) == 0
    out = capsys.readouterr().out
    assert "relu: " in out and "activation" in out and "optimizer_update" in out
    assert ops_main(["no_such_op"]) == 1


# ---- the passes act on the fields --------------------------------------------------------------

def _matmul_then(fn):
    x0 = flow.randn(3, 4)
    w0 = flow.randn(4, 5)
    b = LazyInterpreter("t")
    with b:
        x = b.add_input(0, "x", x0)
        w = b.add_input(1, "w", w0)
        b.add_output(0, "y", fn(F.matmul(x, w)))
    return b.job


def test_fusion_follows_the_activation_field(monkeypatch):
    def fused_steps(job):
        out = fuse_matmul.fuse_matmul_bias_act(job)
        return [o.attrs["ops"] for o in out.ops if o.op_type == "fused_matmul_bias_act"]

    assert fused_steps(_matmul_then(F.relu)) == [["matmul", "relu"]]
    assert fused_steps(_matmul_then(F.sin)) == []
    monkeypatch.setattr(get("sin"), "activation", True)
    assert fused_steps(_matmul_then(F.sin)) == [["matmul", "sin"]]


def test_amp_follows_the_amp_field(monkeypatch):
    job = _matmul_then(F.tanh)
    tanh = next(o for o in job.ops if o.op_type == "tanh")
    mm = next(o for o in job.ops if o.op_type == "matmul")
    assert (amp.op_precision(mm), amp.op_precision(tanh)) == ("allow", "follow")
    monkeypatch.setattr(get("tanh"), "amp", "deny")
    assert amp.op_precision(tanh) == "deny"


def test_identity_elimination_follows_the_is_identity_field(monkeypatch):
    job = _matmul_then(lambda y: F.mul(y, 1.0))
    assert "scalar_mul" in [o.op_type for o in simplify.eliminate_identities(job.copy()).ops]
    monkeypatch.setattr(get("scalar_mul"), "is_identity", lambda attrs: attrs["scalar"] == 1.0)
    assert "scalar_mul" not in [o.op_type for o in simplify.eliminate_identities(job).ops]


# ---- no hand-copied op names in the passes -----------------------------------------------------

PASSES_DIR = Path(__file__).resolve().parents[2] / "actorflow" / "passes"

# Op names a pass may spell out: the ops it creates itself (fused ops, casts), ``assign`` (a
# system-like op the tracer emits), and ``add``, the one op fuse_matmul's rewrite patterns match
# and put into the programs they build. Anything else is a trait: give the ops a field.
ALLOWED_EVERYWHERE = {"assign"}
ALLOWED = {
    "amp.py": {"cast"},
    "fuse_elementwise.py": {"fused_elementwise"},
    "fuse_matmul.py": {"fused_matmul_bias_act", "fused_add_to_output", "add"},
    "fuse_update.py": {"multi_tensor_update"},
    "fuse_clip_grad.py": {"multi_tensor_update"},
    "simplify.py": {"cat", "reshape"},  # cat_of_reshapes rewrites and emits exactly these
}

# where a string naming an op classifies ops: compared with (``op_type == "x"``, ``in (...)``),
# an element or key of a container literal, or bound to a name (a constant standing for the op)
_CLASSIFYING_PARENTS = (ast.Compare, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Assign,
                        ast.AnnAssign)


def op_names_in(source: str, names: set) -> list:
    """``(line, name)`` of each string constant in ``source`` that equals one of ``names`` and
    stands in a comparison, a container literal or an assignment (docstrings and f-strings,
    i.e. messages, are not looked at)."""
    tree = ast.parse(source)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    hits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if node.value in names and isinstance(parent.get(node), _CLASSIFYING_PARENTS):
            hits.append((node.lineno, node.value))
    return sorted(hits)


def test_scanner_finds_hand_copied_lists():
    src = ('"""A pass over relu and tanh (a docstring may name ops)."""\n'
           'ACTS = frozenset(("relu", "gelu"))\n'
           'def f(o):\n'
           '    if o.op_type == "tanh" or o.op_type in ["sigmoid"]:\n'
           '        raise ValueError(f"op {o.name} is not relu")\n'
           '    return {"softmax": 1}, o.attrs.get("reduction") == "mean_of_all"\n'
           'ONE = "silu"\n')
    names = {"relu", "gelu", "tanh", "sigmoid", "softmax", "silu", "mean"}
    assert op_names_in(src, names) == [(2, "gelu"), (2, "relu"), (4, "sigmoid"), (4, "tanh"),
                                       (6, "softmax"), (7, "silu")]


def test_passes_keep_no_op_name_lists():
    names = set(registry.all_ops())
    files = sorted(PASSES_DIR.glob("*.py"))
    assert len(files) > 5 and set(ALLOWED) <= {f.name for f in files}
    found = []
    for path in files:
        allowed = ALLOWED_EVERYWHERE | ALLOWED.get(path.name, set())
        for line, name in op_names_in(path.read_text(), names):
            if name not in allowed:
                found.append(f"{path.name}:{line}: {name!r}")
    assert not found, ("passes name registered ops; make what they need to know a trait of "
                       "the op record (actorflow/ops/registry.py) set at registration:\n"
                       + "\n".join(found))


def op_name_tables_in(source: str, names: set) -> list:
    """Lines of container literals of two or more strings that are all in ``names``."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) and e.value in names for e in node.elts)]


def test_no_op_name_tables_in_the_layers_that_consume_ops():
    """Nothing between the registry and the runtime keeps a list of op names (the tables the
    fusion passes once read lived in ``ops/fused.py``). ``functional`` and ``optim`` are left
    out: they call ops by name, which is their job."""
    names = set(registry.all_ops())
    package = PASSES_DIR.parent
    found = []
    for part in ("ops", "passes", "job", "compiler", "runtime", "nn/graph"):
        for path in sorted((package / part).glob("*.py")):
            found += [f"{path.relative_to(package)}:{line}"
                      for line in op_name_tables_in(path.read_text(), names)]
    assert op_name_tables_in('T = ("relu", "gelu")\nU = ("relu", "x")\n', names) == [1]
    assert not found, "lists of op names (make them traits of the op record): " + ", ".join(found)


def test_program_steps_run_in_place_as_the_record_says():
    """A fused program writes a step over its input exactly when the step's op is alias_safe."""
    from actorflow.ops.fused import buffer_plan, program_attrs

    shape, d = (2, 3), flow.float32

    def shares_buffer(op: str, n_in: int, args: list) -> bool:
        attrs = program_attrs(["neg", op], [{}, {}], [[n_in - 1], args], [shape, shape],
                              [d, d], [1], ["a", "b"])
        plan = buffer_plan(n_in, attrs)
        return plan[0] == plan[1]

    assert shares_buffer("relu", 1, [1])            # relu(neg(x)): in place
    assert not shares_buffer("where", 2, [0, 2, 1])  # where(c, neg(y), y): not alias-safe


def test_a_second_sbp_or_grad_rule_for_one_op_raises():
    """Two definitions of one rule (e.g. two ``@op.sbp`` left by a merge) must not let the later
    one silently win; replacing a default rule is an explicit ``sbp_fn = None`` first."""
    op = registry.Op("test_rule_twice")

    def rule_a(inputs, attrs):
        yield from ()

    def rule_b(inputs, attrs):
        yield from ()

    op.sbp(rule_a)
    op.sbp(rule_a)  # the same function again is harmless
    with pytest.raises(RuntimeError, match=r"test_rule_twice.*already has a @sbp rule.*rule_a"):
        op.sbp(rule_b)
    assert op.sbp_fn is rule_a
    op.sbp_fn = None
    op.sbp(rule_b)
    assert op.sbp_fn is rule_b
    op.grad(rule_a)
    with pytest.raises(RuntimeError, match="already has a @grad rule"):
        op.grad(rule_b)
