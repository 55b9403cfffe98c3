"""The actor runtime: threads, the message bus, actors, registers and buffers (see
``runtime.py``), and ``RuntimeExecutor``, the graph executor built on them."""
from actorflow.runtime.actors import ActorError
from actorflow.runtime.buffer import Buffer, BufferStatus
from actorflow.runtime.collective import CollectiveActor
from actorflow.runtime.executor import RuntimeExecutor
from actorflow.runtime.transfer import RecvActor, SendActor
from actorflow.runtime.runtime import Runtime, RuntimeAborted

__all__ = ["Runtime", "RuntimeExecutor", "RuntimeAborted", "Buffer", "BufferStatus",
           "ActorError", "CollectiveActor", "SendActor", "RecvActor"]
