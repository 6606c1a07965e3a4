"""Exceptions raised by consumergroup.

Everything derives from :class:`ConsumerGroupError`. Errors the broker reports
as a protocol error code are :class:`KafkaError` subclasses, one per code of
Kafka's canonical table (``org.apache.kafka.common.protocol.Errors``) with the
same ``retriable`` flag Kafka gives them; :func:`error_for_code` and
:func:`raise_for_code` map a code from a response to its class. The remaining
classes describe failures detected by the client itself.
"""

# ruff: noqa: F405  (__all__ names the classes of _codes.py, imported below for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

__all__ = [
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "BufferExhaustedError",
    "ClosedError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "ConfigurationError",
    "ConsumerError",
    "ConsumerGroupError",
    "ControllerIdNotRegisteredError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DeliveryTimeoutError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FeatureUpdateFailedError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FencedStateEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError",
    "GroupDeletionFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "InconsistentClusterIdError",
    "InconsistentGroupProtocolError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidShareSessionEpochError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaStorageError",
    "LeaderNotAvailableError",
    "ListenerMismatchError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "MismatchedEndpointTypeError",
    "NetworkError",
    "NewLeaderElectedError",
    "NoBrokersAvailableError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RebootstrapRequiredError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "SaslAuthenticationFailedError",
    "SecurityDisabledError",
    "ShareSessionLimitReachedError",
    "ShareSessionNotFoundError",
    "SilentListenerError",
    "SnapshotNotFoundError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyDescriptionUpdateFailedError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownControllerIdError",
    "UnknownKafkaError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
    "error_for_code",
    "raise_for_code",
]


class ConsumerGroupError(Exception):
    """Root of every exception this library raises.

    Attributes:
        retriable: True when the same operation may succeed if tried again
            (after a backoff, a metadata refresh or a reconnect).
    """

    retriable: bool = False


class ConfigurationError(ConsumerGroupError, ValueError):
    """The configuration (or an argument) is invalid.

    The message names the field path, the bad value, the allowed range and
    what to change.
    """


