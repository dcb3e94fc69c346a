// Command randombot is a complete Gaigel bot: it answers every decision with a random
// legal action. Run it with GAIGEL_SERVER, GAIGEL_TOKEN and GAIGEL_BOT_NAME set:
//
//	go run ./cmd/randombot
package main

import (
	"context"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"

	"github.com/gaigel-arena/gaigel/clients/go/gaigel"
	pb "github.com/gaigel-arena/gaigel/clients/go/gaigelpb"
)

type randomBot struct{ rng *rand.Rand }

// Decide returns the id of one of req.LegalActions.
func (b *randomBot) Decide(req *pb.DecisionRequest) int32 {
	// === Your logic goes here. req.Observation is what your seat knows. ===
	legal := req.GetLegalActions()
	return legal[b.rng.IntN(len(legal))].GetId()
}

func main() {
	seed, _ := strconv.ParseUint(os.Getenv("GAIGEL_SEED"), 10, 64) // default 0
	bot := &randomBot{rng: rand.New(rand.NewPCG(seed, 0))}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := gaigel.Run(ctx, bot, gaigel.Config{Name: "random-go", Version: "1.0"}); err != nil {
		log.Fatal(err)
	}
}
