"""Build facts, as ``oneflow.sysconfig`` reports them: actorflow is a CPU-only NumPy build."""
from __future__ import annotations


def with_cuda() -> bool:
    return False


def get_cuda_version() -> int:
    """0: actorflow is built without CUDA."""
    return 0


def with_mlu() -> bool:
    return False


def with_rdma() -> bool:
    return False


def has_rpc_backend_grpc() -> bool:
    return False
