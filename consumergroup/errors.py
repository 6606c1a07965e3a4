"""Exceptions raised by consumergroup.

Everything derives from :class:`ConsumerGroupError`. Errors the broker reports
as a protocol error code are :class:`KafkaError` subclasses, one per code of
Kafka's canonical table (``org.apache.kafka.common.protocol.Errors``) with the
same ``retriable`` flag Kafka gives them; :func:`error_for_code` and
:func:`raise_for_code` map a code from a response to its class. The remaining
classes describe failures detected by the client itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

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


class UnknownServerError(KafkaError, errno=-1):
    """The broker hit an unexpected error while handling the request; see the broker logs."""


class OffsetOutOfRangeError(KafkaError, errno=1):
    """The requested offset is outside the range of offsets the broker holds for the partition."""


class CorruptMessageError(KafkaError, errno=2, retriable=True):
    """A message failed its CRC check, has an invalid size, or is otherwise corrupt."""


class UnknownTopicOrPartitionError(KafkaError, errno=3, retriable=True):
    """This broker does not host the topic-partition (it may not exist, or metadata is stale)."""


class InvalidFetchSizeError(KafkaError, errno=4):
    """The requested fetch size is invalid."""


class LeaderNotAvailableError(KafkaError, errno=5, retriable=True):
    """The partition has no leader right now because a leader election is in progress."""


class NotLeaderOrFollowerError(KafkaError, errno=6, retriable=True):
    """This broker is not the leader (or not a replica) of the partition: metadata is stale."""


class RequestTimedOutError(KafkaError, errno=7, retriable=True):
    """The request timed out."""


class BrokerNotAvailableError(KafkaError, errno=8):
    """The broker is not available."""


class ReplicaNotAvailableError(KafkaError, errno=9, retriable=True):
    """The replica for the requested topic-partition is not available."""


class MessageTooLargeError(KafkaError, errno=10):
    """The request contained a message larger than the broker accepts."""


class StaleControllerEpochError(KafkaError, errno=11):
    """The controller has moved to another broker."""


class OffsetMetadataTooLargeError(KafkaError, errno=12):
    """The metadata string attached to the committed offset is too large."""


class NetworkError(KafkaError, errno=13, retriable=True):
    """The broker disconnected before sending a response."""


class CoordinatorLoadInProgressError(KafkaError, errno=14, retriable=True):
    """The coordinator is still loading its state and cannot serve the request yet."""


class CoordinatorNotAvailableError(KafkaError, errno=15, retriable=True):
    """The coordinator is not available."""


class NotCoordinatorError(KafkaError, errno=16, retriable=True):
    """This broker is not the coordinator for the group: look the coordinator up again."""


class InvalidTopicError(KafkaError, errno=17):
    """The request named an invalid topic (an illegal name, or an internal topic)."""


class RecordListTooLargeError(KafkaError, errno=18):
    """The request contained a record batch larger than the broker's segment size."""


class NotEnoughReplicasError(KafkaError, errno=19, retriable=True):
    """Messages were rejected because there are fewer in-sync replicas than required."""


class NotEnoughReplicasAfterAppendError(KafkaError, errno=20, retriable=True):
    """Messages were written, but to fewer in-sync replicas than required."""


class InvalidRequiredAcksError(KafkaError, errno=21):
    """The produce request used an invalid required-acks value."""


class IllegalGenerationError(KafkaError, errno=22):
    """The group generation id in the request is not the current one."""


class InconsistentGroupProtocolError(KafkaError, errno=23):
    """The member's protocol type or assignment strategies are empty or incompatible with the
    group's.
    """


class InvalidGroupIdError(KafkaError, errno=24):
    """The group id is empty or otherwise invalid."""


class UnknownMemberIdError(KafkaError, errno=25):
    """The coordinator does not know this member id."""


class InvalidSessionTimeoutError(KafkaError, errno=26):
    """The session timeout is outside the broker's group.min.session.timeout.ms to
    group.max.session.timeout.ms range.
    """


class RebalanceInProgressError(KafkaError, errno=27):
    """The group is rebalancing: the member must rejoin."""


class InvalidCommitOffsetSizeError(KafkaError, errno=28):
    """The size of the offset commit data is invalid."""


