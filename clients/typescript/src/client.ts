/**
 * The session loop of a Gaigel bot (protocol gaigel.v1): connect, Join, answer every
 * DecisionRequest, handle rejections, Resume after a dropped connection, return when the
 * server ends the session (or after the configured number of matches). The message types
 * are generated from proto/ by proto-loader-gen-types (`npm run generate`); the service is
 * loaded from the same .proto files at run time.
 */
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { ProtoGrpcType } from "./generated/bot_service.js";
import type { BotServiceClient } from "./generated/gaigel/v1/BotService.js";
import type { ActionRejected__Output } from "./generated/gaigel/v1/ActionRejected.js";
import type { DecisionRequest__Output } from "./generated/gaigel/v1/DecisionRequest.js";
import type { MatchStart__Output } from "./generated/gaigel/v1/MatchStart.js";
import type { PlayRequest } from "./generated/gaigel/v1/PlayRequest.js";
import type { PlayResponse__Output } from "./generated/gaigel/v1/PlayResponse.js";

export type { DecisionRequest__Output as DecisionRequest } from "./generated/gaigel/v1/DecisionRequest.js";
export type { PlayResponse__Output as PlayResponse } from "./generated/gaigel/v1/PlayResponse.js";
export type { Observation__Output as Observation } from "./generated/gaigel/v1/Observation.js";
export type { LegalAction__Output as LegalAction } from "./generated/gaigel/v1/LegalAction.js";
export type { MatchStart__Output as MatchStart } from "./generated/gaigel/v1/MatchStart.js";

export const PROTOCOL_VERSION = 1;
export const DEFAULT_SERVER = "127.0.0.1:50051";
/** The proto/ directory of the repository; $GAIGEL_PROTO_DIR overrides it. */
export const PROTO_DIR = process.env.GAIGEL_PROTO_DIR ?? fileURLToPath(new URL("../../../../proto", import.meta.url));

/** The options the generated types assume (camelCase fields, enums and 64-bit ints as strings, oneof names). */
export const LOADER_OPTIONS: protoLoader.Options = { longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_DIR] };

/** Loads the gaigel.v1 package from proto/gaigel/v1/bot_service.proto. */
export function loadProto(): ProtoGrpcType {
  const definition = protoLoader.loadSync("gaigel/v1/bot_service.proto", LOADER_OPTIONS);
  return grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
}

export interface Bot {
  /** Returns the id of one of `req.legalActions` (never empty, ascending ids). Keep it within `req.timeLeft`. */
  decide(req: DecisionRequest__Output): number | Promise<number>;
  /** Optional: sees every server message once, in order (the DecisionRequest before `decide`). */
  onMessage?(msg: PlayResponse__Output): void;
  /**
   * Optional: called at each MatchStart, before the match's first decision. Seed all your
   * randomness from `matchStart.botSeed` (a decimal string: 64 bits) and a rematch of
   * the record plays the same (docs/bot-guide.md, Bot seeds).
   */
  startMatch?(matchStart: MatchStart__Output): void;
}

/** Folds a 64-bit seed (a decimal string, as `MatchStart.botSeed`) into 32 bits for a small generator. */
export function seed32(seed: string): number {
  const s = BigInt(seed || "0");
  return Number((s ^ (s >> 32n)) & 0xffffffffn);
}

export interface Config {
  /** `host:port`; default $GAIGEL_SERVER, else 127.0.0.1:50051. */
  server?: string;
  /** The bot token; default $GAIGEL_TOKEN. Required. */
  token?: string;
  /** The registered bot name; $GAIGEL_BOT_NAME, when set, takes precedence (gaigel try sets it). */
  name?: string;
  /** The bot's own version string, recorded in match records. */
  version?: string;
  /**
   * Matches to play before returning (Leave is sent when the last one starts); 0 = until the
   * server ends the session. Unset, $GAIGEL_MATCHES decides (see `matchesFromEnv`; unset there
   * too: 0); set, it wins over $GAIGEL_MATCHES.
   */
  matches?: number;
  /** How long an unreachable server is retried outside a match; default 30 s. Inside a match the resume grace applies. */
  connectTimeoutMs?: number;
  /** Default: plaintext. */
  credentials?: grpc.ChannelCredentials;
  /**
   * Compact mode (Join.compact and Join.compactHandEnd), default true: the server sends
   * HandStart, Events and HandEnd inside the next DecisionRequest instead of on their own,
   * one message per decision. The client unfolds them, so `onMessage` and `decide` see the
   * same messages in the same order either way; a server without compact mode ignores it.
   * `false` turns it off.
   * Unset, $GAIGEL_COMPACT decides (see `compactFromEnv`); set, it wins over $GAIGEL_COMPACT.
   */
  compact?: boolean;
}

/**
 * Compact mode unless $GAIGEL_COMPACT is 0, false, no or off (any case, spaces around
 * ignored), as in the Python SDK: unset or any other value means compact.
 */
export function compactFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return !["0", "false", "no", "off"].includes((env.GAIGEL_COMPACT ?? "1").trim().toLowerCase());
}

