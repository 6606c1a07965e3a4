"""The one retry policy: what counts as transient, how long to wait, how to retry a call.

Every path that decides "try again or give up" asks :func:`is_transient`; every
loop that waits between attempts uses :class:`Backoff` (or :func:`retrying` for a
bounded number of quick retries of one request). The table in
docs/architecture.md ("Retry policy") lists the classes and what each path does.

* **transient** — the same operation may succeed later: broker codes Kafka marks
  retriable, dropped or refused connections, no broker answering at all
  (:class:`~consumergroup.errors.NoBrokersAvailableError`), timeouts, and the
  group-membership answers that only mean "rejoin" (:data:`REJOIN`).
* **fatal** — retrying cannot help: authorization, invalid configuration, a
  fenced static member, an assignor no other member shares, a closed object, a
  handler's own error.

The consumer group protocol (KIP-848) adds: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID
(the member lost its partitions: ``on_lost``, no commit, rejoin with epoch 0) are
:data:`FENCED`; UNRELEASED_INSTANCE_ID is transient (the previous holder of a static
member's instance id has not left yet: it is released when its session times out);
UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED and INVALID_REGULAR_EXPRESSION are fatal
(the configuration, or the broker's, must change); STALE_MEMBER_EPOCH on a commit or
an OffsetFetch (a heartbeat moved the member's epoch while the request was on its way)
is sent again under the epoch the next heartbeat brings (see the group's offset
manager), and is a :data:`REJOIN` answer where no heartbeat runs yet (the claims of a
join: joining again brings the current epoch). An OffsetFetch refused as FENCED ends
the session as fenced: ``on_lost``, rejoin with epoch 0.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from .errors import (
    ConsumerGroupError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    IllegalGenerationError,
    KafkaConnectionError,
    MemberIdRequiredError,
    NoBrokersAvailableError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RequestTimedOutError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)

if TYPE_CHECKING:
    from .config import RetryConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Answers that mean the member no longer owns its partitions: committing is pointless
#: and unsafe, and the member must rejoin (a new generation, or as a new member).
#: REBALANCE_IN_PROGRESS is not one: the member still owns its partitions until it
#: rejoins (a cooperative member keeps most of them).
FENCED: tuple[type[ConsumerGroupError], ...] = (
    IllegalGenerationError,
    UnknownMemberIdError,
    FencedMemberEpochError,
)

#: Membership answers that are not Kafka-retriable but are cured by trying again later.
RETRY_LATER: tuple[type[ConsumerGroupError], ...] = (UnreleasedInstanceIdError,)

#: Answers that end a join attempt but are cured by joining again (a stale member epoch:
#: the join's heartbeat brings the current one).
REJOIN: tuple[type[ConsumerGroupError], ...] = (
    *FENCED,
    RebalanceInProgressError,
    MemberIdRequiredError,
    StaleMemberEpochError,
)

#: Errors after which a group's coordinator must be looked up again: it moved, is
#: loading, or the connection to it failed (no broker answering included). All transient.
COORDINATOR_LOST: tuple[type[ConsumerGroupError], ...] = (
    NotCoordinatorError,
    CoordinatorNotAvailableError,
    CoordinatorLoadInProgressError,
    KafkaConnectionError,
    RequestTimedOutError,
)

#: Upper bound of :class:`Backoff` delays unless the base is larger (seconds).
BACKOFF_CAP = 10.0


def is_transient(exc: BaseException) -> bool:
    """True when the operation that raised ``exc`` may succeed if tried again later.

    The single definition used by the rebalance loop, heartbeats, commits and
    request retries: a :class:`~consumergroup.ConsumerGroupError` whose
    ``retriable`` flag is set (Kafka's retriable codes, connection errors, no
    broker answering), a :data:`REJOIN` or :data:`RETRY_LATER` answer, or an
    OS-level network error / timeout that escaped the connection layer.
    """
    if isinstance(exc, ConsumerGroupError):
        return exc.retriable or isinstance(exc, REJOIN + RETRY_LATER)
    return isinstance(exc, OSError | TimeoutError)


class Backoff:
    """Exponential backoff with jitter, capped: ``base``, ``2*base``, ... up to ``cap``.

    Each delay is drawn uniformly from ``[d/2, d]`` ("equal jitter"), so members that
    failed together do not retry in lockstep. :meth:`reset` after a success.
    """

    def __init__(self, base: float, cap: float = BACKOFF_CAP) -> None:
        self.base = base
        self.cap = max(base, cap)
        self.attempts = 0

    def next(self) -> float:
        """The delay before the next attempt (and count this attempt)."""
        delay: float = min(self.cap, self.base * 2.0 ** min(self.attempts, 30))
        self.attempts += 1
        return delay / 2 + random.uniform(0, delay / 2)

    def reset(self) -> None:
        """Start from ``base`` again."""
        self.attempts = 0


async def retrying(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    retry: RetryConfig,
    before_retry: Callable[[ConsumerGroupError], None] | None = None,
) -> T:
    """Run ``attempt``, again up to ``retry.max`` times after ``retry.backoff`` when it
    raises a retriable :class:`~consumergroup.ConsumerGroupError` (the flag
    :func:`is_transient` reads). :data:`REJOIN` answers go to the caller, which must
    rejoin, and so does :class:`~consumergroup.NoBrokersAvailableError` (every broker
    was just tried; a long-lived caller backs off itself). ``before_retry`` sees each
    error that is retried. Others raise at once."""
    for n in range(retry.max + 1):
        try:
            return await attempt()
        except ConsumerGroupError as exc:
            # REJOIN answers are for the caller; so is "no broker answered": any() has
            # just tried every broker, and the caller's own backoff is the next try.
            if not exc.retriable or isinstance(exc, NoBrokersAvailableError) or n == retry.max:
                raise
            if before_retry is not None:
                before_retry(exc)
            log.debug("%s: %s; retrying in %.2fs", what, exc, retry.backoff)
        await asyncio.sleep(retry.backoff)
    raise AssertionError("unreachable")
