"""The one retry policy: what is transient, and the backoff between attempts."""

from __future__ import annotations

import pytest

from consumergroup import errors
from consumergroup.config import RetryConfig
from consumergroup.retry import (
    COORDINATOR_LOST,
    FENCED,
    REJOIN,
    Backoff,
    is_transient,
    retrying,
)


@pytest.mark.parametrize(
    "exc",
    [
        # Defect 3: no broker answering used to escape every transient-error path.
        errors.NoBrokersAvailableError("none of the brokers answered"),
        errors.KafkaConnectionError("connection to b1:9092 refused"),
        errors.RequestTimedOutError("Heartbeat"),
        errors.NotCoordinatorError("JoinGroup"),
        errors.CoordinatorNotAvailableError("FindCoordinator"),
        errors.NotLeaderOrFollowerError("ListOffsets t/0"),
        errors.LeaderNotAvailableError("t/0"),
        errors.RebalanceInProgressError("JoinGroup"),  # rejoin
        errors.UnknownMemberIdError("SyncGroup"),  # rejoin as a new member
        errors.IllegalGenerationError("SyncGroup"),
        errors.MemberIdRequiredError("JoinGroup"),
        # The consumer protocol (KIP-848): lost partitions, rejoin with epoch 0 ...
        errors.FencedMemberEpochError("ConsumerGroupHeartbeat"),
        # ... and a static member's instance id still held by its previous incarnation.
        errors.UnreleasedInstanceIdError("ConsumerGroupHeartbeat"),
        ConnectionResetError("reset by peer"),
        TimeoutError(),
    ],
)
def test_transient(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        errors.GroupAuthorizationFailedError("JoinGroup"),
        errors.TopicAuthorizationFailedError("Fetch"),
        errors.SaslAuthenticationFailedError("SASL"),
        errors.FencedInstanceIdError("JoinGroup"),
        errors.InconsistentGroupProtocolError("JoinGroup"),
        errors.InvalidSessionTimeoutError("JoinGroup"),
        errors.UnsupportedAssignorError("ConsumerGroupHeartbeat"),
        errors.GroupMaxSizeReachedError("ConsumerGroupHeartbeat"),
        errors.InvalidRegularExpressionError("ConsumerGroupHeartbeat"),
        errors.ConfigurationError("bad"),
        errors.ClosedError("closed"),
        errors.ConsumerError("handler failed", cause=RuntimeError("boom")),
        RuntimeError("a bug"),
    ],
)
def test_fatal(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_a_consumer_error_follows_its_cause() -> None:
    assert is_transient(errors.ConsumerError("fetch", cause=errors.KafkaConnectionError("x")))


def test_no_brokers_is_a_connection_error() -> None:
    """So every ``except KafkaConnectionError`` (and COORDINATOR_LOST) covers it."""
    assert issubclass(errors.NoBrokersAvailableError, errors.KafkaConnectionError)
    assert isinstance(errors.NoBrokersAvailableError("x"), COORDINATOR_LOST)
    assert not isinstance(errors.NoBrokersAvailableError("x"), FENCED)


def test_rebalance_in_progress_is_a_rejoin_answer_not_fencing() -> None:
    """The member still owns its partitions while the group rebalances: not FENCED (whose
    handlers say "the partitions moved on"), but still a transient REJOIN answer."""
    exc = errors.RebalanceInProgressError("x")
    assert not isinstance(exc, FENCED)
    assert isinstance(exc, REJOIN) and is_transient(exc)
    assert isinstance(errors.IllegalGenerationError("x"), FENCED)
    assert isinstance(errors.UnknownMemberIdError("x"), FENCED)


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    backoff = Backoff(0.5, cap=4.0)
    delays = [backoff.next() for _ in range(8)]
    nominal = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    for delay, d in zip(delays, nominal, strict=True):
        assert d / 2 <= delay <= d
    backoff.reset()
    assert backoff.next() <= 0.5


def test_backoff_cap_never_below_base() -> None:
    backoff = Backoff(20.0, cap=10.0)
    assert all(10.0 <= backoff.next() <= 20.0 for _ in range(5))


def test_backoff_jitter_spreads_members() -> None:
    """Members that failed together must not retry in lockstep."""
    assert len({round(Backoff(1.0).next(), 6) for _ in range(20)}) > 1


@pytest.mark.parametrize(
    ("exc", "attempts"),
    [
        (errors.KafkaConnectionError("dropped"), 3),  # quick retries
        (errors.NoBrokersAvailableError("every broker tried"), 1),  # the caller backs off
        (errors.RebalanceInProgressError("rejoin"), 1),  # the caller rejoins
        (errors.GroupAuthorizationFailedError("denied"), 1),
    ],
)
async def test_retrying_retries_only_what_a_quick_retry_can_cure(
    exc: errors.ConsumerGroupError, attempts: int
) -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise exc

    with pytest.raises(type(exc)):
        await retrying("test", attempt, RetryConfig(max=2, backoff=0.0))
    assert calls == attempts
