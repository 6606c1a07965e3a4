"""Unit tests for consumergroup.errors: the code table, lookups and messages."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from aiokafka import errors as aiokafka_errors

from consumergroup import errors
from consumergroup.errors import (
    ConfigurationError,
    ConsumerError,
    ConsumerGroupError,
    KafkaConnectionError,
    KafkaError,
    NoBrokersAvailableError,
    UnknownKafkaError,
    error_for_code,
    raise_for_code,
)

# Every class generated from Kafka's table (exported names with an errno).
TABLE = [
    obj
    for name in errors.__all__
    if isinstance(obj := getattr(errors, name), type)
    and issubclass(obj, KafkaError)
    and hasattr(obj, "errno")
]

# Codes Kafka marks retriable but aiokafka 0.14's table (which lags Kafka) does not.
NEWER_RETRIABLE_IN_KAFKA = {2, 9, 13, 51, 70, 71, 72}


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (-1, errors.UnknownServerError),
        (1, errors.OffsetOutOfRangeError),
        (2, errors.CorruptMessageError),
        (3, errors.UnknownTopicOrPartitionError),
        (5, errors.LeaderNotAvailableError),
        (6, errors.NotLeaderOrFollowerError),
        (7, errors.RequestTimedOutError),
        (10, errors.MessageTooLargeError),
        (14, errors.CoordinatorLoadInProgressError),
        (15, errors.CoordinatorNotAvailableError),
        (16, errors.NotCoordinatorError),
        (22, errors.IllegalGenerationError),
        (23, errors.InconsistentGroupProtocolError),
        (25, errors.UnknownMemberIdError),
        (26, errors.InvalidSessionTimeoutError),
        (27, errors.RebalanceInProgressError),
        (29, errors.TopicAuthorizationFailedError),
        (30, errors.GroupAuthorizationFailedError),
        (33, errors.UnsupportedSaslMechanismError),
        (34, errors.IllegalSaslStateError),
        (35, errors.UnsupportedVersionError),
        (36, errors.TopicAlreadyExistsError),
        (37, errors.InvalidPartitionsError),
        (58, errors.SaslAuthenticationFailedError),
        (74, errors.FencedLeaderEpochError),
        (75, errors.UnknownLeaderEpochError),
        (79, errors.MemberIdRequiredError),
        (81, errors.GroupMaxSizeReachedError),
        (82, errors.FencedInstanceIdError),
        (128, errors.InvalidRegularExpressionError),
    ],
)
def test_error_for_code_known(code: int, cls: type[KafkaError]) -> None:
    assert error_for_code(code) is cls
    assert cls.errno == code


@pytest.mark.parametrize(
    ("cls", "retriable"),
    [
        (errors.NotLeaderOrFollowerError, True),
        (errors.NotCoordinatorError, True),
        (errors.CoordinatorNotAvailableError, True),
        (errors.CoordinatorLoadInProgressError, True),
        (errors.UnknownTopicOrPartitionError, True),
        (errors.RequestTimedOutError, True),
        (errors.FencedLeaderEpochError, True),
        # Kafka (and aiokafka) classify these as needing a rejoin, not a plain retry.
        (errors.RebalanceInProgressError, False),
        (errors.UnknownMemberIdError, False),
        (errors.IllegalGenerationError, False),
        (errors.MemberIdRequiredError, False),
        (errors.FencedInstanceIdError, False),
        (errors.OffsetOutOfRangeError, False),
        (errors.GroupAuthorizationFailedError, False),
    ],
)
def test_retriable_flags(cls: type[KafkaError], retriable: bool) -> None:
    assert cls.retriable is retriable
    assert cls().retriable is retriable


def test_retriable_flags_agree_with_aiokafka() -> None:
    for code, theirs in aiokafka_errors.kafka_errors.items():
        if code == 0:
            continue
        ours = error_for_code(code)
        if code in NEWER_RETRIABLE_IN_KAFKA:
            assert ours.retriable and not theirs.retriable, code
        else:
            assert ours.retriable == theirs.retriable, (code, ours, theirs)


def test_table_is_consistent() -> None:
    codes = [cls.errno for cls in TABLE]
    assert len(codes) == len(set(codes)) >= 128
    assert 0 not in codes
    for cls in TABLE:
        assert error_for_code(cls.errno) is cls
        assert cls.__name__.endswith("Error")
        assert cls.description and cls.description == " ".join(cls.description.split())
        assert cls.__doc__


def test_all_exports_exist_and_cover_public_classes() -> None:
    assert len(errors.__all__) == len(set(errors.__all__))
    for name in errors.__all__:
        assert hasattr(errors, name), name
    public_classes = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and obj.__module__ == errors.__name__ and not name.startswith("_")
    }
    assert public_classes <= set(errors.__all__)


def test_unknown_code_gets_stable_class_with_that_errno() -> None:
    cls = error_for_code(31999)
    assert issubclass(cls, UnknownKafkaError)
    assert cls.errno == 31999
    assert not cls.retriable
    assert error_for_code(31999) is cls
    assert error_for_code(31998) is not cls
    with pytest.raises(UnknownKafkaError) as info:
        raise_for_code(31999, "Fetch from b1:9092")
    assert str(info.value).startswith("UnknownKafkaError (code 31999): ")
    assert str(info.value).endswith(". Fetch from b1:9092")


def test_code_zero_is_success() -> None:
    raise_for_code(0, "anything")  # success: must not raise
    with pytest.raises(ValueError, match="success"):
        error_for_code(0)


def test_raise_for_code_message() -> None:
    with pytest.raises(errors.NotCoordinatorError) as info:
        raise_for_code(16, "OffsetCommit for group 'g'")
    desc = errors.NotCoordinatorError.description.rstrip(".")
    assert str(info.value) == f"NotCoordinatorError (code 16): {desc}. OffsetCommit for group 'g'"
    assert info.value.context == "OffsetCommit for group 'g'"

    with pytest.raises(errors.RequestTimedOutError) as info2:
        raise_for_code(7)
    assert str(info2.value) == "RequestTimedOutError (code 7): The request timed out."


def test_client_side_use_of_broker_classes() -> None:
    # The connection raises these itself (request timeout, no common version, bad frame).
    err = errors.RequestTimedOutError("Fetch to b1:9092 got no answer within 30.0s")
    assert isinstance(err, KafkaError) and err.retriable and err.errno == 7
    assert str(err).endswith("Fetch to b1:9092 got no answer within 30.0s")
    assert errors.CorruptMessageError("bad frame").errno == 2
    assert errors.UnsupportedVersionError("no common version").errno == 35


def test_kafka_error_pickles() -> None:
    err = errors.FencedInstanceIdError("JoinGroup for g")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is errors.FencedInstanceIdError
    assert str(copy) == str(err)


def test_base_classes_without_code_cannot_be_raised() -> None:
    with pytest.raises(TypeError, match="no error code"):
        KafkaError("x")
    with pytest.raises(TypeError, match="no error code"):
        UnknownKafkaError("x")


def test_hierarchy_and_client_side_flags() -> None:
    assert issubclass(KafkaError, ConsumerGroupError)
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(ConfigurationError, ConsumerGroupError)
    assert KafkaConnectionError("connection to b1:9092 refused").retriable
    # A cluster restarting looks like this for a while: transient, like every connection error.
    no_brokers = NoBrokersAvailableError("none of the seed brokers answered")
    assert no_brokers.retriable and isinstance(no_brokers, KafkaConnectionError)
    assert not errors.ClosedError("closed").retriable
    assert not ConsumerGroupError("x").retriable


def test_consumer_error_wraps_cause() -> None:
    cause = errors.NotLeaderOrFollowerError("Fetch orders/3 from b2:9092")
    err = ConsumerError(topic="orders", partition=3, cause=cause)
    assert (err.topic, err.partition, err.cause) == ("orders", 3, cause)
    assert err.__cause__ is cause
    assert err.retriable  # follows the cause
    assert str(err) == f"error while consuming orders/3: {cause}"
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.topic, copy.partition, str(copy)) == ("orders", 3, str(err))


def test_consumer_error_messages() -> None:
    assert str(ConsumerError(topic="orders", cause=ValueError("boom"))) == (
        "error while consuming orders: boom"
    )
    handler = ConsumerError(
        "handler did not return", topic="orders", partition=0, cause=TimeoutError()
    )
    assert str(handler) == "error while consuming orders/0: handler did not return: TimeoutError"
    assert not handler.retriable
    assert str(ConsumerError("fetch task crashed")) == "consumer error: fetch task crashed"
    assert str(ConsumerError()) == "consumer error: unknown error"


def test_consumer_error_says_a_cause_once_when_the_message_quotes_it() -> None:
    # Issue 8 #24: "auto-commit failed: none of the brokers answered (...) Details: ...:
    # none of the brokers answered (...) Details: ..." said the cause twice.
    cause = NoBrokersAvailableError(
        "none of the brokers answered (seeds: a:1). Details: a:1: refused"
    )
    err = ConsumerError(f"auto-commit failed: {cause}", cause=cause)
    text = str(err)
    assert text.count("none of the brokers answered") == 1
    assert text.count("Details:") == 1
    assert text == f"consumer error: auto-commit failed: {cause}"
    # A message that does not quote its cause still gets it appended, once.
    kafka_cause = errors.NotCoordinatorError("OffsetCommit to b:2")
    err = ConsumerError("final commit failed", topic="t", partition=3, cause=kafka_cause)
    assert str(err) == f"error while consuming t/3: final commit failed: {kafka_cause}"
    assert str(err).count("NotCoordinatorError") == 1


def test_codes_the_package_never_names_are_classes_of_errors_made_on_first_use() -> None:
    """``consumergroup._codes`` (loaded by the first lookup): its classes are
    ``consumergroup.errors``' in every way a program sees, by name or by code."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pickle\n"
            "import consumergroup.errors as e\n"
            "assert 'consumergroup._codes' not in sys.modules\n"
            "assert e.error_for_code(44) is e.PolicyViolationError\n"  # by code
            "assert 'consumergroup._codes' in sys.modules\n"
            "assert e.PolicyViolationError.__module__ == 'consumergroup.errors'\n"
            "exc = pickle.loads(pickle.dumps(e.PolicyViolationError('ctx')))\n"
            "assert type(exc) is e.PolicyViolationError and str(exc).endswith('ctx')\n"
            "assert 'VoterNotFoundError' in dir(e)\n",
        ],
        capture_output=True,
        text=True,
    )
    assert loaded.returncode == 0, loaded.stderr
    by_name = subprocess.run(
        [
            sys.executable,
            "-c",
            "from consumergroup.errors import DelegationTokenExpiredError as D, KafkaError\n"
            "from consumergroup.errors import error_for_code\n"
            "assert issubclass(D, KafkaError) and error_for_code(D.errno) is D\n"
            "import consumergroup.errors as e\n"
            "try:\n    e.NoSuchError\nexcept AttributeError as exc:\n"
            "    assert 'NoSuchError' in str(exc)\nelse:\n    raise SystemExit(1)\n",
        ],
        capture_output=True,
        text=True,
    )
    assert by_name.returncode == 0, by_name.stderr
