"""Train a character-level GPT with actorflow.

By default it trains on the text of Python's own documentation topics (``pydoc_data.topics``,
shipped with every Python), shows a progress bar with loss and tokens/s, prints a generated
sample and saves a checkpoint that ``--resume`` continues from.

    python examples/gpt.py                      # a short default run (nn.Graph, actor runtime)
    python examples/gpt.py --mode eager         # the same training step run eagerly
    python examples/gpt.py --steps 2000 --data my.txt --out runs/gpt
    mpiexec -n 2 python examples/gpt.py --mode eager   # data parallel (DDP), same global batch
    mpiexec -n 2 python examples/gpt.py --parallel data    # a global graph: batch split(0)
    mpiexec -n 2 python examples/gpt.py --parallel tensor  # a global graph: heads, MLP split
    mpiexec -n 2 python examples/gpt.py --parallel pipeline --grad-acc 4  # two stages

In graph mode the run also writes the compiled Plan (``plan.dot``, and ``plan.svg`` where
Graphviz is installed) and a Chrome trace of a few training steps on the actor runtime
(``trace.json``; open it in https://ui.perfetto.dev) next to the checkpoint.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F


# ---- data --------------------------------------------------------------------------------------

def load_text(path: str | None) -> str:
    """The training text: a file, or Python's bundled documentation topics."""
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    from pydoc_data import topics
    return "\n".join(topics.topics[k] for k in sorted(topics.topics))


