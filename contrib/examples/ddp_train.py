#!/usr/bin/python3
"""Data-parallel training with PyTorch DDP, gradients allreduced by MPI.

Debian's torch (1.13, CPU) has no MPI process group, but DDP takes a
communication hook: each gradient bucket, once backward has filled it, is
handed to the hook, which here sums it across ranks with MPI_Allreduce in
place on the bucket's own buffer (mpi4py, MPI_FLOAT) and divides by the number
of ranks -- what Horovod's averaging allreduce and torch's MPI backend do.
Under mpirun with coll/hier selected, hier serves those calls.

    mpirun -np 4 [--mca coll_hier_priority 100 ...] python3 ddp_train.py [options]

The model is a small causal transformer language model on synthetic token
sequences from a fixed rule with noise (seeded: every run of the same options
sees the same data; each rank its own share), so the loss falls and runs can
be compared step by step.  A gloo process group is still created: DDP
broadcasts the initial parameters and its bucket layout through it.  --comm
gloo trains with DDP's own gloo allreduce instead of the hook (the
reference the MPI runs are compared with).

Steps:
 1. MPI (mpi4py initializes it on import) and a gloo process group whose
    rendezvous is a file rank 0 names (MASTER_ADDR in the environment: env://).
 2. The model, identical on every rank (seeded), wrapped in DDP with
    bucket_cap_mb; the MPI hook registered unless --comm gloo.
 3. Training: each step draws the rank's batch, runs forward, backward (the
    hook allreduces the buckets as they fill: in the hook, on --overlap's
    thread, or --nonblocking: MPI_Iallreduce started in the hook, tested at
    every parameter's gradient as backward computes it, waited at the last
    bucket, so every bucket is averaged before the optimizer step) and an
    SGD step; each step's global mean
    loss is computed with one more MPI_Allreduce (float64).
 4. Checks: every rank's parameters hashed and the hashes compared
    (--check fails the run if any differ); --losses writes the loss curve,
    --expect-losses compares it with an earlier run's within --rtol.
 5. Rank 0 prints one JSON line (step times, time in the hook's allreduces,
    buckets, parameter digest).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from mpi4py import MPI  # initializes MPI (MPI_THREAD_MULTIPLE)
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

# Model sizes: name -> (d_model, layers, heads, feed-forward, vocabulary,
# sequence length).  "tiny" is make check's; "small" has ~3.7 M parameters
# (14.1 MiB of gradients: one bucket at DDP's default 25 MB cap); "base" 20.0 M
# (76.3 MiB: three buckets of 25.4 MiB).
SIZES = {
    "tiny": (64, 2, 2, 128, 256, 32),
    "small": (256, 4, 4, 1024, 1024, 64),
    "base": (512, 6, 8, 2048, 1024, 64),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=SIZES, default="small")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2,
                   help="steps left out of the timing (bucket rebuild, first touch)")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    p.add_argument("--seq", type=int, help="sequence length (default: the size's)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DDP's bucket size (25: its default; 200: fairseq's BERT recipe)")
    p.add_argument("--comm", choices=("mpi", "gloo"), default="mpi",
                   help="mpi: the MPI_Allreduce hook; gloo: DDP's own allreduce")
    p.add_argument("--overlap", action="store_true",
                   help="allreduce on one communication thread while backward goes on "
                        "(as Horovod and torch's MPI backend); default: in the hook")
    p.add_argument("--nonblocking", action="store_true",
                   help="MPI_Iallreduce started in the hook, no thread: tested as backward goes on "
                        "(--test-at), all waited at the last bucket of the step")
    p.add_argument("--test-at", choices=("gradients", "buckets"), default="gradients",
                   help="--nonblocking: the buckets in flight are tested at every parameter's gradient "
                        "(default), or only at the later buckets' hooks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default="cpu",
                   help="cpu, or cuda (the rank's GPU: LOCAL_RANK or OMPI_COMM_WORLD_LOCAL_RANK); "
                        "CUDA buckets go to MPI as device memory (mpi4py reads __cuda_array_interface__)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads per rank (1: ranks share few cores)")
    p.add_argument("--check", action="store_true",
                   help="fail unless every rank ends with bitwise identical parameters")
    p.add_argument("--losses", help="write the loss curve (one value per step) to this file")
    p.add_argument("--expect-losses", help="compare the loss curve with this file")
    p.add_argument("--rtol", type=float, default=1e-4,
                   help="relative tolerance of --expect-losses (see contrib/examples/README.md)")
    p.add_argument("--store-dir", default=tempfile.gettempdir(),
                   help="where rank 0 makes the gloo rendezvous file (shared by all nodes)")
    return p.parse_args()


class TinyLM(nn.Module):
    """Causal transformer LM: embeddings, pre-norm encoder layers, output projection."""

    def __init__(self, d_model, layers, heads, ff, vocab, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        x = self.encoder(x, mask=self.mask[: tokens.shape[1], : tokens.shape[1]])
        return self.head(self.norm(x))


def make_batch(args, vocab, seq, rank, step):
    """Sequences that follow next = (5 * prev + 3) mod vocab, one token in ten
    random: learnable, so the loss falls.  Seeded by (seed, rank, step)."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + rank * 10_007 + step)
    tokens = torch.empty(args.batch, seq + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(vocab, (args.batch,), generator=g)
    noise = torch.rand(args.batch, seq, generator=g) < 0.1
    rand = torch.randint(vocab, (args.batch, seq), generator=g)
    for t in range(seq):
        nxt = (5 * tokens[:, t] + 3) % vocab
        tokens[:, t + 1] = torch.where(noise[:, t], rand[:, t], nxt)
    return tokens[:, :-1], tokens[:, 1:]


class MpiHookState:
    """What the hook needs and what it measured."""

    def __init__(self, comm, overlap, nonblocking=False):
        self.comm = comm
        self.nonblocking = nonblocking
        self.pending = []  # --nonblocking: (request, buffer, future) of the buckets in flight
        # one thread: MPI calls stay in bucket order, the same on every rank
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1) if overlap else None
        self.size = comm.Get_size()
        self.calls = 0
        self.bytes = 0
        self.seconds = 0.0


