// Package peerio is what the Go peers (sarama, franz-go) share: the clock, rusage and the
// JSON-lines output of bench/peers/_common.py's protocol.
package peerio

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FlushInterval is how often buffered consumed/records items are written.
const FlushInterval = 100 * time.Millisecond

// NowNs is CLOCK_MONOTONIC in nanoseconds (the latency mode's clock).
func NowNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		log.Fatalf("clock_gettime: %v", err)
	}
	return ts.Nano()
}

// WritePairs writes latency mode's (send, arrival) pairs to path as big-endian int64s,
// the format of bench/peers/_common.py's LatencyLog.
func WritePairs(path string, pairs []int64) error {
	buf := make([]byte, 8*len(pairs))
	for i, v := range pairs {
		binary.BigEndian.PutUint64(buf[8*i:], uint64(v))
	}
	return os.WriteFile(path, buf, 0o644)
}

// Now is CLOCK_MONOTONIC in seconds: the clock of Python's time.monotonic() and Java's
// System.nanoTime() on Linux, so a harness compares it with its own.
func Now() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		log.Fatalf("clock_gettime: %v", err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

func rusage() syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatalf("getrusage: %v", err)
	}
	return ru
}

// peakRSSKiB is VmHWM: Linux carries ru_maxrss across fork+exec, so getrusage reports at
// least the RSS of whoever spawned the process.
func peakRSSKiB(ru syscall.Rusage) int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
				if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return ru.Maxrss
}

// Usage is the peak RSS (KiB) and CPU seconds of this process so far (every thread).
func Usage() map[string]any {
	ru := rusage()
	return map[string]any{
		"maxrss_kb":    peakRSSKiB(ru),
		"ru_maxrss_kb": ru.Maxrss,
		"cpu_user":     float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6,
		"cpu_sys":      float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6,
	}
}

