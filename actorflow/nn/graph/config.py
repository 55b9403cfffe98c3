"""``GraphConfig``: the per-graph switches (``graph.config``) the passes read."""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.passes import PASSES

# passes a user may switch off with ``config.disable_pass(name)``; the order they run in
PASS_NAMES = tuple(name for name, _, _ in PASSES)


def _no_auto_parallel(name: str):
    raise NotImplementedError(f"GraphConfig.{name}: auto-parallel (the automatic SBP search) is "
                              f"not implemented in actorflow; set the sbp of parameters and "
                              f"inputs (to_global) instead")


class GraphConfig:
    """Configuration of one ``nn.Graph`` (set it in ``__init__``, before the first call)."""

    def __init__(self):
        self.training = False
        self.amp = False
        self.amp_dtype = dt.float16
        self.accumulation_steps = 1
        self.fuse_model_update_ops = True  # batched updates, as eager Optimizer.step() issues
        self.fuse_add_to_output = False
        self.outputs_buffer_size = 2
        self.cache_size = 10
        self.disabled_passes: set = set()
        self.zero_stage = 0  # 0: off; 1, 2, 3: ZeRO (nn/graph/zero_updates.py, nn/graph/zero.py)
        self.zero_shard_min_size = 1024
        self.zero_shard_restore_level = 1  # stage 3: how build() reads a split(0) parameter
        # enable_straighten_algorithm's choice: None leaves it to the compiler's default
        self.straighten_mode: str | None = None

    def enable_amp(self, mode: bool = True, *, dtype=dt.float16) -> None:
        """Run matmul-like ops in ``dtype`` (float16 or bfloat16) with casts inserted by the AMP
        pass; with float16 and an optimizer, losses are scaled by a GradScaler."""
        d = dt.as_dtype(dtype)
        if d not in (dt.float16, dt.bfloat16):
            raise ValueError(f"enable_amp: dtype must be float16 or bfloat16, got {d}")
        self.amp = bool(mode)
        self.amp_dtype = d

    def set_gradient_accumulation_steps(self, value: int) -> None:
        """Split each call's inputs into ``value`` micro-batches along dim 0, accumulate their
        gradients and update once per call."""
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"set_gradient_accumulation_steps: expected an int >= 1, "
                             f"got {value!r}")
        self.accumulation_steps = value

    def enable_zero(self, mode: bool = True, *, stage: int = 2, shard_min_size: int = 1024,
                    shard_restore_level: int = 1) -> None:
        """ZeRO for data-parallel (broadcast) parameters of a distributed graph: stage 1 keeps
        each rank's split(0) part of the optimizer state and updates only that shard, then
        all-gathers the parameter; stage 2 also reduce-scatters the gradient instead of
        all-reducing it; stage 3 also keeps the parameter itself split(0) between steps (it
        is re-laid out in place before the first trace: ``param.sbp`` shows split(0), while
        ``param.numpy()`` and ``state_dict()`` give the full values) and updates the shard
        with no gather after. Parameters whose shard would have fewer than ``shard_min_size``
        elements, and updates that read the whole parameter (LAMB), stay broadcast and update
        as without ZeRO. See ``actorflow/nn/graph/zero_updates.py``.

        ``shard_restore_level`` (OneFlow's) says how a stage-3 parameter's split(0) shard
        reaches the ops of ``build()`` that read it:

        * 0, no restore: they read the shard itself; each op's SBP signature choice decides
          (a Linear may keep its weight split and split its output's features instead, or
          gather the weight), and so does its backward: the shard's gradient arrives in
          whatever sbp that gave and is boxed to split(0) where the update reads it;
        * 1, soft restore (the default): the shard is all-gathered to broadcast where build()
          first reads it, with an identity backward (OneFlow's ``hierarchical_parallel_cast``
          with ``grad_mode="identity"``): the gradient is not boxed at the gather, it reaches
          the shard as the consumers' backward made it (a partial sum for a Linear of a split
          batch) and is boxed to split(0) where the update reads it (with gradient
          accumulation: once per call, after the micro-batches' partial sums accumulated);
        * 2, hard restore: the same gather, whose backward boxes the gradient back to split(0)
          there (a reduce-scatter per micro-batch).

        At stages 1 and 2 the parameter is broadcast (whole) between steps, so every consumer
        already reads it whole and the level changes nothing there."""
        if not mode:
            self.zero_stage = 0
            return
        if stage not in (1, 2, 3):
            raise ValueError(f"enable_zero: stage must be 1, 2 or 3, got {stage!r}")
        if not isinstance(shard_min_size, int) or shard_min_size < 1:
            raise ValueError(f"enable_zero: shard_min_size must be an int >= 1, "
                             f"got {shard_min_size!r}")
        if type(shard_restore_level) is not int or shard_restore_level not in (0, 1, 2):
            raise ValueError(f"enable_zero: shard_restore_level must be 0 (no restore), 1 "
                             f"(soft restore) or 2 (hard restore), got {shard_restore_level!r}")
        self.zero_stage = stage
        self.zero_shard_min_size = shard_min_size
        self.zero_shard_restore_level = shard_restore_level

    def allow_fuse_model_update_ops(self, mode: bool = True) -> None:
        """Fuse the optimizer's per-parameter update ops into multi-tensor updates (on by
        default, as eager ``Optimizer.step()`` batches them; ``mode=False`` or
        ``disable_pass("fuse_model_update")`` turns it off). Same bits either way."""
        self.fuse_model_update_ops = bool(mode)

    def allow_fuse_add_to_output(self, mode: bool = True) -> None:
        """Fold an add into the op producing one of its operands (the op writes x + y)."""
        self.fuse_add_to_output = bool(mode)

    # -- switches with nothing to act on here (recorded in ``cpu_noop_switches``) -----------
    def _record(self, name: str, value) -> None:
        self.__dict__.setdefault("cpu_noop_switches", {})[name] = value

    def allow_fuse_cast_scale(self, mode: bool = True) -> None:
        """OneFlow fuses a cast followed by a scale into one CUDA kernel. Accepted and recorded
        only: there is no separate cast-scale fusion here (the elementwise fusion pass,
        ``disable_pass("fuse_elementwise")``, decides what fuses on the CPU); it changes
        nothing."""
        self._record("allow_fuse_cast_scale", bool(mode))

    def enable_cudnn_conv_heuristic_search_algo(self, mode: bool = True) -> None:
        """Chooses how cuDNN picks convolution algorithms: there is no cuDNN on the CPU, so
        nothing to tune. Accepted and recorded only."""
        self._record("enable_cudnn_conv_heuristic_search_algo", bool(mode))

    def enable_straighten_algorithm(self, mode: str = "MemoryFirst") -> None:
        """Choose this graph's straightening (``compiler/straighten.py``: control edges that
        make backward leaves - weight- and bias-gradient ops - act early, so the memory plan
        reuses the bytes they read). OneFlow's modes:

        * ``"MemoryFirst"``: straighten (the compiler's default here, see
          ``ACTORFLOW_GRAPH_STRAIGHTEN``);
        * ``"Disable"`` and ``"SpeedFirst"``: no edges; tasks act in data-dependency order
          (the edges only ever delay a leaf, so "speed first" adds none);
        * ``"OverlapCpuGpu"`` and ``"DelayShortGpu"``: order CPU against GPU nodes; with no
          GPU nodes OneFlow falls back to ``"MemoryFirst"``, and so does this.
        """
        modes = ("Disable", "SpeedFirst", "MemoryFirst", "OverlapCpuGpu", "DelayShortGpu")
        if mode not in modes:
            raise ValueError(f"enable_straighten_algorithm: mode must be one of {modes}, "
                             f"got {mode!r}")
        self.straighten_mode = mode

    def enable_compress_memory(self, mode: bool = True) -> None:
        """OneFlow then searches harder for a smaller memory plan. Accepted and recorded only:
        the memory plan here always shares register blocks between registers whose lifetimes
        cannot overlap (best fit, ``compiler/memory.py``) and has no second algorithm."""
        self._record("enable_compress_memory", bool(mode))

    # -- auto-parallel: not implemented ----------------------------------------------------
    def enable_auto_parallel(self, mode: bool = True) -> None:
        """OneFlow's automatic SBP search. Not implemented: ``mode=True`` raises
        NotImplementedError (give parameters and inputs their sbp); False is accepted."""
        if mode:
            _no_auto_parallel("enable_auto_parallel")

    def enable_auto_parallel_ignore_user_sbp_config(self, mode: bool = True) -> None:
        """Auto-parallel setting: raises NotImplementedError (no auto-parallel)."""
        _no_auto_parallel("enable_auto_parallel_ignore_user_sbp_config")

    def set_auto_parallel_computation_cost_ratio(self, ratio: float) -> None:
        """Auto-parallel setting: raises NotImplementedError (no auto-parallel)."""
        _no_auto_parallel("set_auto_parallel_computation_cost_ratio")

    def set_auto_parallel_wait_time(self, cost: float) -> None:
        """Auto-parallel setting: raises NotImplementedError (no auto-parallel)."""
        _no_auto_parallel("set_auto_parallel_wait_time")

    def enable_auto_parallel_trunk_algo(self, mode: bool = True) -> None:
        """Auto-parallel setting: raises NotImplementedError (no auto-parallel)."""
        _no_auto_parallel("enable_auto_parallel_trunk_algo")

    def enable_auto_parallel_sbp_collector(self, mode: bool = True) -> None:
        """Auto-parallel setting: raises NotImplementedError (no auto-parallel)."""
        _no_auto_parallel("enable_auto_parallel_sbp_collector")

    def enable_auto_memory(self, mode="AdaptiveMemory") -> None:
        """Auto-parallel's memory-aware search: raises NotImplementedError (no auto-parallel)."""
        _no_auto_parallel("enable_auto_memory")

    def set_outputs_buffer_size(self, value: int = 2) -> None:
        """How many calls' outputs may be in flight (the output registers of the runtime)."""
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"set_outputs_buffer_size: expected an int >= 1, got {value!r}")
        self.outputs_buffer_size = value

    def set_cache_size(self, value: int) -> None:
        """How many compiled input signatures a graph keeps (least recently used goes)."""
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"set_cache_size: expected an int >= 1, got {value!r}")
        self.cache_size = value

    def disable_pass(self, name: str) -> None:
        """Switch off an optional pass (see ``PASS_NAMES``)."""
        if name not in PASS_NAMES:
            raise ValueError(f"disable_pass: unknown pass {name!r}; passes: {PASS_NAMES}")
        self.disabled_passes.add(name)

    def enable_pass(self, name: str) -> None:
        if name not in PASS_NAMES:
            raise ValueError(f"enable_pass: unknown pass {name!r}; passes: {PASS_NAMES}")
        self.disabled_passes.discard(name)

    def pass_enabled(self, name: str) -> bool:
        return name not in self.disabled_passes

    def __repr__(self) -> str:
        items = {"training": self.training, "amp": self.amp and self.amp_dtype.name,
                 "gradient_accumulation_steps": self.accumulation_steps,
                 "zero_stage": self.zero_stage,
                 **({"zero_shard_restore_level": self.zero_shard_restore_level}
                    if self.zero_stage == 3 else {}),
                 "fuse_model_update_ops": self.fuse_model_update_ops,
                 "fuse_add_to_output": self.fuse_add_to_output,
                 "outputs_buffer_size": self.outputs_buffer_size,
                 "cache_size": self.cache_size,
                 "disabled_passes": sorted(self.disabled_passes)}
        return "GraphConfig(" + ", ".join(f"{k}={v}" for k, v in items.items()) + ")"
