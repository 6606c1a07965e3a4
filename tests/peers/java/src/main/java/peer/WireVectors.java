package peer;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.AlterShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.AlterShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.DeleteShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.DeleteShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.DescribeShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.DescribeShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.IncrementalAlterConfigsRequestData;
import org.apache.kafka.common.message.IncrementalAlterConfigsResponseData;
import org.apache.kafka.common.message.ListGroupsRequestData;
import org.apache.kafka.common.message.ListGroupsResponseData;
import org.apache.kafka.common.message.ShareAcknowledgeRequestData;
import org.apache.kafka.common.message.ShareAcknowledgeResponseData;
import org.apache.kafka.common.message.ShareFetchRequestData;
import org.apache.kafka.common.message.ShareFetchResponseData;
import org.apache.kafka.common.message.ShareGroupDescribeRequestData;
import org.apache.kafka.common.message.ShareGroupDescribeResponseData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.record.internal.MemoryRecords;

/**
 * Message bodies encoded by kafka-clients' own message classes, for the wire codecs of
 * consumergroup/net/share.py and net/group_admin.py: prints one JSON object {name: hex}.
 *
 * <p>tests/unit/test_share_protocol.py holds these bytes and checks our codecs against them;
 * tests/integration/test_share_java_vectors.py runs this program and checks that the stored
 * bytes still equal what the client produces.
 */
public final class WireVectors {
  static final Uuid TOPIC = Uuid.fromString("AAECAwQFBgcICQoLDA0ODw");
  static final Uuid OTHER = Uuid.fromString("EBESExQVFhcYGRobHB0eHw");
  static final String MEMBER = "ICEiIyQlJicoKSorLC0uLw";
  private final Map<String, String> out = new TreeMap<>();

  private void put(String name, Message message, int version) {
    ByteBufferAccessor accessor = MessageUtil.toByteBufferAccessor(message, (short) version);
    ByteBuffer buffer = accessor.buffer();
    buffer.rewind();
    byte[] bytes = new byte[buffer.remaining()];
    buffer.get(bytes);
    StringBuilder hex = new StringBuilder();
    for (byte b : bytes) {
      hex.append(String.format("%02x", b));
    }
    out.put(name + "_v" + version, hex.toString());
  }

  private static ShareFetchRequestData.AcknowledgementBatch ack(long first, long last, int... types) {
    List<Byte> list = new ArrayList<>();
    for (int t : types) {
      list.add((byte) t);
    }
    return new ShareFetchRequestData.AcknowledgementBatch()
        .setFirstOffset(first)
        .setLastOffset(last)
        .setAcknowledgeTypes(list);
  }

  private static ShareAcknowledgeRequestData.AcknowledgementBatch ackOnly(
      long first, long last, int... types) {
    List<Byte> list = new ArrayList<>();
    for (int t : types) {
      list.add((byte) t);
    }
    return new ShareAcknowledgeRequestData.AcknowledgementBatch()
        .setFirstOffset(first)
        .setLastOffset(last)
        .setAcknowledgeTypes(list);
  }

  private void heartbeat() {
    put(
        "share_group_heartbeat_request_join",
        new ShareGroupHeartbeatRequestData()
            .setGroupId("workers")
            .setMemberId(MEMBER)
            .setMemberEpoch(0)
            .setRackId(null)
            .setSubscribedTopicNames(List.of("jobs", "more")),
        1);
    put(
        "share_group_heartbeat_request_beat",
        new ShareGroupHeartbeatRequestData()
            .setGroupId("workers")
            .setMemberId(MEMBER)
            .setMemberEpoch(5)
            .setRackId("r1")
            .setSubscribedTopicNames(null),
        1);
    put(
        "share_group_heartbeat_response_assigned",
        new ShareGroupHeartbeatResponseData()
            .setMemberId(MEMBER)
            .setMemberEpoch(3)
            .setHeartbeatIntervalMs(500)
            .setAssignment(
                new ShareGroupHeartbeatResponseData.Assignment()
                    .setTopicPartitions(
                        List.of(
                            new ShareGroupHeartbeatResponseData.TopicPartitions()
                                .setTopicId(TOPIC)
                                .setPartitions(List.of(0, 2))))),
        1);
    put(
        "share_group_heartbeat_response_error",
        new ShareGroupHeartbeatResponseData()
            .setErrorCode((short) 25)
            .setErrorMessage("unknown member")
            .setMemberId(null)
            .setMemberEpoch(-1)
            .setHeartbeatIntervalMs(0)
            .setAssignment(null),
        1);
  }

