"""JobBuilder: appends OpConfs to a Job and keeps what that needs (unique names, who reads each
blob, which op last wrote a blob in place, so later writers and readers get control edges).

It knows blobs and descriptions only; the lazy interpreter (``actorflow.dispatch.lazy``) turns
op calls on tensors into OpConfs and hands them here, and passes use it to add ops to a Job.
"""
from __future__ import annotations

from actorflow.job.job import BlobDesc, Job, OpConf, split_blob, unique_name
from actorflow.job.system_ops import is_system_op
from actorflow.ops import registry


class JobBuilder:
    """Builds ``job`` op by op (see the module docstring)."""

    def __init__(self, job_name: str):
        self.job = Job(job_name)
        self._names: set = set()
        self._ops: dict = {}
        self._readers: dict = {}     # blob -> names of ops that read it
        self._mutated_by: dict = {}  # blob -> last op that wrote it in place
        self._count = 0

    @classmethod
    def over(cls, job: Job) -> "JobBuilder":
        """A builder appending to existing ``job`` (its names, readers and writers indexed)."""
        b = cls(job.name)
        b.job = job
        b._count = len(job.ops)
        for o in job.ops:
            b._names.add(o.name)
            b._ops[o.name] = o
            for blob in o.inputs:
                b._readers.setdefault(blob, []).append(o.name)
            if not is_system_op(o.op_type):
                for i in registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs):
                    b._mutated_by[o.inputs[i]] = o.name
        return b

    def unique_name(self, base: str) -> str:
        """``base`` or ``base_k``: a name no op of the Job has yet (reserved from now on)."""
        return unique_name(base, self._names)

    def op_name(self, path: str, op_type: str) -> str:
        """A fresh op name ``<module path>-<op type>-<n>``."""
        n = self._count
        self._count += 1
        return self.unique_name(f"{path}-{op_type}-{n}" if path else f"{op_type}-{n}")

    def add_op(self, conf: OpConf) -> OpConf:
        """Append ``conf`` (its name must be unique); an op reading a blob that an earlier op
        wrote in place runs after that write."""
        for b in conf.inputs:
            self._readers.setdefault(b, []).append(conf.name)
            writer = self._mutated_by.get(b)
            if writer is not None and writer != conf.name and writer not in conf.ctrl_inputs:
                conf.ctrl_inputs.append(writer)
        self.job.ops.append(conf)
        self._ops[conf.name] = conf
        return conf

    def order_write(self, conf: OpConf, blob: str) -> None:
        """``conf`` writes ``blob`` in place: it runs after every earlier reader, and later
        readers run after it. Call before ``add_op(conf)``."""
        for r in self._readers.get(blob, ()):
            if r != conf.name and r not in conf.ctrl_inputs:
                conf.ctrl_inputs.append(r)
        self._mutated_by[blob] = conf.name

    def add_reader(self, blob: str, op_name: str) -> None:
        """Note that op ``op_name`` (already in the Job) now also reads ``blob``."""
        self._readers.setdefault(blob, []).append(op_name)

    def producer(self, blob: str) -> OpConf:
        """The op that produces ``blob``."""
        return self._ops[split_blob(blob)[0]]

    def desc(self, blob: str) -> BlobDesc:
        """The description of ``blob``."""
        name, idx = split_blob(blob)
        return self._ops[name].outputs[idx]
