"""What another member of the group may send: malformed subscriptions and assignments.

The other member is scripted on the wire (a raw JoinGroup/SyncGroup over our own
connection, aiokafka's codecs), or a proxy garbles what the leader sent: a buggy or
hostile client in the same group. One such member must not end ours: the leader leaves
it out of the plan (it gets nothing) and says so; a member handed an assignment it
cannot read reports it and joins again.
"""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

import consumergroup as cg
from consumergroup.balance.protocol import MemberAssignment
from consumergroup.client import Client
from consumergroup.group.membership import UnreadableAssignmentError
from consumergroup.net.protocol import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

from ..conftest import TopicFactory, unique
from ..helpers import RoutingProxy, produce
from .group_support import Recorder, group_config, raw_join, running_member, wait_for

# ConsumerProtocolSubscription v1 claiming 5 topics, then cut short (as an assignment:
# 5 topics, then a topic name cut short).
_GARBAGE = b"\x00\x01\x00\x00\x00\x05\x00\x02ab"
_SYNC_GROUP = 14


def _join(group: str, config: cg.Config, instance: str, metadata: bytes) -> JoinGroupRequest:
    strategy = config.consumer.group.rebalance.strategies[0].name
    session_ms = int(config.consumer.group.session_timeout * 1000)
    return JoinGroupRequest(
        group, session_ms, session_ms, "", instance, "consumer", [(strategy, metadata)]
    )


async def test_a_member_with_a_malformed_subscription_gets_nothing_and_fails_no_one(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Our member leads; a second member joins with subscription bytes that do not parse.
    The leader plans without it (a warning names it), keeps both partitions, and the
    group goes on consuming; before, the leader's ValueError ended run() (FAILED)."""
    topic = await new_topic(partitions=2)
    group = unique()
    config = group_config()
    handler = Recorder()
    async with running_member(bootstrap, group, [topic], handler, config) as (member, task):
        await wait_for(lambda: handler.owned() == 2, 30, "our member to lead and claim both")
        generation = member.stats().generation_id
        async with Client([bootstrap], cg.Config(client_id="garbled")) as client:
            join = _join(group, config, "garbled", _GARBAGE)
            with caplog.at_level(logging.WARNING):
                # Joined, then synced as a follower (again, while the round was still
                # being planned: Tansu answers REBALANCE_IN_PROGRESS to an early one).
                for _ in range(10):
                    conn, resp = await raw_join(client, group, join)
                    assert resp["error_code"] == 0, resp
                    assert resp["leader_id"] != resp["member_id"], "ours leads"
                    sync = SyncGroupRequest(
                        group, resp["generation_id"], resp["member_id"], "garbled", []
                    )
                    answer = (await conn.send(sync, timeout=30)).to_object()
                    if answer["error_code"] == 0:
                        break
            assert answer["error_code"] == 0, answer
            assert MemberAssignment.decode(answer["member_assignment"] or b"").topics == {}
            await wait_for(
                lambda: member.stats().generation_id > generation and handler.owned() == 2,
                30,
                "the next generation, both partitions ours",
            )
            assert resp["member_id"] in caplog.text and "cannot read" in caplog.text
            await produce(bootstrap, topic, [b"a", b"b"], partition=0)
            await wait_for(lambda: len(handler.seen) >= 2, 30, "messages after the rebalance")
            assert member.state is not cg.GroupState.FAILED and not task.done()
            leave = LeaveGroupRequest(group, resp["member_id"], "garbled")
            await conn.send(leave, timeout=30)


class GarblingProxy(RoutingProxy):
    """The member's only path to the broker; replaces the assignment in the next
    ``times`` successful SyncGroup answers to ``client_id`` with bytes that do not parse,
    as a leader on a buggy client would send them."""

    def __init__(self, target_port: int, client_id: str, times: int) -> None:
        super().__init__(target_port)
        self.client_id = client_id
        self.left = times

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        frame = super().rewrite_response(key, version, client_id, frame)
        if key != _SYNC_GROUP or client_id != self.client_id or self.left <= 0:
            return frame
        # SyncGroup v0-v3: correlation id, throttle time (v1+), error code, assignment.
        at = 4 + (4 if version >= 1 else 0)
        if struct.unpack_from(">h", frame, at)[0]:
            return frame
        self.left -= 1
        return frame[: at + 2] + struct.pack(">i", len(_GARBAGE)) + _GARBAGE


async def test_an_assignment_that_does_not_parse_is_reported_and_joined_again(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The leader's SyncGroup answer carries assignment bytes that do not parse: the
    member reports it on errors() and joins again, then reads its partitions; before,
    the ValueError ended run() (FAILED)."""
    topic = await new_topic(partitions=2)
    config = group_config(consumer__return_errors=True)
    async with GarblingProxy(int(bootstrap.rsplit(":", 1)[1]), config.client_id, 1) as proxy:
        handler = Recorder()
        async with running_member(proxy.address, unique(), [topic], handler, config) as (
            member,
            task,
        ):
            error = await asyncio.wait_for(anext(member.errors()), 60)
            assert isinstance(error.cause, UnreadableAssignmentError), error
            assert "assignment" in str(error) and "cannot read" in str(error)
            await wait_for(lambda: handler.owned() == 2, 60, "the next generation's claims")
            await produce(bootstrap, topic, [b"a", b"b"], partition=1)
            await wait_for(lambda: len(handler.seen) >= 2, 30, "messages after the rejoin")
            assert member.state is not cg.GroupState.FAILED and not task.done()
            assert proxy.left == 0