  private void describe() {
    put(
        "share_group_describe_request",
        new ShareGroupDescribeRequestData().setGroupIds(List.of("workers", "other")),
        1);
    put(
        "share_group_describe_response",
        new ShareGroupDescribeResponseData()
            .setThrottleTimeMs(1)
            .setGroups(
                List.of(
                    new ShareGroupDescribeResponseData.DescribedGroup()
                        .setGroupId("workers")
                        .setGroupState("Stable")
                        .setGroupEpoch(4)
                        .setAssignmentEpoch(4)
                        .setAssignorName("simple")
                        .setMembers(
                            List.of(
                                new ShareGroupDescribeResponseData.Member()
                                    .setMemberId(MEMBER)
                                    .setRackId(null)
                                    .setMemberEpoch(4)
                                    .setClientId("app")
                                    .setClientHost("/127.0.0.1")
                                    .setSubscribedTopicNames(List.of("jobs"))
                                    .setAssignment(
                                        new ShareGroupDescribeResponseData.Assignment()
                                            .setTopicPartitions(
                                                List.of(
                                                    new ShareGroupDescribeResponseData
                                                            .TopicPartitions()
                                                        .setTopicId(TOPIC)
                                                        .setTopicName("jobs")
                                                        .setPartitions(List.of(0, 1)))))))
                        .setAuthorizedOperations(Integer.MIN_VALUE),
                    new ShareGroupDescribeResponseData.DescribedGroup()
                        .setErrorCode((short) 69)
                        .setErrorMessage("Group other not found.")
                        .setGroupId("other")
                        .setGroupState("Dead")
                        .setAssignorName(""))),
        1);
  }

