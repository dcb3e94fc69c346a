// Package gaigel connects a bot to a Gaigel arena server (protocol gaigel.v1).
//
// A bot implements Bot; Run does the rest: it sends Join, answers every DecisionRequest
// with the bot's choice, deals with rejected answers, reconnects and sends Resume after a
// dropped connection, and returns when the server ends the session (or after
// Config.Matches matches).
package gaigel

//go:generate sh ../generate.sh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/gaigel-arena/gaigel/clients/go/gaigelpb"
)

// ProtocolVersion is the protocol major version this package speaks (gaigel.v1).
const ProtocolVersion = 1

// DefaultServer is the server address used when neither Config.Server nor
// $GAIGEL_SERVER is set.
const DefaultServer = "127.0.0.1:50051"

// Bot chooses actions.
type Bot interface {
	// Decide returns the id of one of req.LegalActions (never empty, ascending ids).
	// It runs on the goroutine that reads from the server, so keep it within
	// req.TimeLeft.
	Decide(req *pb.DecisionRequest) int32
}

// Listener is optionally implemented by a Bot that wants to see every server message
// (Welcome, MatchStart, HandStart, Event, HandEnd, MatchEnd, ActionRejected, and the
// DecisionRequest before Decide is called), in order, once each.
type Listener interface {
	OnMessage(msg *pb.PlayResponse)
}

// MatchStarter is optionally implemented by a Bot that wants to know each match before
// its first decision: seed your randomness from ms.GetBotSeed() there (and from nothing
// else) so a rematch with the same seed and match key plays the same
// (docs/bot-guide.md, Bot seeds).
type MatchStarter interface {
	StartMatch(ms *pb.MatchStart)
}

// Config says where and as whom to connect. Empty fields take their defaults.
type Config struct {
	// Server is "host:port"; default $GAIGEL_SERVER, else DefaultServer.
	Server string
	// Token is the bot token; default $GAIGEL_TOKEN. Required.
	Token string
	// Name is the registered bot name sent in Join. $GAIGEL_BOT_NAME, when set, takes
	// precedence (gaigel try sets it).
	Name string
	// Version is the bot's own version string, recorded in match records.
	Version string
	// Matches is the number of matches to play before Run returns (sending Leave when
	// the last one starts); default $GAIGEL_MATCHES, else 0: play until the server ends
	// the session. A negative value also plays until then, whatever $GAIGEL_MATCHES says.
	Matches int
	// TLS, when set, connects with these credentials instead of plaintext.
	TLS credentials.TransportCredentials
	// ConnectTimeout is how long an unreachable server is retried outside a match;
	// default 30 s. Inside a match the match's resume grace period applies.
	ConnectTimeout time.Duration
	// Logger receives progress and warnings; default slog.Default().
	Logger *slog.Logger
	// DisableCompact turns compact mode off. By default Join asks for compact mode
	// (Join.compact, with Join.compact_hand_end): the server then sends HandStart, Events
	// and the HandEnd of a finished hand with its last Events inside the next
	// DecisionRequest instead of on their own, one message per decision. Run unfolds
	// them, so Listener and Decide see the same messages in the same order either way;
	// a server without compact mode ignores the request. When DisableCompact is false,
	// $GAIGEL_COMPACT decides as in the Python SDK: 0, false, no or off (any case, spaces
	// around ignored) join plain, anything else or unset compact. DisableCompact true
	// always joins plain.
	DisableCompact bool
}

// compactFromEnv reports whether $GAIGEL_COMPACT asks for compact mode: yes unless it is
// 0, false, no or off (the Python SDK's rule; an unknown value means compact).
func compactFromEnv() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("GAIGEL_COMPACT"))) {
	case "0", "false", "no", "off":
		return false
	}
	return true
}