class TopicAuthorizationFailedError(KafkaError, errno=29):
    """Not authorized to access the topic."""


class GroupAuthorizationFailedError(KafkaError, errno=30):
    """Not authorized to access the group."""


class ClusterAuthorizationFailedError(KafkaError, errno=31):
    """Not authorized for this cluster-level operation."""


class InvalidTimestampError(KafkaError, errno=32):
    """The message timestamp is outside the acceptable range."""


class UnsupportedSaslMechanismError(KafkaError, errno=33):
    """The broker does not support the requested SASL mechanism."""


class IllegalSaslStateError(KafkaError, errno=34):
    """The request is not valid in the current SASL state."""


class UnsupportedVersionError(KafkaError, errno=35):
    """The API version is not supported."""


class TopicAlreadyExistsError(KafkaError, errno=36):
    """A topic with this name already exists."""


class InvalidPartitionsError(KafkaError, errno=37):
    """The number of partitions is invalid."""


class InvalidReplicationFactorError(KafkaError, errno=38):
    """The replication factor is invalid."""


class InvalidReplicaAssignmentError(KafkaError, errno=39):
    """The replica assignment is invalid."""


class InvalidConfigError(KafkaError, errno=40):
    """The configuration is invalid."""


class NotControllerError(KafkaError, errno=41, retriable=True):
    """This broker is not the cluster controller."""


class InvalidRequestError(KafkaError, errno=42):
    """The request is malformed or was sent to an incompatible broker; see the broker logs."""


class UnsupportedForMessageFormatError(KafkaError, errno=43):
    """The broker's message format version does not support this request."""


class PolicyViolationError(KafkaError, errno=44):
    """The request violates a policy configured on the broker."""


class OutOfOrderSequenceNumberError(KafkaError, errno=45):
    """The broker received an out-of-order sequence number."""


class DuplicateSequenceNumberError(KafkaError, errno=46):
    """The broker received a duplicate sequence number."""


class InvalidProducerEpochError(KafkaError, errno=47):
    """The producer used an outdated epoch."""


class InvalidTxnStateError(KafkaError, errno=48):
    """The transactional operation is invalid in the current transaction state."""


class InvalidProducerIdMappingError(KafkaError, errno=49):
    """The producer id is not currently assigned to this transactional id."""


class InvalidTransactionTimeoutError(KafkaError, errno=50):
    """The transaction timeout exceeds the broker's transaction.max.timeout.ms."""


class ConcurrentTransactionsError(KafkaError, errno=51, retriable=True):
    """Another operation on the same transaction is in progress."""


class TransactionCoordinatorFencedError(KafkaError, errno=52):
    """The transaction coordinator that sent the marker is no longer the current one."""


class TransactionalIdAuthorizationFailedError(KafkaError, errno=53):
    """Not authorized to use this transactional id."""


class SecurityDisabledError(KafkaError, errno=54):
    """Security features are disabled on the broker."""


class OperationNotAttemptedError(KafkaError, errno=55):
    """The broker skipped this operation because another part of the batched request failed."""


class KafkaStorageError(KafkaError, errno=56, retriable=True):
    """The broker hit a disk error while accessing the log."""


class LogDirNotFoundError(KafkaError, errno=57):
    """The requested log directory is not configured on the broker."""


class SaslAuthenticationFailedError(KafkaError, errno=58):
    """SASL authentication failed."""


class UnknownProducerIdError(KafkaError, errno=59):
    """The broker has no metadata for this producer id (its records may have expired)."""


class ReassignmentInProgressError(KafkaError, errno=60):
    """A partition reassignment is in progress."""


class DelegationTokenAuthDisabledError(KafkaError, errno=61):
    """Delegation tokens are not enabled."""


class DelegationTokenNotFoundError(KafkaError, errno=62):
    """The delegation token was not found."""


class DelegationTokenOwnerMismatchError(KafkaError, errno=63):
    """The principal is not a valid owner or renewer of the delegation token."""


class DelegationTokenRequestNotAllowedError(KafkaError, errno=64):
    """Delegation token requests are not allowed on this kind of channel."""