  private void fetch() {
    for (int version = 1; version <= 2; version++) {
      ShareFetchRequestData.FetchTopicCollection open = new ShareFetchRequestData.FetchTopicCollection();
      ShareFetchRequestData.FetchPartitionCollection parts =
          new ShareFetchRequestData.FetchPartitionCollection();
      parts.add(new ShareFetchRequestData.FetchPartition().setPartitionIndex(0));
      parts.add(new ShareFetchRequestData.FetchPartition().setPartitionIndex(1));
      open.add(new ShareFetchRequestData.FetchTopic().setTopicId(TOPIC).setPartitions(parts));
      put(
          "share_fetch_request_open",
          new ShareFetchRequestData()
              .setGroupId("workers")
              .setMemberId(MEMBER)
              .setShareSessionEpoch(0)
              .setMaxWaitMs(500)
              .setMinBytes(1)
              .setMaxBytes(52428800)
              .setMaxRecords(100)
              .setBatchSize(100)
              .setShareAcquireMode((byte) (version >= 2 ? 1 : 0))
              .setTopics(open),
          version);

      ShareFetchRequestData.FetchTopicCollection acks = new ShareFetchRequestData.FetchTopicCollection();
      ShareFetchRequestData.FetchPartitionCollection acked =
          new ShareFetchRequestData.FetchPartitionCollection();
      acked.add(
          new ShareFetchRequestData.FetchPartition()
              .setPartitionIndex(1)
              .setAcknowledgementBatches(List.of(ack(10, 12, 1), ack(13, 15, 1, 2, 0))));
      acks.add(new ShareFetchRequestData.FetchTopic().setTopicId(TOPIC).setPartitions(acked));
      put(
          "share_fetch_request_acks",
          new ShareFetchRequestData()
              .setGroupId("workers")
              .setMemberId(MEMBER)
              .setShareSessionEpoch(3)
              .setMaxWaitMs(500)
              .setMinBytes(1)
              .setMaxBytes(1048576)
              .setMaxRecords(7)
              .setBatchSize(7)
              .setShareAcquireMode((byte) (version >= 2 ? 1 : 0))
              .setTopics(acks)
              .setForgottenTopicsData(
                  List.of(
                      new ShareFetchRequestData.ForgottenTopic()
                          .setTopicId(OTHER)
                          .setPartitions(List.of(4)))),
          version);

      ShareFetchResponseData.PartitionData data =
          new ShareFetchResponseData.PartitionData()
              .setPartitionIndex(0)
              .setCurrentLeader(
                  new ShareFetchResponseData.LeaderIdAndEpoch().setLeaderId(1).setLeaderEpoch(5))
              .setRecords(MemoryRecords.readableRecords(ByteBuffer.wrap(new byte[] {1, 2, 3, 4, 5})))
              .setAcquiredRecords(
                  List.of(
                      new ShareFetchResponseData.AcquiredRecords()
                          .setFirstOffset(0)
                          .setLastOffset(4)
                          .setDeliveryCount((short) 1),
                      new ShareFetchResponseData.AcquiredRecords()
                          .setFirstOffset(7)
                          .setLastOffset(7)
                          .setDeliveryCount((short) 3)));
      ShareFetchResponseData.PartitionData moved =
          new ShareFetchResponseData.PartitionData()
              .setPartitionIndex(1)
              .setErrorCode((short) 6)
              .setErrorMessage("moved")
              .setAcknowledgeErrorCode((short) 121)
              .setAcknowledgeErrorMessage("bad state")
              .setCurrentLeader(
                  new ShareFetchResponseData.LeaderIdAndEpoch().setLeaderId(2).setLeaderEpoch(6))
              .setRecords(MemoryRecords.EMPTY);
      put(
          "share_fetch_response",
          new ShareFetchResponseData()
              .setAcquisitionLockTimeoutMs(30000)
              .setResponses(
                  new ShareFetchResponseData.ShareFetchableTopicResponseCollection(
                      List.of(
                              new ShareFetchResponseData.ShareFetchableTopicResponse()
                                  .setTopicId(TOPIC)
                                  .setPartitions(List.of(data, moved)))
                          .iterator()))
              .setNodeEndpoints(
                  new ShareFetchResponseData.NodeEndpointCollection(
                      List.of(
                              new ShareFetchResponseData.NodeEndpoint()
                                  .setNodeId(2)
                                  .setHost("127.0.0.1")
                                  .setPort(9093)
                                  .setRack(null))
                          .iterator())),
          version);
    }
    ShareFetchRequestData.FetchTopicCollection renew = new ShareFetchRequestData.FetchTopicCollection();
    ShareFetchRequestData.FetchPartitionCollection renewed =
        new ShareFetchRequestData.FetchPartitionCollection();
    renewed.add(
        new ShareFetchRequestData.FetchPartition()
            .setPartitionIndex(3)
            .setAcknowledgementBatches(List.of(ack(20, 21, 4))));
    renew.add(new ShareFetchRequestData.FetchTopic().setTopicId(TOPIC).setPartitions(renewed));
    put(
        "share_fetch_request_renew",
        new ShareFetchRequestData()
            .setGroupId("workers")
            .setMemberId(MEMBER)
            .setShareSessionEpoch(9)
            .setMaxWaitMs(0)
            .setMinBytes(0)
            .setMaxBytes(0)
            .setMaxRecords(0)
            .setBatchSize(0)
            .setShareAcquireMode((byte) 1)
            .setIsRenewAck(true)
            .setTopics(renew),
        2);
  }

