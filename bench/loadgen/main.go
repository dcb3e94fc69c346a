// Command loadgen opens many BotService.Play streams against one Gaigel server, pairs its
// own sessions into 2-player matches through MatchService.CreateMatch, answers every
// DecisionRequest at once with a random legal action and measures what the server does
// under that load. bench/load.py builds and drives it; see bench/README.md.
//
// It writes JSON lines to stdout: {"event":"joined",...} once every Join is answered,
// {"event":"window_start"} and {"event":"window_end"} around the measured window (the
// driver samples the server's CPU and metrics there), and {"event":"result",...} last.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/gaigel-arena/gaigel/clients/go/gaigelpb"
)

type config struct {
	server, adminToken, botsFile        string
	streams, perBot, perConn, hands     int
	warmup, seconds, drain, joinTimeout time.Duration
	stall, step, rpcTimeout             time.Duration
	seed                                uint64
	createWorkers                       int
}

// run is the shared state of one load run.
type run struct {
	cfg     config
	start   time.Time
	admin   pb.MatchServiceClient
	streams []*stream
	matches sync.Map // match id -> *matchInfo

	draining         atomic.Bool
	winStart, winEnd atomic.Int64
	windowEnds       atomic.Int64
	created          atomic.Int64
	createSem        chan struct{}
	createGate       sync.Mutex     // orders goCreateMatch against the start of the drain
	creating         sync.WaitGroup // CreateMatch calls in flight or queued; the drain waits for them
	createMu         sync.Mutex
	createMicros     []int32

	errs, drainErrs, createErrs, refusals *errorLog
	faults, rejections, terminations      *counters
}

