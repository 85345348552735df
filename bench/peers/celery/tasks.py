"""The Celery app shared by the load generator (bench.py) and the worker (`celery -A tasks`)."""

import os

from celery import Celery

REDIS = f"redis://127.0.0.1:{os.environ.get('CELERY_PEER_REDIS_PORT', '16379')}"

app = Celery("peer", broker=f"{REDIS}/0", backend=f"{REDIS}/1")
app.conf.update(
    task_acks_late=True,              # ack after the task ran (redelivered if the worker dies)
    worker_prefetch_multiplier=1,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(name="t")
def t(i=None):
    return {"ok": True}


@app.task(name="join")
def join(results):
    return {"ok": all(r == {"ok": True} for r in results), "n": len(results)}
