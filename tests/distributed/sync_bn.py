"""Run under ``mpiexec -n 2``: SyncBatchNorm on each rank's shard of a batch (shards of unequal
size) gives the outputs, input gradients, summed parameter gradients and running statistics of
PyTorch's one-process BatchNorm over the whole batch. Prints ``OK rank R``."""
import numpy as np
import torch

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n == 2, "run me under mpiexec -n 2"
rng = np.random.default_rng(3)
C = 3
for shape, sizes in (((7, C, 4, 5), (4, 3)), ((5, C), (2, 3)), ((6, C, 2), (5, 1))):
    X = rng.standard_normal(shape) * 2 + 1
    G = rng.standard_normal(shape)
    W, Bv = rng.standard_normal(C), rng.standard_normal(C)
    lo = sum(sizes[:r])
    hi = lo + sizes[r]

    ref = torch.nn.BatchNorm2d(C, momentum=0.3).double()
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(W))
        ref.bias.copy_(torch.from_numpy(Bv))
    tx = torch.from_numpy(X).requires_grad_()
    # BatchNorm2d checks for 4D; the functional form takes any (N, C, *)
    ty = torch.nn.functional.batch_norm(tx, ref.running_mean, ref.running_var, ref.weight,
                                        ref.bias, True, 0.3, 1e-5)
    (ty * torch.from_numpy(G)).sum().backward()

    bn = flow.nn.SyncBatchNorm(C, momentum=0.3).to(flow.float64)
    with flow.no_grad():
        bn.weight.copy_(flow.tensor(W))
        bn.bias.copy_(flow.tensor(Bv))
    x = flow.tensor(X[lo:hi], requires_grad=True)
    y = bn(x)
    (y * flow.tensor(G[lo:hi])).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy()[lo:hi], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy()[lo:hi], rtol=1e-9, atol=1e-10)
    for p, want in ((bn.weight, ref.weight), (bn.bias, ref.bias)):
        g = p.grad.clone()
        flow.comm.all_reduce(g)  # what DDP does (it then divides by the world size)
        np.testing.assert_allclose(g.numpy(), want.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(bn.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), ref.running_var.numpy(), rtol=1e-12)
    assert int(bn.num_batches_tracked.item()) == 1
    bn.eval()  # evaluation: the (now identical) running statistics, no communication
    ref.eval()
    want = torch.nn.functional.batch_norm(tx.detach(), ref.running_mean, ref.running_var,
                                          ref.weight, ref.bias, False, 0.3, 1e-5)
    np.testing.assert_allclose(bn(flow.tensor(X[lo:hi])).numpy(), want.detach().numpy()[lo:hi],
                               rtol=1e-10, atol=1e-10)
print(f"OK rank {r}", flush=True)