func main() {
	cfg := parseFlags()
	names, tokens, err := readBots(cfg.botsFile)
	if err != nil {
		fail(err)
	}
	if need := (cfg.streams + cfg.perBot - 1) / cfg.perBot; need > len(names) {
		fail(fmt.Errorf("%d streams at %d per bot need %d bot names, the bots file has %d", cfg.streams, cfg.perBot, need, len(names)))
	}
	r := &run{
		cfg: cfg, start: time.Now(), createSem: make(chan struct{}, cfg.createWorkers),
		errs: newErrorLog(), drainErrs: newErrorLog(), createErrs: newErrorLog(), refusals: newErrorLog(),
		faults: newCounters(), rejections: newCounters(), terminations: newCounters(),
	}
	conns, err := r.dial(names, tokens)
	if err != nil {
		fail(err)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	emit("result", r.execute(len(conns)))
}

func parseFlags() config {
	var c config
	var warmup, seconds, drain, joinTimeout, stall, step float64
	flag.StringVar(&c.server, "server", "127.0.0.1:50051", "server host:port")
	flag.StringVar(&c.adminToken, "admin-token", os.Getenv("GAIGEL_ADMIN_TOKEN"), "MatchService admin token")
	flag.StringVar(&c.botsFile, "bots", "", "JSON file mapping bot names to tokens (the server's --bots file)")
	flag.IntVar(&c.streams, "streams", 64, "Play streams to open")
	flag.IntVar(&c.perBot, "per-bot", 64, "streams per bot name (at most the server's --max-sessions)")
	flag.IntVar(&c.perConn, "per-conn", 100, "streams per HTTP/2 connection")
	flag.IntVar(&c.hands, "hands", 2, "hands per match")
	flag.IntVar(&c.createWorkers, "create-workers", 256, "CreateMatch calls in flight at most")
	flag.Float64Var(&warmup, "warmup", 5, "seconds of play before the measured window")
	flag.Float64Var(&seconds, "seconds", 10, "seconds measured")
	flag.Float64Var(&drain, "drain", 10, "seconds to wait for matches to end after Leave (and again after cancelling)")
	flag.Float64Var(&joinTimeout, "join-timeout", 30, "seconds a stream waits for Welcome")
	flag.Float64Var(&stall, "stall", 10, "seconds without a message after which a stream counts as stalled")
	flag.Float64Var(&step, "step", 10, "seconds per timeline interval")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the random choices")
	flag.Parse()
	c.warmup, c.seconds, c.drain = seconds2d(warmup), seconds2d(seconds), seconds2d(drain)
	c.joinTimeout, c.stall, c.step = seconds2d(joinTimeout), seconds2d(stall), seconds2d(step)
	c.rpcTimeout = 30 * time.Second
	if c.botsFile == "" || c.adminToken == "" || c.streams < 2 || c.perBot < 2 || c.perConn < 1 {
		fail(fmt.Errorf("need -bots, -admin-token, -streams >= 2, -per-bot >= 2 and -per-conn >= 1"))
	}
	return c
}

func seconds2d(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func readBots(path string) ([]string, map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	tokens := map[string]string{}
	if err := json.Unmarshal(raw, &tokens); err != nil {
		return nil, nil, fmt.Errorf("bots file %s: %w", path, err)
	}
	names := make([]string, 0, len(tokens))
	for n := range tokens {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, tokens, nil
}

// dial makes one connection per -per-conn streams (HTTP/2 multiplexes them, so the
// server holds few sockets) plus one for the admin calls, and the streams on them.
func (r *run) dial(names []string, tokens map[string]string) ([]*grpc.ClientConn, error) {
	n := (r.cfg.streams + r.cfg.perConn - 1) / r.cfg.perConn
	conns := make([]*grpc.ClientConn, 0, n+1)
	for range n + 1 {
		c, err := grpc.NewClient(r.cfg.server, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return conns, err
		}
		conns = append(conns, c)
	}
	r.admin = pb.NewMatchServiceClient(conns[n])
	for i := range r.cfg.streams {
		bot := names[i/r.cfg.perBot]
		r.streams = append(r.streams, &stream{
			r: r, id: i, bot: bot, token: tokens[bot], client: pb.NewBotServiceClient(conns[i/r.cfg.perConn]),
			rng: rand.New(rand.NewPCG(r.cfg.seed, uint64(i))), done: make(chan struct{}),
		})
	}
	return conns, nil
}

// since is the time since the start of the run, in nanoseconds (always > 0).
func (r *run) since() int64 { return int64(time.Since(r.start)) + 1 }

func (r *run) inWindow(now int64) bool {
	ws, we := r.winStart.Load(), r.winEnd.Load()
	return ws > 0 && now >= ws && (we == 0 || now < we)
}

func (r *run) matchInfo(id string) *matchInfo {
	m, _ := r.matches.LoadOrStore(id, &matchInfo{})
	return m.(*matchInfo)
}

func (r *run) adminCtx() (context.Context, context.CancelFunc) {
	return r.adminCtxIn(context.Background())
}

// adminCtxIn is a context for one admin call within parent, with the RPC timeout.
func (r *run) adminCtxIn(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, r.cfg.rpcTimeout)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.cfg.adminToken), cancel
}

// goCreateMatch creates a match for bot in the background, unless the drain has begun
// (the drain waits for the calls started before).
func (r *run) goCreateMatch(bot string) {
	r.createGate.Lock()
	defer r.createGate.Unlock()
	if r.draining.Load() {
		return
	}
	r.creating.Add(1)
	go func() {
		defer r.creating.Done()
		r.createMatch(bot)
	}()
}

// createMatch asks for a 2-player match between two idle sessions of bot. A call queued
// behind -create-workers others when the drain starts is not made.
func (r *run) createMatch(bot string) {
	r.createSem <- struct{}{}
	defer func() { <-r.createSem }()
	if r.draining.Load() {
		return
	}
	ctx, cancel := r.adminCtx()
	defer cancel()
	started := time.Now()
	_, err := r.admin.CreateMatch(ctx, &pb.CreateMatchRequest{Players: 2, SeatBots: []string{bot, bot}, Hands: int32(r.cfg.hands)})
	took := int32(time.Since(started).Microseconds())
	r.createMu.Lock()
	r.createMicros = append(r.createMicros, took)
	r.createMu.Unlock()
	if err != nil {
		r.createErrs.addStatus(err)
		return
	}
	r.created.Add(1)
}

// execute runs the phases: join, initial matches, warm-up, window, drain.
func (r *run) execute(conns int) map[string]any {
	accepted, joins := r.joinAll()
	emit("joined", map[string]any{"accepted": len(accepted), "refused": r.refusals.snapshot(), "join_ms": joins})
	for _, s := range accepted {
		go s.play()
	}
	r.createInitial(accepted) // in the background: the warm-up is the time to seat everybody
	time.Sleep(r.cfg.warmup)
	cpu0 := cpuSeconds()
	r.winStart.Store(r.since())
	emit("window_start", nil)
	time.Sleep(r.cfg.seconds)
	r.winEnd.Store(r.since())
	cpu1 := cpuSeconds()
	emit("window_end", nil)
	health := r.health(accepted)
	drained := r.drainAll(accepted)
	out := r.measurements(accepted)
	out["streams"], out["connections"], out["join_ms"] = r.cfg.streams, conns, joins
	out["accepted"], out["refused"] = len(accepted), r.refusals.snapshot()
	out["health_at_window_end"], out["drain"] = health, drained
	out["client"] = map[string]any{
		"cpu_s_window": round3(cpu1 - cpu0), "cpu_s_total": round3(cpuSeconds()),
		"max_rss_mb": maxRSSMB(), "goroutines_at_end": runtime.NumGoroutine(),
	}
	return out
}

// joinAll opens every stream at once and waits for each Welcome or refusal.
// The answer times are summarised per outcome (Welcome, or the refusal's status code).
func (r *run) joinAll() ([]*stream, map[string]*dist) {
	results := make([]joinResult, len(r.streams))
	var wg sync.WaitGroup
	for i, s := range r.streams {
		wg.Go(func() { results[i] = s.join() })
	}
	wg.Wait()
	var accepted []*stream
	took := map[string][]int32{}
	for i, res := range results {
		key := "Welcome"
		switch {
		case res.ok:
			accepted = append(accepted, r.streams[i])
		case res.timeout:
			key = "CLIENT_TIMEOUT"
			r.refusals.add(key, fmt.Sprintf("no Welcome within %v", r.cfg.joinTimeout))
		default:
			key = status.Code(res.err).String()
			r.refusals.addStatus(res.err)
		}
		took[key] = append(took[key], int32(res.took.Microseconds()))
	}
	out := map[string]*dist{}
	for key, micros := range took {
		out[key] = summarise(micros)
	}
	return accepted, out
}

// createInitial starts creating, per bot name, one match per two accepted sessions.
func (r *run) createInitial(accepted []*stream) {
	perBot := map[string]int{}
	for _, s := range accepted {
		perBot[s.bot]++
	}
	for bot, n := range perBot {
		for range n / 2 {
			r.goCreateMatch(bot)
		}
	}
}

// health counts, at the end of the window, streams that went quiet or were lost.
func (r *run) health(accepted []*stream) map[string]int {
	now := r.since()
	out := map[string]int{"stalled_in_match": 0, "idle_waiting": 0, "ended_early": 0, "without_decisions": 0}
	for _, s := range accepted {
		select {
		case <-s.done:
			out["ended_early"]++
			continue
		default:
		}
		quiet := time.Duration(now - s.lastRecv.Load())
		if quiet > r.cfg.stall {
			if s.inMatch.Load() {
				out["stalled_in_match"]++
			} else {
				out["idle_waiting"]++
			}
		}
		if s.windowDecisions.Load() == 0 {
			out["without_decisions"]++
		}
	}
	return out
}

// drainAll sends Leave on every stream, waits for the matches to end, cancels those that
// do not, and reports streams that still do not close.
func (r *run) drainAll(accepted []*stream) map[string]any {
	started := time.Now()
	r.createGate.Lock()
	r.draining.Store(true)
	r.createGate.Unlock()
	for _, s := range accepted {
		s.leave()
	}
	closedByLeave := waitDone(accepted, r.cfg.drain)
	r.creating.Wait() // bounded by the RPC timeout: no CreateMatch may land after the cancelling
	// The cancelling is bounded too: an overloaded server answers admin calls slowly.
	phase, stop := context.WithTimeout(context.Background(), max(2*r.cfg.drain, r.cfg.rpcTimeout))
	defer stop()
	cancelledWaiting := r.cancelOpen(phase, pb.MatchState_MATCH_STATE_WAITING)
	cancelledRunning := r.cancelOpen(phase, pb.MatchState_MATCH_STATE_RUNNING)
	closed := waitDone(accepted, r.cfg.drain)
	var stuck []map[string]any
	for _, s := range accepted {
		select {
		case <-s.done:
		default:
			stuck = append(stuck, map[string]any{"stream": s.id, "bot": s.bot, "in_match": s.inMatch.Load(), "match_id": s.matchID})
			s.cancel()
		}
	}
	waitDone(accepted, 5*time.Second)
	running, _ := r.listOpen(context.Background(), pb.MatchState_MATCH_STATE_RUNNING)
	waiting, _ := r.listOpen(context.Background(), pb.MatchState_MATCH_STATE_WAITING)
	return map[string]any{
		"closed_after_leave": closedByLeave, "closed_after_cancel": closed - closedByLeave,
		"cancelled_running": cancelledRunning, "cancelled_waiting": cancelledWaiting,
		"not_closed": len(stuck), "not_closed_sample": stuck[:min(len(stuck), 5)],
		"running_after": len(running), "waiting_after": len(waiting), "errors": r.drainErrs.snapshot(),
		"seconds": round3(time.Since(started).Seconds()),
	}
}

// waitDone waits up to d for the streams to end and returns how many have.
func waitDone(streams []*stream, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := countDone(streams)
		if n == len(streams) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func countDone(streams []*stream) int {
	n := 0
	for _, s := range streams {
		select {
		case <-s.done:
			n++
		default:
		}
	}
	return n
}

// cancelOpen cancels every match in state st (up to three passes, as the list changes
// while matches end). Waiting matches are those created just before the drain: sessions
// that sent Leave are not seated again.
func (r *run) cancelOpen(phase context.Context, st pb.MatchState) int {
	total := 0
	for range 3 {
		if phase.Err() != nil {
			r.drainErrs.add("CANCEL_PHASE_TIMEOUT", "the cancelling phase ran out of time")
			break
		}
		ids, err := r.listOpen(phase, st)
		if err != nil {
			r.drainErrs.addStatus(err)
		}
		if len(ids) == 0 {
			break
		}
		var wg sync.WaitGroup
		var n atomic.Int64
		sem := make(chan struct{}, r.cfg.createWorkers)
		for _, id := range ids {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				ctx, cancel := r.adminCtxIn(phase)
				defer cancel()
				_, err := r.admin.CancelMatch(ctx, &pb.CancelMatchRequest{MatchId: id, Reason: "load run over"})
				switch {
				case err == nil:
					n.Add(1)
				case status.Code(err) != codes.FailedPrecondition: // FAILED_PRECONDITION: it ended meanwhile
					r.drainErrs.addStatus(err)
				}
			})
		}
		wg.Wait()
		total += int(n.Load())
	}
	return total
}