/** A setting that is wrong or missing, or a server that refuses or cannot be reached: its message says what to fix. */
export class GaigelError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "GaigelError";
  }
}

/**
 * The number of matches $GAIGEL_MATCHES asks for: unset, empty or 0 means 0 (play until the
 * server ends the session), N > 0 means leave after N matches. Anything that is not a
 * non-negative integer is a configuration error naming the variable and the value.
 */
export function matchesFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const value = env.GAIGEL_MATCHES;
  if (!value) return 0;
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new GaigelError(`GAIGEL_MATCHES must be a number, got ${JSON.stringify(value)}`);
  return Number(value);
}

interface Pending { req: DecisionRequest__Output; answers: number[] }
interface MatchInfo { matchId: string; seat: number; resumeToken: string; graceMs: number }

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const log = (...args: unknown[]) => console.error(new Date().toISOString(), "gaigel:", ...args);

/**
 * Connects `bot` to the server and plays until the server ends the session with OK (after a
 * MatchEnd, as `gaigel try` and the arena do) or the configured number of matches has ended.
 */
export async function run(bot: Bot, config: Config = {}): Promise<void> {
  const token = config.token ?? process.env.GAIGEL_TOKEN ?? "";
  const name = process.env.GAIGEL_BOT_NAME || config.name || "";
  if (!token) throw new GaigelError("no bot token: set GAIGEL_TOKEN to the token issued when the bot was registered");
  if (!name) throw new GaigelError("no bot name: set GAIGEL_BOT_NAME or config.name");
  const matches = config.matches ?? matchesFromEnv();
  if (!Number.isSafeInteger(matches) || matches < 0) throw new GaigelError(`config.matches must be a non-negative integer, got ${matches}`);
  const server = config.server ?? process.env.GAIGEL_SERVER ?? DEFAULT_SERVER;
  const client = new (loadProto().gaigel.v1.BotService)(server, config.credentials ?? grpc.credentials.createInsecure());
  try {
    await new Session(bot, client, { ...config, token, name, matches, compact: config.compact ?? compactFromEnv() }).run();
  } finally {
    client.close();
  }
}

class Session {
  private lastSeq = 0;
  private match: MatchInfo | null = null;
  private pending: Pending | null = null;
  private done = 0;
  private leaveSent = false;
  private call: grpc.ClientDuplexStream<PlayRequest, PlayResponse__Output> | null = null;
  private readonly matches: number;

  constructor(private bot: Bot, private client: BotServiceClient, private config: Config & { token: string; name: string; matches: number }) {
    this.matches = config.matches;
  }

  async run(): Promise<void> {
    let failures = 0;
    let lostSince: number | null = null;
    for (;;) {
      const resuming = this.match !== null;
      let hello: PlayRequest;
      if (this.match) {
        const { matchId, seat, resumeToken } = this.match;
        hello = { resume: { matchId, seat, resumeToken, lastSequence: this.lastSeq, botVersion: this.config.version } };
      } else {
        this.lastSeq = 0;
        this.pending = null;
        const compact = this.config.compact ?? true; // compactHandEnd with it: unfold reads every folded field
        hello = { join: { botToken: this.config.token, botName: this.config.name, botVersion: this.config.version, protocolVersion: PROTOCOL_VERSION, compact, compactHandEnd: compact } };
      }
      let welcomed = false;
      try {
        const finished = await this.play(hello, resuming, () => { welcomed = true; failures = 0; lostSince = null; });
        if (!finished) log("the server ended the session");
        return;
      } catch (e) {
        // Not the stream's error (a bug in the bot's own code): it ends the run with its stack,
        // as in the other kits, instead of being retried as a lost connection.
        if (typeof (e as grpc.ServiceError).code !== "number") throw e;
        const code = (e as grpc.ServiceError).code;
        if (resuming && !welcomed && (code === grpc.status.FAILED_PRECONDITION || code === grpc.status.NOT_FOUND)) {
          log(`could not resume match ${this.match?.matchId} (${(e as Error).message}); joining afresh`);
          this.match = null;
          if (this.matches > 0 && ++this.done >= this.matches) return;
          continue;
        }
        const retry = [grpc.status.UNAVAILABLE, ...(this.match ? [grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.CANCELLED] : [])];
        if (!retry.includes(code)) throw new GaigelError(`the server ended the stream: ${grpc.status[code]}: ${(e as grpc.ServiceError).details}`, { cause: e });
        const limit = this.match?.graceMs || (this.config.connectTimeoutMs ?? 30_000);
        lostSince ??= Date.now();
        const remaining = lostSince + limit - Date.now();
        if (remaining <= 0) throw new GaigelError(`server unreachable for ${limit} ms: ${(e as Error).message}`);
        const delay = Math.min(remaining, Math.min(5000, 100 * 2 ** failures) * (0.8 + 0.4 * Math.random()));
        failures++;
        log(`stream lost (${(e as Error).message}); ${this.match ? `resuming match ${this.match.matchId}` : "reconnecting"} in ${Math.round(delay)} ms`);
        await sleep(delay);
      }
    }
  }