  private void acknowledge() {
    for (int version = 1; version <= 2; version++) {
      ShareAcknowledgeRequestData.AcknowledgeTopicCollection topics =
          new ShareAcknowledgeRequestData.AcknowledgeTopicCollection();
      ShareAcknowledgeRequestData.AcknowledgePartitionCollection parts =
          new ShareAcknowledgeRequestData.AcknowledgePartitionCollection();
      parts.add(
          new ShareAcknowledgeRequestData.AcknowledgePartition()
              .setPartitionIndex(2)
              .setAcknowledgementBatches(List.of(ackOnly(5, 9, 3), ackOnly(11, 11, version == 2 ? 4 : 2))));
      topics.add(
          new ShareAcknowledgeRequestData.AcknowledgeTopic().setTopicId(TOPIC).setPartitions(parts));
      put(
          "share_acknowledge_request",
          new ShareAcknowledgeRequestData()
              .setGroupId("workers")
              .setMemberId(MEMBER)
              .setShareSessionEpoch(-1)
              .setIsRenewAck(version == 2)
              .setTopics(topics),
          version);
      put(
          "share_acknowledge_response",
          new ShareAcknowledgeResponseData()
              .setAcquisitionLockTimeoutMs(15000)
              .setResponses(
                  new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponseCollection(
                      List.of(
                              new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponse()
                                  .setTopicId(TOPIC)
                                  .setPartitions(
                                      List.of(
                                          new ShareAcknowledgeResponseData.PartitionData()
                                              .setPartitionIndex(2)
                                              .setErrorCode((short) 121)
                                              .setErrorMessage("not acquired")
                                              .setCurrentLeader(
                                                  new ShareAcknowledgeResponseData.LeaderIdAndEpoch()
                                                      .setLeaderId(1)
                                                      .setLeaderEpoch(0)))))
                          .iterator())),
          version);
    }
  }

  private void offsets() {
    for (int version = 0; version <= 1; version++) {
      put(
          "describe_share_group_offsets_request_all",
          new DescribeShareGroupOffsetsRequestData()
              .setGroups(
                  List.of(
                      new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestGroup()
                          .setGroupId("workers")
                          .setTopics(null))),
          version);
      put(
          "describe_share_group_offsets_request_named",
          new DescribeShareGroupOffsetsRequestData()
              .setGroups(
                  List.of(
                      new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestGroup()
                          .setGroupId("workers")
                          .setTopics(
                              List.of(
                                  new DescribeShareGroupOffsetsRequestData
                                          .DescribeShareGroupOffsetsRequestTopic()
                                      .setTopicName("jobs")
                                      .setPartitions(List.of(0, 1)))))),
          version);
      put(
          "describe_share_group_offsets_response",
          new DescribeShareGroupOffsetsResponseData()
              .setGroups(
                  List.of(
                      new DescribeShareGroupOffsetsResponseData
                              .DescribeShareGroupOffsetsResponseGroup()
                          .setGroupId("workers")
                          .setTopics(
                              List.of(
                                  new DescribeShareGroupOffsetsResponseData
                                          .DescribeShareGroupOffsetsResponseTopic()
                                      .setTopicName("jobs")
                                      .setTopicId(TOPIC)
                                      .setPartitions(
                                          List.of(
                                              new DescribeShareGroupOffsetsResponseData
                                                      .DescribeShareGroupOffsetsResponsePartition()
                                                  .setPartitionIndex(0)
                                                  .setStartOffset(42)
                                                  .setLeaderEpoch(1)
                                                  .setLag(8),
                                              new DescribeShareGroupOffsetsResponseData
                                                      .DescribeShareGroupOffsetsResponsePartition()
                                                  .setPartitionIndex(1)
                                                  .setStartOffset(-1)
                                                  .setLeaderEpoch(-1)
                                                  .setLag(-1)))))
                          .setErrorCode((short) 0))),
          version);
    }
    AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestTopicCollection alter =
        new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestTopicCollection();
    List<AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestPartition> alterParts =
        List.of(
            new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestPartition()
                .setPartitionIndex(0)
                .setStartOffset(10),
            new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestPartition()
                .setPartitionIndex(1)
                .setStartOffset(0));
    alter.add(
        new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestTopic()
            .setTopicName("jobs")
            .setPartitions(alterParts));
    put(
        "alter_share_group_offsets_request",
        new AlterShareGroupOffsetsRequestData().setGroupId("workers").setTopics(alter),
        0);
    AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponseTopicCollection altered =
        new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponseTopicCollection();
    altered.add(
        new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponseTopic()
            .setTopicName("jobs")
            .setTopicId(TOPIC)
            .setPartitions(
                List.of(
                    new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponsePartition()
                        .setPartitionIndex(0),
                    new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponsePartition()
                        .setPartitionIndex(1)
                        .setErrorCode((short) 3)
                        .setErrorMessage("no such partition"))));
    put(
        "alter_share_group_offsets_response",
        new AlterShareGroupOffsetsResponseData().setResponses(altered),
        0);
    List<DeleteShareGroupOffsetsRequestData.DeleteShareGroupOffsetsRequestTopic> delete =
        List.of(
            new DeleteShareGroupOffsetsRequestData.DeleteShareGroupOffsetsRequestTopic()
                .setTopicName("jobs"),
            new DeleteShareGroupOffsetsRequestData.DeleteShareGroupOffsetsRequestTopic()
                .setTopicName("gone"));
    put(
        "delete_share_group_offsets_request",
        new DeleteShareGroupOffsetsRequestData().setGroupId("workers").setTopics(delete),
        0);
    List<DeleteShareGroupOffsetsResponseData.DeleteShareGroupOffsetsResponseTopic> deleted =
        List.of(
            new DeleteShareGroupOffsetsResponseData.DeleteShareGroupOffsetsResponseTopic()
                .setTopicName("jobs")
                .setTopicId(TOPIC),
            new DeleteShareGroupOffsetsResponseData.DeleteShareGroupOffsetsResponseTopic()
                .setTopicName("gone")
                .setTopicId(Uuid.ZERO_UUID)
                .setErrorCode((short) 3)
                .setErrorMessage("unknown topic"));
    put(
        "delete_share_group_offsets_response",
        new DeleteShareGroupOffsetsResponseData().setResponses(deleted),
        0);
  }

