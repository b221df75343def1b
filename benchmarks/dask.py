"""Sparse EP on a Dask cluster against one process: time, sweeps and test NLL for 1, 2, 4, ... workers, and where
each sweep's time goes.

``python benchmarks/dask.py [--n 1000000] [--workers 1 2 4 8 15] [--learned-n 100000] [--kill-at 8]
[--out benchmarks/results/dask.md]``

The problem of ``benchmarks/sparse.py`` (d = 8 probit GP, 20 000 test rows), its rows persisted on the
cluster in 10 000-row chunks before the clock starts (as data that live there).  Rows, for each size:

``one process``
    ``GPClassifier(4 * RBF(2), Probit(), inducing_points=M, optimizer=None)``, nothing pinned: every core, as
    a user runs it.
``Dask, w workers``
    ``DaskGPClassifier`` with the same parameters on a ``LocalCluster`` of ``w`` one-thread worker processes.
    Its time is split (from the cluster's task stream and the client's clock) into the setup (the inducing
    inputs' placement, the shards' prior rows) and, per map over the shards (an EP sweep is one map; so is a
    stochastic step): the busiest worker's compute, the busiest worker's transfers, the client's own work
    between maps (the reductions, the ``M x M`` Cholesky, the schedule, submitting), and the rest, the
    scheduler's dispatch and the round trips.
``learned``
    The default learned fit at ``--learned-n`` rows: the stochastic search (1000 steps of 1000 rows, each
    step one map over the shards' minibatches), then EP; one process against the cluster.
``a worker killed``
    With ``--kill-at`` workers (where the machine has the cores): the fixed fit again, one worker process
    killed (SIGKILL) 40% of the way in; its time, and the largest difference of its test probabilities from
    the undisturbed fit's.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# this file is dask.py: the package must win the import, here and in the worker processes, which start with
# this path; sparse.py (the data) is loaded from its file
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
_spec = importlib.util.spec_from_file_location("benchmarks_sparse", HERE / "sparse.py")
sparse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sparse)
bayes, problem, scores = sparse.bayes, sparse.problem, sparse.scores


def _clusters(n_workers: int):
    import distributed

    cluster = distributed.LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit=0
    )
    return cluster, distributed.Client(cluster)


def _split(stream: list, rounds: list, wall: float) -> tuple[float, ...]:
    """The fit's setup (placement, the shards' prior rows: before the first map's answer), the number of maps
    that follow (a sweep is one map; a stochastic step is one), and per map: wall, the busiest worker's compute
    and transfers in that time, the client's own time between maps (reductions, the ``M x M`` factor, the
    schedule, submitting), and the rest (scheduling and latency)."""
    if not rounds:
        return (wall, 0, *[float("nan")] * 5)
    first, last = rounds[0][0], rounds[-1][1]
    compute: dict = {}
    transfer: dict = {}
    for task in stream:
        for part in task.get("startstops", ()):
            bucket = {"compute": compute, "transfer": transfer}.get(part["action"])
            start, stop = max(part["start"], first), min(part["stop"], last)
            if bucket is not None and stop > start:
                bucket[task["worker"]] = bucket.get(task["worker"], 0.0) + stop - start
    client = sum(b[0] - a[1] for a, b in itertools.pairwise(rounds))
    busiest, moving = max(compute.values(), default=0.0), max(transfer.values(), default=0.0)
    phase = last - first
    per = [phase, busiest, moving, client, phase - busiest - moving - client]
    return (wall - phase, len(rounds), *(v / len(rounds) for v in per))


def dask_fit(client, model, X, y, Xt) -> tuple:
    """``model`` fitted on the persisted ``(X, y)`` under the task stream; its time, the sweep split and
    probabilities."""
    from distributed import get_task_stream

    from relaxep.inference import sharded

    made = []
    original = sharded.ShardedFITC.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.rounds = []
        made.append(self)

    sharded.ShardedFITC.__init__ = recording
    try:
        with get_task_stream(client) as stream:
            start = time.perf_counter()
            model.fit(X, y)
            wall = time.perf_counter() - start
    finally:
        sharded.ShardedFITC.__init__ = original
    p1 = model.predict_proba(Xt)[:, 1]
    rounds = made[-1].rounds if made else []
    return wall, _split(stream.data, rounds, wall), p1, model.result_.n_sweeps


def killed_fit(client, make, X, y, Xt, delay: float) -> tuple[float, np.ndarray]:
    """``make()`` fitted with one worker process killed ``delay`` seconds in: its time and probabilities."""
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    threading.Timer(delay, os.kill, (pid, signal.SIGKILL)).start()
    start = time.perf_counter()
    model = make().fit(X, y)
    return time.perf_counter() - start, model.predict_proba(Xt)[:, 1]


def run(n: int, M: int, workers: list[int], learned_n: int, kill_at: int) -> list[str]:
    import dask.array as da
    from sklearn.gaussian_process.kernels import RBF
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from relaxep import DaskGPClassifier, GPClassifier, Probit

    lines = []
    header = (
        "| fit | workers | fit (s) | EP sweeps | test NLL | setup (s) | maps | per map (s) | compute | transfer "
        "| client | scheduler |"
    )
    # (fit (s) of a Dask row: its speed-up over the first Dask row in brackets)
    for size, learned in ((n, False), (learned_n, True)):
        if size <= 0:
            continue
        X, y, Xt, yt, ft = problem(size)
        kernel = C(1.0) * RBF(1.0) if learned else C(4.0) * RBF(2.0)
        options = dict(optimizer="stochastic", optimizer_subset=None) if learned else dict(optimizer=None)
        lines += ["", f"## {'learned (stochastic search + EP)' if learned else 'fixed kernel'}, n = {size}, M = {M}"]
        lines += ["", f"Bayes floor NLL {bayes(yt, ft)[1]:.4f}.", "", header, "|---" * 12 + "|"]
        print("\n".join(lines[-5:]), flush=True)
        local = dict(optimizer="stochastic") if learned else dict(optimizer=None)
        start = time.perf_counter()
        one = GPClassifier(kernel, Probit(), inducing_points=M, random_state=0, **local).fit(X, y)
        wall = time.perf_counter() - start
        nll = scores(one.predict_proba(Xt)[:, 1], yt)[1]
        lines.append(f"| one process, every core | - | {wall:.2f} | {one.result_.n_sweeps} | {nll:.4f} |" + " |" * 7)
        print(lines[-1], flush=True)
        base = None
        for w in workers if not learned else sorted({workers[0], workers[-1]}):
            cluster, client = _clusters(w)
            try:
                Xd = client.persist(da.from_array(X, chunks=(10_000, -1)))
                yd = client.persist(da.from_array(y, chunks=10_000))

                def make(kernel=kernel, client=client, options=options) -> DaskGPClassifier:
                    return DaskGPClassifier(client, kernel, Probit(), inducing_points=M, random_state=0, **options)

                wall, split, p1, sweeps = dask_fit(client, make(), Xd, yd, Xt)
                base = wall if base is None else base
                nll = scores(p1, yt)[1]
                cells = " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in split)
                lines.append(f"| Dask | {w} | {wall:.2f} ({base / wall:.1f}x) | {sweeps} | {nll:.4f} | {cells} |")
                print(lines[-1], flush=True)
                if w == kill_at and not learned:
                    hit, p_hit = killed_fit(client, make, Xd, yd, Xt, 0.4 * wall)
                    gap = float(np.max(np.abs(p_hit - p1)))
                    lines.append(f"| Dask, a worker killed 40% in | {w} | {hit:.2f} | | change {gap:.1e} |" + " |" * 7)
                    print(lines[-1], flush=True)
            finally:
                client.close()
                cluster.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--inducing", type=int, default=200)
    cores = os.cpu_count() or 1
    most = max(cores - 1, 2)  # (one core for the client and the scheduler)
    default_workers = sorted({1, 2, 4, 8, most} & set(range(1, most + 1)))
    parser.add_argument("--workers", type=int, nargs="*", default=default_workers)
    parser.add_argument("--learned-n", type=int, default=100_000)
    parser.add_argument("--kill-at", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    try:  # on a GPU machine, draw the data's latent function there (minutes of cosines on one CPU core at 10^6)
        import torch

        if torch.cuda.is_available():
            sparse.device_latent(torch, torch.device("cuda"))
    except ImportError:
        pass
    head = [
        f"# relaxep on Dask against one process (`python benchmarks/dask.py --n {args.n} --workers "
        f"{' '.join(map(str, args.workers))}`)",
        "",
        f"{cores} cores; one-thread worker processes on one machine (`LocalCluster`); the problem of "
        "`benchmarks/sparse.py`, its rows persisted on the cluster in 10 000-row chunks. The setup (placement, the "
        "shards' prior rows) apart, per map over the shards (an EP sweep is one, a stochastic step one): wall, the "
        "busiest worker's compute and transfers (the task stream), the client's own work between maps, and the "
        "rest (the scheduler's dispatch and the round trips).",
    ]
    print("\n".join(head), flush=True)
    lines = head + run(args.n, args.inducing, args.workers, args.learned_n, args.kill_at)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
