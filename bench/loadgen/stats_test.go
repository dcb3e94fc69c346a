package main

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestPercentileIsNearestRank(t *testing.T) {
	values := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {50, 6}, {90, 9}, {99, 10}, {100, 10}} {
		if got := percentile(values, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestSummariseSkipsMissingSamples(t *testing.T) {
	d := summarise([]int32{-1, 2000, 1000, -1, 3000})
	if d == nil || d.N != 3 || d.P50 != 2 || d.Max != 3 || d.Mean != 2 {
		t.Fatalf("summarise = %+v, want n 3, p50 2 ms, max 3 ms, mean 2 ms", d)
	}
	if summarise([]int32{-1}) != nil {
		t.Fatal("summarise of no samples must be nil")
	}
}

func TestTimelineJoinsAShortRemainderToTheLastInterval(t *testing.T) {
	// window 1000..3004 ms in steps of 1000 ms: two intervals, the second 1004 ms long
	samples := []sample{{at: 999, rtt: 1}, {at: 1000, rtt: 1000}, {at: 1999, rtt: 3000}, {at: 2000, rtt: 2000}, {at: 3003, rtt: 4000}, {at: 3004, rtt: 1}}
	got := timeline(samples, 1000, 3004, 1000)
	if len(got) != 2 {
		t.Fatalf("timeline has %d intervals, want 2: %+v", len(got), got)
	}
	if got[0].Decisions != 2 || got[1].Decisions != 2 || got[1].EndS != 2.004 {
		t.Fatalf("timeline = %+v, want 2 decisions in each, the last ending at 2.004 s", got)
	}
	if *got[0].RTTP99 != 3 || *got[1].RTTP50 != 4 {
		t.Fatalf("interval latencies wrong: %+v %+v", *got[0].RTTP99, *got[1].RTTP50)
	}
}

func TestErrorLogKeepsDistinctSamplesByCode(t *testing.T) {
	l := newErrorLog()
	for range 5 {
		l.addStatus(status.Error(codes.ResourceExhausted, "SERVER_FULL: limit 4"))
	}
	l.addStatus(status.Error(codes.ResourceExhausted, "too many sessions"))
	l.addStatus(errors.New("plain"))
	got := l.snapshot()
	re := got["ResourceExhausted"]
	if re.Count != 6 || len(re.Samples) != 2 {
		t.Fatalf("ResourceExhausted = %+v, want 6 with 2 distinct samples", re)
	}
	if got["Unknown"].Count != 1 {
		t.Fatalf("a non-status error must be filed as Unknown: %+v", got)
	}
}
