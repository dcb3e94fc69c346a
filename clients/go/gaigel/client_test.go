package gaigel

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/gaigel-arena/gaigel/clients/go/gaigelpb"
)

// fakeServer plays a scripted match with a bot that plays one match (Config.Matches 1):
// it breaks the first stream right after the bot's answer, then expects a Resume, resends
// the decision, rejects the repeated answer and ends the match.
type fakeServer struct {
	pb.UnimplementedBotServiceServer
	t       *testing.T
	streams int
	got     [][]*pb.PlayRequest // the requests of each stream
}

func (f *fakeServer) Play(stream pb.BotService_PlayServer) error {
	f.streams++
	var got []*pb.PlayRequest
	defer func() { f.got = append(f.got, got) }()
	recv := func() *pb.PlayRequest {
		req, err := stream.Recv()
		if err != nil {
			f.t.Errorf("stream %d: Recv: %v", f.streams, err)
			return &pb.PlayRequest{}
		}
		got = append(got, req)
		return req
	}
	send := func(seq uint64, msg *pb.PlayResponse) {
		msg.Sequence = seq
		if err := stream.Send(msg); err != nil {
			f.t.Errorf("Send: %v", err)
		}
	}
	decision := &pb.PlayResponse{Message: &pb.PlayResponse_DecisionRequest{DecisionRequest: &pb.DecisionRequest{
		DecisionId: "d1", LegalActions: []*pb.LegalAction{{Id: 3}, {Id: 7}},
	}}}
	first := recv()
	if f.streams == 1 {
		if first.GetJoin().GetBotName() != "bob" || first.GetJoin().GetProtocolVersion() != 1 {
			f.t.Errorf("first message %v, want a Join of bob, protocol 1", first)
		}
		send(0, &pb.PlayResponse{Message: &pb.PlayResponse_Welcome{Welcome: &pb.Welcome{SessionId: "s"}}})
		send(1, &pb.PlayResponse{Message: &pb.PlayResponse_MatchStart{MatchStart: &pb.MatchStart{
			MatchId: "m", Seat: 2, ResumeToken: "rt", Clock: &pb.ClockSettings{ResumeGrace: durationpb.New(5 * time.Second)},
		}}})
		send(2, decision)
		recv() // Leave: the only match
		recv() // the answer, "lost" with the stream
		return status.Error(codes.Unavailable, "connection dropped")
	}
	r := first.GetResume()
	if r.GetMatchId() != "m" || r.GetSeat() != 2 || r.GetResumeToken() != "rt" || r.GetLastSequence() != 2 {
		f.t.Errorf("first message of stream 2 is %v, want Resume{m, 2, rt, 2}", first)
	}
	send(0, &pb.PlayResponse{Message: &pb.PlayResponse_Welcome{Welcome: &pb.Welcome{SessionId: "s", Resumed: true}}})
	send(2, decision) // resent: the bot must skip it
	again := recv().GetAction()
	send(3, &pb.PlayResponse{Message: &pb.PlayResponse_ActionRejected{ActionRejected: &pb.ActionRejected{
		DecisionId: "d1", ActionId: again.GetActionId(), DecisionOpen: true,
	}}})
	recv() // the second answer
	send(4, &pb.PlayResponse{Message: &pb.PlayResponse_MatchEnd{MatchEnd: &pb.MatchEnd{MatchId: "m"}}})
	return nil
}

type constBot struct{ calls int }

func (b *constBot) Decide(req *pb.DecisionRequest) int32 { b.calls++; return 7 }