def finish_buckets(state, wait):
    """--nonblocking: the buckets whose MPI_Iallreduce is over (all of them,
    waited, when `wait`) averaged and their futures set; the others stay in
    flight (MPI_Test also lets the MPI library progress them)."""
    left = []
    for req, buf, fut in state.pending:
        if wait:
            req.Wait()
        elif not req.Test():
            left.append((req, buf, fut))
            continue
        buf.div_(state.size)
        state.calls += 1
        state.bytes += buf.numel() * buf.element_size()
        fut.set_result(buf)
    state.pending = left


def test_buckets(state):
    """--nonblocking --test-at gradients: called as backward computes each
    parameter's gradient. Without a thread, a request's data moves only
    inside MPI calls: a bucket tested only at the later buckets' hooks (a
    few per step) waits between them, its transfer and backward's work
    taking turns; tested at every gradient (hundreds per step, each a few
    microseconds) it moves while backward computes."""
    if state.pending:
        start = time.perf_counter()
        finish_buckets(state, wait=False)
        state.seconds += time.perf_counter() - start


def mpi_iallreduce_bucket(state, bucket, buf, fut, ready):
    """--nonblocking: MPI_Iallreduce started on the bucket (every rank starts
    the buckets in the same order: DDP's), the earlier ones tested; the step's
    last bucket waits for all, so DDP finds every future set."""
    start = time.perf_counter()
    try:
        if ready is not None:
            ready.synchronize()
        req = state.comm.Iallreduce(MPI.IN_PLACE, buf if buf.is_cuda else buf.numpy(), op=MPI.SUM)
        state.pending.append((req, buf, fut))
        finish_buckets(state, wait=bucket.is_last())
    except BaseException as e:  # DDP raises it where it waits for the bucket
        for _, _, f in state.pending:
            if not f.done():
                f.set_exception(e)
        state.pending = []
        if not fut.done():
            fut.set_exception(e)
    state.seconds += time.perf_counter() - start
    return fut


def mpi_allreduce_hook(state, bucket):
    """Average one gradient bucket across ranks: MPI_Allreduce(MPI_IN_PLACE,
    SUM) on the bucket's flat buffer, then divide (the buffer is contiguous
    CPU memory; its numpy view shares it)."""
    buf = bucket.buffer()
    fut = torch.futures.Future()
    # A CUDA bucket is written by kernels still queued on torch's stream: MPI
    # reads the memory itself, so the hook waits for them first (what
    # Horovod does), with an event, so that --overlap's thread waits, not
    # backward.
    ready = None
    if buf.is_cuda:
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(buf.device))
    if state.nonblocking:
        return mpi_iallreduce_bucket(state, bucket, buf, fut, ready)

    def allreduce():
        try:
            start = time.perf_counter()
            if ready is not None:
                ready.synchronize()
            state.comm.Allreduce(MPI.IN_PLACE, buf if buf.is_cuda else buf.numpy(), op=MPI.SUM)
            buf.div_(state.size)
            state.seconds += time.perf_counter() - start
            state.calls += 1
            state.bytes += buf.numel() * buf.element_size()
            fut.set_result(buf)
        except BaseException as e:  # DDP raises it where it waits for the bucket
            fut.set_exception(e)

    if state.pool:
        state.pool.submit(allreduce)
    else:
        allreduce()
    return fut


