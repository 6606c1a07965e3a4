"""Every member (not only the leader) rebalances the group when a topic gains partitions.

Tansu lacks CreatePartitions, so the growth is staged by a proxy that hides
partitions from the members' Metadata answers until the test reveals them.
"""

from __future__ import annotations

import pytest

from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.group_support import Recorder, group_config, running_member, wait_for
from tests.integration.metadata_proxy import MetadataFilterProxy

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("watching", ["first", "second"])
async def test_new_partitions_trigger_a_rebalance_from_any_member(watching: str) -> None:
    proxy_port = free_port()
    topic = unique("grow")
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        MetadataFilterProxy(broker.port, proxy_port, topic, client_id="test") as proxy,
    ):
        await broker.create_topic(topic, 4)
        proxy.visible = 2
        slow, fast = group_config(), group_config()
        slow.consumer.group.partition_watch_interval = 1000.0  # this one never looks
        first_cfg, second_cfg = (fast, slow) if watching == "first" else (slow, fast)
        group = unique()
        a, b = Recorder("a"), Recorder("b")
        through_proxy = f"127.0.0.1:{proxy_port}"  # every member connection is filtered
        async with running_member(through_proxy, group, [topic], a, first_cfg):
            await wait_for(lambda: a.owned() == 2, 30, "a to own the 2 visible partitions")
            async with running_member(through_proxy, group, [topic], b, second_cfg):
                await wait_for(lambda: a.owned() == 1 and b.owned() == 1, 40, "the split of 2")
                await produce(broker.bootstrap, topic, [b"x"] * 8)
                proxy.visible = 4
                await wait_for(lambda: a.owned() + b.owned() == 4, 40, "all 4 partitions claimed")
                await wait_for(
                    lambda: {p for _, p, _ in a.seen + b.seen} == {0, 1, 2, 3},
                    30,
                    "messages from the new partitions",
                )
        watcher = a if watching == "first" else b
        assert any("now has 4 partitions" in (r or "") for r in watcher.end_reasons), (
            a.end_reasons,
            b.end_reasons,
        )
