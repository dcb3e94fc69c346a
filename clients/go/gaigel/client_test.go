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

// fakeServer plays a scripted match: it breaks the first stream right after the bot's
// answer, then expects a Resume, resends the decision, rejects the repeated answer and
// ends the match.
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
	if err := Run(ctx, bot, Config{Server: lis.Addr().String(), Token: "tok", Name: "bob"}); err != nil {
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
	for { // Leave, then the answer
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
