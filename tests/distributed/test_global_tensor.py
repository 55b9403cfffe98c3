"""Eager global tensors (placement, 1-D and 2-D SBP, boxing, moves between placements,
partial_max, the eager-global interpreter): one-process checks here, several-process ones
through ``mpiexec`` on the scripts in ``tests/distributed/`` (each prints ``OK rank R``)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi, run_ranks


def test_placement_and_sbp_values():
    p = flow.placement("cpu", [0])
    assert p == flow.placement(type="cpu", ranks=[0]) == flow.placement.all("cpu")
    assert hash(p) == hash(flow.placement("cpu", [0]))
    assert repr(p) == 'actorflow.placement(type="cpu", ranks=[0])'
    assert repr(flow.sbp.split(1)) == "actorflow.sbp.split(dim=1)"
    assert flow.sbp.split(1) == flow.sbp.split(1) != flow.sbp.split(0)
    assert repr(flow.sbp.broadcast) == "actorflow.sbp.broadcast"
    assert repr(flow.sbp.partial_sum) == "actorflow.sbp.partial_sum"
    assert flow.env.all_device_placement("cpu") == p
    assert flow.placement("cpu", [[0]]).hierarchy == (1, 1)
    # OneFlow's ranks: an int64 array of the hierarchy's shape (a copy: the placement stays)
    r = flow.placement("cpu", np.array([[0]])).ranks
    assert isinstance(r, np.ndarray) and r.dtype == np.int64 and r.shape == (1, 1)
    r[0, 0] = 5
    assert flow.placement("cpu", [[0]]).ranks.tolist() == [[0]]
    with pytest.raises(ValueError, match="rank 1 is not in 0..0"):
        flow.placement("cpu", [0, 1])
    with pytest.raises(ValueError, match="device type"):
        flow.placement("cuda", [0])
    with pytest.raises(ValueError, match="distinct"):
        flow.placement("cpu", [0, 0])


def test_one_sbp_for_2d_placement_raises_naming_the_op():
    # OneFlow's creation ops assert len(sbp) == placement.ranks.ndim (nn/modules/constant,
    # arange, empty, linspace; eye and the graph's source ops check it in C++) and its boxing
    # (to_global) checks the nd_sbp against the hierarchy: one sbp on a 2-D placement errors
    q, s0 = flow.placement("cpu", [[0]]), flow.sbp.split(0)
    makers = {
        "flow.ones": lambda: flow.ones(4, placement=q, sbp=s0),
        "flow.zeros": lambda: flow.zeros(4, placement=q, sbp=[s0]),
        "flow.full": lambda: flow.full((4,), 2.0, placement=q, sbp=s0),
        "flow.empty": lambda: flow.empty(4, placement=q, sbp=s0),
        "flow.arange": lambda: flow.arange(4, placement=q, sbp=s0),
        "flow.linspace": lambda: flow.linspace(0, 1, 4, placement=q, sbp=s0),
        "flow.eye": lambda: flow.eye(4, placement=q, sbp=s0),
        "flow.rand": lambda: flow.rand(4, placement=q, sbp=s0),
        "flow.randn": lambda: flow.randn(4, placement=q, sbp=s0),
        "flow.randint": lambda: flow.randint(0, 5, (4,), placement=q, sbp=s0),
        "flow.randperm": lambda: flow.randperm(4, placement=q, sbp=s0),
        "flow.hann_window": lambda: flow.hann_window(8, placement=q, sbp=s0),
        "flow.tensor": lambda: flow.tensor([1.0, 2.0], placement=q, sbp=flow.sbp.broadcast),
        "to_global": lambda: flow.ones(4).to_global(placement=q, sbp=s0),
    }
    for name, make in makers.items():
        with pytest.raises(ValueError, match=rf"^{name}: 1 sbp .* hierarchy \(1, 1\)"):
            make()
    g = flow.ones(4, placement=q, sbp=(s0, flow.sbp.broadcast))
    with pytest.raises(ValueError, match=r"^to_global: 1 sbp"):
        g.to_global(sbp=flow.sbp.broadcast)
    assert flow.hann_window(1, placement=q, sbp=(s0, s0)).sbp == (s0, s0)


def test_one_process_global_tensor_round_trip():
    p = flow.placement("cpu", [0])
    x = flow.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    g = x.to_global(p, flow.sbp.split(1))
    assert g.is_global and not g.is_local and x.is_local and not x.is_global
    assert g.placement == p and g.sbp == (flow.sbp.split(1),) and g.shape == (2, 3)
    y = (g.to_global(sbp=flow.sbp.partial_sum) * 3.0).sum()
    assert y.item() == 45.0
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0))
    assert "sbp=(actorflow.sbp.split(dim=1),)" in repr(g)
    # a 2-D placement of one rank: every n-d layout holds the whole tensor
    q = flow.placement("cpu", [[0]])
    h = x.to_global(q, (flow.sbp.split(0), flow.sbp.partial_sum))
    assert h.sbp == (flow.sbp.split(0), flow.sbp.partial_sum) and h.shape == (2, 3)
    m = h.to_global(sbp=(flow.sbp.broadcast, flow.sbp.split(1))).mean(dim=1)
    assert m.sbp == (flow.sbp.broadcast, flow.sbp.partial_sum)
    np.testing.assert_allclose(m.numpy(), [1.0, 4.0])
    np.testing.assert_array_equal(flow.ones(2, placement=q, sbp=(flow.sbp.broadcast,) * 2)
                                  .numpy(), [1.0, 1.0])
    with pytest.raises(ValueError, match="one per placement dim"):
        flow.ones(2, placement=q, sbp=flow.sbp.broadcast)
    # moving to another placement (here: another hierarchy of the same rank); the gradient
    # moves back
    x.grad = None
    mv = x.to_global(p, flow.sbp.split(0)).to_global(
        placement=q, sbp=(flow.sbp.split(1), flow.sbp.partial_sum))
    assert mv.placement == q and mv.sbp == (flow.sbp.split(1), flow.sbp.partial_sum)
    (mv * flow.tensor(np.arange(6.0).reshape(2, 3), placement=q,
                      sbp=(flow.sbp.broadcast,) * 2)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="needs sbp"):
        g.to_global(placement=q)
    with pytest.raises(ValueError, match="mixes a local tensor"):
        g + x
    with pytest.raises(ValueError, match="needs both placement and sbp"):
        x.to_global(p)
    with pytest.raises(ValueError, match="split"):
        x.to_global(p, flow.sbp.split(2))
    with pytest.raises(OpError, match="dim 2 is out of range"):
        flow.zeros(2, 3, placement=p, sbp=flow.sbp.split(2))
    with pytest.raises(TypeError, match="flow.sbp.split"):
        flow.zeros(2, placement=p, sbp="S0")
    # an op without an SBP rule runs broadcast
    c = flow.median(g)
    assert c.sbp == (flow.sbp.broadcast,)
    np.testing.assert_array_equal(c.numpy(), np.float64(2.0))


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_boxing_on_several_ranks(n):
    code, secs, out = run_ranks(n, "global_boxing.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(240)
@pytest.mark.parametrize("n", [2, 4])
def test_2d_sbp_boxing_and_ops_on_several_ranks(n):
    code, secs, out = run_ranks(n, "global_nd.py", timeout=230)
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_moving_between_placements(n):
    code, secs, out = run_ranks(n, "global_move.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_partial_max(n):
    code, secs, out = run_ranks(n, "global_pmax.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 3])
def test_ops_with_sbp_rules_match_one_process(n):
    code, secs, out = run_ranks(n, "global_ops.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_mlp_with_global_tensors_trains_like_one_process(n):
    code, secs, out = run_ranks(n, "global_mlp.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_optimizers_on_global_parameters_match_one_process(n):
    code, secs, out = run_ranks(n, "global_optim.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_checkpoints_of_global_state(n, tmp_path):
    code, secs, out = run_ranks(n, "global_ckpt.py", str(tmp_path))
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


def test_nd_box_plan_gathers_conflicting_inner_axes_first():
    from actorflow.dispatch.boxing import box_plan
    S0, S1, B, P, M = ("S", 0), ("S", 1), ("B",), ("P",), ("M",)
    # the inner axis splits the dim the outer change touches: gather it, change, re-split
    assert box_plan((S0, S0), (B, S0)) == [(1, B), (0, B), (1, S0)]
    assert box_plan((B, S0), (S0, S0)) == [(1, B), (0, S0), (1, S0)]
    # other dims and broadcast inner axes commute with the change: one step
    assert box_plan((S0, S1), (B, S1)) == [(0, B)]
    assert box_plan((P, B), (S0, B)) == [(0, S0)]
    assert box_plan((P, P), (B, P)) == [(0, B)]  # a sum of sums
    # a max of sums is not a sum of maxima: the inner partial goes to broadcast first
    assert box_plan((P, M), (M, P)) == [(1, B), (0, M), (1, P)]
    assert box_plan((M, P), (B, B)) == [(1, B), (0, B)]
    # freeing an axis can make an axis inside it conflict in turn
    assert box_plan((M, P, M), (B, P, M)) == [(2, B), (1, B), (0, B), (1, P), (2, M)]
    assert box_plan((S0, S1, S0), (S0, S1, S0)) == []


def test_select_signature_is_a_function_of_the_call_metadata():
    # what a graph compiler calls: no tensors, only shapes/dtypes, sbps, attrs and placement
    from actorflow.dispatch.nd_sbp import select_signature
    from actorflow.ops import registry
    S0, S1, B, P = ("S", 0), ("S", 1), ("B",), ("P",)
    f32 = flow.float32
    sig = select_signature(registry.get("matmul"), [((4, 3), f32), ((3, 5), f32)],
                           [(S0, B), (B, S1)], {}, flow.placement("cpu", [[0]]), 1)
    assert sig.ins == ((S0, B), (B, S1)) and sig.outs == ((S0, S1),)
    assert [s.outs for s in sig.levels((0, 0))] == [(S0,), (S1,)]
    sig = select_signature(registry.get("sum"), [((4, 3), f32)], [(S0,)], {"dim": (0,)},
                           flow.placement("cpu", [0]), 1)
    assert sig.ins == ((S0,),) and sig.outs == ((P,),)
    # an in-place call keeps the written tensor's layout
    sig = select_signature(registry.get("relu"), [((4, 3), f32)], [(S1,)], {},
                           flow.placement("cpu", [0]), 1, out_sbps=[(B,)])
    assert sig.outs == ((B,),) and sig.ins == ((B,),)


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_to_global_checks_meta_and_takes_grad_sbp_and_copy():
    check_eager_2("global_meta.py")


def test_adam_on_a_2d_placed_parameter_matches_local_adam():
    # the step counter and lr are laid out like the parameter: one sbp per hierarchy axis
    pl = flow.placement("cpu", [[0]])
    init = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    grad = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    results = []
    for place in (False, True):
        w = flow.tensor(init)
        if place:
            w = w.to_global(placement=pl, sbp=(flow.sbp.broadcast, flow.sbp.broadcast))
        w = flow.nn.Parameter(w)
        opt = flow.optim.Adam([w], lr=0.1)
        for _ in range(2):
            w.grad = flow.tensor(grad).to_global(placement=pl, sbp=w.sbp) if place \
                else flow.tensor(grad)
            opt.step()
        results.append(w.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_class_losses_on_a_split_batch_match_one_process(n):
    code, secs, out = run_ranks(n, "global_loss.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


def test_to_local_of_a_local_tensor_raises_as_oneflow():
    x = flow.tensor([1, 2, 3, 4])
    for kw in ({}, {"copy": True}):
        with pytest.raises(RuntimeError, match="Expected global tensor for to_local but got "
                                               "local tensor!"):
            x.to_local(**kw)
    with pytest.warns(UserWarning, match="local already"):  # global_view keeps it
        assert flow.utils.global_view.to_local(x) is x
    g = x.to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    assert g.to_local().tolist() == [1, 2, 3, 4] and not g.to_local().is_global


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [1, 2])
def test_inplace_writes_into_views_of_global_tensors_follow_eager_local(n):
    code, secs, out = run_ranks(n, "global_inplace.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_global_meta_tensors_on_two_ranks_box_and_backward_without_data():
    check_eager_2("global_meta_device.py")


def test_flow_new_zeros_takes_the_tensors_shape_and_layout():
    # OneFlow's flow.new_zeros(x): size, dtype, placement and sbp default to x's
    q = flow.placement("cpu", [[0]])
    sbp = (flow.sbp.split(1), flow.sbp.broadcast)
    x = flow.ones(2, 3, dtype=flow.float64, placement=q, sbp=sbp)
    z = flow.new_zeros(x)
    assert z.shape == (2, 3) and z.dtype == flow.float64 and z.sbp == sbp and z.placement == q
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3)))
    assert x.new_zeros().shape == (2, 3)
    w = flow.new_zeros(flow.ones(4, dtype=flow.int32), (2, 2))
    assert w.is_local and w.shape == (2, 2) and w.dtype == flow.int32
    np.testing.assert_array_equal(w.numpy(), np.zeros((2, 2), np.int32))
    with pytest.raises(TypeError, match="new_zeros: expected a Tensor"):
        flow.new_zeros([1, 2])


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_setitem_replicates_a_value_from_another_placement_onto_the_target():
    check_eager_2("global_setitem_placement.py")


def test_a_local_tensor_has_no_placement_sbp_or_global_id_as_in_oneflow():
    x = flow.Tensor(2, 3)
    for what, get in (("placement", lambda: x.placement), ("sbp", lambda: x.sbp),
                      ("global_id", lambda: x.global_id())):
        with pytest.raises(RuntimeError, match=f"{what}: a local tensor"):
            get()
    g = x.to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    h = flow.zeros(2, placement=flow.placement("cpu", [0]), sbp=flow.sbp.broadcast)
    assert isinstance(g.global_id(), int) and g.global_id() != h.global_id()
    i = g.global_id()
    g.mul_(2)
    assert g.global_id() == i and g.to_global(sbp=flow.sbp.broadcast).global_id() == i


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_nn_init_and_random_fills_of_global_parameters_agree_on_every_rank():
    check_eager_2("global_init.py")


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_gather_gradient_and_coin_flip_on_global_tensors():
    check_eager_2("global_gather_coinflip.py")
