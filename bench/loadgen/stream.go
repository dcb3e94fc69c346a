package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gaigel-arena/gaigel/clients/go/gaigelpb"
)

// matchInfo is shared by the two streams of one match (both are in this process), so the
// server's turnaround can be measured from whichever seat acted last.
type matchInfo struct {
	lastAction atomic.Int64 // nanoseconds since the start of the run; 0: no Action yet
	ends       atomic.Int32 // MatchEnds seen; the entry is dropped at the second
}

// stream is one bot session: one BotService.Play stream, answering at once.
type stream struct {
	r      *run
	id     int
	bot    string
	token  string
	client pb.BotServiceClient
	rng    *rand.Rand

	ctx    context.Context
	cancel context.CancelFunc
	call   pb.BotService_PlayClient
	sendMu sync.Mutex // Leave is sent from the drain goroutine, Actions from the reader

	seat      int32
	matchID   string
	match     *matchInfo
	lastWrite int64 // nanoseconds since the start of the run of this stream's last Action; 0: none
	samples   []sample

	windowDecisions atomic.Int64
	inMatch         atomic.Bool
	lastRecv        atomic.Int64
	left            atomic.Bool
	done            chan struct{}
}

// joinResult is what happened to the Join of one stream.
type joinResult struct {
	ok      bool
	timeout bool
	err     error
	took    time.Duration
}

// join opens the stream and waits for Welcome (or the refusal) within the join timeout.
func (s *stream) join() joinResult {
	s.ctx, s.cancel = context.WithCancel(context.Background())
	started := time.Now()
	var timedOut atomic.Bool
	timer := time.AfterFunc(s.r.cfg.joinTimeout, func() { timedOut.Store(true); s.cancel() })
	defer timer.Stop()
	var msg *pb.PlayResponse
	call, err := s.client.Play(s.ctx)
	if err == nil {
		s.call = call
		err = call.Send(&pb.PlayRequest{Message: &pb.PlayRequest_Join{Join: &pb.Join{
			BotToken: s.token, BotName: s.bot, BotVersion: "loadgen", ProtocolVersion: 1,
		}}})
		if err == nil || errors.Is(err, io.EOF) {
			msg, err = call.Recv() // a refused Send reports io.EOF; Recv has the status
		}
	}
	took := time.Since(started)
	if timer.Stop() && err == nil && msg.GetWelcome() != nil {
		return joinResult{ok: true, took: took}
	}
	s.cancel()
	if timedOut.Load() {
		return joinResult{timeout: true, took: took}
	}
	if err == nil {
		err = status.Errorf(codes.Unknown, "first server message is not Welcome: %v", msg)
	}
	return joinResult{err: err, took: took}
}

// play reads until the stream ends, answering every DecisionRequest with a random legal action.
func (s *stream) play() {
	defer close(s.done)
	defer s.cancel()
	for {
		msg, err := s.call.Recv()
		if err != nil {
			s.ended(err)
			return
		}
		now := s.r.since()
		s.lastRecv.Store(now)
		s.handle(msg, now)
	}
}

// ended files the way the stream ended: OK after Leave is the expected end.
func (s *stream) ended(err error) {
	switch {
	case errors.Is(err, io.EOF):
		if !s.left.Load() {
			s.r.errs.add("OK_WITHOUT_LEAVE", "the server ended the stream with OK before the bot sent Leave")
		}
	case status.Code(err) == codes.Canceled && s.ctx.Err() != nil:
		// cancelled by this program at the end of the drain
	case s.r.draining.Load():
		s.r.drainErrs.addStatus(err)
	default:
		s.r.errs.addStatus(err)
	}
}

func (s *stream) handle(msg *pb.PlayResponse, now int64) {
	switch m := msg.GetMessage().(type) {
	case *pb.PlayResponse_MatchStart:
		s.seat, s.matchID = m.MatchStart.GetSeat(), m.MatchStart.GetMatchId()
		s.match = s.r.matchInfo(s.matchID)
		s.lastWrite = 0
		s.inMatch.Store(true)
	case *pb.PlayResponse_DecisionRequest:
		s.decide(m.DecisionRequest, now)
	case *pb.PlayResponse_ActionRejected:
		s.r.rejections.inc(m.ActionRejected.GetReason().String())
	case *pb.PlayResponse_Event:
		if f := m.Event.GetFault(); f != nil && f.GetSeat() == s.seat {
			s.r.faults.inc(f.GetReason().String())
		}
	case *pb.PlayResponse_MatchEnd:
		s.matchEnded(m.MatchEnd, now)
	}
}

// decide records the latencies of this DecisionRequest and answers it.
func (s *stream) decide(req *pb.DecisionRequest, now int64) {
	if s.r.inWindow(now) {
		smp := sample{at: int32(now / 1e6), rtt: -1, turn: -1}
		if s.lastWrite > 0 {
			smp.rtt = int32((now - s.lastWrite) / 1e3)
		}
		if s.match != nil {
			if last := s.match.lastAction.Load(); last > 0 {
				smp.turn = int32((now - last) / 1e3)
			}
		}
		s.samples = append(s.samples, smp)
		s.windowDecisions.Add(1)
	}
	legal := req.GetLegalActions()
	action := &pb.PlayRequest{Message: &pb.PlayRequest_Action{Action: &pb.Action{
		DecisionId: req.GetDecisionId(), ActionId: legal[s.rng.IntN(len(legal))].GetId(),
	}}}
	s.lastWrite = s.r.since()
	if s.match != nil {
		s.match.lastAction.Store(s.lastWrite)
	}
	s.sendMu.Lock()
	_ = s.call.Send(action) // a broken stream shows its status on the next Recv
	s.sendMu.Unlock()
}

// matchEnded counts the match once (at seat 0) and, outside the drain, asks for the next one.
func (s *stream) matchEnded(end *pb.MatchEnd, now int64) {
	s.inMatch.Store(false)
	s.lastWrite = 0
	if s.match != nil && s.match.ends.Add(1) == 2 {
		s.r.matches.Delete(s.matchID)
	}
	s.match = nil
	if s.seat != 0 {
		return
	}
	s.r.terminations.inc(end.GetTermination().String())
	if s.r.inWindow(now) {
		s.r.windowEnds.Add(1)
	}
	if !s.r.draining.Load() {
		s.r.goCreateMatch(s.bot)
	}
}

// leave asks the server to end the session after its current match.
func (s *stream) leave() {
	s.left.Store(true)
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_ = s.call.Send(&pb.PlayRequest{Message: &pb.PlayRequest_Leave{Leave: &pb.Leave{}}})
}