// listOpen lists the ids of the matches in state st, every page.
func (r *run) listOpen(parent context.Context, st pb.MatchState) ([]string, error) {
	var ids []string
	token := ""
	for {
		ctx, cancel := r.adminCtxIn(parent)
		resp, err := r.admin.ListMatches(ctx, &pb.ListMatchesRequest{State: st, PageSize: 1000, PageToken: token})
		cancel()
		if err != nil {
			return ids, err
		}
		for _, m := range resp.GetMatches() {
			ids = append(ids, m.GetMatchId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			return ids, nil
		}
	}
}

// measurements summarises the window: decisions, latencies, timeline, errors and faults.
func (r *run) measurements(accepted []*stream) map[string]any {
	var all []sample
	for _, s := range accepted {
		select {
		case <-s.done:
			all = append(all, s.samples...)
		default: // still running after the cancel: its samples cannot be read safely
		}
	}
	rtt := make([]int32, len(all))
	turn := make([]int32, len(all))
	for i, s := range all {
		rtt[i], turn[i] = s.rtt, s.turn
	}
	ws, we := int32(r.winStart.Load()/1e6), int32(r.winEnd.Load()/1e6)
	window := float64(we-ws) / 1000
	faults := r.faults.snapshot()
	return map[string]any{
		"window_s": window, "decisions": len(all), "decisions_per_s": round3(float64(len(all)) / window),
		"round_trip": summarise(rtt), "turnaround": summarise(turn),
		"timeline": timeline(all, ws, we, int32(r.cfg.step/time.Millisecond)),
		"errors":   r.errs.snapshot(), "create_match_errors": r.createErrs.snapshot(),
		"faults": faults, "fallbacks": faults["FAULT_REASON_TIMEOUT_FALLBACK"], "rejections": r.rejections.snapshot(),
		"matches": map[string]any{
			"created": r.created.Load(), "ended_by_termination": r.terminations.snapshot(),
			"create_ms":       r.createLatency(),
			"ended_in_window": r.windowEnds.Load(),
		},
	}
}

func (r *run) createLatency() *dist {
	r.createMu.Lock()
	defer r.createMu.Unlock()
	return summarise(r.createMicros)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func maxRSSMB() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return math.NaN()
	}
	return round3(float64(ru.Maxrss) / 1024)
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

var emitMu sync.Mutex

// emit writes one JSON line {"event": name, ...fields} to stdout.
func emit(name string, fields map[string]any) {
	line := map[string]any{"event": name, "t_s": round3(time.Since(startTime).Seconds())}
	for k, v := range fields {
		line[k] = v
	}
	raw, err := json.Marshal(line)
	if err != nil {
		raw, _ = json.Marshal(map[string]any{"event": name, "error": err.Error()})
	}
	emitMu.Lock()
	defer emitMu.Unlock()
	fmt.Println(string(raw))
}

var startTime = time.Now()

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}