// CPUNow is the user + system CPU seconds of this process so far.
func CPUNow() float64 {
	ru := rusage()
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// Out serialises every JSON line on stdout; Consumed and Records items (appended under
// Mu) are flushed every FlushInterval and before any other event, so lines keep the
// order things happened.
type Out struct {
	Mu       sync.Mutex
	Consumed [][]any
	Records  [][2]int64
	w        *bufio.Writer
}

// NewOut writes to stdout.
func NewOut() *Out {
	return &Out{w: bufio.NewWriterSize(os.Stdout, 1<<16)}
}

func (o *Out) line(obj map[string]any) {
	b, err := json.Marshal(obj)
	if err != nil {
		log.Fatalf("json: %v", err)
	}
	o.w.Write(b)
	o.w.WriteByte('\n')
}

func (o *Out) flushLocked() {
	if len(o.Consumed) > 0 {
		o.line(map[string]any{"ev": "consumed", "items": o.Consumed})
		o.Consumed = nil
	}
	if len(o.Records) > 0 {
		o.line(map[string]any{"ev": "records", "items": o.Records})
		o.Records = nil
	}
	o.w.Flush()
}

// Flush writes the buffered items.
func (o *Out) Flush() {
	o.Mu.Lock()
	defer o.Mu.Unlock()
	o.flushLocked()
}

// FlushEvery flushes every FlushInterval, forever (run it in a goroutine).
func (o *Out) FlushEvery() {
	for range time.Tick(FlushInterval) {
		o.Flush()
	}
}

// Event writes {"ev": ev, "t": Now(), fields...} after the buffered items.
func (o *Out) Event(ev string, fields map[string]any) {
	o.Mu.Lock()
	defer o.Mu.Unlock()
	o.flushLocked()
	obj := map[string]any{"ev": ev, "t": Now()}
	for k, v := range fields {
		obj[k] = v
	}
	o.line(obj)
	o.w.Flush()
}

// Result is the final report: the fields plus Usage().
func (o *Out) Result(fields map[string]any) {
	for k, v := range Usage() {
		fields[k] = v
	}
	o.Event("result", fields)
}

// Options is the command line every peer accepts (tests/peers/__init__.py lists it).
type Options struct {
	Bootstrap        []string
	Topic            string
	Group            string
	Throughput       bool // -mode throughput: count to Expect, report, exit
	Produce          bool // -mode produce: write Expect records of Size bytes, report, exit
	Latency          bool // -mode latency: log every record's send and arrival time to Out
	Out              string
	Tuned            bool
	Size             int
	Expect           int64
	SessionTimeout   time.Duration
	Heartbeat        time.Duration
	RebalanceTimeout time.Duration
	Assignor         string
	InstanceID       string
	ClientID         string
	Records          bool
	CommitInterval   time.Duration
}

// ParseOptions parses os.Args; bad usage exits 2 with a message naming the peer.
func ParseOptions(name string) Options {
	bootstrap := flag.String("bootstrap", "", "host:port[,host:port...] (required)")
	topic := flag.String("topic", "", "the topic to read (required)")
	group := flag.String("group", "", "the consumer group id (required)")
	mode := flag.String("mode", "stream", "stream (report every message), throughput (count to -expect, report, exit), produce (write -expect records of -size bytes, report, exit) or latency (the client's defaults; every record's send and arrival time to -out at stop)")
	out := flag.String("out", "", "latency mode: the file of (send, arrival) pairs")
	tuned := flag.Bool("tuned", false, "latency mode: the client's documented latency settings")
	size := flag.Int("size", 100, "produce mode: value bytes")
	expect := flag.Int64("expect", 0, "throughput mode: messages to read")
	sessionTimeout := flag.Float64("session-timeout", 6, "seconds")
	heartbeat := flag.Float64("heartbeat", 1, "seconds")
	rebalanceTimeout := flag.Float64("rebalance-timeout", 30, "seconds")
	assignor := flag.String("assignor", "range", "range, roundrobin, sticky or cooperative-sticky")
	instanceID := flag.String("instance-id", "", "group.instance.id (static membership)")
	clientID := flag.String("client-id", name, "client id")
	records := flag.Bool("records", false, "stream mode: also report each message's partition and offset")
	commitInterval := flag.Float64("commit-interval", 0.2, "auto-commit interval, seconds")
	flag.Parse()
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...)
		os.Exit(2)
	}
	if *bootstrap == "" || *topic == "" || (*group == "" && *mode != "produce") {
		fail("-bootstrap, -topic and -group (but in produce mode) are required")
	}
	if *mode != "stream" && *mode != "throughput" && *mode != "produce" && *mode != "latency" {
		fail("-mode must be stream, throughput, produce or latency, not %q", *mode)
	}
	if *mode == "latency" && *out == "" {
		fail("-mode latency needs -out")
	}
	switch *assignor {
	case "range", "roundrobin", "sticky", "cooperative-sticky":
	default:
		fail("unknown -assignor %q (range, roundrobin, sticky, cooperative-sticky)", *assignor)
	}
	seconds := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return Options{
		Bootstrap: strings.Split(*bootstrap, ","), Topic: *topic, Group: *group,
		Throughput: *mode == "throughput", Produce: *mode == "produce", Size: *size,
		Latency: *mode == "latency", Out: *out, Tuned: *tuned,
		Expect: *expect,
		SessionTimeout: seconds(*sessionTimeout), Heartbeat: seconds(*heartbeat),
		RebalanceTimeout: seconds(*rebalanceTimeout), Assignor: *assignor,
		InstanceID: *instanceID, ClientID: *clientID, Records: *records,
		CommitInterval: seconds(*commitInterval),
	}
}

// StopContext is cancelled by SIGTERM or SIGINT, by a line on stdin, or by stdin closing
// (the harness went away): every way a harness asks a peer to finish.
func StopContext() (context.Context, context.CancelFunc) {
	ctx, stop := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; stop() }()
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		stop()
	}()
	return ctx, stop
}