class CharCodec:
    """Maps characters to ids and back."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[c] for c in text], dtype=np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def unigram_entropy(ids: np.ndarray, vocab_size: int) -> float:
    """Entropy (nats) of the character distribution: the loss of a model that ignores context."""
    p = np.bincount(ids, minlength=vocab_size) / len(ids)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def get_batch(data: np.ndarray, batch_size: int, block_size: int):
    """Random windows of the token stream: inputs and next-token targets."""
    starts = flow.randint(0, len(data) - block_size - 1, (batch_size,)).numpy()
    offsets = starts[:, None] + np.arange(block_size)[None, :]
    return flow.from_numpy(data[offsets]), flow.from_numpy(data[offsets + 1])


# ---- model -------------------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where each position sees only earlier positions."""

    def __init__(self, n_embd: int, n_head: int, dropout: float):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd ({n_embd}) must be divisible by n_head ({n_head})")
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.q = self.k = self.v = None   # set (and qkv dropped) by ``split_qkv``
        self.proj = nn.Linear(n_embd, n_embd)
        self.dropout = dropout
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        if self.qkv is not None:
            q, k, v = self.qkv(x).split(C, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.reshape(B, T, self.n_head, hs).transpose(1, 2)
        k = k.reshape(B, T, self.n_head, hs).transpose(1, 2)
        v = v.reshape(B, T, self.n_head, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_drop(all_reduce_partial(self.proj(y)))

    def split_qkv(self) -> None:
        """Replace the fused ``qkv`` projection by three (``q``, ``k``, ``v``) holding its
        rows, so each can be split by output features (heads) for tensor parallelism."""
        C = self.proj.in_features
        w, b = self.qkv.weight.detach(), self.qkv.bias.detach()
        rng = flow.get_rng_state()   # (the new layers' own init draws nothing for later)
        for i, name in enumerate("qkv"):
            lin = nn.Linear(C, C).to(w.dtype)
            lin.weight = nn.Parameter(w[i * C:(i + 1) * C].clone())
            lin.bias = nn.Parameter(b[i * C:(i + 1) * C].clone())
            setattr(self, name, lin)
        flow.set_rng_state(rng)
        self.qkv = None


def to_stage(t, module: nn.Module):
    """Global activation ``t`` moved to ``module``'s placement where that differs (a pipeline
    stage's boundary: a send/recv in a graph), kept broadcast; ``t`` itself otherwise."""
    if not t.is_global:
        return t
    pl = next(module.parameters()).placement
    return t if pl == t.placement else t.to_global(placement=pl, sbp=flow.sbp.broadcast)


def all_reduce_partial(t):
    """A tensor-parallel layer's partial sums made whole on every rank (Megatron's
    all-reduce after the row-split projection); anything else passes through."""
    if t.is_global and t.sbp == (flow.sbp.partial_sum,):
        return t.to_global(sbp=flow.sbp.broadcast)
    return t


class Block(nn.Module):
    """A pre-norm transformer block: attention and an MLP, each with a residual."""

    def __init__(self, n_embd: int, n_head: int, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + all_reduce_partial(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    """Token + position embeddings, ``n_layer`` blocks, a final norm and a (tied) head."""

    def __init__(self, vocab_size: int, block_size: int = 64, n_layer: int = 2, n_head: int = 4,
                 n_embd: int = 64, dropout: float = 0.0, tie_weights: bool = True):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.tie_weights = tie_weights
        if not tie_weights:
            self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"GPT: sequence length {T} exceeds block_size {self.block_size}")
        pos = flow.arange(T)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(to_stage(x, block))
        x = self.ln_f(to_stage(x, self.ln_f))
        if self.tie_weights:   # (pipeline: the embedding moves to the head's stage)
            logits = F.linear(x, to_stage(self.tok_emb.weight, self.ln_f))
        else:
            logits = self.head(x)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss

    @flow.no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0):
        """Extend ``idx`` (B, T) by sampling ``max_new_tokens`` tokens."""
        for _ in range(max_new_tokens):
            ctx = idx[:, -self.block_size:]
            logits = self(ctx)[:, -1, :] / temperature
            probs = F.softmax(logits, dim=-1)
            nxt = flow.multinomial(probs, 1)
            idx = flow.cat([idx, nxt.to(idx.dtype)], dim=1)
        return idx


def pipeline_stages(world: int) -> tuple:
    """The two pipeline stages' placements: the first half of the ranks, the rest."""
    if world < 2:
        raise ValueError(f"--parallel pipeline: needs at least 2 processes, got {world}")
    ranks = list(range(world))
    return (flow.placement("cpu", ranks[:world // 2]), flow.placement("cpu", ranks[world // 2:]))


def parallelize(model: GPT, how: str, world: int | None = None) -> flow.placement:
    """Lay ``model`` out over every process for a global ``nn.Graph``: ``"data"``: each
    parameter broadcast (the caller splits the batch); ``"tensor"``: Megatron - the q, k, v
    and first MLP weights split by output features (heads, hidden units), the attention
    projection and second MLP weights by input features, the rest broadcast; ``"pipeline"``:
    two stages, the embeddings and the first half of the blocks on the first half of the
    ranks, the other blocks, the final norm and the head on the rest (broadcast within a
    stage; ``forward`` moves the activations). Returns the placement (pipeline: stage 0's).
    ``world`` (default: the running world's size) is checked against the heads."""
    world = world or flow.env.get_world_size()
    if how == "pipeline":
        p0, p1 = pipeline_stages(world)
        cut = (len(model.blocks) + 1) // 2
        late = [*model.blocks[cut:], model.ln_f] + ([] if model.tie_weights else [model.head])
        for m in (model.tok_emb, model.pos_emb, *model.blocks[:cut]):
            m.to_global(placement=p0, sbp=flow.sbp.broadcast)
        for m in late:
            m.to_global(placement=p1, sbp=flow.sbp.broadcast)
        return p0
    if how == "tensor":
        for blk in model.blocks:
            if blk.attn.n_head % world or blk.mlp[0].out_features % world:
                raise ValueError(f"--parallel tensor: n_head ({blk.attn.n_head}) and the MLP "
                                 f"width ({blk.mlp[0].out_features}) must be divisible by the "
                                 f"{world} processes")
            blk.attn.split_qkv()
    pl = flow.placement.all("cpu")
    model.to_global(placement=pl, sbp=flow.sbp.broadcast)
    if how == "tensor":
        s0, s1 = flow.sbp.split(0), flow.sbp.split(1)
        for blk in model.blocks:
            a, fc1, fc2 = blk.attn, blk.mlp[0], blk.mlp[2]
            for mod, name, sbp in ((a.q, "weight", s0), (a.q, "bias", s0),
                                   (a.k, "weight", s0), (a.k, "bias", s0),
                                   (a.v, "weight", s0), (a.v, "bias", s0),
                                   (a.proj, "weight", s1), (fc1, "weight", s0),
                                   (fc1, "bias", s0), (fc2, "weight", s1)):
                p = getattr(mod, name)
                setattr(mod, name, nn.Parameter(p.detach().to_global(sbp=sbp)))
    elif how != "data":
        raise ValueError(f"--parallel must be 'data', 'tensor' or 'pipeline', got {how!r}")
    return pl


# ---- training ----------------------------------------------------------------------------------

class TrainGraph(nn.Graph):
    """One training step as a static graph: forward, loss, backward, the optimizer's update
    and (once per call) the learning-rate scheduler's step."""

    def __init__(self, model: GPT, optimizer, scheduler=None, grad_acc: int = 1):
        super().__init__()
        self.model = model
        self.add_optimizer(optimizer, lr_sch=scheduler)
        if grad_acc > 1:   # the batch cut into micro-batches; one loss per micro-batch
            self.config.set_gradient_accumulation_steps(grad_acc)

    def build(self, x, y):
        _, loss = self.model(x, y)
        loss.backward()
        return loss


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="text file to train on (default: pydoc_data.topics)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--untied", action="store_true", help="use a separate output head")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--schedule-steps", type=int, default=None,
                   help="length of the cosine learning-rate schedule (default: --steps)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=("eager", "graph"), default="graph",
                   help="run each training step as an nn.Graph on the actor runtime (traced "
                        "once; the default) or eagerly; both give the same numbers")
    p.add_argument("--parallel", choices=("data", "tensor", "pipeline"), default=None,
                   help="graph mode on several processes (mpiexec): global parameters, the "
                        "batch split over the ranks (data), the heads and MLP hidden units "
                        "(tensor) or the blocks in two stages (pipeline); the same losses as "
                        "one process")
    p.add_argument("--grad-acc", type=int, default=1,
                   help="graph mode: gradient accumulation steps (micro-batches per step; "
                        "they flow through the pipeline's stages)")
    p.add_argument("--trace-steps", type=int, default=3,
                   help="graph mode: record this many steps (after the first) as a Chrome "
                        "trace in --out (0: none)")
    p.add_argument("--out", default="runs/gpt", help="folder for the checkpoint")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--sample-len", type=int, default=200)
    p.add_argument("--no-progress", action="store_true")
    return p


def train(args) -> dict:
    """Train per ``args``; returns a summary (losses, entropy, sample, checkpoint path)."""
    from tqdm import tqdm

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    parallel = args.parallel
    if parallel and args.mode != "graph":
        raise ValueError("--parallel trains a global nn.Graph: use it with --mode graph")
    if world > 1 and args.mode != "eager" and not parallel:
        raise ValueError("several processes train data parallel in eager mode (--mode eager) "
                         "or as a global graph (--parallel data|tensor)")
    if args.grad_acc > 1 and args.mode != "graph":
        raise ValueError("--grad-acc accumulates micro-batches in an nn.Graph: use --mode graph")
    if args.batch_size % (args.grad_acc * (world if parallel == "data" else 1)):
        raise ValueError(f"--batch-size {args.batch_size} is not divisible into --grad-acc "
                         f"{args.grad_acc} micro-batches per process")
    if parallel and args.resume:
        raise ValueError("--resume is not supported with --parallel yet")
    if args.batch_size % world:
        raise ValueError(f"--batch-size {args.batch_size} is not divisible by the {world} "
                         f"processes (each takes an equal share of the global batch)")
    flow.manual_seed(args.seed)
    text = load_text(args.data)
    codec = CharCodec(text)
    data = codec.encode(text)
    entropy = unigram_entropy(data, codec.vocab_size)
    model = GPT(codec.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd,
                args.dropout, tie_weights=not args.untied)
    pl = parallelize(model, parallel) if parallel else None
    # gradient clipping lives in the param group (OneFlow's way), so eager (``clip_grad()``)
    # and graph (the optimizer pass) clip the same way
    opt = flow.optim.AdamW([{"params": list(model.parameters()), "clip_grad_max_norm": 1.0,
                             "clip_grad_norm_type": 2.0}], lr=args.lr, weight_decay=0.01)
    sched = flow.optim.lr_scheduler.CosineAnnealingLR(
        opt, T_max=max(args.schedule_steps or args.steps, 1), eta_min=args.lr / 10)
    ckpt = os.path.join(args.out, "checkpoint.safetensors")
    start = 0
    if args.resume and os.path.exists(ckpt):
        state = flow.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = state["step"]
        flow.set_rng_state(state["rng"])
    graph = TrainGraph(model, opt, sched, args.grad_acc) if args.mode == "graph" else None
    # several processes: rank 0's weights everywhere, gradients averaged across the ranks
    step_model = (nn.parallel.DistributedDataParallel(model) if world > 1 and not parallel
                  else model)
    share = args.batch_size // world
    losses = []
    bar = tqdm(range(start, start + args.steps), disable=args.no_progress or rank > 0,
               unit="step",
               desc=f"gpt ({args.mode})")
    t0 = time.perf_counter()
    tokens = 0
    prof = None
    artifacts = {}
    for i, _ in enumerate(bar):
        if graph is not None and i == 1 and args.trace_steps > 0:
            prof = flow.profiler.profile().__enter__()
        x, y = get_batch(data, args.batch_size, args.block_size)
        if parallel:  # the logical batch: split over the ranks, or whole on each
            sbp = flow.sbp.split(0) if parallel == "data" else flow.sbp.broadcast
            # (pipeline: the tokens on the first stage, the targets on the last)
            pl_y = pipeline_stages(world)[1] if parallel == "pipeline" else pl
            loss = graph(flow.tensor(x.numpy(), placement=pl, sbp=sbp),
                         flow.tensor(y.numpy(), placement=pl_y, sbp=sbp))
            # the whole loss on every rank (data: a partial sum; pipeline: the last stage's)
            loss = loss.to_global(placement=flow.placement.all("cpu"), sbp=flow.sbp.broadcast)
            loss = loss.to_local().mean()   # (the micro-batches' mean)
        elif graph is not None:
            loss = graph(x, y).mean()  # updates model, optimizer state and schedule in place
        else:
            # every rank draws the same global batch and trains on its share of the rows
            rows = slice(rank * share, (rank + 1) * share)
            _, loss = step_model(x[rows], y[rows])
            opt.zero_grad()
            loss.backward()
            opt.clip_grad()
            opt.step()
            sched.step()
        if world > 1 and not parallel:  # the global batch's loss: the ranks' mean
            loss = loss.detach().clone()
            flow.comm.all_reduce(loss)
            loss = loss / world
        losses.append(loss.item())
        tokens += x.numel()
        if prof is not None and i == args.trace_steps:
            prof.__exit__(None, None, None)
            artifacts.update(write_graph_artifacts(graph, prof, args.out))
            prof = None
        bar.set_postfix(loss=f"{losses[-1]:.3f}",
                        tok_s=f"{tokens / (time.perf_counter() - t0):.0f}")
    if prof is not None:  # fewer steps than --trace-steps
        prof.__exit__(None, None, None)
        artifacts.update(write_graph_artifacts(graph, prof, args.out))
    if graph is not None and not artifacts:
        artifacts.update(write_graph_artifacts(graph, None, args.out))
    boxing = []
    if parallel:  # the collectives the trace inserted (a boxing report line each)
        from actorflow.dispatch.lazy_global import boxing_report
        boxing = boxing_report(graph.full_job)
    if graph is not None:
        graph.close()
    os.makedirs(args.out, exist_ok=True)
    if parallel:  # a local copy of the whole model on every rank, for the sample and file
        model = local_copy(model, args)
        if rank == 0:
            flow.save({"model": model.state_dict(), "step": start + args.steps}, ckpt)
    elif rank == 0:  # the ranks hold the same model and optimizer state
        flow.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                   "scheduler": sched.state_dict(), "step": start + args.steps,
                   "rng": flow.get_rng_state()}, ckpt)
    if world > 1:
        flow.comm.barrier()  # a --resume right after finds the file
    model.eval()
    prompt = flow.from_numpy(codec.encode("\n")[None, :])
    sample = codec.decode(model.generate(prompt, args.sample_len)[0].numpy())
    return {"losses": losses, "entropy": entropy, "sample": sample, "checkpoint": ckpt,
            "tokens_per_s": tokens / max(time.perf_counter() - t0, 1e-9),
            "artifacts": artifacts, "boxing": boxing}


def local_copy(model: GPT, args) -> GPT:
    """A local model holding a global ``model``'s whole parameters (every rank calls it)."""
    every = flow.placement.all("cpu")   # (pipeline: a stage's parameters to every rank)
    full = {k: v.to_global(placement=every, sbp=flow.sbp.broadcast).to_local()
            for k, v in model.state_dict().items()}
    rng = flow.get_rng_state()   # (the copy's init draws nothing for the sample)
    local = GPT(model.tok_emb.weight.shape[0], args.block_size, args.n_layer, args.n_head,
                args.n_embd, args.dropout, tie_weights=not args.untied)
    flow.set_rng_state(rng)
    for blk, mine in zip(local.blocks, model.blocks):
        if mine.attn.qkv is None:
            blk.attn.split_qkv()
    local.load_state_dict(full)
    return local


def write_graph_artifacts(graph, prof, out: str) -> dict:
    """Write the graph's Plan as DOT (and SVG with Graphviz's ``dot``) and, given a profile,
    its Chrome trace; returns {what: path}."""
    import shutil
    import subprocess

    os.makedirs(out, exist_ok=True)
    paths = {}
    if flow.env.get_rank() > 0:  # a global graph: rank 0's Plan and trace stand for all
        return paths
    dot = os.path.join(out, "plan.dot")
    with open(dot, "w") as f:
        f.write(graph.plan.to_dot())
    paths["plan"] = dot
    if shutil.which("dot"):
        svg = os.path.join(out, "plan.svg")
        done = subprocess.run(["dot", "-Tsvg", dot, "-o", svg], capture_output=True, timeout=120)
        if done.returncode == 0:
            paths["plan_svg"] = svg
    if prof is not None and prof.events:
        trace = os.path.join(out, "trace.json")
        paths["trace"] = prof.export_chrome_trace(trace)  # trace.rank<r>.json under mpiexec
    return paths


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    res = train(args)
    if flow.env.get_rank() > 0:
        return
    tail = res["losses"][-20:]
    print(f"unigram entropy of the text: {res['entropy']:.3f} nats; "
          f"final loss (mean of last {len(tail)} steps): {sum(tail) / len(tail):.3f}; "
          f"{res['tokens_per_s']:.0f} tokens/s")
    print(f"checkpoint: {res['checkpoint']} (continue with --resume)")
    for what, path in res["artifacts"].items():
        label = {"plan": "compiled Plan (Graphviz DOT)", "plan_svg": "compiled Plan (SVG)",
                 "trace": "Chrome trace of the actor runtime (open in ui.perfetto.dev)"}[what]
        print(f"{label}: {path}")
    print("sample:\n" + res["sample"])
    if not all(math.isfinite(v) for v in res["losses"]):
        raise SystemExit("training diverged (non-finite loss)")


if __name__ == "__main__":
    main()
