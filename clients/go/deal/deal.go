package deal

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
)

// Format is the deal format implemented here; it is also the hash prefix of every hand.
const Format = "gaigel-deal-v1"

// SplitMix64 is the generator of DEALS.md. Go's uint64 arithmetic wraps modulo 2^64,
// exactly as the algorithm requires, so no masking is needed.
type SplitMix64 struct{ State uint64 }

// Next returns the next 64-bit output.
func (r *SplitMix64) Next() uint64 {
	r.State += 0x9E3779B97F4A7C15
	z := r.State
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Below returns a uniform integer in [0, n) without modulo bias; n must be > 0.
//
// DEALS.md rejects x >= limit = 2^64 - (2^64 mod n). 2^64 does not fit in a uint64, so:
// 2^64 mod n == (2^64 - n) mod n == (-n) % n in wrapping arithmetic, and
// x < 2^64 - rem  <=>  x <= MaxUint64 - rem, which also holds when rem == 0.
func (r *SplitMix64) Below(n uint64) uint64 {
	rem := -n % n
	for {
		if x := r.Next(); x <= math.MaxUint64-rem {
			return x % n
		}
	}
}

// HandStream returns the generator of hand `hand` of the match with seed `seed`: its state
// is the first 8 bytes, big-endian, of SHA-256("gaigel-deal-v1:<seed>:<hand>").
func HandStream(seed uint64, hand uint32) *SplitMix64 {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s:%d:%d", Format, seed, hand)))
	return &SplitMix64{State: binary.BigEndian.Uint64(sum[:8])}
}

// Shuffle returns the 48 cards of hand `hand` after the Fisher-Yates shuffle (from the top).
func Shuffle(seed uint64, hand uint32) [NumCards]Card {
	var deck [NumCards]Card
	for i := range deck {
		deck[i] = Card(i)
	}
	r := HandStream(seed, hand)
	for i := NumCards - 1; i >= 1; i-- {
		j := r.Below(uint64(i + 1))
		deck[i], deck[j] = deck[j], deck[i]
	}
	return deck
}

// Hand is the deal of one hand, before the first decision.
type Hand struct {
	// Hands holds five cards per player, in playing order starting with the forehand.
	Hands [][]Card
	// Trump is the face-up trump card; it lies under the talon and is drawn last.
	Trump Card
	// Talon is the face-down stock, top card first.
	Talon []Card
}

// Deal deals hand `hand` of the match with seed `seed` to `players` players (2, 3, 4, 6
// or 8) in packets 3-T-2: three cards each from the forehand, the trump card, two each.
func Deal(seed uint64, hand uint32, players int) (Hand, error) {
	if players < 2 || players > 8 || NumCards%players != 0 {
		return Hand{}, fmt.Errorf("deal: cannot deal to %d players (allowed: 2, 3, 4, 6, 8)", players)
	}
	c, n := Shuffle(seed, hand), players
	h := Hand{Hands: make([][]Card, n), Trump: c[3*n], Talon: append([]Card(nil), c[5*n+1:]...)}
	for i := range h.Hands {
		h.Hands[i] = append(append(make([]Card, 0, 5), c[3*i:3*i+3]...), c[3*n+1+2*i:3*n+3+2*i]...)
	}
	return h, nil
}
