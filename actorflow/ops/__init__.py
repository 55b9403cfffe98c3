"""Registered ops: each family module registers its ops on import (see ``registry``)."""
from actorflow.ops.registry import Meta, Op, OpError, all_ops, fail, get, register  # noqa: F401
from actorflow.ops import (  # noqa: F401  (importing registers the ops)
    elementwise, binary_math, compare, activation, creation, shape, reduce, reduce_extrema,
    rearrange, index, gather, linalg, nn_ops, attention, conv, pool, normalization, loss,
    optim_ops, views, fold,
)
from actorflow.ops import pool_adaptive, linalg_dense  # noqa: F401,E402  (nn layers, linalg)
from actorflow.ops import linalg_decomp  # noqa: F401,E402  (solve, cholesky, qr, slogdet)
from actorflow.ops import linalg_spectral  # noqa: F401,E402  (eigh, svd)
from actorflow.ops import scan, index_fill, histogram  # noqa: F401,E402  (cummax, histc...)
from actorflow.ops import complex_ops  # noqa: F401,E402  (abs and angle of complex tensors)
from actorflow.ops import complex_views  # noqa: F401,E402  (view_as_real, view_as_complex)
from actorflow.ops import fused  # noqa: F401,E402  (fused ops of the fusion passes)
from actorflow.ops import graph_ops  # noqa: F401,E402  (depend)
from actorflow.ops import special  # noqa: F401,E402  (erfinv, lgamma, digamma, logaddexp...)
from actorflow.ops import fft  # noqa: F401,E402  (discrete Fourier transforms)
from actorflow.ops import sort  # noqa: F401,E402  (sorting and selection)
from actorflow.ops import boxing  # noqa: F401,E402  (global tensors: SBP changes)
from actorflow.ops import transfer  # noqa: F401,E402  (send/recv between ranks in a graph)
from actorflow.ops import quantization  # noqa: F401,E402  (observers, (fake) quantization)
from actorflow.ops import decode  # noqa: F401,E402  (nms, ctc_greedy_decoder)
from actorflow.ops import ctc  # noqa: F401,E402  (ctc_loss)
from actorflow.ops import upsample  # noqa: F401,E402  (interpolate: nearest, linear, cubic)
from actorflow.ops import pointwise_extra  # noqa: F401,E402  (lerp, frac)
from actorflow.ops import multinomial, index_extra  # noqa: F401,E402  (multinomial, scatter_nd)
from actorflow.ops import one_embedding  # noqa: F401,E402  (flow.one_embedding's lookup, update)
from actorflow.ops import optim_ftrl  # noqa: F401,E402  (ftrl_update)