  private void groupAdmin() {
    put(
        "list_groups_request",
        new ListGroupsRequestData().setStatesFilter(List.of()).setTypesFilter(List.of("share")),
        5);
    put(
        "list_groups_response",
        new ListGroupsResponseData()
            .setGroups(
                List.of(
                    new ListGroupsResponseData.ListedGroup()
                        .setGroupId("workers")
                        .setProtocolType("share")
                        .setGroupState("Stable")
                        .setGroupType("share"))),
        5);
    IncrementalAlterConfigsRequestData.AlterableConfigCollection configs =
        new IncrementalAlterConfigsRequestData.AlterableConfigCollection();
    configs.add(
        new IncrementalAlterConfigsRequestData.AlterableConfig()
            .setName("share.auto.offset.reset")
            .setConfigOperation((byte) 0)
            .setValue("earliest"));
    configs.add(
        new IncrementalAlterConfigsRequestData.AlterableConfig()
            .setName("share.record.lock.duration.ms")
            .setConfigOperation((byte) 1)
            .setValue(null));
    IncrementalAlterConfigsRequestData.AlterConfigsResourceCollection resources =
        new IncrementalAlterConfigsRequestData.AlterConfigsResourceCollection();
    resources.add(
        new IncrementalAlterConfigsRequestData.AlterConfigsResource()
            .setResourceType((byte) 32)
            .setResourceName("workers")
            .setConfigs(configs));
    put(
        "incremental_alter_configs_request",
        new IncrementalAlterConfigsRequestData().setResources(resources).setValidateOnly(false),
        1);
    put(
        "incremental_alter_configs_response",
        new IncrementalAlterConfigsResponseData()
            .setResponses(
                List.of(
                    new IncrementalAlterConfigsResponseData.AlterConfigsResourceResponse()
                        .setErrorCode((short) 40)
                        .setErrorMessage("bad value")
                        .setResourceType((byte) 32)
                        .setResourceName("workers"))),
        1);
  }

  public static void main(String[] args) {
    WireVectors vectors = new WireVectors();
    vectors.heartbeat();
    vectors.describe();
    vectors.fetch();
    vectors.acknowledge();
    vectors.offsets();
    vectors.groupAdmin();
    StringBuilder json = new StringBuilder("{\n");
    String sep = "";
    for (Map.Entry<String, String> e : vectors.out.entrySet()) {
      json.append(sep).append("  \"").append(e.getKey()).append("\": \"").append(e.getValue()).append('"');
      sep = ",\n";
    }
    System.out.println(json.append("\n}"));
  }
}
