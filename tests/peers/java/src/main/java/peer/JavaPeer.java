package peer;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.StringJoiner;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A consumer-group member on the Java {@code KafkaConsumer}, run by the test suite and the
 * benchmarks next to consumergroup members (see tests/peers/__init__.py).
 *
 * <p>It reads one topic as a member of a group and reports on stdout in JSON lines, the
 * protocol of bench/peers/_common.py: hello, start, assigned/revoked/lost (with the
 * generation), consumed (stream mode), records (with --records: every record's partition and
 * offset), result, closed. Offsets are committed asynchronously every --commit-interval, and
 * synchronously for partitions being revoked and at exit. A line on stdin, stdin closing or
 * SIGTERM stops it cleanly: final commit, then the member leaves the group.
 *
 * <p>{@code --protocol share} makes it a member of a share group (KIP-932) on the Java {@code
 * KafkaShareConsumer}, acknowledging implicitly (each poll accepts the records of the previous
 * one; close accepts the last): the same events, without assigned/revoked (a share group hands
 * out records, not partitions), and {@code --delay-ms N} per record.
 */
public final class JavaPeer {
  private static final long FLUSH_NANOS = 100_000_000L;
  /**
   * Throughput mode: the steady window (rate, CPU) starts once this share of --expect was
   * read, so that the JIT compiling the poll path is not counted against the JVM.
   */
  private static final long WARMUP_DIVISOR = 10;
  private static final String USAGE =
      "usage: JavaPeer --bootstrap H:P --topic T --group G [--mode stream|throughput|produce]"
          + " [--size BYTES (produce)]"
          + " [--expect N] [--session-timeout S] [--heartbeat S] [--rebalance-timeout S]"
          + " [--assignor range|roundrobin|sticky|cooperative-sticky]"
          + " [--protocol classic|consumer|share] [--remote-assignor uniform|range]"
          + " [--max-poll-records N] [--delay-ms N]"
          + " [--instance-id ID] [--client-id ID] [--isolation read_committed|read_uncommitted]"
          + " [--commit-interval S] [--records] [--mode latency --out FILE [--tuned]]";

  private final BufferedWriter out =
      new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
  private final StringBuilder consumed = new StringBuilder();
  private final StringBuilder records = new StringBuilder();
  private int lastPartition = -1;
  private long lastOffset;
  private double lastT;
  private int lastN;
  private long lastFlush = System.nanoTime();
  private final Map<TopicPartition, OffsetAndMetadata> marked = new HashMap<>();

  /** CLOCK_MONOTONIC in seconds (System.nanoTime on Linux), the clock of the harness. */
  private static double now() {
    return System.nanoTime() / 1e9;
  }

  private void line(String json) {
    try {
      out.write(json);
      out.write('\n');
    } catch (IOException e) {
      throw new IllegalStateException("stdout closed", e);
    }
  }

  private void flush() {
    closeItem();
    if (consumed.length() > 0) {
      line("{\"ev\":\"consumed\",\"items\":[" + consumed + "]}");
      consumed.setLength(0);
    }
    if (records.length() > 0) {
      line("{\"ev\":\"records\",\"items\":[" + records + "]}");
      records.setLength(0);
    }
    try {
      out.flush();
    } catch (IOException e) {
      throw new IllegalStateException("stdout closed", e);
    }
    lastFlush = System.nanoTime();
  }

  private void event(String ev, String fields) {
    flush();
    line("{\"ev\":\"" + ev + "\",\"t\":" + now() + (fields.isEmpty() ? "" : "," + fields) + "}");
    flush();
  }

  // Consecutive records of one partition are one consumed item [partition, t, n, last].
  private void closeItem() {
    if (lastPartition >= 0) {
      if (consumed.length() > 0) {
        consumed.append(',');
      }
      consumed.append('[').append(lastPartition).append(',').append(lastT).append(',')
          .append(lastN).append(',').append(lastOffset).append(']');
      lastPartition = -1;
    }
  }

  private void add(int partition, long offset, boolean withRecords) {
    if (partition != lastPartition) {
      closeItem();
      lastPartition = partition;
      lastN = 0;
    }
    lastN++;
    lastOffset = offset;
    lastT = now();
    if (withRecords) {
      if (records.length() > 0) {
        records.append(',');
      }
      records.append('[').append(partition).append(',').append(offset).append(']');
    }
  }

  private static String parts(Collection<TopicPartition> tps) {
    StringJoiner j = new StringJoiner(",", "[", "]");
    tps.stream().mapToInt(TopicPartition::partition).sorted().forEach(p -> j.add(Integer.toString(p)));
    return j.toString();
  }

