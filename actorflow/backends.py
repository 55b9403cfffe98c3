"""``actorflow.backends``: the CUDA / cuDNN switches of OneFlow's (and PyTorch's) API.

actorflow runs its kernels on the CPU with NumPy, so these are plain settable flags that no
kernel reads; they exist so code that sets them keeps working. Matmuls always run in the
tensors' own precision (no TF32).
"""
from types import SimpleNamespace

cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=True))
cudnn = SimpleNamespace(enabled=True, benchmark=False, deterministic=False, allow_tf32=True)

__all__ = ["cuda", "cudnn"]
