package main

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
)

// sample is one DecisionRequest received inside the measured window.
type sample struct {
	at   int32 // milliseconds since the start of the run
	rtt  int32 // microseconds, Action written -> this DecisionRequest on the same stream; -1: none
	turn int32 // microseconds, the match's previous Action (any seat) -> this DecisionRequest; -1: none
}

// dist summarises one latency distribution in milliseconds.
type dist struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// percentile is the nearest-rank percentile of sorted values (bench/server.py's _pct).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Round(p / 100 * float64(len(sorted)-1)))
	return sorted[max(0, min(len(sorted)-1, k))]
}

// summarise sorts micros (microseconds; negative entries are skipped) and returns its summary.
func summarise(micros []int32) *dist {
	ms := make([]float64, 0, len(micros))
	for _, v := range micros {
		if v >= 0 {
			ms = append(ms, float64(v)/1000)
		}
	}
	if len(ms) == 0 {
		return nil
	}
	slices.Sort(ms)
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	return &dist{
		N: len(ms), P50: percentile(ms, 50), P90: percentile(ms, 90), P99: percentile(ms, 99),
		Max: ms[len(ms)-1], Mean: sum / float64(len(ms)),
	}
}

// interval is one slice of the window's timeline: was the server steady, or did it drift?
type interval struct {
	EndS      float64  `json:"end_s"`
	Decisions int      `json:"decisions"`
	PerSecond float64  `json:"decisions_per_s"`
	RTTP50    *float64 `json:"rtt_p50_ms"`
	RTTP99    *float64 `json:"rtt_p99_ms"`
}

// timeline cuts the samples of the window [start, end) (milliseconds) into steps of step ms.
func timeline(samples []sample, start, end, step int32) []interval {
	if step <= 0 || end <= start {
		return nil
	}
	n := max(1, int(math.Round(float64(end-start)/float64(step)))) // a short remainder joins the last interval
	buckets := make([][]int32, n)
	for _, s := range samples {
		if s.at < start || s.at >= end {
			continue
		}
		i := min(n-1, int((s.at-start)/step))
		buckets[i] = append(buckets[i], s.rtt)
	}
	out := make([]interval, n)
	for i, b := range buckets {
		lo := start + int32(i)*step
		hi := lo + step
		if i == n-1 {
			hi = end
		}
		iv := interval{EndS: float64(hi-start) / 1000, Decisions: len(b), PerSecond: float64(len(b)) * 1000 / float64(hi-lo)}
		if d := summarise(b); d != nil {
			iv.RTTP50, iv.RTTP99 = &d.P50, &d.P99
		}
		out[i] = iv
	}
	return out
}

// errorEntry counts one kind of failure and keeps a few distinct messages as samples.
type errorEntry struct {
	Count   int      `json:"count"`
	Samples []string `json:"samples"`
}

const maxSamples = 3

// errorLog groups failures by a key (a gRPC status code name, a reason, ...).
type errorLog struct {
	mu sync.Mutex
	m  map[string]*errorEntry
}

func newErrorLog() *errorLog { return &errorLog{m: map[string]*errorEntry{}} }

func (l *errorLog) add(key, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil {
		e = &errorEntry{Samples: []string{}}
		l.m[key] = e
	}
	e.Count++
	if len(e.Samples) < maxSamples && !slices.Contains(e.Samples, message) {
		e.Samples = append(e.Samples, message)
	}
}

// addStatus files err under its gRPC status code name, with the status message as sample.
func (l *errorLog) addStatus(err error) {
	st := status.Convert(err)
	l.add(st.Code().String(), st.Message())
}

func (l *errorLog) snapshot() map[string]errorEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]errorEntry, len(l.m))
	for k, v := range l.m {
		out[k] = errorEntry{Count: v.Count, Samples: slices.Clone(v.Samples)}
	}
	return out
}

// counters is a set of named atomic counts (faults by reason, matches by termination).
type counters struct {
	mu sync.Mutex
	m  map[string]*atomic.Int64
}

func newCounters() *counters { return &counters{m: map[string]*atomic.Int64{}} }

func (c *counters) inc(key string) {
	c.mu.Lock()
	v := c.m[key]
	if v == nil {
		v = new(atomic.Int64)
		c.m[key] = v
	}
	c.mu.Unlock()
	v.Add(1)
}

func (c *counters) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.m))
	for k, v := range c.m {
		out[k] = v.Load()
	}
	return out
}

// millis rounds a duration to milliseconds as a float, for JSON output.
func millis(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
