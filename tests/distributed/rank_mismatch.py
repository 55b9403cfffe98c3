"""Rank script for test_rank_mismatch.py: collectives and transfers whose ranks disagree.

argv[1] names the case; every rank prints "CAUGHT rank r: <message>" for the error it got, or
"OK rank r" when the call was fine, then a last all_reduce proves the ranks still work."""
import sys

import actorflow as flow

case = sys.argv[1]
rank, n = flow.env.get_rank(), flow.env.get_world_size()


def run():
    if case == "all_reduce_shape":
        x = flow.ones(3 if rank == 0 else 4)
        flow.comm.all_reduce(x)
        return x
    if case == "all_reduce_dtype":
        x = flow.ones(4, dtype=flow.float32 if rank != 1 else flow.float64)
        flow.comm.all_reduce(x)
        return x
    if case == "all_reduce_large_shape":  # past the direct path: queued on the worker
        x = flow.ones((1 << 20) + (rank == 1))
        flow.comm.all_reduce(x)
        return x
    if case == "broadcast_src":
        x = flow.full((2,), float(rank))
        flow.comm.broadcast(x, 0 if rank != n - 1 else 1)
        return x
    if case == "all_gather_shape":
        out = []
        flow.comm.all_gather(out, flow.ones(2, 1 + (rank == 0)))
        return out[0]
    if case == "reduce_dst":
        x = flow.ones(2)
        flow.comm.reduce(x, rank % 2)
        return x
    if case == "same":  # agreeing ranks: no error, the right sums
        x = flow.ones(3) * (rank + 1)
        flow.comm.all_reduce(x)
        assert x.numpy().tolist() == [n * (n + 1) / 2] * 3, x.numpy()
        y = flow.full((2,), float(rank))
        flow.comm.broadcast(y, n - 1)
        assert y.numpy().tolist() == [n - 1.0] * 2
        return x
    # point to point: rank 0 sends, rank 1 receives
    if rank == 0:
        if case == "recv_larger":
            flow.comm.send(flow.arange(3, dtype=flow.float32), 1, send_meta=False)
        elif case in ("recv_out_meta", "recv_right"):
            flow.comm.send(flow.arange(4, dtype=flow.float32), 1)
        elif case == "recv_dtype":
            flow.comm.send(flow.arange(4, dtype=flow.int64), 1, send_meta=False)
        flow.comm.send(flow.full((2,), 7.0), 1)  # the next transfer still pairs right
        return None
    if rank == 1:
        if case == "recv_larger":
            r = flow.comm.recv(0, shape=(5,), dtype=flow.float32)
        elif case == "recv_out_meta":
            r = flow.comm.recv(0, out=flow.zeros(6))
        elif case == "recv_dtype":
            r = flow.comm.recv(0, shape=(4,), dtype=flow.float32)
        else:
            r = flow.comm.recv(0, out=flow.zeros(4))
            assert r.numpy().tolist() == [0.0, 1.0, 2.0, 3.0], r.numpy()
        try:
            r.numpy()
        finally:
            nxt = flow.comm.recv(0)
            assert nxt.numpy().tolist() == [7.0, 7.0], nxt.numpy()
        return r
    return None


try:
    t = run()
    if t is not None:
        t.numpy()
    print(f"OK rank {rank}", flush=True)
except Exception as e:
    print(f"CAUGHT rank {rank}: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
z = flow.ones(1)
flow.comm.all_reduce(z)
assert z.numpy().tolist() == [float(n)]
print(f"ALIVE rank {rank}", flush=True)
