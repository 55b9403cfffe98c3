"""The logical IR (``Job``, ``OpConf``, ``BlobDesc``), the tracing builder, and the reference
executor that runs a Job op by op."""
from actorflow.job.job import SYSTEM_OPS, BlobDesc, Job, OpConf, split_blob
from actorflow.job.verify import JobError

__all__ = ["Job", "OpConf", "BlobDesc", "JobError", "SYSTEM_OPS", "split_blob"]