class DelegationTokenAuthorizationFailedError(KafkaError, errno=65):
    """Delegation token authorization failed."""


class DelegationTokenExpiredError(KafkaError, errno=66):
    """The delegation token has expired."""


class InvalidPrincipalTypeError(KafkaError, errno=67):
    """The principal type is not supported."""


class NonEmptyGroupError(KafkaError, errno=68):
    """The group is not empty."""


class GroupIdNotFoundError(KafkaError, errno=69):
    """The group id does not exist."""


class FetchSessionIdNotFoundError(KafkaError, errno=70, retriable=True):
    """The fetch session id was not found."""


class InvalidFetchSessionEpochError(KafkaError, errno=71, retriable=True):
    """The fetch session epoch is invalid."""


class ListenerNotFoundError(KafkaError, errno=72, retriable=True):
    """The leader has no listener matching the one the metadata request arrived on."""


class TopicDeletionDisabledError(KafkaError, errno=73):
    """Topic deletion is disabled."""


class FencedLeaderEpochError(KafkaError, errno=74, retriable=True):
    """The leader epoch in the request is older than the broker's."""


class UnknownLeaderEpochError(KafkaError, errno=75, retriable=True):
    """The leader epoch in the request is newer than the broker's."""


class UnsupportedCompressionTypeError(KafkaError, errno=76):
    """The client does not support the partition's compression type."""


class StaleBrokerEpochError(KafkaError, errno=77):
    """The broker epoch has changed."""


class OffsetNotAvailableError(KafkaError, errno=78, retriable=True):
    """The new leader's high watermark has not caught up after an election, so offsets are not
    available yet.
    """


class MemberIdRequiredError(KafkaError, errno=79):
    """The member must join again with the member id the coordinator just assigned."""


class PreferredLeaderNotAvailableError(KafkaError, errno=80, retriable=True):
    """The preferred leader is not available."""


class GroupMaxSizeReachedError(KafkaError, errno=81):
    """The group has reached its maximum size (group.max.size)."""


class FencedInstanceIdError(KafkaError, errno=82):
    """Another member with the same group.instance.id has fenced this static member."""


class EligibleLeadersNotAvailableError(KafkaError, errno=83, retriable=True):
    """No eligible leader is available for the partition."""


class ElectionNotNeededError(KafkaError, errno=84, retriable=True):
    """No leader election is needed for the partition."""


class NoReassignmentInProgressError(KafkaError, errno=85):
    """No partition reassignment is in progress."""


class GroupSubscribedToTopicError(KafkaError, errno=86):
    """A topic's offsets cannot be deleted while the group is subscribed to it."""


class InvalidRecordError(KafkaError, errno=87):
    """The broker rejected a record that failed validation."""


class UnstableOffsetCommitError(KafkaError, errno=88, retriable=True):
    """Pending transactional offsets must be resolved first."""


class ThrottlingQuotaExceededError(KafkaError, errno=89, retriable=True):
    """The throttling quota was exceeded."""


class ProducerFencedError(KafkaError, errno=90):
    """A newer producer with the same transactional id has fenced this one."""


class ResourceNotFoundError(KafkaError, errno=91):
    """The request referred to a resource that does not exist."""


class DuplicateResourceError(KafkaError, errno=92):
    """The request referred to the same resource twice."""


class UnacceptableCredentialError(KafkaError, errno=93):
    """The credential does not meet the acceptability criteria."""


class InconsistentVoterSetError(KafkaError, errno=94):
    """The sender or receiver of a voter-only request is not in the voter set."""


class InvalidUpdateVersionError(KafkaError, errno=95):
    """The update version is invalid."""


class FeatureUpdateFailedError(KafkaError, errno=96):
    """Finalized features could not be updated because of an unexpected server error."""


class PrincipalDeserializationFailureError(KafkaError, errno=97):
    """The request principal could not be deserialized while forwarding."""


class SnapshotNotFoundError(KafkaError, errno=98):
    """The requested snapshot was not found."""


class PositionOutOfRangeError(KafkaError, errno=99):
    """The requested snapshot position is out of range."""


class UnknownTopicIdError(KafkaError, errno=100, retriable=True):
    """This broker does not host the topic id."""