  /** CPU seconds (user, system) and peak RSS of this process from /proc. */
  private static String usage() {
    double user = 0;
    double sys = 0;
    long hwm = 0;
    try {
      String stat = Files.readString(Path.of("/proc/self/stat"));
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      user = Long.parseLong(f[11]) / 100.0; // USER_HZ is 100 in /proc on Linux
      sys = Long.parseLong(f[12]) / 100.0;
      for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (l.startsWith("VmHWM:")) {
          hwm = Long.parseLong(l.replaceAll("[^0-9]", ""));
        }
      }
    } catch (IOException e) {
      // not Linux: report zeros
    }
    return "\"maxrss_kb\":" + hwm + ",\"cpu_user\":" + user + ",\"cpu_sys\":" + sys;
  }

  private static double cpuNow() {
    String u = usage();
    String[] kv = u.split(",");
    return Double.parseDouble(kv[1].split(":")[1]) + Double.parseDouble(kv[2].split(":")[1]);
  }

  private static Map<String, String> parse(String[] args) {
    Map<String, String> opts = new HashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--")) {
        usageExit("unexpected argument " + a);
      }
      String key = a.substring(2);
      if (key.equals("records") || key.equals("tuned")) {
        opts.put(key, "true");
      } else if (i + 1 < args.length) {
        opts.put(key, args[++i]);
      } else {
        usageExit(a + " needs a value");
      }
    }
    boolean producing = "produce".equals(opts.get("mode"));
    for (String required : producing ? List.of("bootstrap", "topic")
        : List.of("bootstrap", "topic", "group")) {
      if (!opts.containsKey(required)) {
        usageExit("--" + required + " is required");
      }
    }
    return opts;
  }

  private static void usageExit(String why) {
    System.err.println("java-peer: " + why + "\n" + USAGE);
    System.exit(2);
  }

  private static String ms(Map<String, String> o, String key, String dflt) {
    return Long.toString(Math.round(Double.parseDouble(o.getOrDefault(key, dflt)) * 1000));
  }

  private static String assignorClass(String name) {
    switch (name) {
      case "range":
        return "org.apache.kafka.clients.consumer.RangeAssignor";
      case "roundrobin":
        return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
      case "sticky":
        return "org.apache.kafka.clients.consumer.StickyAssignor";
      case "cooperative-sticky":
        return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
      default:
        usageExit("unknown --assignor " + name);
        return "";
    }
  }

  private static Properties config(Map<String, String> o) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, o.getOrDefault("client-id", "java-peer"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, o.getOrDefault("isolation", "read_uncommitted"));
    p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, ms(o, "rebalance-timeout", "30"));
    p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
    p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000"); // sees new partitions within 1 s
    if (o.containsKey("instance-id")) {
      p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, o.get("instance-id"));
    }
    String protocol = o.getOrDefault("protocol", "classic");
    p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    if (protocol.equals("classic")) {
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, ms(o, "session-timeout", "6"));
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, ms(o, "heartbeat", "1"));
      p.put(
          ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
          assignorClass(o.getOrDefault("assignor", "range")));
    } else if (protocol.equals("consumer")) {
      // session timeout, heartbeat interval and assignors are the broker's in KIP-848
      if (o.containsKey("remote-assignor")) {
        p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, o.get("remote-assignor"));
      }
    } else {
      usageExit("--protocol must be classic or consumer, not " + protocol);
    }
    return p;
  }

  private void run(Map<String, String> o) throws InterruptedException {
    boolean throughput = o.getOrDefault("mode", "stream").equals("throughput");
    if (!throughput && !o.getOrDefault("mode", "stream").equals("stream")) {
      usageExit("--mode must be stream or throughput");
    }
    boolean withRecords = o.containsKey("records");
    long expect = Long.parseLong(o.getOrDefault("expect", "0"));
    long commitNanos = Math.round(Double.parseDouble(o.getOrDefault("commit-interval", "0.2")) * 1e9);
    event("hello", "");
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config(o));
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      consumer.wakeup(); // SIGTERM: leave the poll loop, commit, close
      try {
        done.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }));
    wakeOnStdin(consumer::wakeup);

    ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        for (TopicPartition tp : revoked) {
          OffsetAndMetadata om = marked.remove(tp);
          if (om != null) {
            commit.put(tp, om);
          }
        }
        if (!commit.isEmpty()) {
          consumer.commitSync(commit);
        }
        event("revoked", "\"parts\":" + parts(revoked) + ",\"generation\":"
            + consumer.groupMetadata().generationId());
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
        event("assigned", "\"parts\":" + parts(assigned) + ",\"generation\":"
            + consumer.groupMetadata().generationId() + ",\"member_id\":\""
            + consumer.groupMetadata().memberId() + "\"");
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> lost) {
        marked.keySet().removeAll(lost);
        event("lost", "\"parts\":" + parts(lost));
      }
    };

    long count = 0;
    long nFirst = 0;
    double cpuFirst = 0;
    double tFirst = 0;
    double tSteady = 0;
    double tLast = 0;
    long lastCommit = System.nanoTime();
    event("start", "");
    try {
      consumer.subscribe(List.of(o.get("topic")), listener);
      while (true) {
        ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
        for (ConsumerRecord<byte[], byte[]> r : batch) {
          if (!throughput) {
            add(r.partition(), r.offset(), withRecords);
            marked.put(new TopicPartition(r.topic(), r.partition()),
                new OffsetAndMetadata(r.offset() + 1));
          }
        }
        int n = batch.count();
        if (n > 0) {
          count += n;
          tLast = now();
          if (tFirst == 0) {
            tFirst = tLast;
          }
          if (tSteady == 0 && (!throughput || count >= expect / WARMUP_DIVISOR)) {
            tSteady = tLast;
            nFirst = count;
            cpuFirst = throughput ? cpuNow() : 0;
          }
        }
        if (throughput && count >= expect && count > 0) {
          String rate = tLast > tSteady ? ",\"msgs_per_s\":" + (count - nFirst) / (tLast - tSteady) : "";
          event("result", "\"count\":" + count + ",\"n_first\":" + nFirst + ",\"cpu_first\":"
              + cpuFirst + ",\"t_first\":" + tFirst + ",\"t_steady\":" + tSteady + ",\"t_last\":"
              + tLast + "," + usage() + rate);
          break;
        }
        long t = System.nanoTime();
        if (!marked.isEmpty() && t - lastCommit >= commitNanos) {
          consumer.commitAsync(new HashMap<>(marked), null);
          lastCommit = t;
        }
        if (t - lastFlush >= FLUSH_NANOS) {
          flush();
        }
      }
    } catch (WakeupException e) {
      // asked to stop
    } finally {
      try {
        if (!marked.isEmpty()) {
          consumer.commitSync(new HashMap<>(marked));
        }
      } catch (RuntimeException e) {
        System.err.println("java-peer: final commit failed: " + e);
      }
      if (!throughput) {
        event("result", "\"count\":" + count + ",\"t_first\":" + tFirst + ",\"t_last\":" + tLast
            + "," + usage());
      }
      consumer.close(); // leaves the group
      event("closed", "");
      done.countDown();
    }
  }

  /**
   * Produce mode: --expect records of --size bytes without a key, with the producer's
   * defaults (idempotent, acks=all, linger.ms=5, the built-in sticky partitioner); reports
   * the rate and the CPU from the first send to the last acknowledgement.
   */
  private void produce(Map<String, String> o) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
    p.put(ProducerConfig.CLIENT_ID_CONFIG, o.getOrDefault("client-id", "java-peer"));
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    String topic = o.get("topic");
    long count = Long.parseLong(o.getOrDefault("expect", "0"));
    byte[] value = new byte[Integer.parseInt(o.getOrDefault("size", "100"))];
    AtomicLong failed = new AtomicLong();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      producer.send(new ProducerRecord<>(topic, "warm-up".getBytes(StandardCharsets.UTF_8)))
          .get();
      double t0 = now();
      double cpu0 = cpuNow();
      for (long i = 0; i < count; i++) {
        producer.send(new ProducerRecord<>(topic, value), (md, err) -> {
          if (err != null) {
            failed.incrementAndGet();
          }
        });
      }
      producer.flush();
      double t1 = now();
      double cpu1 = cpuNow();
      event("result", "\"count\":" + count + ",\"failed\":" + failed.get() + ",\"seconds\":"
          + (t1 - t0) + ",\"cpu\":" + (cpu1 - cpu0) + "," + usage());
    }
  }

  /** A share-group member: poll, report, sleep --delay-ms per record, acknowledge implicitly. */
  private void runShare(Map<String, String> o) throws InterruptedException {
    boolean throughput = o.getOrDefault("mode", "stream").equals("throughput");
    boolean withRecords = o.containsKey("records");
    long expect = Long.parseLong(o.getOrDefault("expect", "0"));
    long delayMs = Long.parseLong(o.getOrDefault("delay-ms", "0"));
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, o.getOrDefault("client-id", "java-share-peer"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "implicit");
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, o.getOrDefault("max-poll-records", "500"));
    p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
    event("hello", "");
    KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p);
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      consumer.wakeup();
      try {
        done.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }));
    wakeOnStdin(consumer::wakeup);
    long count = 0;
    long nFirst = 0;
    double cpuFirst = 0;
    double tFirst = 0;
    double tSteady = 0;
    double tLast = 0;
    event("start", "");
    try {
      consumer.subscribe(List.of(o.get("topic")));
      while (true) {
        ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
        for (ConsumerRecord<byte[], byte[]> r : batch) {
          if (!throughput) {
            add(r.partition(), r.offset(), withRecords);
          }
          if (delayMs > 0) {
            Thread.sleep(delayMs);
          }
        }
        int n = batch.count();
        if (n > 0) {
          count += n;
          tLast = now();
          if (tFirst == 0) {
            tFirst = tLast;
          }
          if (tSteady == 0 && (!throughput || count >= expect / WARMUP_DIVISOR)) {
            tSteady = tLast;
            nFirst = count;
            cpuFirst = throughput ? cpuNow() : 0;
          }
        }
        if (throughput && count >= expect && count > 0) {
          String rate = tLast > tSteady ? ",\"msgs_per_s\":" + (count - nFirst) / (tLast - tSteady) : "";
          event("result", "\"count\":" + count + ",\"n_first\":" + nFirst + ",\"cpu_first\":"
              + cpuFirst + ",\"t_first\":" + tFirst + ",\"t_steady\":" + tSteady + ",\"t_last\":"
              + tLast + "," + usage() + rate);
          break;
        }
        if (System.nanoTime() - lastFlush >= FLUSH_NANOS) {
          flush();
        }
      }
    } catch (WakeupException e) {
      // asked to stop
    } finally {
      if (!throughput) {
        event("result", "\"count\":" + count + ",\"t_first\":" + tFirst + ",\"t_last\":" + tLast
            + "," + usage());
      }
      consumer.close(); // accepts the last poll's records, leaves the group
      event("closed", "");
      done.countDown();
    }
  }

  /**
   * Latency mode: the consumer's defaults (its documentation names no latency setting beyond
   * them: fetch.min.bytes=1), the documented poll loop; every record's send time (its value's
   * first 8 bytes, CLOCK_MONOTONIC ns: System.nanoTime on Linux) and arrival (read once per
   * poll answer) go to --out at stop, as big-endian int64 pairs.
   */
  private void latency(Map<String, String> o) throws IOException {
    event("hello", "");
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
    p.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, o.getOrDefault("client-id", "java-peer"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, ms(o, "session-timeout", "6"));
    p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, ms(o, "heartbeat", "1"));
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
    wakeOnStdin(consumer::wakeup);
    long[] pairs = new long[1 << 20];
    int n = 0;
    event("start", "");
    try {
      consumer.subscribe(List.of(o.get("topic")), new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> revoked) {}

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
          event("assigned", "\"parts\":" + parts(assigned));
        }
      });
      while (true) {
        ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
        long t = System.nanoTime();
        for (ConsumerRecord<byte[], byte[]> r : batch) {
          byte[] v = r.value();
          if (v == null || v.length < 8) {
            continue;
          }
          if (n + 2 > pairs.length) {
            pairs = java.util.Arrays.copyOf(pairs, pairs.length * 2);
          }
          pairs[n++] = java.nio.ByteBuffer.wrap(v, 0, 8).getLong();
          pairs[n++] = t;
        }
      }
    } catch (WakeupException e) {
      // asked to stop
    }
    java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate(8 * n); // big-endian
    for (int i = 0; i < n; i++) {
      buf.putLong(pairs[i]);
    }
    Files.write(Path.of(o.get("out")), buf.array());
    event("result", "\"count\":" + n / 2 + ",\"records\":" + n / 2 + "," + usage());
    consumer.close();
    event("closed", "");
  }

  /** Calls {@code wakeup} once a line arrives on stdin, or stdin closes: the harness's stop. */
  private static void wakeOnStdin(Runnable wakeup) {
    Thread stdin = new Thread(() -> {
      try {
        new InputStreamReader(System.in, StandardCharsets.UTF_8).read();
      } catch (IOException e) {
        // closed: stop as well
      }
      wakeup.run();
    });
    stdin.setDaemon(true);
    stdin.start();
  }

  /** Entry point: see {@link #USAGE}. */
  public static void main(String[] args) throws Exception {
    Map<String, String> o = parse(args);
    if ("produce".equals(o.get("mode"))) {
      new JavaPeer().produce(o);
    } else if ("latency".equals(o.get("mode"))) {
      new JavaPeer().latency(o);
    } else if (o.getOrDefault("protocol", "classic").equals("share")) {
      new JavaPeer().runShare(o);
    } else {
      new JavaPeer().run(o);
    }
  }
}
