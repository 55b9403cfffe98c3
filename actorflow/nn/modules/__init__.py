"""The layers of ``actorflow.nn``, one family per module."""
from actorflow.nn.modules.activation import (  # noqa: F401
    ELU, GELU, Dropout, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh,
)
from actorflow.nn.modules.activation_pointwise import *  # noqa: F401,F403
from actorflow.nn.modules.container import (  # noqa: F401
    ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential,
)
from actorflow.nn.modules.conv import Conv1d, Conv2d, Conv3d  # noqa: F401
from actorflow.nn.modules.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from actorflow.nn.modules.fold import Fold, Unfold  # noqa: F401
from actorflow.nn.modules.linear import Flatten, Identity, Linear, Unflatten  # noqa: F401
from actorflow.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from actorflow.nn.modules.normalization import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm,
)
from actorflow.nn.modules.pooling import (  # noqa: F401
    AdaptiveAvgPool2d, AvgPool2d, MaxPool1d, MaxPool2d,
)
from actorflow.nn.modules.sparse import Embedding  # noqa: F401
from actorflow.nn.modules.transformer import (  # noqa: F401
    MultiheadAttention, TransformerEncoder, TransformerEncoderLayer,
)
