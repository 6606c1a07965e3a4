"""The classes of Kafka's error codes that the package itself never names.

They are :mod:`consumergroup.errors`' classes (their ``__module__`` says so, and they
pickle, print and compare as such); this module holds them so that ``import
consumergroup`` does not create them: 92 classes, ~11 M instructions of a consumer's
start-up, for codes that a response rarely carries. ``consumergroup.errors`` loads this
module on the first :func:`~consumergroup.errors.error_for_code` of one of their codes or
the first lookup of one of their names (``from consumergroup.errors import
DelegationTokenExpiredError``). A class the package names (``from ..errors import X`` in
any of its modules) belongs in ``errors.py``: tests/unit/test_import_cost.py fails when
the consumer path loads this module.
"""

from __future__ import annotations

from .errors import KafkaError

__all__ = [
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "ClusterAuthorizationFailedError",
    "ControllerIdNotRegisteredError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FeatureUpdateFailedError",
    "FencedStateEpochError",
    "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError",
    "GroupDeletionFailedError",
    "GroupSubscribedToTopicError",
    "IllegalSaslStateError",
    "InconsistentClusterIdError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MismatchedEndpointTypeError",
    "NetworkError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NotControllerError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OperationNotAttemptedError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ReassignmentInProgressError",
    "RebootstrapRequiredError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "ResourceNotFoundError",
    "SecurityDisabledError",
    "ShareSessionLimitReachedError",
    "SnapshotNotFoundError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyDescriptionUpdateFailedError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownControllerIdError",
    "UnknownLeaderEpochError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "VoterNotFoundError",
]


class UnknownServerError(KafkaError, errno=-1):
    """The broker hit an unexpected error while handling the request; see the broker logs."""


class InvalidFetchSizeError(KafkaError, errno=4):
    """The requested fetch size is invalid."""


class BrokerNotAvailableError(KafkaError, errno=8):
    """The broker is not available."""


class ReplicaNotAvailableError(KafkaError, errno=9, retriable=True):
    """The replica for the requested topic-partition is not available."""


class StaleControllerEpochError(KafkaError, errno=11):
    """The controller has moved to another broker."""


class OffsetMetadataTooLargeError(KafkaError, errno=12):
    """The metadata string attached to the committed offset is too large."""


class NetworkError(KafkaError, errno=13, retriable=True):
    """The broker disconnected before sending a response."""


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


class InvalidGroupIdError(KafkaError, errno=24):
    """The group id is empty or otherwise invalid."""


class InvalidSessionTimeoutError(KafkaError, errno=26):
    """The session timeout is outside the broker's group.min.session.timeout.ms to
    group.max.session.timeout.ms range.
    """


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


class IllegalSaslStateError(KafkaError, errno=34):
    """The request is not valid in the current SASL state."""


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


class InvalidProducerIdMappingError(KafkaError, errno=49):
    """The producer id is not currently assigned to this transactional id."""


class InvalidTransactionTimeoutError(KafkaError, errno=50):
    """The transaction timeout exceeds the broker's transaction.max.timeout.ms."""


class TransactionCoordinatorFencedError(KafkaError, errno=52):
    """The transaction coordinator that sent the marker is no longer the current one."""


class SecurityDisabledError(KafkaError, errno=54):
    """Security features are disabled on the broker."""


class OperationNotAttemptedError(KafkaError, errno=55):
    """The broker skipped this operation because another part of the batched request failed."""


class LogDirNotFoundError(KafkaError, errno=57):
    """The requested log directory is not configured on the broker."""


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


class ListenerNotFoundError(KafkaError, errno=72, retriable=True):
    """The leader has no listener matching the one the metadata request arrived on."""


class TopicDeletionDisabledError(KafkaError, errno=73):
    """Topic deletion is disabled."""


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


class PreferredLeaderNotAvailableError(KafkaError, errno=80, retriable=True):
    """The preferred leader is not available."""


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


class ThrottlingQuotaExceededError(KafkaError, errno=89, retriable=True):
    """The throttling quota was exceeded."""


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


class InvalidRecordStateError(KafkaError, errno=121):
    """The record state is invalid, so the delivery acknowledgement failed."""


class FencedStateEpochError(KafkaError, errno=124):
    """The share-group state epoch did not match."""


class InvalidVoterKeyError(KafkaError, errno=125):
    """The voter key does not match the receiving replica's key."""


class DuplicateVoterError(KafkaError, errno=126):
    """The voter is already in the voter set."""


class VoterNotFoundError(KafkaError, errno=127):
    """The voter is not in the voter set."""


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


for _name in __all__:
    globals()[_name].__module__ = KafkaError.__module__
