"""When each op of a Job runs within one graph call, for every executor alike.

* **Stages** (gradient accumulation, ``job.train["accumulation_steps"] = n``): ``pre`` ops run
  once before the micro-batches, ``micro`` ops ``n`` times, ``post`` ops once after. An op's
  ``stage`` tag decides; an untagged op (one a later pass added) gets the stage its kind and
  inputs imply: a system op's fixed stage (``system_ops.py``), ``post`` for optimizer ops and
  for ops reading an accumulated or a ``post`` blob, ``micro`` otherwise.
* **Random seeds.** Random ops whose ``seed`` attr is None draw a seed from the global
  generator on every call, on the caller's thread when the call is made, in the order eager
  code would: the ``pre`` ops in Job order, then per micro-batch the ``micro`` ops in Job
  order, then the ``post`` ops. An op tagged ``seed_of`` (an activation-checkpointing
  recomputation) reuses the seed of the op it recomputes, which must be in the same stage.
"""
from __future__ import annotations

from actorflow.job.job import Job, split_blob
from actorflow.job.system_ops import system_op
from actorflow.job.verify import JobError
from actorflow.ops import registry
from actorflow.random import default_generator

STAGES = ("pre", "micro", "post")


def accumulation_steps(job: Job) -> int:
    """How many micro-batches one call of ``job`` runs."""
    return int(job.train.get("accumulation_steps", 1))


def stage_of(job: Job) -> dict:
    """op name -> ``pre`` / ``micro`` / ``post`` (see the module docstring)."""
    stages: dict = {}
    accumulated = set()
    for conf in job.ops:
        row = system_op(conf.op_type)
        if row is not None and row.accumulates:
            accumulated.add(conf.name)
        st = conf.tags.get("stage")
        if st is None:
            if row is not None and row.stage is not None:
                st = row.stage
            elif conf.tags.get("phase") == "optimizer":
                st = "post"
            else:
                st = "micro"
                for b in conf.inputs:
                    src = split_blob(b)[0]
                    if stages.get(src) == "post" or src in accumulated:
                        st = "post"
                        break
        elif st not in STAGES:
            raise JobError(f"op {conf.name}: unknown stage {st!r} (pre, micro or post)")
        stages[conf.name] = st
    return stages


def seed_draw_order(job: Job) -> dict:
    """stage -> names of the random ops that draw a seed each call, in draw order; ops tagged
    ``seed_of`` are checked (their source draws a seed in the same stage) and left out."""
    stages = stage_of(job) if accumulation_steps(job) > 1 else {}
    order: dict = {st: [] for st in STAGES}
    clones = []
    for conf in job.ops:
        if system_op(conf.op_type) is not None:
            continue
        if not registry.get(conf.op_type).random or conf.attrs.get("seed") is not None:
            continue
        stage = stages.get(conf.name, "micro")
        src = conf.tags.get("seed_of")
        if src is None:
            order[stage].append(conf.name)
        else:
            clones.append((conf, src, stage))
    for conf, src, stage in clones:
        if src not in order[stage]:
            raise JobError(f"{conf.op_type} (op {conf.name}): tagged seed_of {src!r}, which is "
                           f"not a random op of the same stage drawing its own seed")
    return order


def draw_seeds(job: Job, order: dict | None = None) -> dict:
    """One call's seeds, drawn now: op name -> one seed per micro-batch for ``micro`` ops, one
    seed for ``pre`` and ``post`` ops. ``order``: ``seed_draw_order(job)``, if already made."""
    n = accumulation_steps(job)
    order = order if order is not None else seed_draw_order(job)
    seeds: dict = {}
    for name in order["pre"]:
        seeds[name] = [default_generator.next_seed()]
    for _ in range(n):
        for name in order["micro"]:
            seeds.setdefault(name, []).append(default_generator.next_seed())
    for name in order["post"]:
        seeds[name] = [default_generator.next_seed()]
    return seeds