  /** Runs one stream: true when the configured matches are done, false when the server closed it with OK; throws on errors. */
  private async play(hello: PlayRequest, resuming: boolean, onWelcome: () => void): Promise<boolean> {
    const call = this.client.Play();
    this.call = call;
    call.write(hello);
    try {
      for await (const msg of call as AsyncIterable<PlayResponse__Output>) {
        if (msg.welcome) onWelcome();
        if (await this.handle(msg, resuming)) return true;
      }
      return false;
    } finally {
      call.on("error", () => {}); // the cancellation below is ours
      call.end();
      call.cancel();
    }
  }

  private send(pending: Pending, actionId: number): void {
    pending.answers.push(actionId);
    this.call?.write({ action: { decisionId: pending.req.decisionId, actionId } });
  }

  /** Handles one server message; true when the session is done. */
  private async handle(msg: PlayResponse__Output, resuming: boolean): Promise<boolean> {
    if (msg.welcome) {
      const w = msg.welcome;
      log(`${w.resumed ? "resumed" : "joined"} session ${w.sessionId} as ${w.botName} (server ${w.serverVersion})`);
      this.bot.onMessage?.(msg);
      const p = this.pending;
      if (resuming && p) {
        // Our answer may have been lost with the old stream: send it (or a first one) again.
        this.send(p, p.answers.length ? p.answers[p.answers.length - 1] : await this.bot.decide(p.req));
      }
      return false;
    }
    const seq = Number(msg.sequence);
    if (seq <= this.lastSeq) return false; // resent after Resume, already handled
    if (seq !== this.lastSeq + 1) log(`messages ${this.lastSeq + 1}..${seq - 1} never arrived`);
    this.lastSeq = seq;
    if (msg.decisionRequest) this.unfold(msg.sequence, msg.decisionRequest);
    this.bot.onMessage?.(msg);
    if (msg.decisionRequest) {
      this.pending = { req: msg.decisionRequest, answers: [] };
      this.send(this.pending, await this.bot.decide(msg.decisionRequest));
    } else if (msg.actionRejected) {
      await this.rejected(msg.actionRejected);
    } else if (msg.matchStart) {
      const m = msg.matchStart;
      const grace = m.clock?.resumeGrace;
      this.match = { matchId: m.matchId, seat: m.seat, resumeToken: m.resumeToken, graceMs: grace ? Number(grace.seconds) * 1000 + grace.nanos / 1e6 : 0 };
      this.pending = null;
      log(`match ${m.matchId} started: seat ${m.seat} of ${m.players}`);
      this.bot.startMatch?.(m);
      if (this.matches > 0 && this.done + 1 >= this.matches && !this.leaveSent) {
        this.leaveSent = true;
        this.call?.write({ leave: {} });
      }
    } else if (msg.matchEnd) {
      const m = msg.matchEnd;
      this.match = null;
      this.pending = null;
      this.done++;
      log(`match ${m.matchId} ended: ${m.termination}, winners [${m.winnerSides.join(", ")}], ${m.faults.length} faults`);
      return this.matches > 0 && this.done >= this.matches;
    } else {
      this.pending = null; // HandStart, Event, HandEnd: only for onMessage
    }
    return false;
  }

  /**
   * Passes the messages that rode in a compact-mode DecisionRequest to `onMessage` as
   * messages of their own (numbered like the request), in the order they happened: the
   * ended hand's Events, its HandEnd, the new HandStart, then its Events. It removes them
   * from the request, so the bot sees exactly what it would have seen without compact
   * mode. (Clearing `pending`, as `handle` does for these messages, is left to the request
   * itself, which replaces it next.) Without folded messages it does nothing.
   */
  private unfold(sequence: string, req: DecisionRequest__Output): void {
    for (const event of req.endedHandEvents) this.bot.onMessage?.({ sequence, event, message: "event" });
    if (req.handEnd) this.bot.onMessage?.({ sequence, handEnd: req.handEnd, message: "handEnd" });
    if (req.handStart) this.bot.onMessage?.({ sequence, handStart: req.handStart, message: "handStart" });
    for (const event of req.events) this.bot.onMessage?.({ sequence, event, message: "event" });
    req.endedHandEvents = [];
    req.handEnd = null;
    req.handStart = null;
    req.events = [];
  }

  private async rejected(r: ActionRejected__Output): Promise<void> {
    log(`action ${r.actionId} for decision ${r.decisionId} rejected (${r.reason}, strike ${r.strikes} of limit ${r.strikesLimit}): ${r.message}`);
    const p = this.pending;
    if (!r.decisionOpen || !p || r.decisionId !== p.req.decisionId) return;
    const legal = p.req.legalActions.map((a) => a.id);
    let action = legal[0];
    if (p.answers.length === 1) {
      const again = await this.bot.decide(p.req);
      if (legal.includes(again) && !p.answers.includes(again)) action = again;
    }
    if (p.answers.includes(action)) {
      log(`giving up on decision ${r.decisionId}: every answer was rejected`);
      return;
    }
    this.send(p, action);
  }
}