// matchesFromEnv reads $GAIGEL_MATCHES: 0 (until the server ends the session) when it is
// unset, empty or 0, and an error when it is not a whole number of at least 0.
func matchesFromEnv() (int, error) {
	raw := os.Getenv("GAIGEL_MATCHES")
	v := strings.TrimSpace(raw)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, strconv.IntSize-1)
	if err != nil {
		return 0, fmt.Errorf("gaigel: GAIGEL_MATCHES must be a number, got %q", raw)
	}
	return int(n), nil
}

// Run connects bot to the server and plays until the server ends the session (it
// closes the stream with OK, as after a Leave or at the end of gaigel try), the
// configured number of matches has ended (both return nil), or ctx is cancelled.
//
// Rejected answers: if the server rejects an answer while the decision is still open,
// Decide is called once more; if it repeats a rejected answer or names an illegal
// action, the first legal action is sent instead. So a buggy bot costs at most two
// strikes per decision.
//
// Dropped connections: on UNAVAILABLE (inside a match also INTERNAL, UNKNOWN and
// CANCELLED) Run reconnects with exponential backoff (0.1 s doubling to 5 s) and sends
// Resume with the match id, seat, resume token and last sequence number, for as long
// as the match's resume grace period. Resent messages are skipped; an answer that got
// no reply yet is sent again.
func Run(ctx context.Context, bot Bot, cfg Config) error {
	cfg.Server = first(cfg.Server, os.Getenv("GAIGEL_SERVER"), DefaultServer)
	cfg.Token = first(cfg.Token, os.Getenv("GAIGEL_TOKEN"))
	cfg.Name = first(os.Getenv("GAIGEL_BOT_NAME"), cfg.Name)
	cfg.DisableCompact = cfg.DisableCompact || !compactFromEnv()
	if cfg.Token == "" {
		return errors.New("gaigel: no bot token: set GAIGEL_TOKEN to the token issued when the bot was registered")
	}
	if cfg.Name == "" {
		return errors.New("gaigel: no bot name: set GAIGEL_BOT_NAME or Config.Name")
	}
	if cfg.Matches == 0 {
		n, err := matchesFromEnv()
		if err != nil {
			return err
		}
		cfg.Matches = n
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	creds := cfg.TLS
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(cfg.Server, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("gaigel: %w", err)
	}
	defer conn.Close()
	s := &session{bot: bot, cfg: cfg, log: cfg.Logger, client: pb.NewBotServiceClient(conn)}
	return s.run(ctx)
}

func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// match is what Resume needs.
type match struct {
	id    string
	seat  int32
	token string
	grace time.Duration
}

// pending is the open decision and the answers sent for it.
type pending struct {
	req     *pb.DecisionRequest
	answers []int32
}

type session struct {
	bot     Bot
	cfg     Config
	log     *slog.Logger
	client  pb.BotServiceClient
	stream  pb.BotService_PlayClient
	lastSeq uint64
	match   *match
	pending *pending
	done    int // matches finished
	left    bool
}

var errFinished = errors.New("finished")

func (s *session) run(ctx context.Context) error {
	failures := 0
	var lostSince time.Time
	for {
		resuming := s.match != nil
		var hello *pb.PlayRequest
		if resuming {
			hello = &pb.PlayRequest{Message: &pb.PlayRequest_Resume{Resume: &pb.Resume{
				MatchId: s.match.id, Seat: s.match.seat, ResumeToken: s.match.token,
				LastSequence: s.lastSeq, BotVersion: s.cfg.Version,
			}}}
		} else {
			s.lastSeq, s.pending = 0, nil
			hello = &pb.PlayRequest{Message: &pb.PlayRequest_Join{Join: &pb.Join{
				BotToken: s.cfg.Token, BotName: s.cfg.Name, BotVersion: s.cfg.Version,
				ProtocolVersion: ProtocolVersion, Compact: !s.cfg.DisableCompact,
				CompactHandEnd: !s.cfg.DisableCompact,
			}}}
		}
		welcomed, err := s.play(ctx, hello, resuming)
		if welcomed {
			failures, lostSince = 0, time.Time{}
		}
		switch {
		case err == nil:
			s.log.Info("gaigel: the server ended the session")
			return nil
		case errors.Is(err, errFinished):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		code := status.Code(err)
		if resuming && !welcomed && (code == codes.FailedPrecondition || code == codes.NotFound) {
			s.log.Warn("gaigel: could not resume; joining afresh", "match", s.match.id, "error", err)
			s.match = nil
			if s.done++; s.cfg.Matches > 0 && s.done >= s.cfg.Matches {
				return nil
			}
			continue
		}
		dropped := code == codes.Unavailable || s.match != nil &&
			(code == codes.Internal || code == codes.Unknown || code == codes.Canceled)
		if !dropped {
			return fmt.Errorf("gaigel: the server ended the stream: %w", err)
		}
		limit := s.cfg.ConnectTimeout
		if s.match != nil && s.match.grace > 0 {
			limit = s.match.grace
		}
		if lostSince.IsZero() {
			lostSince = time.Now()
		}
		remaining := limit - time.Since(lostSince)
		if remaining <= 0 {
			return fmt.Errorf("gaigel: server unreachable for %v: %w", limit, err)
		}
		delay := min(5*time.Second, 100*time.Millisecond<<min(failures, 6))
		delay = min(time.Duration(float64(delay)*(0.8+0.4*rand.Float64())), remaining)
		failures++
		s.log.Warn("gaigel: stream lost; reconnecting", "error", err, "resume", s.match != nil, "delay", delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// play runs one stream; it returns whether Welcome arrived and why the stream ended
// (nil: the server closed it with OK).
func (s *session) play(ctx context.Context, hello *pb.PlayRequest, resuming bool) (welcomed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.stream, err = s.client.Play(ctx)
	if err != nil {
		return false, err
	}
	if err := s.stream.Send(hello); err != nil && err != io.EOF {
		return false, err
	}
	for {
		msg, err := s.stream.Recv()
		if err == io.EOF {
			return welcomed, nil
		}
		if err != nil {
			return welcomed, err
		}
		if msg.GetWelcome() != nil {
			welcomed = true
		}
		if err := s.handle(msg, resuming); err != nil {
			return welcomed, err
		}
	}
}

func (s *session) send(p *pending, actionID int32) error {
	p.answers = append(p.answers, actionID)
	err := s.stream.Send(&pb.PlayRequest{Message: &pb.PlayRequest_Action{Action: &pb.Action{
		DecisionId: p.req.GetDecisionId(), ActionId: actionID,
	}}})
	if err == io.EOF {
		return nil // the stream broke; Recv reports why
	}
	return err
}

func (s *session) notify(msg *pb.PlayResponse) {
	if l, ok := s.bot.(Listener); ok {
		l.OnMessage(msg)
	}
}

// handle processes one server message; errFinished ends the session.
func (s *session) handle(msg *pb.PlayResponse, resuming bool) error {
	if w := msg.GetWelcome(); w != nil {
		s.log.Info("gaigel: session open", "session", w.GetSessionId(), "bot", w.GetBotName(),
			"resumed", w.GetResumed(), "server", w.GetServerVersion())
		s.notify(msg)
		if p := s.pending; resuming && p != nil {
			// Our answer may have been lost with the old stream: send it (or a first one) again.
			if len(p.answers) > 0 {
				return s.send(p, p.answers[len(p.answers)-1])
			}
			return s.send(p, s.bot.Decide(p.req))
		}
		return nil
	}
	seq := msg.GetSequence()
	if seq <= s.lastSeq {
		return nil // resent after Resume, already handled
	}
	if seq != s.lastSeq+1 {
		s.log.Warn("gaigel: messages never arrived", "from", s.lastSeq+1, "to", seq-1)
	}
	s.lastSeq = seq
	if req := msg.GetDecisionRequest(); req != nil {
		s.unfold(seq, req)
	}
	s.notify(msg)
	switch m := msg.GetMessage().(type) {
	case *pb.PlayResponse_DecisionRequest:
		s.pending = &pending{req: m.DecisionRequest}
		return s.send(s.pending, s.bot.Decide(m.DecisionRequest))
	case *pb.PlayResponse_ActionRejected:
		return s.rejected(m.ActionRejected)
	case *pb.PlayResponse_MatchStart:
		ms := m.MatchStart
		s.match = &match{id: ms.GetMatchId(), seat: ms.GetSeat(), token: ms.GetResumeToken(),
			grace: ms.GetClock().GetResumeGrace().AsDuration()}
		s.pending = nil
		s.log.Info("gaigel: match started", "match", ms.GetMatchId(), "seat", ms.GetSeat(), "players", ms.GetPlayers())
		if starter, ok := s.bot.(MatchStarter); ok {
			starter.StartMatch(ms)
		}
		if s.cfg.Matches > 0 && s.done+1 >= s.cfg.Matches && !s.left {
			s.left = true
			return s.stream.Send(&pb.PlayRequest{Message: &pb.PlayRequest_Leave{Leave: &pb.Leave{}}})
		}
	case *pb.PlayResponse_MatchEnd:
		s.match, s.pending = nil, nil
		s.done++
		me := m.MatchEnd
		s.log.Info("gaigel: match ended", "match", me.GetMatchId(), "termination", me.GetTermination(),
			"winners", me.GetWinnerSides(), "faults", len(me.GetFaults()))
		if s.cfg.Matches > 0 && s.done >= s.cfg.Matches {
			_ = s.stream.CloseSend()
			return errFinished
		}
	default: // HandStart, Event, HandEnd: only for the Listener
		s.pending = nil
	}
	return nil
}

// unfold passes the messages that rode in a compact-mode DecisionRequest to the bot as
// messages of their own (numbered like the request), in the order they happened: the
// ended hand's Events, its HandEnd, the new HandStart, then the new hand's Events. It
// removes them from the request: the bot sees exactly what it would have seen without
// compact mode. Without folded messages it does nothing.
func (s *session) unfold(seq uint64, req *pb.DecisionRequest) {
	for _, ev := range req.GetEndedHandEvents() {
		s.notify(&pb.PlayResponse{Sequence: seq, Message: &pb.PlayResponse_Event{Event: ev}})
	}
	if he := req.GetHandEnd(); he != nil {
		s.notify(&pb.PlayResponse{Sequence: seq, Message: &pb.PlayResponse_HandEnd{HandEnd: he}})
	}
	if hs := req.GetHandStart(); hs != nil {
		s.notify(&pb.PlayResponse{Sequence: seq, Message: &pb.PlayResponse_HandStart{HandStart: hs}})
	}
	for _, ev := range req.GetEvents() {
		s.notify(&pb.PlayResponse{Sequence: seq, Message: &pb.PlayResponse_Event{Event: ev}})
	}
	req.EndedHandEvents, req.HandEnd, req.HandStart, req.Events = nil, nil, nil, nil
}

func (s *session) rejected(r *pb.ActionRejected) error {
	s.log.Warn("gaigel: action rejected", "decision", r.GetDecisionId(), "action", r.GetActionId(),
		"reason", r.GetReason(), "strikes", r.GetStrikes(), "limit", r.GetStrikesLimit(), "message", r.GetMessage())
	p := s.pending
	if !r.GetDecisionOpen() || p == nil || r.GetDecisionId() != p.req.GetDecisionId() {
		return nil
	}
	legal := make([]int32, 0, len(p.req.GetLegalActions()))
	for _, a := range p.req.GetLegalActions() {
		legal = append(legal, a.GetId())
	}
	action := legal[0]
	if len(p.answers) == 1 {
		if a := s.bot.Decide(p.req); slices.Contains(legal, a) && !slices.Contains(p.answers, a) {
			action = a
		}
	}
	if slices.Contains(p.answers, action) {
		s.log.Error("gaigel: giving up on the decision: every answer was rejected", "decision", r.GetDecisionId())
		return nil
	}
	return s.send(p, action)
}
