"""Run under ``mpiexec -n N``: global tensors on a meta placement keep their logical and
shard shapes through ops, boxing (S<->B, P->B) and backward, with nothing exchanged (a hang or
a data read would fail). Prints ``OK rank R``."""
import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
PM, PC = flow.placement.all("meta"), flow.placement.all("cpu")
B, S0, S1, PS = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1), flow.sbp.partial_sum

for sbp in (B, S0, S1, PS):
    x = flow.zeros(2 * n + 1, 3, placement=PM, sbp=sbp, requires_grad=True)
    ref = flow.zeros(2 * n + 1, 3, placement=PC, sbp=sbp)
    assert x.to_local().is_meta and x.to_local().shape == ref.to_local().shape, sbp
    for dst in (B, S0, S1):
        y = x.to_global(sbp=dst)
        want = ref.to_global(sbp=dst)
        assert y.sbp == want.sbp and y.to_local().shape == want.to_local().shape, (sbp, dst)
    z = (x * x).sum()
    assert z.placement == PM and z.shape == ()
    z.backward()
    assert x.grad.placement == PM and x.grad.to_local().is_meta and x.grad.shape == x.shape
loc = flow.zeros(2, 3, device="meta").to_global(placement=PM, sbp=S0)
assert loc.shape == (2 * n, 3) and loc.to_local().shape == (2, 3)
print(f"OK rank {r}", flush=True)
