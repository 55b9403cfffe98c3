"""Run under ``mpiexec -n N``: every flow.comm call against NumPy, on every rank. Prints
``OK rank R`` at the end; any failed check raises (and the watchdog's hook aborts all ranks)."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"


def rank_data(k, shape=(2, 3), dtype=np.float32):
    return (np.arange(int(np.prod(shape))).reshape(shape) + 100 * k).astype(dtype)


def check(got, want, what, rtol=1e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, err_msg=f"rank {r}: {what}")


total = sum(rank_data(k).astype(np.float64) for k in range(n))
for dtype in (flow.float32, flow.float64, flow.int64, flow.float16, flow.bfloat16):
    x = flow.tensor(rank_data(r)).to(dtype)
    flow.comm.all_reduce(x)
    half = dtype in (flow.float16, flow.bfloat16)  # inputs and result rounded to 8-11 bits
    check(x.float().numpy(), total, f"all_reduce {dtype}", rtol=1e-2 if half else 1e-6)
# a non-contiguous tensor is reduced in place through a copy
base = flow.tensor(rank_data(r, (3, 2)))
view = base.t()
flow.comm.all_reduce(view)
check(base.numpy(), sum(rank_data(k, (3, 2)) for k in range(n)), "all_reduce of a view")
flags = flow.tensor([r == 0, False, True])
flow.comm.all_reduce(flags)
assert flags.numpy().tolist() == [True, False, True], flags
# the sum of ones over many ranks in float16 is exact (accumulated in float32)
h = flow.ones(1000, dtype=flow.float16) * 0.1
flow.comm.all_reduce(h)
check(h.numpy(), np.full(1000, np.float16(np.float32(np.float16(0.1)) * n)), "half sum")

out = []
flow.comm.all_gather(out, flow.tensor(rank_data(r)))
assert len(out) == n
for k in range(n):
    check(out[k].numpy(), rank_data(k), "all_gather")
big = flow.zeros(2 * n, 3)
flow.comm.all_gather_into_tensor(big, flow.tensor(rank_data(r)))
check(big.numpy(), np.concatenate([rank_data(k) for k in range(n)]), "all_gather_into_tensor")

for src in range(n):
    b = flow.tensor(rank_data(r)).to(flow.bfloat16)
    flow.comm.broadcast(b, src)
    want = flow.tensor(rank_data(src)).to(flow.bfloat16).float().numpy()  # bits as sent
    np.testing.assert_array_equal(b.float().numpy(), want, err_msg=f"broadcast from {src}")

red = flow.tensor(rank_data(r))
flow.comm.reduce(red, n - 1)
check(red.numpy(), total if r == n - 1 else rank_data(r), "reduce")

o = flow.zeros(2, 3)
flow.comm.reduce_scatter(o, [flow.tensor(rank_data(r * n + k)) for k in range(n)])
check(o.numpy(), sum(rank_data(k * n + r).astype(np.float64) for k in range(n)),
      "reduce_scatter")
o2 = flow.zeros(1, 3)
flow.comm.reduce_scatter_tensor(o2, flow.tensor(rank_data(r, (n, 3))))
check(o2.numpy(), sum(rank_data(k, (n, 3)) for k in range(n))[r:r + 1], "reduce_scatter_tensor")

outs = [flow.zeros(2) for _ in range(n)]
flow.comm.all_to_all(outs, [flow.full((2,), float(r * 10 + k)) for k in range(n)])
for k in range(n):
    check(outs[k].numpy(), [k * 10 + r] * 2, "all_to_all")

recv_into = flow.zeros(2, 3)
flow.comm.scatter(recv_into, [flow.tensor(rank_data(k)) for k in range(n)] if r == 0 else None,
                  src=0)
check(recv_into.numpy(), rank_data(r), "scatter")
gl = [flow.zeros(2, 3) for _ in range(n)] if r == n - 1 else None
flow.comm.gather(flow.tensor(rank_data(r)), gl, dst=n - 1)
if r == n - 1:
    for k in range(n):
        check(gl[k].numpy(), rank_data(k), "gather")

# point to point, with and without the shape sent ahead, into a new tensor or into out=
if r == 0:
    flow.comm.send(flow.tensor(rank_data(7, (4,), np.int64)), 1)
    flow.comm.send(flow.tensor(rank_data(8)), 1, send_meta=False)
elif r == 1:
    got = flow.comm.recv(0)
    assert got.dtype is flow.int64 and tuple(got.shape) == (4,)
    check(got.numpy(), rank_data(7, (4,)), "recv with meta")
    into = flow.zeros(2, 3)
    flow.comm.recv(0, out=into)
    check(into.numpy(), rank_data(8), "recv into out")

# compute on the default worker overlaps with, and is ordered after, the transfer
y = flow.tensor(rank_data(r)) * 2
flow.comm.all_reduce(y)
z = y + 1  # waits for the all_reduce
check(z.numpy(), 2 * total + 1, "ops after a collective see its result")
# a large all-reduce (queued on the communication worker, reduced in the tensor's memory),
# then small ones issued behind it (queued in order), then small ones on an idle worker (run
# on this thread) and one right after the op that produces its input (it waits for it)
big = flow.comm.SMALL_ALL_REDUCE + 1
large = flow.ones(big) * float(r + 1)
flow.comm.all_reduce(large)
smalls = [flow.full((5,), float(r + k)) for k in range(3)]
for s in smalls:
    flow.comm.all_reduce(s)
check(large.numpy(), np.full(big, n * (n + 1) / 2), "large all_reduce")
for k, s in enumerate(smalls):
    check(s.numpy(), np.full(5, n * (n - 1) / 2 + n * k), f"small all_reduce {k}")
flow.synchronize()
for k in range(3):
    s = flow.full((3,), float(r * k))
    flow.comm.all_reduce(s)
    check(s.numpy(), np.full(3, k * n * (n - 1) / 2), f"idle small all_reduce {k}")
# 1 MiB of float32 on an idle worker (the largest size still run on this thread), in place
mid = flow.tensor(rank_data(r, (1 << 18,)))
flow.synchronize()
flow.comm.all_reduce(mid)
check(mid.numpy(), sum(rank_data(k, (1 << 18,)) for k in range(n)), "idle 1 MiB all_reduce",
      rtol=1e-5)
w = flow.tensor(rank_data(r, (300, 300))) @ flow.ones(300, 2)
flow.comm.all_reduce(w)
check(w.numpy(), sum(rank_data(k, (300, 300)).astype(np.float64) @ np.ones((300, 2))
                     for k in range(n)), "small all_reduce after its producer", rtol=1e-5)

# the direct path (a plain MPI call, no VM instruction) is taken only when nothing in the VM
# still reads or writes the tensor and the communication worker is idle; it adds no writer
idle = flow.tensor(rank_data(r, (4,)))
flow.synchronize()
before = idle._h.storage.writer
flow.comm.all_reduce(idle)
assert idle._h.storage.writer is before, "the direct path issued an instruction"
check((idle + 1).numpy(), sum(rank_data(k, (4,)) for k in range(n)) + 1,
      "an op after a direct all_reduce sees its result")
# a pending reader of the tensor (write-after-read): the reader sees the values before the sum
m = flow.tensor(rank_data(r, (200, 200)).astype(np.float64) / 1e4)
big = flow.ones(600, 600, dtype=flow.float64)
flow.synchronize()
slow = big @ big  # queued first on the same worker: the reader below is surely pending
prod = m @ m @ m  # reads m
flow.comm.all_reduce(m)
local = rank_data(r, (200, 200)).astype(np.float64) / 1e4
check(prod.numpy(), local @ local @ local, "a reader issued before the all_reduce", rtol=1e-9)
check(m.numpy(), sum(rank_data(k, (200, 200)).astype(np.float64) / 1e4 for k in range(n)),
      "all_reduce after a pending reader")
# a pending in-place writer (write-after-write): the sum is of the written values
acc = flow.zeros(200, 200, dtype=flow.float64)
flow.synchronize()
slow = big @ big
acc.add_(m @ m)  # pending behind slow
flow.comm.all_reduce(acc)
msum = m.numpy()
check(acc.numpy(), n * (msum @ msum), "all_reduce after a pending in-place writer", rtol=1e-9)
# a failing direct call is reported as a failure of comm.all_reduce (at once in blocking mode,
# else at the next sync point), and leaves the tensor usable
direct = flow.comm._direct
real = direct.comm


class _Broken:
    def Allreduce(self, *args, **kw):
        raise RuntimeError("injected MPI failure")


bad = flow.ones(3)
flow.synchronize()
direct.comm = _Broken()
try:
    flow.comm.all_reduce(bad)
    bad.numpy()
except flow.vm.KernelError as e:
    assert "comm.all_reduce" in str(e) and "injected MPI failure" in str(e), str(e)
else:
    raise AssertionError("the failed direct all_reduce was not reported")
finally:
    direct.comm = real
flow.comm.all_reduce(bad)
check(bad.numpy(), np.full(3, n), "all_reduce after a failed one")
flow.comm.barrier()
print(f"OK rank {r}", flush=True)
