"""Run under ``mpiexec -n 2``: the signature an eager global op call picks - as OneFlow, the
one taking the most inputs as they are first, then the one moving the fewest bytes (a
broadcast input re-laid out locally moves none), then the op rule's own order. Each case
checks the output SBP, the values against NumPy, and which boxing ops moved data (none where
OneFlow moves none; ``boxing_b_to_s`` / ``boxing_b_to_p`` are local). Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
S0, S1, S2, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2), flow.sbp.broadcast
rng = np.random.default_rng(0)
A3 = rng.random((4, 6, 8))
M = rng.random((6, 8))
N = rng.random((8, 6))
IDX = np.array([[1, 2], [3, 0], [5, 4]])


LOCAL = {"boxing_b_to_s", "boxing_b_to_p"}  # re-layouts of a broadcast tensor move nothing


def g(a, s):
    return flow.tensor(a, placement=PL, sbp=s)


def ln(x):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)


CASES = [  # (name, call on prepared inputs, inputs (array, sbp), NumPy, output sbp, boxing ops)
    ("reshape of S(0) keeps S(0)", lambda x: x.reshape(4, 48), [(A3, S0)],
     lambda x: x.reshape(4, 48), S0, set()),
    ("batched S(0) @ B (2-d b) stays S(0)", flow.matmul, [(A3, S0), (N, B)],
     lambda a, b: a @ b, S0, set()),
    ("batched S(0) @ B (3-d b) stays S(0)", flow.matmul,
     [(A3, S0), (A3.transpose(0, 2, 1).copy(), B)], lambda a, b: a @ b, S0, set()),
    ("B @ S(0): a re-laid out locally, partial sums", flow.matmul, [(M, B), (N, S0)],
     lambda a, b: a @ b, flow.sbp.partial_sum, set()),
    ("S(1) @ B: b re-laid out locally, partial sums", flow.matmul, [(M, S1), (N, B)],
     lambda a, b: a @ b, flow.sbp.partial_sum, set()),
    ("S(1) @ S(0): partial sum", flow.matmul, [(M, S1), (N, S0)],
     lambda a, b: a @ b, flow.sbp.partial_sum, set()),
    ("layer_norm on S(1) keeps S(1)", lambda x: flow.nn.functional.layer_norm(x, (8,)),
     [(A3, S1)], ln, S1, set()),
    ("embedding with an S(1) weight gathers it", flow.nn.functional.embedding,
     [(IDX, B), (M, S1)], lambda i, w: w[i], B, {"boxing_s_to_b"}),
    ("embedding with split indices", flow.nn.functional.embedding,
     [(IDX, S0), (M, B)], lambda i, w: w[i], S0, set()),
    ("B + S(0) keeps S(0)", lambda a, b: a + b, [(A3, B), (A3, S0)],
     lambda a, b: a + b, S0, set()),
    ("S(1) + B keeps S(1)", lambda a, b: a + b, [(A3, S1), (A3, B)],
     lambda a, b: a + b, S1, set()),
    ("S(2) + S(2) stays S(2)", lambda a, b: a + b, [(A3, S2), (A3, S2)],
     lambda a, b: a + b, S2, set()),
    ("amax over a split axis: partial maxima", lambda x: x.amax(dim=0), [(A3, S0)],
     lambda x: x.max(axis=0), flow.sbp.partial_max, set()),
    ("amax over another axis keeps the split", lambda x: x.amax(dim=1), [(A3, S0)],
     lambda x: x.max(axis=1), S0, set()),
]

for name, fn, ins, ref, want_sbp, want_moves in CASES:
    xs = [g(a, s) for a, s in ins]
    with flow.profiler.profile() as prof:
        y = fn(*xs)
        flow.synchronize()
    moved = {e["name"] for e in prof.instructions() if e["name"].startswith("boxing")
             and e["name"] not in LOCAL}
    assert y.sbp == (want_sbp,), (name, y.sbp)
    assert moved == want_moves, (name, moved)
    np.testing.assert_allclose(y.numpy(), ref(*[a for a, _ in ins]), rtol=1e-6, atol=1e-6,
                               err_msg=name)
print(f"OK rank {r}", flush=True)
