"""The compiler: Job -> Plan (tasks, regst descs, task ids, memory plan)."""
from actorflow.compiler.compile import CompileOptions, compile_job
from actorflow.compiler.plan import Plan, RegstDesc, TaskProto
from actorflow.compiler.task_id import TaskId, decode_task_id, encode_task_id, thread_id_of

__all__ = ["compile_job", "CompileOptions", "Plan", "RegstDesc", "TaskProto", "TaskId",
           "encode_task_id", "decode_task_id", "thread_id_of"]
