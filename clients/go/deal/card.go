// Package deal implements the seeded deal of DEALS.md (deal format v1): the cards, the
// SplitMix64 generator, the per-hand shuffle and the 3-T-2 deal. Any implementation that
// reproduces testdata/deals.json is correct.
package deal

import "fmt"

// Suit is one of the four suits, in DEALS.md order; none ranks above another.
type Suit uint8

// The suits.
const (
	Eichel Suit = iota
	Blatt
	Herz
	Schellen
)

// Rank is one of the six ranks, strongest first (A 10 K O U 7).
type Rank uint8

// The ranks.
const (
	Ace Rank = iota
	Ten
	King
	Ober
	Unter
	Seven
)

const (
	suitLetters = "EBHS"
	rankLetters = "ATKOU7"
	copyLetters = "ab"
)

var rankPoints = [6]int{11, 10, 4, 3, 2, 0}

// NumCards is the size of the double 24-card deck.
const NumCards = 48

// Card is a card id 0..47 = suit*12 + rank*2 + copy. Within a suit a smaller id is a
// stronger card. The copy (0 or 1) is for bookkeeping only; no rule depends on it.
type Card uint8

// NewCard builds a card from its suit, rank and copy (0 or 1).
func NewCard(s Suit, r Rank, copy int) Card { return Card(int(s)*12 + int(r)*2 + copy) }

// Suit returns the suit of c.
func (c Card) Suit() Suit { return Suit(c / 12) }

// Rank returns the rank of c.
func (c Card) Rank() Rank { return Rank(c % 12 / 2) }

// Copy returns 0 or 1; it only tells the two identical cards apart.
func (c Card) Copy() int { return int(c % 2) }

// Points returns the card points of c: 11, 10, 4, 3, 2 or 0.
func (c Card) Points() int { return rankPoints[c.Rank()] }

// Code returns the three-letter code of c, e.g. "EAa" for card 0 and "S7b" for card 47.
func (c Card) Code() string {
	if c >= NumCards {
		return fmt.Sprintf("Card(%d)", uint8(c))
	}
	return string([]byte{suitLetters[c.Suit()], rankLetters[c.Rank()], copyLetters[c.Copy()]})
}

// String returns the code of c.
func (c Card) String() string { return c.Code() }

// ParseCard parses a card code such as "EAa" or "S7b".
func ParseCard(code string) (Card, error) {
	if len(code) == 3 {
		s, r, cp := indexByte(suitLetters, code[0]), indexByte(rankLetters, code[1]), indexByte(copyLetters, code[2])
		if s >= 0 && r >= 0 && cp >= 0 {
			return NewCard(Suit(s), Rank(r), cp), nil
		}
	}
	return 0, fmt.Errorf("deal: invalid card code %q", code)
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}
