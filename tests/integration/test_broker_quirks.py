"""The broker-quirk seam picks its work-arounds from what the broker answers."""

from __future__ import annotations

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.net.quirks import NO_QUIRKS


async def test_apache_kafka_gets_no_work_arounds_and_tansu_its_own(
    bootstrap: str, broker: str
) -> None:
    async with Client([bootstrap], cg.Config(client_id="quirks")) as client:
        quirks = (await client.any()).quirks
    if broker == "tansu":
        assert quirks.orphaned_leader and quirks.replays_held_join, quirks
        assert quirks.empty_past_log_end, quirks
    else:  # Apache Kafka, started by the suite or given by KAFKA_BOOTSTRAP_SERVERS
        assert quirks is NO_QUIRKS, quirks
