package deal

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// vector is one entry of testdata/deals.json (a copy of the arena's tests/data/deals.json).
type vector struct {
	Seed    uint64     `json:"seed"`
	Hand    uint32     `json:"hand"`
	Players int        `json:"players"`
	Deck    []string   `json:"deck"`
	Hands   [][]string `json:"hands_from_forehand"`
	Trump   string     `json:"trump_card"`
	Talon   []string   `json:"talon_top_first"`
}

func codes(cards []Card) []string {
	out := make([]string, len(cards))
	for i, c := range cards {
		out[i] = c.Code()
	}
	return out
}

func TestVectors(t *testing.T) {
	data, err := os.ReadFile("testdata/deals.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []vector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) != 60 {
		t.Fatalf("got %d vectors, want 60", len(vectors))
	}
	for _, v := range vectors {
		deck := Shuffle(v.Seed, v.Hand)
		if got := codes(deck[:]); !reflect.DeepEqual(got, v.Deck) {
			t.Errorf("seed %d hand %d: deck %v, want %v", v.Seed, v.Hand, got, v.Deck)
		}
		h, err := Deal(v.Seed, v.Hand, v.Players)
		if err != nil {
			t.Fatalf("seed %d hand %d players %d: %v", v.Seed, v.Hand, v.Players, err)
		}
		hands := make([][]string, len(h.Hands))
		for i, cards := range h.Hands {
			hands[i] = codes(cards)
		}
		if !reflect.DeepEqual(hands, v.Hands) {
			t.Errorf("seed %d hand %d players %d: hands %v, want %v", v.Seed, v.Hand, v.Players, hands, v.Hands)
		}
		if h.Trump.Code() != v.Trump {
			t.Errorf("seed %d hand %d players %d: trump %s, want %s", v.Seed, v.Hand, v.Players, h.Trump, v.Trump)
		}
		if got := codes(h.Talon); !reflect.DeepEqual(got, v.Talon) {
			t.Errorf("seed %d hand %d players %d: talon %v, want %v", v.Seed, v.Hand, v.Players, got, v.Talon)
		}
	}
}

func TestCards(t *testing.T) {
	for id := 0; id < NumCards; id++ {
		c := Card(id)
		back, err := ParseCard(c.Code())
		if err != nil || back != c {
			t.Errorf("ParseCard(%q) = %d, %v; want %d", c.Code(), back, err, id)
		}
		if NewCard(c.Suit(), c.Rank(), c.Copy()) != c {
			t.Errorf("NewCard round trip failed for %d", id)
		}
	}
	if c := NewCard(Schellen, Seven, 1); c != 47 || c.Code() != "S7b" || c.Points() != 0 {
		t.Errorf("S7b: got id %d code %s points %d", c, c.Code(), c.Points())
	}
	if c, _ := ParseCard("HTa"); c.Suit() != Herz || c.Rank() != Ten || c.Points() != 10 {
		t.Errorf("HTa: got suit %d rank %d points %d", c.Suit(), c.Rank(), c.Points())
	}
	total := 0
	for id := 0; id < NumCards; id++ {
		total += Card(id).Points()
	}
	if total != 240 {
		t.Errorf("deck points %d, want 240", total)
	}
	for _, bad := range []string{"", "EA", "XAa", "EXa", "EAc", "EAab", "eaa"} {
		if _, err := ParseCard(bad); err == nil {
			t.Errorf("ParseCard(%q) accepted", bad)
		}
	}
}

func TestBelowRange(t *testing.T) {
	r := &SplitMix64{State: 0}
	for _, n := range []uint64{1, 2, 3, 47, 48, 1 << 63, 1<<63 + 1, ^uint64(0)} {
		for k := 0; k < 100; k++ {
			if x := r.Below(n); x >= n {
				t.Fatalf("Below(%d) = %d", n, x)
			}
		}
	}
}

func TestDealErrors(t *testing.T) {
	for _, p := range []int{-1, 0, 1, 5, 7, 9, 12} {
		if _, err := Deal(0, 0, p); err == nil {
			t.Errorf("Deal with %d players accepted", p)
		}
	}
	for _, p := range []int{2, 3, 4, 6, 8} {
		h, err := Deal(7, 3, p)
		if err != nil {
			t.Fatalf("Deal with %d players: %v", p, err)
		}
		seen := map[Card]bool{h.Trump: true}
		for _, c := range append(append([]Card(nil), h.Talon...), flatten(h.Hands)...) {
			seen[c] = true
		}
		if len(seen) != NumCards || len(h.Talon) != NumCards-5*p-1 {
			t.Errorf("%d players: %d distinct cards, talon %d", p, len(seen), len(h.Talon))
		}
	}
}

func flatten(hands [][]Card) []Card {
	var out []Card
	for _, h := range hands {
		out = append(out, h...)
	}
	return out
}
