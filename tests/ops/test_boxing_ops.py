"""Boxing ops' own checks, in one process (the collectives themselves run in
tests/distributed)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import actorflow as flow
from actorflow.dispatch import apply
from actorflow.ops import OpError, registry


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name,attrs,shape", [
    ("boxing_s_to_b", {"shape": (5, 3), "ranks": (0, 1), "index": 0, "in_dim": 0}, (2, 3)),
    ("boxing_s_to_s", {"shape": (5, 4), "ranks": (0, 1), "index": 1, "in_dim": 0,
                       "out_dim": 1}, (3, 4)),
    ("boxing_p_to_b", {"shape": (5, 3), "ranks": (0, 1), "index": 0}, (3, 3)),
    ("boxing_move", {"shape": (4, 2), "ranks": (0, 1), "index": 0}, (4, 3)),
])
def test_boxing_checks_the_shard_before_queueing(name, attrs, shape):
    # a shard that is not the one the attrs give raises at the call (inference), on every rank
    # before any collective is posted, never later in the kernel (its peers would wait)
    x = flow.tensor(np.zeros(shape, np.float32))
    with pytest.raises(OpError, match=rf"{name}: .*{re.escape(str(shape))}"):
        apply(registry.get(name), [x], attrs)
