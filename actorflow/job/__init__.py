"""The logical IR (``Job``, ``OpConf``, ``BlobDesc``), its system ops, the builder that appends
ops, the schedule of a call (stages, seed order) and the executor protocol with the reference
executor that runs a Job op by op."""
from actorflow.job.job import BlobDesc, Job, OpConf, split_blob
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.job.verify import JobError

__all__ = ["Job", "OpConf", "BlobDesc", "JobError", "SYSTEM_OPS", "split_blob"]
