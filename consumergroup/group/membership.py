"""Membership: the group protocol calls of one member (the Java ``AbstractCoordinator`` core).

JoinGroup -> (leader: run the assignor) -> SyncGroup, with sarama's ``newSession``
retry table; Heartbeat; LeaveGroup. Holds the member id and generation, which
outlive sessions: a member rejoins with its id so the coordinator can recognise
it. No tasks here; the session's heartbeat task calls :meth:`heartbeat`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from .._dataclass import dataclass
from ..balance.protocol import MemberAssignment, MemberSubscription
from ..errors import (
    ConsumerGroupError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    KafkaConnectionError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    error_for_code,
)
from ..net.protocol import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from ..net.quirks import NO_QUIRKS, OrphanedLeaderPoke
from ..retry import COORDINATOR_LOST, Backoff
from .logs import GroupLogger

if TYPE_CHECKING:
    from ..balance.strategy import BalanceStrategy
    from ..client import Client
    from ..config import Config
    from ..net.connection import BrokerConnection

_log = logging.getLogger(__name__)


class UnreadableAssignmentError(ConsumerGroupError):
    """The leader sent this member an assignment that does not parse (another client's
    bug): transient, the member reports it and joins again, maybe under another leader."""

    retriable = True


@dataclass(slots=True)
class Generation:
    """What one successful JoinGroup + SyncGroup gave this member."""

    generation_id: int
    member_id: str
    leader_id: str
    protocol: str
    assignment: dict[str, list[int]]
    user_data: bytes | None = None
    members: dict[str, MemberSubscription] = field(default_factory=dict)  # leader only
    #: KIP-429: this member keeps the claims the assignment keeps (see Membership.cooperative).
    cooperative: bool = False

    @property
    def is_leader(self) -> bool:
        """True when this member ran the assignor for the generation."""
        return self.leader_id == self.member_id


class Membership:
    """One member's identity in ``group`` and the calls that change it."""

    protocol = "classic"

    def __init__(self, client: Client, group: str, config: Config) -> None:
        self._client = client
        self.group = group
        self._config = config
        # Written by join() (and reset on fencing errors); read by heartbeat/commit/leave.
        self.member_id = ""
        self.generation_id = -1
        self.instance_id = config.consumer.group.instance_id
        # The last assignment received: the history sticky assignors publish in user data.
        self.assignment: dict[str, list[int]] = {}
        self.log = GroupLogger(_log, group, lambda: self.member_id)
        # The coordinator's departures from Kafka's protocol (net.quirks), from its answers.
        self.quirks = NO_QUIRKS
        self._orphaned = OrphanedLeaderPoke(self.log, config.consumer.group.session_timeout)
        # The coordinator connection whose JoinGroup/SyncGroup was cancelled while held.
        self._abandoned: BrokerConnection | None = None

    def _strategies(self) -> list[BalanceStrategy]:
        return list(self._config.consumer.group.rebalance.strategies)

    @property
    def cooperative(self) -> bool:
        """True when every configured strategy is cooperative (Java's rule, KIP-429).

        One eager strategy in the list makes this member eager: it revokes everything
        before each join, whatever the group chooses, so a rolling upgrade from
        ``[range]`` through ``[cooperative-sticky, range]`` to ``[cooperative-sticky]``
        never has a partition owned twice.
        """
        return all(s.rebalance_protocol == "cooperative" for s in self._strategies())

    def reset(self) -> None:
        """Forget the member id (after UNKNOWN_MEMBER_ID): the next join starts fresh."""
        self.member_id = ""
        self.generation_id = -1
        self.assignment = {}

    def _fenced(self, where: str) -> FencedInstanceIdError:
        return FencedInstanceIdError(
            f"group {self.group!r}: {where}: another member joined with group_instance_id "
            f"{self.instance_id!r} and fenced this one; it stops (not retried). Give every "
            "member its own consumer.group.instance_id"
        )

    async def _coordinator_send(
        self, request: Any, timeout: float | None = None, *, held: bool = False
    ) -> Any:
        """``request`` to the coordinator. ``held``: a JoinGroup/SyncGroup, which the
        coordinator may hold for seconds. Cancelled, its answer is still due on the
        connection, and a broker answers a connection's requests in order: the connection
        is remembered as abandoned, and retired before the next request (see
        :meth:`_drop_abandoned`, :meth:`leave`)."""
        self._drop_abandoned()
        conn = await self._client.coordinator(self.group)
        self.quirks = conn.quirks
        try:
            return await conn.send(request, timeout=timeout)
        except (KafkaConnectionError, RequestTimedOutError):
            self._client.invalidate_coordinator(self.group)
            raise
        except asyncio.CancelledError:
            if held:
                self._abandoned = conn
            raise

    def _drop_abandoned(self) -> None:
        """Retire the connection whose held request was cancelled, so that nothing waits
        behind that request's answer: the next request dials afresh."""
        abandoned, self._abandoned = self._abandoned, None
        if abandoned is not None:
            abandoned.retire("a request the coordinator held on it was abandoned")

    async def join(self, topics: Sequence[str], owned: dict[str, list[int]]) -> Generation:
        """JoinGroup + SyncGroup until this member holds an assignment for a generation.

        ``owned``: the partitions this member still holds (a cooperative member's kept
        claims; empty for an eager member, which revoked everything first). The
        subscription is ConsumerProtocol v3: owned partitions, generation and
        ``config.client_rack`` (KIP-881; none when empty).

        Retry table (sarama ``newSession``): MEMBER_ID_REQUIRED -> rejoin at once
        with the id the broker gave; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION ->
        reset the member id and rejoin at once; NOT_COORDINATOR /
        COORDINATOR_NOT_AVAILABLE -> find the coordinator again, back off (jittered),
        retry; REBALANCE_IN_PROGRESS -> join the new round at once; anything else
        raises, and the group's rebalance loop decides (:func:`~consumergroup.retry.is_transient`).
        """
        retry = self._config.consumer.group.rebalance.retry
        backoff = Backoff(retry.backoff, cap=retry.backoff)  # jitter only: no lockstep
        backoffs = 0
        while True:
            try:
                return await self._join_once(topics, owned)
            except MemberIdRequiredError:
                continue  # _join_once stored the id the broker handed out
            except (UnknownMemberIdError, IllegalGenerationError) as exc:
                self.log.info("%s; rejoining as a new member", type(exc).__name__)
                self.reset()
                continue
            except COORDINATOR_LOST as exc:  # find it again, back off, retry
                self._client.invalidate_coordinator(self.group)
                error: ConsumerGroupError = exc
                delay = backoff.next()
            except RebalanceInProgressError as exc:
                # Another member joined after this round closed: join the new round now
                # (as Java's client does), while it is open, not after a backoff.
                error, delay = exc, 0.0
                if self.quirks.orphaned_leader:
                    await self._orphaned.after_stalled_sync(
                        self.member_id,
                        lambda leader: self._join_as(topics, owned, leader),
                        self._heartbeat_answer,
                    )
            backoffs += 1
            if backoffs > retry.max:
                raise error
            self.log.info(
                "join failed (%s); retry %d/%d in %.1fs",
                type(error).__name__,
                backoffs,
                retry.max,
                delay,
            )
            await asyncio.sleep(delay)

    async def _join_as(
        self, topics: Sequence[str], owned: dict[str, list[int]], member_id: str
    ) -> None:
        """One JoinGroup under ``member_id``, answer dropped (``orphaned_leader``'s poke).

        Dynamic (no instance id): a static one would bind our instance id to it."""
        await self._send_join(self._join_request(topics, owned, member_id, None))

    async def _heartbeat_answer(self) -> str:
        """One Heartbeat under this member's ids; the name of the error it was answered."""
        request = HeartbeatRequest(self.group, self.generation_id, self.member_id, self.instance_id)
        resp = await self._coordinator_send(request, timeout=self._config.net.read_timeout)
        return error_for_code(resp.error_code).__name__ if resp.error_code else "no error"

    def _join_request(
        self,
        topics: Sequence[str],
        owned: dict[str, list[int]],
        member_id: str,
        instance_id: str | None,
    ) -> JoinGroupRequest:
        group_cfg = self._config.consumer.group
        protocols = []
        for strategy in self._strategies():
            user_data = strategy.subscription_user_data(
                list(topics), self.assignment, self.generation_id
            )
            if user_data is None and group_cfg.member.user_data:
                user_data = group_cfg.member.user_data
            meta = MemberSubscription(
                topics=sorted(topics),
                user_data=user_data,
                owned_partitions=owned,
                generation_id=self.generation_id,
                rack_id=self._config.client_rack or None,
                version=3,
            )
            protocols.append((strategy.name, meta.encode()))
        return JoinGroupRequest(
            self.group,
            int(group_cfg.session_timeout * 1000),
            int(group_cfg.rebalance.timeout * 1000),
            member_id,
            instance_id,
            "consumer",
            protocols,
        )

    async def _send_join(self, request: JoinGroupRequest) -> dict[str, Any]:
        # The coordinator may hold a JoinGroup for up to the rebalance timeout.
        timeout = self._config.consumer.group.rebalance.timeout + self._config.net.read_timeout
        resp: dict[str, Any] = (
            await self._coordinator_send(request, timeout=timeout, held=True)
        ).to_object()
        return resp

    async def _join_once(self, topics: Sequence[str], owned: dict[str, list[int]]) -> Generation:
        group_cfg = self._config.consumer.group
        self._orphaned.round_started()
        resp = await self._send_join(
            self._join_request(topics, owned, self.member_id, self.instance_id)
        )
        code = resp["error_code"]
        if code == MemberIdRequiredError.errno:
            self.member_id = resp["member_id"]
            raise MemberIdRequiredError()
        if code == InconsistentGroupProtocolError.errno:
            names = [s.name for s in self._strategies()]
            raise InconsistentGroupProtocolError(
                f"group {self.group!r}: no assignor is shared by all members (ours: {names}); "
                "configure consumer.group.rebalance.strategies to include one the others use"
            )
        if code == FencedInstanceIdError.errno:
            raise self._fenced("JoinGroup")
        if code:
            raise error_for_code(code)(f"JoinGroup {self.group!r}")
        self.member_id = resp["member_id"]
        self.generation_id = resp["generation_id"]
        self._orphaned.round_named(self.generation_id, resp["leader_id"])
        protocol = resp.get("group_protocol") or resp.get("protocol_name") or ""
        chosen = next((s for s in self._strategies() if s.name == protocol), None)
        if chosen is None:
            raise InconsistentGroupProtocolError(
                f"group {self.group!r} chose assignor {protocol!r}, which this member lacks"
            )
        members: dict[str, MemberSubscription] = {}
        assignments: list[tuple[str, bytes]] = []
        if resp["leader_id"] == self.member_id:
            unreadable = []
            for m in resp["members"]:
                try:
                    members[m["member_id"]] = MemberSubscription.decode(m["member_metadata"])
                except ValueError as exc:
                    # One member's bug must not end the group: it is planned without,
                    # and assigned nothing.
                    self.log.warning(
                        "member %r sent a subscription this leader cannot read (%s): it is "
                        "assigned nothing in generation %d",
                        m["member_id"],
                        exc,
                        self.generation_id,
                    )
                    unreadable.append((m["member_id"], MemberAssignment({}).encode()))
            assignments = await self._plan(chosen, members) + unreadable
        sync = SyncGroupRequest(
            self.group, self.generation_id, self.member_id, self.instance_id, assignments
        )
        sync_resp = (
            await self._coordinator_send(
                sync, timeout=group_cfg.rebalance.timeout + self._config.net.read_timeout, held=True
            )
        ).to_object()
        if sync_resp["error_code"] == FencedInstanceIdError.errno:
            raise self._fenced("SyncGroup")
        if sync_resp["error_code"]:
            raise error_for_code(sync_resp["error_code"])(f"SyncGroup {self.group!r}")
        self._orphaned.completed()
        try:
            assignment = MemberAssignment.decode(sync_resp["member_assignment"] or b"")
        except ValueError as exc:
            raise UnreadableAssignmentError(
                f"group {self.group!r}: the leader {resp['leader_id']!r} sent generation "
                f"{self.generation_id}'s assignment in bytes this member cannot read ({exc}); "
                "joining again (a member on another client, or version, leads the group?)"
            ) from exc
        self.assignment = {t: sorted(p) for t, p in assignment.topics.items()}
        return Generation(
            self.generation_id,
            self.member_id,
            resp["leader_id"],
            protocol,
            dict(self.assignment),
            assignment.user_data,
            members,
            cooperative=self.cooperative,
        )

    async def _plan(
        self, strategy: BalanceStrategy, members: dict[str, MemberSubscription]
    ) -> list[tuple[str, bytes]]:
        """Leader only: run the assignor over every member's subscription, with the racks
        of every partition's replicas (KIP-881)."""
        topics = sorted({t for m in members.values() for t in m.topics})
        await self._client.refresh_metadata(*topics)
        partitions = {}
        for topic in topics:
            parts = self._client.cached_partitions(topic)
            if parts is not None:
                partitions[topic] = parts
            else:
                self.log.warning(
                    "subscribed topic %r does not exist; assigning nothing of it", topic
                )
        plan = strategy.plan_with_racks(members, partitions, self._client.replica_racks(partitions))
        out = []
        for member_id in members:
            share = plan.get(member_id, {})
            user_data = strategy.assignment_user_data(member_id, share, self.generation_id)
            out.append((member_id, MemberAssignment(share, user_data).encode()))
        return out

    async def heartbeat(self) -> None:
        """One Heartbeat; raises the broker's error (REBALANCE_IN_PROGRESS ends the session)."""
        timeout = min(self._config.net.read_timeout, self._config.consumer.group.session_timeout)
        resp = await self._coordinator_send(
            HeartbeatRequest(self.group, self.generation_id, self.member_id, self.instance_id),
            timeout=timeout,
        )
        if resp.error_code == FencedInstanceIdError.errno:
            raise self._fenced("Heartbeat")
        if resp.error_code:
            raise error_for_code(resp.error_code)(f"Heartbeat {self.group!r}")

    async def leave(self, permanent: bool = True) -> None:
        """LeaveGroup, so the others rebalance now rather than after the session timeout.

        Not ``permanent`` (a static member closing without ``leave_group``): nothing is
        sent, and the member's partitions wait for it until its session timeout.

        After a cancelled join (close() during a join) it goes out on a fresh connection,
        answered at once (Kafka then drops the pending join). On a coordinator with the
        ``replays_held_join`` quirk (net.quirks) a copy is also posted behind the
        abandoned JoinGroup, unanswered.
        """
        if not self.member_id or not permanent:
            return
        request = LeaveGroupRequest(self.group, self.member_id, self.instance_id)
        abandoned = self._abandoned
        if self.quirks.replays_held_join and abandoned is not None and not abandoned.closed:
            abandoned.post(request)
        resp = await self._coordinator_send(request)
        code = getattr(resp, "error_code", 0)
        if code and code != UnknownMemberIdError.errno:
            self.log.info("LeaveGroup answered %s", error_for_code(code).__name__)
        self.reset()
