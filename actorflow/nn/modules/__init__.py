"""The layers of ``actorflow.nn``, one family per module."""
from actorflow.nn.modules.activation import (  # noqa: F401
    ELU, GELU, Dropout, LeakyReLU, LogSoftmax, ReLU, RReLU, Sigmoid, SiLU, Softmax, Softplus,
    Tanh,
)
from actorflow.nn.modules.activation import (  # noqa: F401
    CELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, Mish, PReLU,
    QuickGELU, ReLU6, Softmin, Softshrink, Softsign, SquareReLU, Tanhshrink, Threshold,
)
from actorflow.nn.modules.container import (  # noqa: F401
    ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential,
)
from actorflow.nn.modules.conv import (  # noqa: F401
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
)
from actorflow.nn.modules.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from actorflow.nn.modules.fold import Fold, Unfold  # noqa: F401
from actorflow.nn.modules.linear import Flatten, Identity, Linear, Unflatten  # noqa: F401
from actorflow.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MarginRankingLoss,
    MSELoss, NLLLoss, SmoothL1Loss, TripletMarginLoss,
)
from actorflow.nn.modules.normalization import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
    InstanceNorm3d, LayerNorm, RMSNorm,
)
from actorflow.nn.modules.padding import *  # noqa: F401,F403
from actorflow.nn.modules.shuffle_dropout import (  # noqa: F401
    Dropout1d, Dropout2d, Dropout3d, PixelShuffle, PixelUnshuffle,
)
from actorflow.nn.modules.pooling import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
    AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d,
    MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
)
from actorflow.nn.modules.sparse import Embedding  # noqa: F401
from actorflow.nn.modules.transformer import (  # noqa: F401
    MultiheadAttention, TransformerEncoder, TransformerEncoderLayer,
)
from actorflow.nn.modules.quantization import *  # noqa: F401,F403,E402
from actorflow.nn.modules.qat import *  # noqa: F401,F403,E402
from actorflow.nn.modules.fused_norm import *  # noqa: F401,F403,E402
from actorflow.nn.modules.sync_batchnorm import *  # noqa: F401,F403,E402
from actorflow.nn.modules.coin_flip import *  # noqa: F401,F403,E402
from actorflow.nn.modules.margin_loss import *  # noqa: F401,F403,E402
from actorflow.nn.modules.ctc import *  # noqa: F401,F403,E402
from actorflow.nn.modules.rnn import *  # noqa: F401,F403,E402
from actorflow.nn.modules.upsampling import *  # noqa: F401,F403,E402
