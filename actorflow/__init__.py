"""actorflow: a OneFlow-shaped deep-learning framework on NumPy kernels.

``import actorflow as flow`` gives tensors with autograd, ``nn``, ``optim``, ``utils.data``,
checkpoints (``save``/``load``) and, built on them, ``nn.Graph`` and the actor runtime.
"""
import builtins as _builtins

from actorflow.framework import dtype as _dtype_mod
from actorflow.framework.dtype import (  # noqa: F401
    bfloat16, dtype, float16, float32, float64, get_default_dtype, int8, int16, int32, int64,
    promote_types, set_default_dtype, uint8,
)
from actorflow.framework.dtype import complex64, complex128  # noqa: F401,E402
from actorflow.framework.device import device  # noqa: F401
from actorflow.framework import sbp  # noqa: F401
from actorflow.framework.placement import placement  # noqa: F401
from actorflow.framework.type_info import finfo, iinfo  # noqa: F401
from actorflow.tensor import Size, Tensor  # noqa: F401
from actorflow.tensor_types import *  # noqa: F401,F403
from actorflow import sysconfig  # noqa: F401
from actorflow import ops as _ops  # noqa: F401  (registers every op)
from actorflow.functional import *  # noqa: F401,F403
from actorflow.functional import __dict__ as _fdict
import actorflow.fft as fft  # noqa: F401,E402  (over the functional.fft module name)
from actorflow import autograd  # noqa: F401
from actorflow import vm  # noqa: F401
from actorflow import asyncs  # noqa: F401
from actorflow.vm import synchronize  # noqa: F401
from actorflow.vm.threads import get_num_threads, set_num_threads  # noqa: F401
from actorflow.tensor_str import set_printoptions  # noqa: F401
from actorflow import nn  # noqa: F401
from actorflow.nn.data.tensor_buffer import (  # noqa: F401,E402  (OneFlow's tensor buffers)
    gen_tensor_buffer, tensor_buffer_to_list_of_tensors, tensor_buffer_to_tensor,
    tensor_to_tensor_buffer,
)
from actorflow import comm, distributed, env  # noqa: F401
from actorflow import oneflow_compat as _oneflow_compat  # noqa: F401  (oneflow.framework.X)
from actorflow.autograd import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)
from actorflow.random import (  # noqa: F401
    Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state,
)

bool = _dtype_mod.bool_  # noqa: A001  (flow.bool, as in PyTorch and OneFlow)
half = float16
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
char = int8
cfloat = complex64
cdouble = complex128
short = int16
is_floating_point = _fdict.get("is_floating_point")

__version__ = "0.1.0"


def is_tensor(x) -> _builtins.bool:
    """True for actorflow tensors."""
    return isinstance(x, Tensor)


def numel(x: Tensor) -> _builtins.int:
    return x.numel()


def manual_seed_all(seed_value) -> None:
    manual_seed(seed_value)
from actorflow import utils  # noqa: F401,E402
from actorflow import distributions  # noqa: F401,E402
from actorflow import one_embedding  # noqa: F401,E402  (flow.one_embedding on the CPU)
from actorflow.serialization import load, save  # noqa: F401,E402
from actorflow import optim  # noqa: F401,E402
from actorflow import amp  # noqa: F401,E402  (GradScaler, StaticGradScaler, autocast)
from actorflow.autocast_mode import *  # noqa: F401,F403,E402  (flow.autocast, its state)
from actorflow import profiler  # noqa: F401,E402
from actorflow import functional as _C  # noqa: F401,E402  (OneFlow's functional namespace)
import actorflow.linalg as linalg  # noqa: F401,E402  (over the functional.linalg module name)
import actorflow.special as special  # noqa: F401,E402  (over the functional.special module name)
from actorflow import backends  # noqa: F401,E402  (CUDA/cuDNN flags, unread on the CPU)
from actorflow import boxing  # noqa: F401,E402  (NCCL switches, checked, unread: MPI here)
from actorflow import cuda  # noqa: F401,E402  (is_available() is False: CPU only)
from actorflow import jit  # noqa: F401,E402  (TorchScript decorators, ignored)

from actorflow.process import world as _world  # noqa: E402
_world.world()  # join the other ranks now (and export RANK...) when launched by MPI
