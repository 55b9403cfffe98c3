"""The functional API: one Python function per op family member, plus Tensor methods.

Every function here ends in ``dispatch.apply`` on a registered op, so the same code runs
eagerly, inside a Graph trace, and inside gradient rules.
"""
from actorflow.functional._base import as_tensor_like, call  # noqa: F401
from actorflow.functional.creation import *  # noqa: F401,F403
from actorflow.functional import tensor_new  # noqa: F401,E402  (Tensor.new, new_*)
from actorflow.functional.tensor_new import new_zeros  # noqa: F401  (flow.new_zeros)
from actorflow.functional.elementwise import *  # noqa: F401,F403
from actorflow.functional.activation import *  # noqa: F401,F403
from actorflow.functional.activation_grad import *  # noqa: F401,F403
from actorflow.functional.reduce import *  # noqa: F401,F403
from actorflow.functional.shape import *  # noqa: F401,F403
from actorflow.functional.reduce_extrema import *  # noqa: F401,F403
from actorflow.functional.rearrange import *  # noqa: F401,F403
from actorflow.functional.index import *  # noqa: F401,F403
from actorflow.functional.linalg import *  # noqa: F401,F403
from actorflow.functional.nn_ops import *  # noqa: F401,F403
from actorflow.functional.conv import *  # noqa: F401,F403
from actorflow.functional.pool import *  # noqa: F401,F403
from actorflow.functional.normalization import *  # noqa: F401,F403
from actorflow.functional.loss import *  # noqa: F401,F403
from actorflow.functional.graph_ops import *  # noqa: F401,F403
from actorflow.functional.special import *  # noqa: F401,F403
from actorflow.functional.complex_views import *  # noqa: F401,F403
from actorflow.functional.fft import *  # noqa: F401,F403
from actorflow.functional.sort import *  # noqa: F401,F403
from actorflow.functional.distance import *  # noqa: F401,F403
from actorflow.functional.index_nd import *  # noqa: F401,F403
from actorflow.functional.views import *  # noqa: F401,F403
from actorflow.functional.tensor_api import *  # noqa: F401,F403
from actorflow.functional import tensor_memory  # noqa: F401,E402  (pin_memory, offload, ...)
from actorflow.functional.fold import *  # noqa: F401,F403
from actorflow.functional.layers import *  # noqa: F401,F403
from actorflow.functional.pool_adaptive import *  # noqa: F401,F403
from actorflow.functional.linalg_ops import *  # noqa: F401,F403
from actorflow.functional.linalg_decomp import *  # noqa: F401,F403
from actorflow.functional.scan import *  # noqa: F401,F403
from actorflow.functional.stft import *  # noqa: F401,F403
from actorflow.functional.grid_sample import *  # noqa: F401,F403
from actorflow.functional.global_tensor import *  # noqa: F401,F403
from actorflow.functional.quantize import *  # noqa: F401,F403
from actorflow.functional.fused_layers import *  # noqa: F401,F403
from actorflow.functional.decode import *  # noqa: F401,F403
from actorflow.functional.margin_loss import *  # noqa: F401,F403
from actorflow.functional.ctc import *  # noqa: F401,F403
from actorflow.functional.random_fill import *  # noqa: F401,F403
from actorflow.functional.interpolate import *  # noqa: F401,F403
from actorflow.functional.einsum import *  # noqa: F401,F403
from actorflow.functional.pointwise_extra import *  # noqa: F401,F403
from actorflow.functional.sampling import *  # noqa: F401,F403
from actorflow.functional.index_extra import *  # noqa: F401,F403
from actorflow.functional.deform_conv import *  # noqa: F401,F403
from actorflow.functional.one_embedding_ops import *  # noqa: F401,F403