func TestResumeAndRejection(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeServer{t: t}
	srv := grpc.NewServer()
	pb.RegisterBotServiceServer(srv, fake)
	go srv.Serve(lis)
	defer srv.Stop()

	bot := &constBot{}
	t.Setenv("GAIGEL_BOT_NAME", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Run(ctx, bot, Config{Server: lis.Addr().String(), Token: "tok", Name: "bob", Matches: 1}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	srv.GracefulStop()
	if fake.streams != 2 {
		t.Fatalf("%d streams, want 2", fake.streams)
	}
	var actions []int32
	for _, stream := range fake.got {
		for _, req := range stream {
			if a := req.GetAction(); a != nil {
				if a.GetDecisionId() != "d1" {
					t.Errorf("answer quotes %q, want d1", a.GetDecisionId())
				}
				actions = append(actions, a.GetActionId())
			}
		}
	}
	// The answer, the same answer again after Resume, then, after the rejection, the
	// first legal action (the decision already had two answers, so Decide is not asked).
	if want := []int32{7, 7, 3}; !equal(actions, want) {
		t.Errorf("actions %v, want %v", actions, want)
	}
	if bot.calls != 1 {
		t.Errorf("Decide called %d times, want 1", bot.calls)
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// foldServer plays a one-decision match in compact mode: the end of the previous hand
// (two Events and the HandEnd), the HandStart and two Events ride in the DecisionRequest.
type foldServer struct {
	pb.UnimplementedBotServiceServer
	t    *testing.T
	join *pb.Join
}

func (f *foldServer) Play(stream pb.BotService_PlayServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	f.join = first.GetJoin()
	msgs := []*pb.PlayResponse{
		{Message: &pb.PlayResponse_Welcome{Welcome: &pb.Welcome{SessionId: "s"}}},
		{Sequence: 1, Message: &pb.PlayResponse_MatchStart{MatchStart: &pb.MatchStart{MatchId: "m", Seat: 0}}},
		{Sequence: 2, Message: &pb.PlayResponse_DecisionRequest{DecisionRequest: &pb.DecisionRequest{
			DecisionId: "d1", LegalActions: []*pb.LegalAction{{Id: 3}, {Id: 7}},
			EndedHandEvents: []*pb.Event{
				{Kind: &pb.Event_TrickRevealed{TrickRevealed: &pb.TrickRevealed{}}},
				{Kind: &pb.Event_TrickWon{TrickWon: &pb.TrickWon{WinnerSeat: 1}}},
			},
			HandEnd:   &pb.HandEnd{HandIndex: 0, WinnerSides: []int32{1}},
			HandStart: &pb.HandStart{DealerSeat: 1},
			Events: []*pb.Event{
				{Kind: &pb.Event_OpeningDeclared{OpeningDeclared: &pb.OpeningDeclared{Seat: 1}}},
				{Kind: &pb.Event_CardPlayed{CardPlayed: &pb.CardPlayed{Seat: 1}}},
			},
		}}},
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	for { // a Leave (if the bot plays one match only), then the answer
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		if req.GetAction() != nil {
			break
		}
	}
	return stream.Send(&pb.PlayResponse{Sequence: 3, Message: &pb.PlayResponse_MatchEnd{MatchEnd: &pb.MatchEnd{MatchId: "m"}}})
}

// logBot writes down every callback.
type logBot struct{ log []string }

func (b *logBot) OnMessage(msg *pb.PlayResponse) {
	entry := fmt.Sprintf("%T", msg.GetMessage())
	if ev := msg.GetEvent(); ev != nil {
		entry = fmt.Sprintf("%T", ev.GetKind())
	}
	if req := msg.GetDecisionRequest(); req != nil && (req.GetHandStart() != nil || len(req.GetEvents()) > 0 ||
		req.GetHandEnd() != nil || len(req.GetEndedHandEvents()) > 0) {
		entry += " still folded"
	}
	b.log = append(b.log, entry)
}

func (b *logBot) Decide(req *pb.DecisionRequest) int32 {
	b.log = append(b.log, "Decide")
	return 7
}

func TestCompactUnfoldsInOrder(t *testing.T) {
	for _, c := range []struct {
		disable bool
		env     string // $GAIGEL_COMPACT
		want    bool   // Join.compact
	}{
		{false, "", true},
		{true, "", false},
		{false, "0", false}, // the environment turns it off ...
		{true, "1", false},  // ... but cannot turn it on against DisableCompact
	} {
		disable := c.disable
		t.Setenv("GAIGEL_COMPACT", c.env)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fake := &foldServer{t: t}
		srv := grpc.NewServer()
		pb.RegisterBotServiceServer(srv, fake)
		go srv.Serve(lis)

		bot := &logBot{}
		t.Setenv("GAIGEL_BOT_NAME", "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = Run(ctx, bot, Config{Server: lis.Addr().String(), Token: "tok", Name: "bob", DisableCompact: disable})
		cancel()
		srv.Stop()
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := fake.join.GetCompact(); got != c.want {
			t.Errorf("DisableCompact %v, GAIGEL_COMPACT %q: Join.compact %v", disable, c.env, got)
		}
		if got := fake.join.GetCompactHandEnd(); got != c.want {
			t.Errorf("DisableCompact %v, GAIGEL_COMPACT %q: Join.compact_hand_end %v", disable, c.env, got)
		}
		want := []string{
			"*gaigelpb.PlayResponse_Welcome", "*gaigelpb.PlayResponse_MatchStart",
			"*gaigelpb.Event_TrickRevealed", "*gaigelpb.Event_TrickWon", "*gaigelpb.PlayResponse_HandEnd",
			"*gaigelpb.PlayResponse_HandStart", "*gaigelpb.Event_OpeningDeclared", "*gaigelpb.Event_CardPlayed",
			"*gaigelpb.PlayResponse_DecisionRequest", "Decide", "*gaigelpb.PlayResponse_MatchEnd",
		}
		if !slices.Equal(bot.log, want) {
			t.Errorf("callbacks\n %v\nwant\n %v", bot.log, want)
		}
	}
}

// TestCompactFromEnv: $GAIGEL_COMPACT is read as the Python SDK reads it.
func TestCompactFromEnv(t *testing.T) {
	for v, want := range map[string]bool{
		"": true, "1": true, "true": true, "yes": true, "on": true, "maybe": true, "2": true,
		"0": false, "false": false, "no": false, "off": false, "FALSE": false, " Off\n": false, "No": false,
	} {
		t.Setenv("GAIGEL_COMPACT", v)
		if got := compactFromEnv(); got != want {
			t.Errorf("GAIGEL_COMPACT=%q: compact %v, want %v", v, got, want)
		}
	}
	os.Unsetenv("GAIGEL_COMPACT") // restored by t.Setenv's cleanup
	if !compactFromEnv() {
		t.Error("GAIGEL_COMPACT unset: plain, want compact")
	}
}

// matchServer offers `matches` one-decision matches on one stream, then ends the stream
// with OK, as gaigel try and the arena end a session. It ignores Leave (a server may
// honour it only later), so a bot that leaves must stop by itself. got is what the bot
// sent: "Join", then "Leave m<i>" (a Leave during match i) and "Action d<i>".
type matchServer struct {
	pb.UnimplementedBotServiceServer
	matches int
	streams int
	got     []string
}

func (f *matchServer) Play(stream pb.BotService_PlayServer) error {
	f.streams++
	if _, err := stream.Recv(); err != nil {
		return err
	}
	f.got = append(f.got, "Join")
	var seq uint64 // Welcome is 0, the match messages count on from 1
	send := func(msg *pb.PlayResponse) error {
		msg.Sequence, seq = seq, seq+1
		return stream.Send(msg)
	}
	if err := send(&pb.PlayResponse{Message: &pb.PlayResponse_Welcome{Welcome: &pb.Welcome{SessionId: "s"}}}); err != nil {
		return err
	}
	for i := 1; i <= f.matches; i++ {
		id := fmt.Sprint("m", i)
		if err := send(&pb.PlayResponse{Message: &pb.PlayResponse_MatchStart{MatchStart: &pb.MatchStart{MatchId: id}}}); err != nil {
			return err
		}
		if err := send(&pb.PlayResponse{Message: &pb.PlayResponse_DecisionRequest{DecisionRequest: &pb.DecisionRequest{
			DecisionId: fmt.Sprint("d", i), LegalActions: []*pb.LegalAction{{Id: 3}, {Id: 7}},
		}}}); err != nil {
			return err
		}
		for { // a Leave, if any, then the answer
			req, err := stream.Recv()
			if err != nil {
				return err
			}
			if req.GetLeave() != nil {
				f.got = append(f.got, "Leave "+id)
			}
			if a := req.GetAction(); a != nil {
				f.got = append(f.got, "Action "+a.GetDecisionId())
				break
			}
		}
		if err := send(&pb.PlayResponse{Message: &pb.PlayResponse_MatchEnd{MatchEnd: &pb.MatchEnd{MatchId: id}}}); err != nil {
			return err
		}
	}
	return nil // OK: the session is over
}

// matchBot writes down the matches it sees and its decisions.
type matchBot struct{ log []string }

func (b *matchBot) OnMessage(msg *pb.PlayResponse) {
	if ms := msg.GetMatchStart(); ms != nil {
		b.log = append(b.log, "start "+ms.GetMatchId())
	}
	if me := msg.GetMatchEnd(); me != nil {
		b.log = append(b.log, "end "+me.GetMatchId())
	}
}

func (b *matchBot) Decide(req *pb.DecisionRequest) int32 {
	b.log = append(b.log, "Decide "+req.GetDecisionId())
	return 7
}

// playMatches runs a matchBot with cfg against a matchServer that offers two matches. It
// returns what the bot saw, what the server got and Run's error.
func playMatches(t *testing.T, cfg Config) (bot *matchBot, fake *matchServer, err error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake = &matchServer{matches: 2}
	srv := grpc.NewServer()
	pb.RegisterBotServiceServer(srv, fake)
	go srv.Serve(lis)
	defer srv.Stop()

	t.Setenv("GAIGEL_BOT_NAME", "")
	cfg.Server, cfg.Token, cfg.Name = lis.Addr().String(), "tok", "bob"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bot = &matchBot{}
	err = Run(ctx, bot, cfg)
	srv.GracefulStop() // waits for Play to return: fake.got is complete
	return bot, fake, err
}

// unsetenv unsets key for the rest of the test.
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "") // restores the old value after the test
	os.Unsetenv(key)
}

var (
	oneMatch   = []string{"start m1", "Decide d1", "end m1"}
	twoMatches = []string{"start m1", "Decide d1", "end m1", "start m2", "Decide d2", "end m2"}
)

// TestDefaultPlaysUntilServerEndsSession: without Config.Matches and $GAIGEL_MATCHES the
// bot plays every match the server offers on the same stream, never sends Leave, and Run
// returns nil when the server ends the stream with OK.
func TestDefaultPlaysUntilServerEndsSession(t *testing.T) {
	unsetenv(t, "GAIGEL_MATCHES")
	bot, fake, err := playMatches(t, Config{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(bot.log, twoMatches) {
		t.Errorf("bot saw %v, want %v", bot.log, twoMatches)
	}
	if want := []string{"Join", "Action d1", "Action d2"}; !slices.Equal(fake.got, want) {
		t.Errorf("server got %v, want %v", fake.got, want)
	}
	if fake.streams != 1 {
		t.Errorf("%d streams, want 1", fake.streams)
	}
}

// TestGaigelMatches: $GAIGEL_MATCHES=N leaves after N matches, sending Leave when the
// N-th starts; 0 or empty is the default; Config.Matches, when set, wins.
func TestGaigelMatches(t *testing.T) {
	leaveAt1 := []string{"Join", "Leave m1", "Action d1"}
	leaveAt2 := []string{"Join", "Action d1", "Leave m2", "Action d2"}
	noLeave := []string{"Join", "Action d1", "Action d2"}
	for _, c := range []struct {
		env     string // $GAIGEL_MATCHES
		matches int    // Config.Matches
		bot     []string
		server  []string
	}{
		{"1", 0, oneMatch, leaveAt1},
		{" 1\n", 0, oneMatch, leaveAt1},
		{"2", 0, twoMatches, leaveAt2},
		{"0", 0, twoMatches, noLeave},
		{"", 0, twoMatches, noLeave},
		{"", 1, oneMatch, leaveAt1},
		{"1", 2, twoMatches, leaveAt2}, // Config.Matches wins ...
		{"1", -1, twoMatches, noLeave}, // ... also when negative: until the server ends the session
	} {
		t.Setenv("GAIGEL_MATCHES", c.env)
		bot, fake, err := playMatches(t, Config{Matches: c.matches})
		if err != nil {
			t.Errorf("GAIGEL_MATCHES %q, Matches %d: Run: %v", c.env, c.matches, err)
		}
		if !slices.Equal(bot.log, c.bot) {
			t.Errorf("GAIGEL_MATCHES %q, Matches %d: bot saw %v, want %v", c.env, c.matches, bot.log, c.bot)
		}
		if !slices.Equal(fake.got, c.server) {
			t.Errorf("GAIGEL_MATCHES %q, Matches %d: server got %v, want %v", c.env, c.matches, fake.got, c.server)
		}
	}
}

// TestGaigelMatchesBadValue: a $GAIGEL_MATCHES that is not a whole number of at least 0 is
// a configuration error naming the variable and the value; nothing is sent.
func TestGaigelMatchesBadValue(t *testing.T) {
	for _, v := range []string{"abc", "-1", "1.5", "+2", "1e3", "99999999999999999999"} {
		t.Setenv("GAIGEL_MATCHES", v)
		_, fake, err := playMatches(t, Config{})
		want := fmt.Sprintf("gaigel: GAIGEL_MATCHES must be a number, got %q", v)
		if err == nil || err.Error() != want {
			t.Errorf("GAIGEL_MATCHES %q: Run returned %v, want %q", v, err, want)
		}
		if fake.streams != 0 {
			t.Errorf("GAIGEL_MATCHES %q: %d streams opened, want none", v, fake.streams)
		}
	}
}
