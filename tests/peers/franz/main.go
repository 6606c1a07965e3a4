// Command franz-peer is a consumer-group member built on github.com/twmb/franz-go, run by
// the test suite and the benchmarks next to consumergroup members (see
// tests/peers/__init__.py).
//
// It reads one topic as a member of a group with the loop franz-go's documentation shows:
// PollFetches, then MarkCommitRecords of each partition's last record, committed by the
// client's auto-commit of marked offsets. It reports on stdout in JSON lines, the protocol
// of bench/peers/_common.py: hello, start, assigned/revoked/lost, consumed (stream mode),
// records (with -records: every message's partition and offset), result, closed. A line on
// stdin, stdin closing, SIGTERM or SIGINT stops it cleanly: marked offsets are committed,
// the member leaves the group.
//
// With -share it is a member of a share group (KIP-932, franz-go's ShareGroup): each poll
// accepts the records of the one before (implicit acknowledgement), the last poll's records
// are accepted before it leaves; the same events, without assigned/revoked (a share group
// hands out records, not partitions); -max-records sets ShareMaxRecords (strict) and
// -delay-ms sleeps per record.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"consumergroup/tests/peers/peerio"
	"github.com/twmb/franz-go/pkg/kgo"
)

func parts(m map[string][]int32) []int32 {
	ps := []int32{} // never null in the JSON
	for _, p := range m {
		ps = append(ps, p...)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func generation(cl *kgo.Client) int32 {
	_, g := cl.GroupMetadata()
	return g
}

// produce writes op.Expect records of op.Size bytes (no key: franz-go's default sticky
// partitioning) with franz-go's defaults (idempotent, acks=all) but a 5 ms linger as
// Java's, and reports the rate and the CPU from the first record to the last
// acknowledgement.
func produce(op peerio.Options, o *peerio.Out) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(op.Bootstrap...),
		kgo.ClientID(op.ClientID),
		kgo.DefaultProduceTopic(op.Topic),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		log.Fatalf("franz-peer: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		log.Fatalf("franz-peer: warm-up: %v", err)
	}
	value := make([]byte, op.Size)
	var failed atomic.Int64
	count := op.Expect
	t0, cpu0 := peerio.Now(), peerio.CPUNow()
	for i := int64(0); i < count; i++ {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		log.Fatalf("franz-peer: flush: %v", err)
	}
	t1, cpu1 := peerio.Now(), peerio.CPUNow()
	o.Result(map[string]any{
		"count": count, "failed": failed.Load(), "seconds": t1 - t0, "cpu": cpu1 - cpu0,
	})
	o.Flush()
}

// groupOpts are the options of every consumer-group member here: the group, the topic
// from its start, the session, and an "assigned" event per assignment.
func groupOpts(op peerio.Options, o *peerio.Out) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(op.Bootstrap...),
		kgo.ClientID(op.ClientID),
		kgo.ConsumerGroup(op.Group),
		kgo.ConsumeTopics(op.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(op.SessionTimeout),
		kgo.HeartbeatInterval(op.Heartbeat),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			o.Event("assigned", map[string]any{"parts": parts(m), "generation": generation(cl)})
		}),
	}
}

// latency reads with franz-go's defaults (its documentation names no latency setting
// beyond them: FetchMinBytes 1), the documented PollFetches loop, and logs every record's
// send time (its value's first 8 bytes, CLOCK_MONOTONIC ns) and arrival (read once per
// PollFetches answer) to op.Out at stop.
func latency(op peerio.Options, o *peerio.Out) {
	o.Event("hello", nil)
	cl, err := kgo.NewClient(groupOpts(op, o)...)
	if err != nil {
		log.Fatalf("franz-peer: %v", err)
	}
	ctx, _ := peerio.StopContext()
	o.Event("start", nil)
	pairs := make([]int64, 0, 1<<20)
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if fetches.IsClientClosed() {
			break
		}
		t := peerio.NowNs()
		fetches.EachRecord(func(r *kgo.Record) {
			if len(r.Value) >= 8 {
				pairs = append(pairs, int64(binary.BigEndian.Uint64(r.Value)), t)
			}
		})
	}
	if err := peerio.WritePairs(op.Out, pairs); err != nil {
		log.Fatalf("franz-peer: %v", err)
	}
	o.Result(map[string]any{"count": len(pairs) / 2, "records": len(pairs) / 2})
	cl.Close()
	o.Event("closed", nil)
}

