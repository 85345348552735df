"""The DBOS application of the peer benchmark: workflows, queues, and the worker process.

`python3 app.py <db-url> <executor-id> <W1|W2>` launches DBOS in this process, which then
dequeues and runs workflows until its stdin closes (the load generator ended) or it gets
SIGTERM/SIGINT. It prints "ready" on stdout once it listens.

    W1: `w1` (enqueued by the client on the queue "bench") runs one step `task`.
    W2: `w2` (enqueued on "bench") enqueues three `branch` child workflows on the queue
        "branch", each running one step `task`, and waits on the three handles (the join).
Each dequeued workflow runs on its own DBOS executor thread. The parents' queue has a
per-process cap, so a backlog waits in Postgres instead of as running parents that poll
for their children; the children's queue has none, so parents can never starve them.
"""

import logging
import os
import signal
import sys
import threading

from dbos import DBOS, DBOSConfig

# Seconds between two polls of a queue for new work, and of the database for a child's
# result: DBOS queues and results are polled (default 1 s each); see README.md.
QUEUE_POLL = float(os.environ.get("DBOS_BENCH_QUEUE_POLL", "0.02"))
RESULT_POLL = float(os.environ.get("DBOS_BENCH_RESULT_POLL", "0.05"))
# Workflows of the queue "bench" one process runs at once (W1/W2 parents).
CONCURRENCY = int(os.environ.get("DBOS_BENCH_CONCURRENCY", "8"))
# How W2 forks: "queue" (default) enqueues the three children on the queue "branch"; "local"
# starts them in this process with DBOS.start_workflow (no queue hop, no polling for the join).
FORK = os.environ.get("DBOS_BENCH_FORK", "queue")
QUEUES = {}  # the registered queues, kept so a parent does not read them from the database


@DBOS.step(name="task")
def task(i: int) -> dict:
    return {"ok": True}


@DBOS.workflow(name="w1")
def w1() -> dict:
    return task(0)


@DBOS.workflow(name="branch")
def branch(i: int) -> dict:
    return task(i)


@DBOS.workflow(name="w2")
def w2() -> dict:
    if FORK == "queue":
        handles = [QUEUES["branch"].enqueue(branch, i) for i in range(3)]
    else:
        handles = [DBOS.start_workflow(branch, i) for i in range(3)]
    results = [h.get_result(polling_interval_sec=RESULT_POLL) for h in handles]
    return {"ok": all(r == {"ok": True} for r in results)}


def main():
    url, executor_id, workload = sys.argv[1:4]
    config: DBOSConfig = {
        "name": "baton-bench",
        "system_database_url": url,
        "executor_id": executor_id,
        "application_version": "bench",
        "log_level": os.environ.get("DBOS_BENCH_LOG_LEVEL", "WARNING"),
    }
    DBOS(config=config)
    DBOS.launch()
    QUEUES["bench"] = DBOS.register_queue("bench", worker_concurrency=CONCURRENCY,
                                          polling_interval_sec=QUEUE_POLL,
                                          on_conflict="always_update")
    if workload == "W2" and FORK == "queue":  # each polled queue costs CPU: only if used
        QUEUES["branch"] = DBOS.register_queue("branch", polling_interval_sec=QUEUE_POLL,
                                               on_conflict="always_update")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The load generator holds our stdin open; EOF means it is gone.
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    os.dup2(2, 1)  # nobody reads our stdout pipe from now on
    stop.wait()
    logging.getLogger("dbos").setLevel(logging.CRITICAL)  # no errors of work cut off
    DBOS.destroy()
    # Parents still waiting on children would keep the interpreter alive: DBOS recovers
    # unfinished workflows on the next launch, and ./run drops the database anyway.
    os._exit(0)


if __name__ == "__main__":
    main()
