"""The logical IR: a Job is an ordered list of OpConfs whose inputs name blobs other ops produce.

A blob is named ``"<op name>/<output index>"``. Besides registered ops, a Job holds the system
ops of ``system_ops.py`` (input, variable, literal, output and gradient accumulation's micro
ops). Their attrs: ``input`` ``index``, ``path``; ``variable`` ``name``, ``kind`` (parameter,
buffer, free (an eager tensor used in build), optimizer_state, lr, grad_scaler, train_step);
``literal`` ``value`` (an array); ``output`` ``index``, ``path``; the micro ops ``n``.

Ops are kept in a valid execution order; ``ctrl_inputs`` names ops that must run before an op
even though it reads none of their blobs (an op that updates a variable waits for the other
readers of that variable). The Job is data: ``to_json`` / ``from_json`` round-trip it and
``to_dot`` draws it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from actorflow.framework import dtype as dt
from actorflow.job import attrs as attr_codec



@dataclass(frozen=True)
class BlobDesc:
    """Shape and dtype of one blob."""

    shape: tuple
    dtype: dt.dtype

    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= int(s)
        return n * self.dtype.itemsize

    def to_dict(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype.name}

    @staticmethod
    def from_dict(d: dict) -> "BlobDesc":
        return BlobDesc(tuple(d["shape"]), dt.as_dtype(d["dtype"]))


@dataclass
class OpConf:
    """One op of a Job.

    ``op_type`` is a registered op name or a system op; ``inputs`` are blob names; ``outputs``
    the BlobDescs of what it produces; ``scope`` the module path it was called in;
    ``tags`` free-form facts passes use (``phase``: forward / backward / optimizer,
    ``checkpointing``, ``micro_batch`` ...)."""

    name: str
    op_type: str
    inputs: list
    attrs: dict
    outputs: list
    scope: str = ""
    ctrl_inputs: list = field(default_factory=list)
    tags: dict = field(default_factory=dict)

    def out(self, i: int = 0) -> str:
        """The blob name of output ``i``."""
        return f"{self.name}/{i}"

    def to_dict(self) -> dict:
        return {"name": self.name, "op_type": self.op_type, "inputs": list(self.inputs),
                "attrs": {k: attr_codec.encode(v) for k, v in self.attrs.items()},
                "outputs": [b.to_dict() for b in self.outputs], "scope": self.scope,
                "ctrl_inputs": list(self.ctrl_inputs),
                "tags": {k: attr_codec.encode(v) for k, v in self.tags.items()}}

    @staticmethod
    def from_dict(d: dict) -> "OpConf":
        return OpConf(d["name"], d["op_type"], list(d["inputs"]),
                      {k: attr_codec.decode(v) for k, v in d["attrs"].items()},
                      [BlobDesc.from_dict(b) for b in d["outputs"]], d.get("scope", ""),
                      list(d.get("ctrl_inputs", [])),
                      {k: attr_codec.decode(v) for k, v in d.get("tags", {}).items()})

    def copy(self, **changes) -> "OpConf":
        """A shallow copy with some fields replaced."""
        c = OpConf(self.name, self.op_type, list(self.inputs), dict(self.attrs),
                   list(self.outputs), self.scope, list(self.ctrl_inputs), dict(self.tags))
        for k, v in changes.items():
            if k not in _OPCONF_FIELDS:
                raise TypeError(f"OpConf.copy() got an unexpected field {k!r}")
            setattr(c, k, v)
        return c


_OPCONF_FIELDS = frozenset(("name", "op_type", "inputs", "attrs", "outputs", "scope",
                            "ctrl_inputs", "tags"))


def unique_name(base: str, names: set) -> str:
    """``base``, or ``base_1``, ``base_2``... : the first not in ``names`` (which it joins)."""
    name, k = base, 1
    while name in names:
        name = f"{base}_{k}"
        k += 1
    names.add(name)
    return name


_SPLIT_MEMO: dict = {}  # blob name -> (op name, index): passes and checks split each often
_SPLIT_MEMO_MAX = 1 << 16


def split_blob(blob: str) -> tuple:
    """``"op/1"`` -> ``("op", 1)``."""
    hit = _SPLIT_MEMO.get(blob)
    if hit is None:
        name, _, idx = blob.rpartition("/")
        hit = (name, int(idx))
        if len(_SPLIT_MEMO) >= _SPLIT_MEMO_MAX:
            _SPLIT_MEMO.clear()
        _SPLIT_MEMO[blob] = hit
    return hit


class Job:
    """A logical graph: ops in execution order plus facts about training.

    ``train`` holds what the optimizer pass needs (set while tracing): ``grads`` maps a
    variable op's name to the blob of its gradient, ``optimizers`` describes each param group,
    ``losses`` names the blobs ``backward()`` was called on.
    """

    def __init__(self, name: str, ops: list | None = None, train: dict | None = None):
        self.name = name
        self.ops: list = list(ops or [])
        self.train: dict = dict(train or {})

    # -- lookup ----------------------------------------------------------------------------------
    def op_map(self) -> dict:
        return {op.name: op for op in self.ops}

    def op(self, name: str) -> OpConf:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(f"job {self.name!r} has no op {name!r}")

    def blob_desc(self, blob: str) -> BlobDesc:
        name, idx = split_blob(blob)
        return self.op(name).outputs[idx]

    def ops_of_type(self, op_type: str) -> list:
        return [o for o in self.ops if o.op_type == op_type]

    def consumers(self) -> dict:
        """blob name -> list of ops that read it."""
        users: dict = {}
        for o in self.ops:
            for b in o.inputs:
                users.setdefault(b, []).append(o)
        return users

    @property
    def inputs(self) -> list:
        return sorted(self.ops_of_type("input"), key=lambda o: o.attrs["index"])

    @property
    def outputs(self) -> list:
        return sorted(self.ops_of_type("output"), key=lambda o: o.attrs["index"])

    @property
    def variables(self) -> list:
        return self.ops_of_type("variable")

    def copy(self) -> "Job":
        return Job(self.name, [o.copy() for o in self.ops], _deep_copy_train(self.train))

    # -- checks ----------------------------------------------------------------------------------
    def verify(self) -> None:
        """Check that names are unique, every input and control input is produced by an earlier
        op, and every registered op's recorded outputs match its inference. Raises ValueError."""
        from actorflow.job.verify import verify_job

        verify_job(self)

    def topological_order(self) -> list:
        """The ops in an order that respects data and control edges, stable with respect to the
        stored order (the stored order already is one for a verified Job)."""
        from actorflow.job.verify import topological_order

        return topological_order(self)

    # -- data ------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"name": self.name, "ops": [o.to_dict() for o in self.ops],
                "train": {k: attr_codec.encode(v) for k, v in self.train.items()}}

    def to_json(self, indent: int | None = None) -> str:
        """The Job as a JSON string (``Job.from_json`` loads it back equal)."""
        return json.dumps(self.to_dict(), indent=indent)

    @staticmethod
    def from_json(text: str) -> "Job":
        d = json.loads(text)
        return Job(d["name"], [OpConf.from_dict(o) for o in d["ops"]],
                   {k: attr_codec.decode(v) for k, v in d.get("train", {}).items()})

    def to_dot(self) -> str:
        """Graphviz DOT text of the Job: one node per op, clustered by module scope."""
        from actorflow.job.dot import job_to_dot

        return job_to_dot(self)

    def __eq__(self, other) -> bool:
        return isinstance(other, Job) and self.to_dict() == other.to_dict()

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"<Job {self.name!r}: {len(self.ops)} ops>"

    def summary(self) -> str:
        """One line per op: name, type, inputs -> output shapes (and placement and sbp)."""
        lines = [f"Job {self.name} ({len(self.ops)} ops)"]
        for o in self.ops:
            outs = ", ".join(f"{tuple(b.shape)}:{b.dtype.name}" for b in o.outputs)
            g = o.tags.get("global")  # a distributed graph's op: placement, sbp in -> out
            where = "" if g is None else \
                f" @ {g['placement']} {','.join(g['in'])}->{','.join(g['out'])}"
            lines.append(f"  {o.name} = {o.op_type}({', '.join(o.inputs)}) -> [{outs}]{where}")
        return "\n".join(lines)


def _deep_copy_train(train: dict) -> dict:
    return {k: attr_codec.decode(attr_codec.encode(v)) for k, v in train.items()}
