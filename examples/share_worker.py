"""A job-worker aiohttp service on a share group: many jobs at once, poison jobs archived.

    python examples/share_worker.py [BOOTSTRAP] [--topic T] [--group G] [--port P]
                                    [--concurrency N]

Each record of the ``jobs`` topic is a job (JSON ``{"id": 7, "ms": 20}``): the worker
"does" it (awaits ``ms`` milliseconds, as a call to another service would), up to
``--concurrency`` jobs at once, more than the topic has partitions. A job whose
``"flaky"`` is set fails on its first delivery (the handler raises: the record is
released and comes back, its ``delivery_count`` 2); a job that is not JSON is rejected
(``cg.AckType.REJECT``: the broker archives it, it never comes back). Totals at
``GET /stats``, next to ``GET /health/live``, ``GET /health/ready`` and ``GET /metrics``.
Runs until Ctrl-C or SIGTERM, then closes: running jobs finish (or are released at the
close timeout), what finished is acknowledged, the member leaves.

Share groups need Apache Kafka 4.2+. BOOTSTRAP (``host:port``) comes from the argument or
``$KAFKA_BOOTSTRAP_SERVERS``; with neither, an Apache Kafka starts here
(``cg.testing.KafkaCluster``: Java 17+, its jars fetched from Maven Central on first use)
with 60 jobs in the topic. The group starts at the earliest offsets (it sets its
``share.auto.offset.reset`` group config). Needs aiohttp and prometheus_client: from a
clone, ``make install EXTRAS=aiohttp,prometheus``; from PyPI,
``pip install 'consumergroup[aiohttp,prometheus]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict, dataclass

from _support import Standalone, run_example
from aiohttp import web

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.integrations.aiohttp import setup_consumer_group


@dataclass
class JobTotals:
    """What the worker did so far (written by the handler, read by ``GET /stats``)."""

    done: int = 0
    retried: int = 0  # handled again after a failed delivery
    rejected: int = 0  # not a job: archived
    running: int = 0
    most_running: int = 0


class Worker(cg.ShareGroupHandler):
    """One call per job, up to ``concurrency`` at once."""

    def __init__(self, totals: JobTotals) -> None:
        self.totals = totals

    async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
        try:
            job = json.loads(record.value or b"")
        except ValueError:
            session.acknowledge(record, cg.AckType.REJECT)  # poison: never again
            self.totals.rejected += 1
            return
        if job.get("flaky") and record.delivery_count == 1:
            raise RuntimeError(f"job {job['id']} failed; it comes again")  # released
        totals = self.totals
        totals.running += 1
        totals.most_running = max(totals.most_running, totals.running)
        try:
            await asyncio.sleep(job.get("ms", 20) / 1000)  # the job's I/O
        finally:
            totals.running -= 1
        totals.done += 1
        if record.delivery_count > 1:
            totals.retried += 1


TOTALS = web.AppKey("totals", JobTotals)


async def stats(request: web.Request) -> web.Response:
    """The worker's totals."""
    return web.json_response(asdict(request.app[TOTALS]))


def create_app(bootstrap: str, topic: str, group_id: str, concurrency: int) -> web.Application:
    """The service: the share group runs in a cleanup_ctx; /stats reads the handler's totals."""
    totals = JobTotals()
    app = web.Application()
    app[TOTALS] = totals
    config = cg.Config(client_id="share-worker")
    config.share.close_timeout = 10.0
    group = cg.ShareGroup([bootstrap], group_id, config)
    setup_consumer_group(app, group, [topic], Worker(totals), concurrency=concurrency)
    app.router.add_get("/stats", stats)
    return app


async def serve(bootstrap: str, args: argparse.Namespace) -> None:
    """Start the group at the earliest offsets, serve on 127.0.0.1 until Ctrl-C / SIGTERM."""
    async with ClusterAdmin([bootstrap]) as admin:
        # A share group starts at the end of the log unless its config says otherwise.
        await admin.alter_group_configs(args.group, {"share.auto.offset.reset": "earliest"})
    runner = web.AppRunner(create_app(bootstrap, args.topic, args.group, args.concurrency))
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", args.port).start()
        print(f"serving on http://127.0.0.1:{args.port}", flush=True)
        await asyncio.Event().wait()  # until cg.run() cancels us on Ctrl-C / SIGTERM
    finally:
        await runner.cleanup()  # close the share group: acknowledge, release, leave
    print("stopped", flush=True)


def sample_job(i: int) -> bytes:
    """Job ``i`` of the standalone topic: every 20th is not JSON, every 15th is flaky."""
    if i % 20 == 19:
        return b"not a job"
    return json.dumps({"id": i, "ms": 20 + i % 5 * 10, "flaky": i % 15 == 7}).encode()


def main(argv: list[str] | None = None) -> int:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--port", type=int, default=8081)
        parser.add_argument("--concurrency", type=int, default=32)

    return run_example(
        argv,
        description="A job-worker aiohttp service on a share group.",
        group="job-workers",
        topic="jobs",
        standalone=Standalone(records=60, value=sample_job, kafka=True),
        consume=serve,
        add_arguments=add_arguments,
        service=True,
    )


if __name__ == "__main__":
    sys.exit(main())