class KafkaConnectionError(ConsumerGroupError):
    """A connection to a broker could not be opened or was dropped.

    The message includes the broker address.
    """

    retriable = True


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the seed brokers answered.

    Retriable, like every connection error (see :func:`consumergroup.retry.is_transient`):
    a cluster restarting looks like this for a while, so a running group keeps
    retrying with backoff. When it persists, the bootstrap addresses, the network
    or the brokers need attention (the message lists the addresses and the timeout).
    """


class SilentListenerError(NoBrokersAvailableError):
    """The address (every seed, when the client raises it) accepted the TCP connection
    but did not answer the Kafka ApiVersions request in time.

    A stalled broker looks like this, and so does another service that waits for its
    own protocol (an HTTP server): retriable, like every connection error, and the
    message asks whether the address is a Kafka listener.
    """


class ListenerMismatchError(ConsumerGroupError):
    """The address answers, but not as the configured Kafka listener does.

    Something other than Kafka listens there (an HTTP server, SSH, ...), or TLS
    is set on one side only. Not retriable: trying again gives the same answer;
    the message names what was seen and what to change.
    """


class ClosedError(ConsumerGroupError):
    """The consumer, group, client or connection is closed."""


class BufferExhaustedError(ConsumerGroupError):
    """``send()`` found ``producer.buffer_memory`` full for ``producer.max_block`` seconds:
    records are sent faster than the brokers take them (or they take none).

    Retriable: the buffer drains as the brokers answer.
    """

    retriable = True


class DeliveryTimeoutError(ConsumerGroupError):
    """A record was neither acknowledged nor refused within ``producer.delivery_timeout``
    (retries included), or the producer was closed before it was (Java's
    ``TimeoutException`` for an expired batch).

    The record may or may not have been written. Retriable.
    """

    retriable = True


class ConsumerError(ConsumerGroupError):
    """An error surfaced by a partition consumer or a handler (sarama's ``ConsumerError``).

    ``str()`` reads ``"error while consuming <topic>/<partition>: <message>"``
    (the message defaults to the cause's text), so ``message`` itself need not
    repeat the topic and partition. ``retriable`` follows the cause.

    Attributes:
        topic: The topic being consumed, if the error concerns one.
        partition: The partition being consumed, if the error concerns one.
        cause: The underlying exception, also set as ``__cause__`` so tracebacks show it.
    """

    def __init__(
        self,
        message: str = "",
        *,
        topic: str | None = None,
        partition: int | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.topic = topic
        self.partition = partition
        self.cause = cause
        self.__cause__ = cause
        self.retriable = bool(getattr(cause, "retriable", False))

    def __str__(self) -> str:
        details = [self.message] if self.message else []
        if self.cause is not None:
            cause = str(self.cause) or type(self.cause).__name__
            # Callers often build the message from the cause ("commit failed: {exc}"):
            # say each cause once.
            if cause not in self.message:
                details.append(cause)
        what = ": ".join(details) or "unknown error"
        if self.topic is None:
            return f"consumer error: {what}"
        where = self.topic if self.partition is None else f"{self.topic}/{self.partition}"
        return f"error while consuming {where}: {what}"


# errno -> class; filled by KafkaError.__init_subclass__, extended lazily for unknown codes.
_BY_CODE: dict[int, type[KafkaError]] = {}


class KafkaError(ConsumerGroupError):
    """Base of the errors a broker reports as a protocol error code.

    Each subclass fixes ``errno``, ``retriable`` and ``description``; the
    description is the class docstring. Instantiate a subclass with optional
    context (what was being done, with which broker/topic); ``str()`` gives
    ``"<ClassName> (code N): <description>. <context>"``.

    Attributes:
        errno: The Kafka protocol error code.
        description: What the code means.
        context: The context passed to the constructor.
    """

    errno: ClassVar[int]
    description: ClassVar[str] = "An error reported by a Kafka broker."

    def __init_subclass__(
        cls, *, errno: int | None = None, retriable: bool | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if retriable is not None:
            cls.retriable = retriable
        # Under ``python -OO`` docstrings are gone and the inherited generic description
        # stays; the class name and code in the message still identify the error.
        if cls.__doc__:
            cls.description = " ".join(cls.__doc__.split())
        if errno is not None:
            cls.errno = errno
            # setdefault: if two threads race to define the same unknown code, both use one class.
            _BY_CODE.setdefault(errno, cls)

    def __init__(self, context: str = "") -> None:
        if not hasattr(self, "errno"):
            raise TypeError(
                f"{type(self).__name__} has no error code: raise a subclass, "
                "e.g. error_for_code(code)(context)"
            )
        super().__init__(context)
        self.context = context

    def __str__(self) -> str:
        text = f"{type(self).__name__} (code {self.errno}): {self.description.rstrip('.')}."
        return f"{text} {self.context}" if self.context else text


class UnknownKafkaError(KafkaError):
    """An error code this library does not know (the broker may be newer).

    :func:`error_for_code` returns a subclass whose ``errno`` is the code.
    """


def error_for_code(code: int) -> type[KafkaError]:
    """The :class:`KafkaError` subclass for a non-zero protocol error code.

    Unknown codes get a subclass of :class:`UnknownKafkaError` carrying that
    ``errno`` (created once per code). Raises ValueError for 0, which means
    success.
    """
    if code == 0:
        raise ValueError("error code 0 means success: there is no error class for it")
    known = _BY_CODE.get(code)
    if known is not None:
        return known
    from . import _codes  # noqa: F401  (the rest of the table: its classes register their codes)

    known = _BY_CODE.get(code)
    if known is not None:
        return known

    class _Unknown(UnknownKafkaError, errno=code):
        __doc__ = f"Error code {code} is unknown to this client (the broker may be newer)."

    _Unknown.__name__ = _Unknown.__qualname__ = UnknownKafkaError.__name__
    return _BY_CODE[code]


def raise_for_code(code: int, context: str = "") -> None:
    """Raise the error for a response's error ``code``; do nothing when it is 0.

    The message is ``"<ClassName> (code N): <description>. <context>"``.
    """
    if code:
        raise error_for_code(code)(context)


class OffsetOutOfRangeError(KafkaError, errno=1):
    """The requested offset is outside the range of offsets the broker holds for the partition."""


class CorruptMessageError(KafkaError, errno=2, retriable=True):
    """A message failed its CRC check, has an invalid size, or is otherwise corrupt."""


class UnknownTopicOrPartitionError(KafkaError, errno=3, retriable=True):
    """This broker does not host the topic-partition (it may not exist, or metadata is stale)."""


class LeaderNotAvailableError(KafkaError, errno=5, retriable=True):
    """The partition has no leader right now because a leader election is in progress."""


class NotLeaderOrFollowerError(KafkaError, errno=6, retriable=True):
    """This broker is not the leader (or not a replica) of the partition: metadata is stale."""


class RequestTimedOutError(KafkaError, errno=7, retriable=True):
    """The request timed out."""


class MessageTooLargeError(KafkaError, errno=10):
    """The request contained a message larger than the broker accepts."""


class CoordinatorLoadInProgressError(KafkaError, errno=14, retriable=True):
    """The coordinator is still loading its state and cannot serve the request yet."""


class CoordinatorNotAvailableError(KafkaError, errno=15, retriable=True):
    """The coordinator is not available."""


class NotCoordinatorError(KafkaError, errno=16, retriable=True):
    """This broker is not the coordinator for the group: look the coordinator up again."""


class IllegalGenerationError(KafkaError, errno=22):
    """The group generation id in the request is not the current one."""


class InconsistentGroupProtocolError(KafkaError, errno=23):
    """The member's protocol type or assignment strategies are empty or incompatible with the
    group's.
    """


class UnknownMemberIdError(KafkaError, errno=25):
    """The coordinator does not know this member id."""


class RebalanceInProgressError(KafkaError, errno=27):
    """The group is rebalancing: the member must rejoin."""


class UnsupportedSaslMechanismError(KafkaError, errno=33):
    """The broker does not support the requested SASL mechanism."""


class UnsupportedVersionError(KafkaError, errno=35):
    """The API version is not supported."""


class TopicAlreadyExistsError(KafkaError, errno=36):
    """A topic with this name already exists."""


class OutOfOrderSequenceNumberError(KafkaError, errno=45):
    """The broker received an out-of-order sequence number."""


class DuplicateSequenceNumberError(KafkaError, errno=46):
    """The broker received a duplicate sequence number."""


class InvalidProducerEpochError(KafkaError, errno=47):
    """The producer used an outdated epoch."""


class InvalidTxnStateError(KafkaError, errno=48):
    """The transactional operation is invalid in the current transaction state."""


class ConcurrentTransactionsError(KafkaError, errno=51, retriable=True):
    """Another operation on the same transaction is in progress."""


class TransactionalIdAuthorizationFailedError(KafkaError, errno=53):
    """Not authorized to use this transactional id."""


class KafkaStorageError(KafkaError, errno=56, retriable=True):
    """The broker hit a disk error while accessing the log."""


class SaslAuthenticationFailedError(KafkaError, errno=58):
    """SASL authentication failed."""


class UnknownProducerIdError(KafkaError, errno=59):
    """The broker has no metadata for this producer id (its records may have expired)."""


class NonEmptyGroupError(KafkaError, errno=68):
    """The group is not empty."""


class GroupIdNotFoundError(KafkaError, errno=69):
    """The group id does not exist."""


class FetchSessionIdNotFoundError(KafkaError, errno=70, retriable=True):
    """The fetch session id was not found."""


class InvalidFetchSessionEpochError(KafkaError, errno=71, retriable=True):
    """The fetch session epoch is invalid."""


class FencedLeaderEpochError(KafkaError, errno=74, retriable=True):
    """The leader epoch in the request is older than the broker's."""


class MemberIdRequiredError(KafkaError, errno=79):
    """The member must join again with the member id the coordinator just assigned."""


class GroupMaxSizeReachedError(KafkaError, errno=81):
    """The group has reached its maximum size (group.max.size)."""


class FencedInstanceIdError(KafkaError, errno=82):
    """Another member with the same group.instance.id has fenced this static member."""


class UnstableOffsetCommitError(KafkaError, errno=88, retriable=True):
    """Pending transactional offsets must be resolved first."""


class ProducerFencedError(KafkaError, errno=90):
    """A newer producer with the same transactional id has fenced this one."""


class UnknownTopicIdError(KafkaError, errno=100, retriable=True):
    """This broker does not host the topic id."""


class FencedMemberEpochError(KafkaError, errno=110):
    """The coordinator fenced the member epoch: the member must drop its partitions and rejoin."""


class UnreleasedInstanceIdError(KafkaError, errno=111):
    """Another member still uses this instance id and must leave first."""


class UnsupportedAssignorError(KafkaError, errno=112):
    """The group does not support the assignor or its version range."""


class StaleMemberEpochError(KafkaError, errno=113):
    """The member epoch is stale: retry once a heartbeat returns the current epoch."""


class TransactionAbortableError(KafkaError, errno=120):
    """The transaction failed on the server: abort it to keep using the transactional id."""


class ShareSessionNotFoundError(KafkaError, errno=122, retriable=True):
    """The share session was not found."""


class InvalidShareSessionEpochError(KafkaError, errno=123, retriable=True):
    """The share session epoch is invalid."""


class InvalidRegularExpressionError(KafkaError, errno=128):
    """The regular expression is invalid."""


# The classes of the codes this package never names live in ``_codes.py`` and are
# created on first use (see its docstring): by error_for_code, or by the lookup of a name
# below. Type checkers and the API reference see them here, through the import.
if TYPE_CHECKING:
    from ._codes import *  # noqa: F403


def __getattr__(name: str) -> Any:
    if not name.startswith("__") and name in __all__:  # one of _codes.py's classes
        from . import _codes

        value = getattr(_codes, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
