"""Datasets, samplers and the DataLoader (``actorflow.utils.data``)."""
from actorflow.utils.data._workers import WorkerInfo, get_worker_info  # noqa: F401
from actorflow.utils.data.collate import default_collate, default_convert  # noqa: F401
from actorflow.utils.data.dataloader import DataLoader  # noqa: F401
from actorflow.utils.data.dataset import (  # noqa: F401
    ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split,
)
from actorflow.utils.data.distributed import DistributedSampler  # noqa: F401
from actorflow.utils.data.sampler import (  # noqa: F401
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
)

__all__ = ["DataLoader", "Dataset", "IterableDataset", "TensorDataset", "Subset",
           "ConcatDataset", "ChainDataset", "random_split", "Sampler", "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "BatchSampler", "DistributedSampler",
           "default_collate", "default_convert", "get_worker_info", "WorkerInfo"]