def init_gloo(comm, args):
    """Step 1: the gloo group DDP needs for its own broadcasts."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if "MASTER_ADDR" in os.environ:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=size)
        return None
    store_dir = tempfile.mkdtemp(prefix="ddp-store-", dir=args.store_dir) if rank == 0 else None
    store_dir = comm.bcast(store_dir, root=0)
    store = dist.FileStore(os.path.join(store_dir, "store"), size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
    return store_dir


def param_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def train(args, comm, model, sizes, state):
    """Step 3: returns the loss curve, the timed steps' durations and the
    hook's allreduce time within them."""
    rank = comm.Get_rank()
    _, _, _, _, vocab, seq = sizes
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses, step_s, allreduce_s = [], [], 0.0
    mean = np.zeros(1, dtype=np.float64)
    for step in range(args.steps):
        x, y = (t.to(args.device) for t in make_batch(args, vocab, seq, rank, step))
        comm.Barrier()  # every rank starts the step together: step times comparable
        start, hook_start = time.perf_counter(), state.seconds
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            step_s.append(elapsed)
            allreduce_s += state.seconds - hook_start
        mean[0] = loss.item()
        comm.Allreduce(MPI.IN_PLACE, mean, op=MPI.SUM)
        losses.append(float(mean[0]) / comm.Get_size())
    return losses, step_s, allreduce_s


def check_losses(args, losses):
    """Step 4: the curve against an earlier run's (e.g. --comm gloo)."""
    with open(args.expect_losses) as f:
        want = [float(v) for v in f.read().split()]
    if len(want) != len(losses):
        return None, f"{len(want)} losses expected, {len(losses)} computed"
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, want))
    return worst, f"max relative difference {worst:.3g} (tolerance {args.rtol:g})"


def main():
    args = parse_args()
    if args.overlap and args.nonblocking:
        sys.exit("ddp_train.py: --overlap (a thread) or --nonblocking (MPI_Iallreduce), not both")
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    torch.set_num_threads(args.threads)
    store_dir = init_gloo(comm, args)
    # Step 2: the same model on every rank
    sizes = SIZES[args.size][:5] + (args.seq or SIZES[args.size][5],)
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
        torch.cuda.set_device(local % torch.cuda.device_count())
    model = DDP(TinyLM(*sizes).to(args.device), bucket_cap_mb=args.bucket_cap_mb)
    state = MpiHookState(comm, args.overlap, args.nonblocking)
    if args.comm == "mpi":
        model.register_comm_hook(state, mpi_allreduce_hook)
        if args.nonblocking and args.test_at == "gradients":
            for p in model.parameters():
                if p.requires_grad:
                    p.register_hook(lambda grad: test_buckets(state))
    losses, step_s, allreduce_s = train(args, comm, model, sizes, state)
    # Step 4: parameters agree?
    digest = param_digest(model.module)
    digests = comm.allgather(digest)
    agree = all(d == digest for d in digests)
    ok = agree or not args.check
    report = {
        "comm": args.comm, "overlap": args.overlap, "nonblocking": args.nonblocking,
        "test_at": args.test_at if args.nonblocking else None, "size": args.size, "ranks": comm.Get_size(),
        "params": sum(p.numel() for p in model.parameters()),
        "bucket_cap_mb": args.bucket_cap_mb, "steps": args.steps,
        "step_s_median": statistics.median(step_s) if step_s else None,
        "allreduce_calls": state.calls, "buckets": state.calls // max(args.steps, 1),
        "allreduce_bytes_per_step": state.bytes // max(args.steps, 1),
        "allreduce_s_per_step": allreduce_s / len(step_s) if step_s and args.comm == "mpi" else None,
        "allreduce_share": allreduce_s / sum(step_s) if step_s and args.comm == "mpi" else None,
        "loss_first": losses[0], "loss_last": losses[-1],
        "params_agree": agree, "digest": digest[:16],
    }
    if rank == 0:
        if args.losses:
            with open(args.losses, "w") as f:
                f.write("\n".join(repr(v) for v in losses) + "\n")
        if args.expect_losses:
            worst, why = check_losses(args, losses)
            report["losses_max_rel_diff"] = worst
            print(f"ddp: loss curve against {args.expect_losses}: {why}", flush=True)
            ok = ok and worst is not None and worst <= args.rtol
        if not agree:
            print(f"ddp: FAIL: parameters differ between ranks: {sorted(set(digests))}", flush=True)
        print("ddp: " + json.dumps(report), flush=True)
    if state.pool:
        state.pool.shutdown()
    ok = comm.allreduce(ok, op=MPI.LAND)
    dist.destroy_process_group()
    if rank == 0 and store_dir:
        shutil.rmtree(store_dir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        rc = main()
    except BaseException:
        # one rank's exception must not leave the others waiting in a
        # collective: print it and abort the job (what `python3 -m mpi4py` does)
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(rc)
