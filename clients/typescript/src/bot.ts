/**
 * A complete Gaigel bot: answers every decision with a random legal action.
 * `npm start` with GAIGEL_SERVER, GAIGEL_TOKEN and GAIGEL_BOT_NAME set; it plays until the
 * server ends the session (or GAIGEL_MATCHES matches). Each match's MatchStart.botSeed
 * seeds it, so a rematch of its record plays the same.
 */
import { GaigelError, run, seed32, type DecisionRequest, type MatchStart } from "./client.js";

/** A small seeded generator (mulberry32), so that a seed replays the same choices. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
let random = rng(0);

function startMatch(matchStart: MatchStart): void {
  random = rng(seed32(matchStart.botSeed));
}

function decide(req: DecisionRequest): number {
  // === Your logic goes here: return the id of one of req.legalActions. ===
  // req.observation is what your seat knows (hand, trumpCard, currentTrick, ...).
  const legal = req.legalActions;
  return legal[Math.floor(random() * legal.length)].id;
}

try {
  await run({ decide, startMatch }, { name: "random-ts", version: "1.0" });
} catch (e) {
  if (!(e instanceof GaigelError)) throw e; // a bug in the bot: its stack trace helps
  console.error(`gaigel: ${e.message}`); // a setting or the server's refusal: one line says what to fix
  process.exitCode = 1;
}