func main() {
	share := flag.Bool("share", false, "a share-group member (KIP-932) instead of a consumer-group one")
	maxRecords := flag.Int("max-records", 500, "share: MaxRecords of each ShareFetch (strict)")
	delayMs := flag.Int("delay-ms", 0, "share: milliseconds to sleep per record")
	op := peerio.ParseOptions("franz-peer")
	if op.Produce {
		produce(op, peerio.NewOut())
		return
	}
	if *share {
		runShare(op, int32(*maxRecords), time.Duration(*delayMs)*time.Millisecond)
		return
	}
	if op.Latency {
		latency(op, peerio.NewOut())
		return
	}
	var balancer kgo.GroupBalancer
	switch op.Assignor {
	case "range":
		balancer = kgo.RangeBalancer()
	case "roundrobin":
		balancer = kgo.RoundRobinBalancer()
	case "sticky":
		balancer = kgo.StickyBalancer()
	case "cooperative-sticky":
		balancer = kgo.CooperativeStickyBalancer()
	}
	o := peerio.NewOut()
	o.Event("hello", nil)

	opts := append(groupOpts(op, o),
		kgo.RebalanceTimeout(op.RebalanceTimeout),
		kgo.Balancers(balancer),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(op.CommitInterval),
		kgo.FetchMaxWait(100*time.Millisecond),
		// Our own revoke callback replaces franz-go's default one, which commits: keep that.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "franz-peer: commit on revoke: %v\n", err)
			}
			o.Event("revoked", map[string]any{"parts": parts(m), "generation": generation(cl)})
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			o.Event("lost", map[string]any{"parts": parts(m), "generation": generation(cl)})
		}),
	)
	if op.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(op.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		log.Fatalf("franz-peer: %v", err)
	}

	ctx, stop := peerio.StopContext()
	throughput := op.Throughput
	if !throughput {
		go o.FlushEvery()
	}

	var count, nFirst int64
	var tFirst, tLast, cpuFirst float64
	o.Event("start", nil)
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "franz-peer: fetch %s[%d]: %v\n", t, p, err)
			}
		})
		t := peerio.Now()
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			n := len(fp.Records)
			if n == 0 {
				return
			}
			last := fp.Records[n-1]
			cl.MarkCommitRecords(last)
			if !throughput {
				o.Mu.Lock()
				o.Consumed = append(o.Consumed, []any{fp.Partition, t, n, last.Offset})
				if op.Records {
					for _, r := range fp.Records {
						o.Records = append(o.Records, [2]int64{int64(r.Partition), r.Offset})
					}
				}
				o.Mu.Unlock()
			}
			if count == 0 {
				tFirst = t
				if throughput {
					cpuFirst = peerio.CPUNow()
				}
			}
			count += int64(n)
			tLast = t
		})
		if nFirst == 0 {
			// The steady window leaves out the whole first poll, as the Python peers leave out
			// their first delivery: its records were fetched and decoded before tFirst.
			nFirst = count
		}
		if throughput && count >= op.Expect && count > 0 {
			res := map[string]any{
				"count": count, "n_first": nFirst, "cpu_first": cpuFirst,
				"t_first": tFirst, "t_last": tLast,
			}
			if tLast > tFirst {
				res["msgs_per_s"] = float64(count-nFirst) / (tLast - tFirst)
			}
			o.Result(res)
			stop()
		}
	}
	if !throughput {
		o.Result(map[string]any{"count": count, "t_first": tFirst, "t_last": tLast})
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cl.CommitMarkedOffsets(closeCtx); err != nil {
		fmt.Fprintf(os.Stderr, "franz-peer: final commit: %v\n", err)
	}
	cancel()
	cl.Close() // leaves the group
	o.Event("closed", nil)
}

// runShare is the -share member: poll, report, sleep -delay-ms per record; each poll accepts
// the previous one's records, and the last ones are accepted before the member leaves.
func runShare(op peerio.Options, maxRecords int32, delay time.Duration) {
	o := peerio.NewOut()
	o.Event("hello", nil)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(op.Bootstrap...),
		kgo.ClientID(op.ClientID),
		kgo.ShareGroup(op.Group),
		kgo.ConsumeTopics(op.Topic),
		kgo.ShareMaxRecords(maxRecords),
		kgo.ShareMaxRecordsStrict(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		log.Fatalf("franz-peer: %v", err)
	}
	ctx, stop := peerio.StopContext()
	throughput := op.Throughput
	if !throughput {
		go o.FlushEvery()
	}
	var count, nFirst int64
	var tFirst, tLast, cpuFirst float64
	var last []*kgo.Record
	o.Event("start", nil)
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "franz-peer: share fetch %s[%d]: %v\n", t, p, err)
			}
		})
		last = last[:0]
		t := peerio.Now()
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			n := len(fp.Records)
			if n == 0 {
				return
			}
			last = append(last, fp.Records...)
			if delay > 0 {
				time.Sleep(time.Duration(n) * delay)
			}
			if !throughput {
				o.Mu.Lock()
				o.Consumed = append(o.Consumed, []any{fp.Partition, t, n, fp.Records[n-1].Offset})
				if op.Records {
					for _, r := range fp.Records {
						o.Records = append(o.Records, [2]int64{int64(r.Partition), r.Offset})
					}
				}
				o.Mu.Unlock()
			}
			if count == 0 {
				tFirst, nFirst = t, int64(n)
				if throughput {
					cpuFirst = peerio.CPUNow()
				}
			}
			count += int64(n)
			tLast = t
		})
		if throughput && count >= op.Expect && count > 0 {
			res := map[string]any{
				"count": count, "n_first": nFirst, "cpu_first": cpuFirst,
				"t_first": tFirst, "t_last": tLast,
			}
			if tLast > tFirst {
				res["msgs_per_s"] = float64(count-nFirst) / (tLast - tFirst)
			}
			o.Result(res)
			stop()
		}
	}
	if !throughput {
		o.Result(map[string]any{"count": count, "t_first": tFirst, "t_last": tLast})
	}
	cl.MarkAcks(kgo.AckAccept, last...) // leaving would release them otherwise
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cl.FlushAcks(flushCtx); err != nil {
		fmt.Fprintf(os.Stderr, "franz-peer: flushing acknowledgements: %v\n", err)
	}
	cancel()
	cl.Close() // closes the share sessions, leaves the group
	o.Event("closed", nil)
}
