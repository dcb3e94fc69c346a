// Command randombot is a complete Gaigel bot: it answers every decision with a random
// legal action until the server ends the session (GAIGEL_MATCHES=N: leave after N
// matches), then exits 0. Run it with GAIGEL_SERVER, GAIGEL_TOKEN and GAIGEL_BOT_NAME set:
//
//	go run ./cmd/randombot
package main

import (
	"context"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"

	"github.com/gaigel-arena/gaigel/clients/go/gaigel"
	pb "github.com/gaigel-arena/gaigel/clients/go/gaigelpb"
)

type randomBot struct{ rng *rand.Rand }

// StartMatch reseeds from the seat's bot seed: a rematch of the record plays the same.
func (b *randomBot) StartMatch(ms *pb.MatchStart) {
	b.rng = rand.New(rand.NewPCG(ms.GetBotSeed(), 0))
}

// Decide returns the id of one of req.LegalActions.
func (b *randomBot) Decide(req *pb.DecisionRequest) int32 {
	// === Your logic goes here. req.Observation is what your seat knows. ===
	legal := req.GetLegalActions()
	return legal[b.rng.IntN(len(legal))].GetId()
}

func main() {
	bot := &randomBot{rng: rand.New(rand.NewPCG(0, 0))}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := gaigel.Run(ctx, bot, gaigel.Config{Name: "random-go", Version: "1.0"}); err != nil {
		log.Fatal(err)
	}
}
