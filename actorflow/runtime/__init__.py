"""The actor runtime: threads, the message bus, actors, registers and buffers (see
``runtime.py``)."""
from actorflow.runtime.actors import ActorError
from actorflow.runtime.buffer import Buffer, BufferStatus
from actorflow.runtime.runtime import Future, Runtime, RuntimeAborted

__all__ = ["Runtime", "Future", "RuntimeAborted", "Buffer", "BufferStatus", "ActorError"]
