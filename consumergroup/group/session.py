"""ConsumerGroupSession: one generation of membership, run as one task group.

Inside the session's task group (nothing outlives it):

* the heartbeat task — REBALANCE_IN_PROGRESS, a fencing error or a lost
  coordinator ends the session;
* one task per claim running ``handler.consume_claim``;
* the auto-commit ticker;
* the partition watcher — every member (not only the leader, unlike sarama)
  ends the session when a subscribed topic's partition count changes;
* the loop watchdog (see :mod:`.watchdog`).

Ending (:meth:`ConsumerGroupSession.end`): ``done`` is set, every claim's
stream ends, handlers get ``rebalance.timeout`` to return and are then
cancelled, ``cleanup`` runs, marked offsets are committed, the claims are
released. Claims are owned by the session's registry and revoked one by one
(:meth:`_revoke`), so a cooperative protocol can later keep the claims a
rebalance does not revoke: a change of policy, not of structure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import anyio

from ..errors import (
    ConsumerError,
    ConsumerGroupError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaConnectionError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from ..offsets import FENCED
from .claim import ConsumerGroupClaim
from .watchdog import LoopWatchdog

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from ..message import ConsumerMessage
    from ..offsets import OffsetManager
    from .handler import ConsumerGroupHandler
    from .membership import Generation, Membership

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ErrorSink = Callable[[ConsumerError], None]


class ConsumerGroupSession:
    """One generation's claims, marks and lifecycle (sarama's ``ConsumerGroupSession``).

    Handed to every handler callback. ``done`` is set when the session is
    ending; ``claims`` maps topic -> claimed partitions.
    """

    def __init__(
        self,
        *,
        group_id: str,
        generation: Generation,
        claims: dict[TopicPartition, ConsumerGroupClaim],
        partition_counts: dict[str, int],
        client: Client,
        membership: Membership,
        offsets: OffsetManager,
        config: Config,
        on_error: ErrorSink,
    ) -> None:
        self.group_id = group_id
        self.member_id = generation.member_id
        self.generation_id = generation.generation_id
        self.done = anyio.Event()
        # The registry of claims this session owns; _revoke() removes them one by one.
        self._claims = claims
        # Subscribed topic -> its partition count when the session began.
        self._partition_counts = partition_counts
        self._client = client
        self._membership = membership
        self._offsets = offsets
        self._config = config
        self._on_error = on_error
        # Why the session ended (None: still running); a fatal error ends run().
        self.end_reason: str | None = None
        self.fatal: BaseException | None = None
        # Set when the next join must start as a new member (see _watch_partitions).
        self.rejoin_fresh = False
        # Handlers still running; _claims_done is set when it drops to zero.
        self._running_claims = 0
        self._claims_done = anyio.Event()
        self.watchdog = LoopWatchdog(config.consumer.group.session_timeout / 3, _claim_on_stack)

    def __repr__(self) -> str:
        return (
            f"<ConsumerGroupSession {self.group_id} member={self.member_id} "
            f"generation={self.generation_id} claims={self.claims}>"
        )

    @property
    def claims(self) -> dict[str, list[int]]:
        """topic -> sorted partitions this member owns in this generation."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self._claims):
            out.setdefault(topic, []).append(partition)
        return out

    # ------------------------------------------------------------------ marking

    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Mark ``msg`` processed: its offset + 1 is committed next (sarama semantics)."""
        self._offsets.mark(msg.topic, msg.partition, msg.offset + 1, metadata)

    def mark_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Mark ``offset`` as the next to consume (only moves forward)."""
        self._offsets.mark(topic, partition, offset, metadata)

    def reset_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Set the next offset to commit, backwards too (takes effect at the next commit)."""
        self._offsets.reset(topic, partition, offset, metadata)

    async def commit(self) -> None:
        """Commit marked offsets now (also done every ``auto_commit.interval`` and at the end)."""
        await self._offsets.commit()

    # ------------------------------------------------------------------ lifecycle

    def end(self, reason: str, fatal: BaseException | None = None) -> None:
        """Start ending the session (idempotent): set ``done`` and end every claim's stream."""
        if fatal is not None and self.fatal is None:
            self.fatal = fatal
        if self.done.is_set():
            return
        self.end_reason = reason
        log.info(
            "group %r generation %d: session ending: %s", self.group_id, self.generation_id, reason
        )
        self.done.set()
        for claim in self._claims.values():
            claim._pc.stop()

    async def run(self, handler: ConsumerGroupHandler) -> None:
        """Run the session to its end, then cleanup, final commit and release."""
        config = self._config
        try:
            await handler.setup(self)
            async with anyio.create_task_group() as background:
                background.start_soon(self._heartbeat_loop)
                background.start_soon(self.watchdog.run)
                if config.consumer.offsets.auto_commit.enable:
                    background.start_soon(self._commit_loop)
                background.start_soon(self._watch_partitions)
                async with anyio.create_task_group() as claims:
                    self._running_claims = len(self._claims)
                    if not self._claims:
                        self._claims_done.set()
                    for claim in self._claims.values():
                        claims.start_soon(
                            self._run_claim,
                            handler,
                            claim,
                            name=f"claim-{claim.topic}-{claim.partition}",
                        )
                    await self.done.wait()
                    with anyio.move_on_after(config.consumer.group.rebalance.timeout) as waited:
                        await self._claims_done.wait()
                    if waited.cancelled_caught:
                        log.warning(
                            "group %r: handlers still running %.1fs after the session "
                            "ended; cancelling them",
                            self.group_id,
                            config.consumer.group.rebalance.timeout,
                        )
                        claims.cancel_scope.cancel()
                background.cancel_scope.cancel()
        finally:
            self.end("session task cancelled")
            await self._finish(handler)

    async def _finish(self, handler: ConsumerGroupHandler) -> None:
        """cleanup + final commit + release, bounded and shielded from cancellation."""
        bound = self._config.consumer.group.rebalance.timeout
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(bound):
                try:
                    await handler.cleanup(self)
                except Exception as exc:
                    self._report(ConsumerError(f"cleanup raised {exc!r}", cause=exc))
            with anyio.move_on_after(bound):
                try:
                    await self._offsets.commit()
                except FENCED as exc:
                    log.warning(
                        "group %r: final commit refused (%s): the partitions moved on; "
                        "uncommitted messages will be read again by their new owner",
                        self.group_id,
                        type(exc).__name__,
                    )
                except ConsumerGroupError as exc:
                    self._report(ConsumerError(f"final commit failed: {exc}", cause=exc))
            self._revoke(list(self._claims))

    def _revoke(self, partitions: list[TopicPartition]) -> None:
        """Drop claims from the registry and release their offsets (after their commit)."""
        for tp in partitions:
            claim = self._claims.pop(tp, None)
            if claim is not None:
                claim._pc.stop()
        self._offsets.release(partitions)

    async def _run_claim(self, handler: ConsumerGroupHandler, claim: ConsumerGroupClaim) -> None:
        try:
            await handler.consume_claim(self, claim)
        except Exception as exc:
            err = ConsumerError(
                "consume_claim raised; its unmarked messages will be read again",
                topic=claim.topic,
                partition=claim.partition,
                cause=exc,
            )
            if self._config.consumer.return_errors:
                self._report(err)
            else:
                self.end(f"handler failed on {claim.topic}/{claim.partition}", fatal=err)
        finally:
            self._running_claims -= 1
            if self._running_claims == 0:
                self._claims_done.set()
            claim._pc.stop()

    def _report(self, err: ConsumerError) -> None:
        log.error("group %r: %s", self.group_id, err)
        self._on_error(err)

    # --------------------------------------------------------------- background

    async def _heartbeat_loop(self) -> None:
        group = self._config.consumer.group
        last_ok = time.monotonic()
        # Runs until the session's task group is cancelled: while handlers drain after
        # `done`, heartbeats keep the membership alive.
        while True:
            await anyio.sleep(group.heartbeat_interval)
            try:
                await self._membership.heartbeat()
                last_ok = time.monotonic()
            except RebalanceInProgressError:
                self.end("the group is rebalancing")
            except (UnknownMemberIdError, FencedInstanceIdError) as exc:
                self._membership.reset()
                self.end(f"{type(exc).__name__}: the coordinator no longer knows this member")
                return
            except IllegalGenerationError:
                self.end("a newer generation exists")
                return
            except (KafkaConnectionError, KafkaError) as exc:  # incl. request timeouts
                self._client.invalidate_coordinator(self.group_id)
                if time.monotonic() - last_ok > group.session_timeout:
                    self.end(f"no heartbeat got through for {group.session_timeout}s ({exc})")
                    return
                log.info("group %r: heartbeat failed (%s); retrying", self.group_id, exc)
                await anyio.sleep(self._config.metadata.retry.backoff)

    async def _commit_loop(self) -> None:
        interval = self._config.consumer.offsets.auto_commit.interval
        while not self.done.is_set():
            with anyio.move_on_after(interval):
                await self.done.wait()
            if self.done.is_set():
                return  # the final commit follows in _finish()
            try:
                await self._offsets.commit()
            except FENCED as exc:
                self.end(f"commit refused: {type(exc).__name__}")
            except ConsumerGroupError as exc:
                self._report(ConsumerError(f"auto-commit failed: {exc}", cause=exc))

    async def _watch_partitions(self) -> None:
        interval = self._config.consumer.group.partition_watch_interval
        while not self.done.is_set():
            with anyio.move_on_after(interval):
                await self.done.wait()
            if self.done.is_set():
                return
            try:
                await self._client.refresh_metadata(*self._partition_counts)
            except ConsumerGroupError as exc:
                log.info(
                    "group %r: partition watch could not refresh metadata: %s", self.group_id, exc
                )
                continue
            for topic, count in self._partition_counts.items():
                now = len(self._client.cached_partitions(topic) or ())
                if now != count:
                    # A coordinator answers a follower that rejoins with unchanged metadata
                    # with the old assignment; leaving first forces the rebalance.
                    self.rejoin_fresh = True
                    self.end(f"topic {topic!r} now has {now} partitions (was {count})")
                    return


def _claim_on_stack(frame: FrameType | None) -> str:
    """Name the claim whose handler holds the loop, from the loop thread's stack."""
    while frame is not None:
        if frame.f_code is ConsumerGroupSession._run_claim.__code__:
            claim = frame.f_locals.get("claim")
            return (
                f"in consume_claim for {claim.topic}/{claim.partition}" if claim else "in a claim"
            )
        frame = frame.f_back
    return "outside any claim handler"
