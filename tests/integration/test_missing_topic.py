"""A subscribed topic that does not exist is waited for (Java's and librdkafka's rule):
not created yet when the member starts, deleted and re-created while it runs."""

from __future__ import annotations

import logging

import pytest

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.integrations._service import ServiceHealth
from tests.conftest import unique
from tests.helpers import delete_topic, produce
from tests.integration.group_support import Recorder, running_member, wait_for

pytestmark = pytest.mark.slow


def waiting_for(member: cg.ConsumerGroup, topic: str) -> bool:
    stats = member.stats()
    return stats.state is cg.GroupState.JOINING and f"'{topic}'" in (stats.error or "")


async def test_a_member_started_before_its_topic_waits_and_joins_once_it_exists(
    bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="consumergroup")
    topic = unique("t")
    handler = Recorder()
    async with running_member(bootstrap, unique(), [topic], handler) as (member, task):
        await wait_for(lambda: waiting_for(member, topic), 30, "the member to say it waits")
        status, body = ServiceHealth([member], metrics=False).ready()
        assert status == 503
        [group] = body["groups"]  # type: ignore[misc]
        assert group["state"] == "joining" and "does not exist" in group["error"]
        assert not task.done()
        async with Client([bootstrap]) as client:
            await client.create_topic(topic, 2)
        await produce(bootstrap, topic, [b"a", b"b", b"c", b"d"])
        await wait_for(lambda: len(handler.seen) == 4, 30, "the records of the new topic")
        assert member.state is cg.GroupState.STABLE and member.stats().error is None
    # One warning for the wait (then one a minute), not one per check.
    waits = [r for r in caplog.records if "does not exist" in r.getMessage()]
    assert len(waits) == 1, [r.getMessage() for r in waits]


async def test_a_topic_deleted_and_recreated_is_picked_up_again(bootstrap: str) -> None:
    topic = unique("t")
    async with Client([bootstrap]) as client:
        await client.create_topic(topic, 1)
    await produce(bootstrap, topic, [b"before"])
    handler = Recorder()
    async with running_member(bootstrap, unique(), [topic], handler) as (member, task):
        await wait_for(lambda: len(handler.seen) == 1, 30, "the first record")
        await delete_topic(bootstrap, topic)
        await wait_for(lambda: waiting_for(member, topic), 30, "the member to wait for the topic")
        async with Client([bootstrap]) as client:
            await client.create_topic(topic, 1)
        await produce(bootstrap, topic, [b"after"])
        await wait_for(lambda: len(handler.seen) == 2, 30, "the record of the re-created topic")
        assert not task.done()
        assert member.state is cg.GroupState.STABLE
