import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Card, NUM_CARDS, Rank, SplitMix64, Suit, deal, parseCard, shuffle } from "../src/deal.js";

interface Vector {
  seed: number | string;
  hand: number;
  players: number;
  deck: string[];
  hands_from_forehand: string[][];
  trump_card: string;
  talon_top_first: string[];
}

// Seeds reach 2^64 - 1, beyond a JS number: keep every integer literal's exact digits by
// turning the seed field into a string before JSON.parse sees it.
const raw = readFileSync(new URL("../../test/vectors/deals.json", import.meta.url), "utf8");
const vectors: Vector[] = JSON.parse(raw.replace(/("seed"\s*:\s*)(\d+)/g, '$1"$2"'));
const codes = (cards: Card[]): string[] => cards.map((c) => c.code);

test("all 60 vectors", () => {
  assert.equal(vectors.length, 60);
  for (const v of vectors) {
    const seed = BigInt(v.seed);
    const where = `seed ${seed} hand ${v.hand} players ${v.players}`;
    assert.deepEqual(codes(shuffle(seed, v.hand)), v.deck, `${where}: deck`);
    const d = deal(seed, v.hand, v.players);
    assert.deepEqual(d.hands.map(codes), v.hands_from_forehand, `${where}: hands`);
    assert.equal(d.trump.code, v.trump_card, `${where}: trump`);
    assert.deepEqual(codes(d.talon), v.talon_top_first, `${where}: talon`);
  }
});

test("the largest seed is exact", () => {
  assert.ok(vectors.some((v) => BigInt(v.seed) === (1n << 64n) - 1n));
});

test("cards", () => {
  let total = 0;
  for (let id = 0; id < NUM_CARDS; id++) {
    const c = Card.of(id);
    assert.equal(c.id, id);
    assert.equal(parseCard(c.code), c);
    assert.equal(Card.from(c.suit, c.rank, c.copy), c);
    total += c.points;
  }
  assert.equal(total, 240);
  const s7b = Card.of(47);
  assert.deepEqual([s7b.code, s7b.suit, s7b.rank, s7b.copy, s7b.points], ["S7b", Suit.Schellen, Rank.Seven, 1, 0]);
  assert.equal(parseCard("HTa").points, 10);
  assert.equal(JSON.stringify([Card.of(0)]), '["EAa"]');
  for (const bad of ["", "EA", "XAa", "EXa", "EAc", "EAab", "eaa"]) {
    assert.throws(() => parseCard(bad), RangeError, bad);
  }
  assert.throws(() => Card.of(48), RangeError);
});

test("below stays in range and next wraps", () => {
  const rng = new SplitMix64((1n << 64n) - 1n); // the first addition wraps past 2^64
  for (const n of [1n, 2n, 3n, 47n, 48n, 1n << 63n, (1n << 63n) + 1n, (1n << 64n) - 1n]) {
    for (let k = 0; k < 100; k++) {
      const x = rng.below(n);
      assert.ok(x >= 0n && x < n, `below(${n}) = ${x}`);
    }
  }
  assert.ok(rng.state >= 0n && rng.state < 1n << 64n);
});

test("invalid arguments", () => {
  for (const p of [-1, 0, 1, 5, 7, 9, 12, 2.5]) assert.throws(() => deal(0n, 0, p), RangeError, `players ${p}`);
  assert.throws(() => deal(-1n, 0, 2), RangeError);
  assert.throws(() => deal(1n << 64n, 0, 2), RangeError);
  assert.throws(() => deal(0n, -1, 2), RangeError);
  for (const p of [2, 3, 4, 6, 8]) {
    const d = deal(7n, 3, p);
    const all = new Set([d.trump, ...d.talon, ...d.hands.flat()]);
    assert.equal(all.size, NUM_CARDS);
    assert.equal(d.talon.length, NUM_CARDS - 5 * p - 1);
    assert.ok(d.hands.every((h) => h.length === 5));
  }
});
