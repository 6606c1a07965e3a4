// Package peerio is what the Go peers (sarama, franz-go) share: the clock, rusage and the
// JSON-lines output of bench/peers/_common.py's protocol.
package peerio

import (
	"bufio"
	"encoding/json"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FlushInterval is how often buffered consumed/records items are written.
const FlushInterval = 100 * time.Millisecond

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
