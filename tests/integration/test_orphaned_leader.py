"""A group whose coordinator waits for a leader that left (the chaos suite's seed-7 livelock).

On Tansu 0.6 a LeaveGroup from the member the coordinator chose as leader of a
forming generation removes the member but not the leader: every later JoinGroup
names the departed leader, no member is told it leads, every SyncGroup is held
~0.8 session timeouts and answered REBALANCE_IN_PROGRESS, for ever. The member
must notice and unblock the group. On Apache Kafka the same sequence is an
ordinary departure, and the member simply joins.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest

import consumergroup as cg
from consumergroup.balance.protocol import MemberSubscription
from consumergroup.client import Client
from consumergroup.errors import MemberIdRequiredError
from consumergroup.net.protocol import JoinGroupRequest, LeaveGroupRequest
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.group_support import (
    Recorder,
    group_config,
    raw_join,
    silent_leader,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


async def _join_then_leave(bootstrap: str, group: str, topic: str, config: cg.Config) -> str:
    """A raw member joins (becoming the leader of the forming generation) and leaves
    before its SyncGroup, as a member closed mid-join does. Returns its member id."""
    strategy = config.consumer.group.rebalance.strategies[0].name
    meta = MemberSubscription(topics=[topic], user_data=None, version=3).encode()
    session_ms = int(config.consumer.group.session_timeout * 1000)
    async with Client([bootstrap], cg.Config(client_id="departing")) as client:
        member_id = ""
        for _ in range(2):  # MEMBER_ID_REQUIRED first (Tansu, and Kafka >= 2.2), then the join
            join = JoinGroupRequest(
                group, session_ms, session_ms, member_id, None, "consumer", [(strategy, meta)]
            )
            conn, resp = await raw_join(client, group, join)
            member_id = resp["member_id"]
            if resp["error_code"] != MemberIdRequiredError.errno:
                break
        assert resp["error_code"] == 0, resp
        assert resp["leader_id"] == member_id, "the first member to join leads"
        await conn.send(LeaveGroupRequest(group, member_id, None))
    return member_id


async def _forms_without(
    bootstrap: str,
    group: str,
    topic: str,
    config: cg.Config,
    departed: str,
    on_tansu: bool,
    caplog: pytest.LogCaptureFixture,
    check: Callable[[cg.ConsumerGroup, Recorder], None],
) -> None:
    """Run one member in ``group`` until it consumed 10 records, that is until the group
    formed although ``departed`` was named its leader, then ``check`` it while it runs;
    on Tansu, the stall must have been recognised and ended by the poke under the
    departed leader's id."""
    handler = Recorder()
    member = cg.ConsumerGroup([bootstrap], group, config)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(member.close, 10.0)
        run = asyncio.create_task(member.run([topic], handler))
        await produce(bootstrap, topic, [b"%d" % i for i in range(10)])
        # Before the fixes: no generation ever completed (SyncGroup answered
        # REBALANCE_IN_PROGRESS every ~8 s). Now: two stalled rounds, a poke, an eviction.
        await wait_for(lambda: len(set(handler.seen)) == 10, 60, "the group to form")
        assert not run.done()
        check(member, handler)
        if on_tansu:
            assert f"named leader {departed}" in caplog.text
        await member.close(10.0)
        await asyncio.wait_for(run, 5)


async def test_a_group_whose_leader_left_mid_join_still_forms(
    bootstrap: str, new_topic: TopicFactory, on_tansu: bool, caplog: pytest.LogCaptureFixture
) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    config = group_config()
    departed = await _join_then_leave(bootstrap, group, topic, config)

    def a_new_member(member: cg.ConsumerGroup, _: Recorder) -> None:
        assert member.member_id != departed

    await _forms_without(bootstrap, group, topic, config, departed, on_tansu, caplog, a_new_member)


async def test_a_static_group_whose_leader_vanished_still_forms(
    bootstrap: str, new_topic: TopicFactory, on_tansu: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """On Tansu 0.6 only a request without a group_instance_id (or a Heartbeat while the
    group forms) evicts silent members: in a group of static members nothing did, so the
    joining member was told the silent leader leads, for ever; and poking the leader's id
    again evicted it and re-made it leader in the same request. Before the fix this test
    timed out (the intermittent failure of test_static_membership's no-LeaveGroup case)."""
    topic = await new_topic(partitions=2)
    group = unique()
    config = group_config()
    config.consumer.group.instance_id = "survivor"
    departed = await silent_leader(bootstrap, group, topic, config)

    def owns_both(_: cg.ConsumerGroup, handler: Recorder) -> None:
        assert handler.owned() == 2

    await _forms_without(bootstrap, group, topic, config, departed, on_tansu, caplog, owns_both)
