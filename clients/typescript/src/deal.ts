/**
 * The seeded deal of DEALS.md (deal format v1): cards, the SplitMix64 generator, the
 * per-hand shuffle and the 3-T-2 deal. An implementation is correct when it reproduces
 * test/vectors/deals.json exactly.
 */
import { createHash } from "node:crypto";

/** The deal format implemented here; it is also the hash prefix of every hand. */
export const FORMAT = "gaigel-deal-v1";
export const NUM_CARDS = 48;
export const MAX_SEED = (1n << 64n) - 1n;

/** The four suits in DEALS.md order; none ranks above another. */
export enum Suit { Eichel = 0, Blatt = 1, Herz = 2, Schellen = 3 }
/** The six ranks, strongest first (A 10 K O U 7). */
export enum Rank { Ace = 0, Ten = 1, King = 2, Ober = 3, Unter = 4, Seven = 5 }

const SUIT_LETTERS = "EBHS";
const RANK_LETTERS = "ATKOU7";
const COPY_LETTERS = "ab";
const RANK_POINTS = [11, 10, 4, 3, 2, 0] as const;

/**
 * A card, id 0..47 = suit * 12 + rank * 2 + copy. Within a suit a smaller id is a
 * stronger card. The copy (0 or 1) is for bookkeeping only; no rule depends on it.
 * The 48 instances are interned, so cards can be compared with `===`.
 */
export class Card {
  /** All 48 cards, indexed by id. */
  static readonly ALL: readonly Card[] = Array.from({ length: NUM_CARDS }, (_, id) => new Card(id));
  private static readonly BY_CODE = new Map(Card.ALL.map((c) => [c.code, c]));

  readonly suit: Suit;
  readonly rank: Rank;
  readonly copy: 0 | 1;
  /** Card points: 11, 10, 4, 3, 2 or 0. */
  readonly points: number;
  /** Three-letter code, e.g. "EAa" for id 0 and "S7b" for id 47. */
  readonly code: string;

  private constructor(readonly id: number) {
    this.suit = Math.floor(id / 12);
    this.rank = Math.floor((id % 12) / 2);
    this.copy = (id % 2) as 0 | 1;
    this.points = RANK_POINTS[this.rank];
    this.code = SUIT_LETTERS[this.suit] + RANK_LETTERS[this.rank] + COPY_LETTERS[this.copy];
  }

  /** The card with id `id` (0..47). */
  static of(id: number): Card {
    const c = Card.ALL[id];
    if (c === undefined) throw new RangeError(`invalid card id ${id}`);
    return c;
  }

  /** The card of suit, rank and copy (0 or 1). */
  static from(suit: Suit, rank: Rank, copy: 0 | 1 = 0): Card {
    return Card.of(suit * 12 + rank * 2 + copy);
  }

  /** Parses a card code such as "EAa" or "S7b". */
  static parse(code: string): Card {
    const c = Card.BY_CODE.get(code);
    if (c === undefined) throw new RangeError(`invalid card code ${JSON.stringify(code)}`);
    return c;
  }

  toString(): string { return this.code; }
  toJSON(): string { return this.code; }
}

/** Parses a card code such as "EAa" (same as `Card.parse`). */
export const parseCard = (code: string): Card => Card.parse(code);

const MASK64 = (1n << 64n) - 1n;
const TWO64 = 1n << 64n;

/**
 * The SplitMix64 generator of DEALS.md. BigInt never overflows, so every addition and
 * multiplication is masked with `& MASK64` to wrap modulo 2^64 like a uint64.
 */
export class SplitMix64 {
  state: bigint;

  constructor(state: bigint) { this.state = state & MASK64; }

  /** The next 64-bit output. */
  next(): bigint {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  }

  /**
   * A uniform integer in [0, n), n > 0, without modulo bias: outputs at or above
   * limit = 2^64 - (2^64 mod n), the largest multiple of n that fits, are rejected.
   */
  below(n: bigint): bigint {
    if (n <= 0n) throw new RangeError(`below(${n}): n must be > 0`);
    const limit = TWO64 - (TWO64 % n);
    for (;;) {
      const x = this.next();
      if (x < limit) return x % n;
    }
  }
}

function checkArgs(seed: bigint, hand: number): void {
  if (typeof seed !== "bigint" || seed < 0n || seed > MAX_SEED) {
    throw new RangeError(`seed must be a bigint in 0..${MAX_SEED}, got ${String(seed)}`);
  }
  if (!Number.isSafeInteger(hand) || hand < 0) {
    throw new RangeError(`hand index must be an integer >= 0, got ${hand}`);
  }
}

/**
 * The generator of hand `hand` of the match with seed `seed`: its state is the first 8
 * bytes, big-endian, of SHA-256("gaigel-deal-v1:<seed>:<hand>").
 */
export function handStream(seed: bigint, hand: number): SplitMix64 {
  checkArgs(seed, hand);
  const digest = createHash("sha256").update(`${FORMAT}:${seed}:${hand}`, "ascii").digest();
  return new SplitMix64(digest.readBigUInt64BE(0));
}

/** The 48 cards of hand `hand` after the Fisher-Yates shuffle (from the top). */
export function shuffle(seed: bigint, hand: number): Card[] {
  const rng = handStream(seed, hand);
  const deck = Card.ALL.slice();
  for (let i = NUM_CARDS - 1; i >= 1; i--) {
    const j = Number(rng.below(BigInt(i + 1)));
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  return deck;
}

/** The deal of one hand, before the first decision. */
export interface Hand {
  /** Five cards per player, in playing order starting with the forehand. */
  hands: Card[][];
  /** The face-up trump card; it lies under the talon and is drawn last. */
  trump: Card;
  /** The face-down stock, top card first. */
  talon: Card[];
}

/**
 * Deals hand `hand` of the match with seed `seed` to `players` players (2, 3, 4, 6 or 8)
 * in packets 3-T-2: three cards each from the forehand, the trump card, two cards each.
 */
export function deal(seed: bigint, hand: number, players: number): Hand {
  const n = players;
  if (!Number.isInteger(n) || n < 2 || n > 8 || NUM_CARDS % n !== 0) {
    throw new RangeError(`cannot deal to ${players} players (allowed: 2, 3, 4, 6, 8)`);
  }
  const c = shuffle(seed, hand);
  return {
    hands: Array.from({ length: n }, (_, i) => [...c.slice(3 * i, 3 * i + 3), ...c.slice(3 * n + 1 + 2 * i, 3 * n + 3 + 2 * i)]),
    trump: c[3 * n],
    talon: c.slice(5 * n + 1),
  };
}
