// Command sarama-peer is a consumer-group member built on github.com/IBM/sarama, run by the
// test suite and the benchmarks next to consumergroup members (see tests/peers/__init__.py).
//
// It reads one topic as a member of a group and reports on stdout in JSON lines, the
// protocol of bench/peers/_common.py: hello, start, assigned/revoked (with the generation),
// consumed (stream mode), records (with -records: every message's partition and offset),
// result, closed. A line on stdin, stdin closing, SIGTERM or SIGINT stops it cleanly: the
// session ends, marked offsets are committed, the member leaves the group.
package main

import (
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"consumergroup/tests/peers/peerio"
	"github.com/IBM/sarama"
)

type handler struct {
	o           *peerio.Out
	records     bool
	throughput  bool
	expect      int64
	cooperative bool
	done        func()

	mu       sync.Mutex
	count    int64
	nFirst   int64
	cpuFirst float64
	tFirst   float64
	tLast    float64
	reported bool
}

func claimed(sess sarama.ConsumerGroupSession) []int32 {
	var parts []int32
	for _, ps := range sess.Claims() {
		parts = append(parts, ps...)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	return parts
}

// Eager strategies: one session per generation, reported whole at Setup and Cleanup.
// Cooperative: the session lives across generations; each claim is reported as it
// starts and ends (the increments).
func (h *handler) Setup(sess sarama.ConsumerGroupSession) error {
	if !h.cooperative {
		h.o.Event("assigned", map[string]any{
			"parts": claimed(sess), "generation": sess.GenerationID(), "member_id": sess.MemberID(),
		})
	}
	return nil
}

func (h *handler) Cleanup(sess sarama.ConsumerGroupSession) error {
	if !h.cooperative {
		h.o.Event("revoked", map[string]any{"parts": claimed(sess), "generation": sess.GenerationID()})
	}
	return nil
}

func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	p := claim.Partition()
	if h.cooperative {
		h.o.Event("assigned", map[string]any{
			"parts": []int32{p}, "generation": sess.GenerationID(), "member_id": sess.MemberID(),
		})
		defer h.o.Event("revoked", map[string]any{"parts": []int32{p}, "generation": sess.GenerationID()})
	}
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(msg, "")
			h.add(p, msg.Offset)
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (h *handler) add(p int32, offset int64) {
	t := peerio.Now()
	if h.throughput {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.count++
		if h.count == 1 {
			h.tFirst, h.nFirst, h.cpuFirst = t, 1, peerio.CPUNow()
		}
		if h.count >= h.expect && !h.reported {
			h.reported = true
			h.tLast = t
			res := map[string]any{
				"count": h.count, "n_first": h.nFirst, "cpu_first": h.cpuFirst,
				"t_first": h.tFirst, "t_last": h.tLast,
			}
			if h.tLast > h.tFirst {
				res["msgs_per_s"] = float64(h.count-h.nFirst) / (h.tLast - h.tFirst)
			}
			h.o.Result(res)
			h.done()
		}
		return
	}
	h.o.Mu.Lock()
	defer h.o.Mu.Unlock()
	if n := len(h.o.Consumed); n > 0 && h.o.Consumed[n-1][0] == p {
		last := h.o.Consumed[n-1] // consecutive messages of one partition: one item
		last[1], last[2], last[3] = t, last[2].(int)+1, offset
	} else {
		h.o.Consumed = append(h.o.Consumed, []any{p, t, 1, offset})
	}
	if h.records {
		h.o.Records = append(h.o.Records, [2]int64{int64(p), offset})
	}
	h.mu.Lock()
	h.count++
	if h.count == 1 {
		h.tFirst = t
	}
	h.tLast = t
	h.mu.Unlock()
}

func main() {
	op := peerio.ParseOptions("sarama-peer")
	o := peerio.NewOut()
	o.Event("hello", nil)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = op.ClientID
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = op.CommitInterval
	cfg.Consumer.Group.Session.Timeout = op.SessionTimeout
	cfg.Consumer.Group.Heartbeat.Interval = op.Heartbeat
	cfg.Consumer.Group.Rebalance.Timeout = op.RebalanceTimeout
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cfg.Consumer.Group.InstanceId = op.InstanceID
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Metadata.RefreshFrequency = time.Second // the partition watcher's interval
	cooperative := false
	switch op.Assignor {
	case "range":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case "roundrobin":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	case "sticky":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	case "cooperative-sticky":
		cooperative = true
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	}

	cg, err := sarama.NewConsumerGroup(op.Bootstrap, op.Group, cfg)
	if err != nil {
		log.Fatalf("sarama-peer: %v", err)
	}
	ctx, stop := peerio.StopContext()
	go func() {
		for err := range cg.Errors() {
			fmt.Fprintf(os.Stderr, "sarama-peer: %v\n", err)
		}
	}()
	go o.FlushEvery()

	h := &handler{o: o, records: op.Records, throughput: op.Throughput, expect: op.Expect,
		cooperative: cooperative, done: stop}
	o.Event("start", nil)
	for ctx.Err() == nil {
		// Eager: one Consume per generation. Cooperative: one across rebalances.
		if err := cg.Consume(ctx, []string{op.Topic}, h); err != nil {
			fmt.Fprintf(os.Stderr, "sarama-peer: consume: %v\n", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !h.throughput {
		h.mu.Lock()
		res := map[string]any{"count": h.count, "t_first": h.tFirst, "t_last": h.tLast}
		h.mu.Unlock()
		o.Result(res)
	}
	if err := cg.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "sarama-peer: close: %v\n", err)
	}
	o.Event("closed", nil)
}
