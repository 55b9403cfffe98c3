"""Run under ``mpiexec -n N``: ``nn.init`` and the in-place random fills on global parameters
(broadcast, split(0), split(1)) keep the parameter's placement and sbp and give every rank the
same logical values (one agreed draw); eye_, orthogonal_ and constant_ give their values.
Prints ``OK rank R``."""
import numpy as np
import actorflow as flow
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
fns = ["constant_(t, 2.5)", "zeros_(t)", "ones_(t)", "normal_(t)", "uniform_(t, -1, 1)",
       "xavier_uniform_(t)", "xavier_normal_(t)", "kaiming_normal_(t)", "kaiming_uniform_(t)",
       "eye_(t)", "orthogonal_(t)", "trunc_normal_(t)"]
meth = ["exponential_()", "cauchy_()", "log_normal_()", "geometric_(0.3)", "random_(0, 10)",
        "bernoulli_(0.3)", "bernoulli_(flow.full((4, 6), 0.5, placement=PL, sbp=B))"]
for sbp in (B, S0, S1):
    for f in fns + meth:
        t = flow.nn.Parameter(flow.zeros(4, 6, placement=PL, sbp=sbp))
        if f in fns:
            eval("flow.nn.init." + f)
        else:
            eval("t.detach()." + f)
        assert t.sbp == (sbp,) and t.placement == PL, (f, t.sbp)
        full = t.numpy()
        # every rank holds the same logical values (rank 0's)
        gathered = flow.tensor(full[None]).to_global(placement=PL, sbp=S0).numpy()
        assert all(np.array_equal(g, full) for g in gathered), (f, sbp)
        if f.startswith('orthogonal'):
            np.testing.assert_allclose(full @ full.T, np.eye(4), atol=1e-5)
        if f.startswith('eye'):
            np.testing.assert_array_equal(full, np.eye(4, 6))
        if f.startswith('constant'):
            assert (full == 2.5).all()
        if f.startswith('normal') or f.startswith('uniform'):
            assert full.std() > 0.1, (f, full)
print(f"OK rank {r}", flush=True)  # one write: ranks share the pipe