class DuplicateBrokerRegistrationError(KafkaError, errno=101):
    """The broker id is already in use."""


class BrokerIdNotRegisteredError(KafkaError, errno=102):
    """The broker id is not registered."""


class InconsistentTopicIdError(KafkaError, errno=103, retriable=True):
    """The log's topic id does not match the one in the request."""


class InconsistentClusterIdError(KafkaError, errno=104):
    """The cluster id in the request does not match the server's."""


class TransactionalIdNotFoundError(KafkaError, errno=105):
    """The transactional id was not found."""


class FetchSessionTopicIdError(KafkaError, errno=106, retriable=True):
    """The fetch session used topic ids inconsistently."""


class IneligibleReplicaError(KafkaError, errno=107):
    """The new in-sync replica set contains an ineligible replica."""


class NewLeaderElectedError(KafkaError, errno=108):
    """The partition state was updated but the leader has changed."""


class OffsetMovedToTieredStorageError(KafkaError, errno=109):
    """The requested offset has moved to tiered storage."""


class FencedMemberEpochError(KafkaError, errno=110):
    """The coordinator fenced the member epoch: the member must drop its partitions and rejoin."""


class UnreleasedInstanceIdError(KafkaError, errno=111):
    """Another member still uses this instance id and must leave first."""


class UnsupportedAssignorError(KafkaError, errno=112):
    """The group does not support the assignor or its version range."""


class StaleMemberEpochError(KafkaError, errno=113):
    """The member epoch is stale: retry once a heartbeat returns the current epoch."""


class MismatchedEndpointTypeError(KafkaError, errno=114):
    """The request was sent to the wrong type of endpoint."""


class UnsupportedEndpointTypeError(KafkaError, errno=115):
    """The endpoint type is not supported yet."""


class UnknownControllerIdError(KafkaError, errno=116):
    """The controller id is unknown."""


class UnknownSubscriptionIdError(KafkaError, errno=117):
    """The telemetry subscription id is invalid or outdated."""


class TelemetryTooLargeError(KafkaError, errno=118):
    """The telemetry push exceeded the broker's size limit."""


class InvalidRegistrationError(KafkaError, errno=119):
    """The controller considers the broker registration invalid."""


class TransactionAbortableError(KafkaError, errno=120):
    """The transaction failed on the server: abort it to keep using the transactional id."""


class InvalidRecordStateError(KafkaError, errno=121):
    """The record state is invalid, so the delivery acknowledgement failed."""


class ShareSessionNotFoundError(KafkaError, errno=122, retriable=True):
    """The share session was not found."""


class InvalidShareSessionEpochError(KafkaError, errno=123, retriable=True):
    """The share session epoch is invalid."""


class FencedStateEpochError(KafkaError, errno=124):
    """The share-group state epoch did not match."""


class InvalidVoterKeyError(KafkaError, errno=125):
    """The voter key does not match the receiving replica's key."""


class DuplicateVoterError(KafkaError, errno=126):
    """The voter is already in the voter set."""


class VoterNotFoundError(KafkaError, errno=127):
    """The voter is not in the voter set."""


class InvalidRegularExpressionError(KafkaError, errno=128):
    """The regular expression is invalid."""


class RebootstrapRequiredError(KafkaError, errno=129):
    """The client must look up the cluster's brokers again from its bootstrap addresses."""


class StreamsInvalidTopologyError(KafkaError, errno=130):
    """The supplied Streams topology is invalid."""


class StreamsInvalidTopologyEpochError(KafkaError, errno=131):
    """The supplied Streams topology epoch is invalid."""


class StreamsTopologyFencedError(KafkaError, errno=132):
    """The Streams topology was updated by another member."""


class ShareSessionLimitReachedError(KafkaError, errno=133, retriable=True):
    """The broker has as many share sessions as ``group.share.max.share.sessions`` allows."""


class GroupDeletionFailedError(KafkaError, errno=134):
    """Deleting the group (or its state) failed; try again later."""


class StreamsTopologyDescriptionUpdateFailedError(KafkaError, errno=135):
    """Updating the Streams topology description failed."""


class ControllerIdNotRegisteredError(KafkaError, errno=136):
    """The controller id is not registered."""
