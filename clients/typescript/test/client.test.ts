// The session loop against a scripted in-process server: Join, a dropped stream, Resume
// with the right token and sequence, the answer sent again, a rejection, MatchEnd.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { compactFromEnv, GaigelError, loadProto, matchesFromEnv, run } from "../src/client.js";
import type { PlayRequest__Output } from "../src/generated/gaigel/v1/PlayRequest.js";
import type { PlayResponse, PlayResponse__Output } from "../src/generated/gaigel/v1/PlayResponse.js";

test("resumes after a dropped stream and answers a rejection", async () => {
  const got: PlayRequest__Output[][] = [];
  const decision: PlayResponse = { sequence: 2, decisionRequest: { decisionId: "d1", legalActions: [{ id: 3 }, { id: 7 }] } };
  const server = new grpc.Server();
  server.addService(loadProto().gaigel.v1.BotService.service, {
    Play: async (call: grpc.ServerDuplexStream<PlayRequest__Output, PlayResponse>) => {
      const requests = call[Symbol.asyncIterator]();
      const stream: PlayRequest__Output[] = [];
      got.push(stream);
      const recv = async () => {
        const req = (await requests.next()).value as PlayRequest__Output;
        stream.push(req);
        return req;
      };
      const hello = await recv();
      if (got.length === 1) {
        assert.equal(hello.join?.botName, "bob");
        assert.equal(hello.join?.protocolVersion, 1);
        call.write({ sequence: 0, welcome: { sessionId: "s" } });
        call.write({ sequence: 1, matchStart: { matchId: "m", seat: 2, resumeToken: "rt", clock: { resumeGrace: { seconds: 5 } } } });
        call.write(decision);
        await recv(); // Leave: the only match
        await recv(); // the answer, "lost" with the stream
        call.emit("error", { code: grpc.status.UNAVAILABLE, details: "connection dropped" });
        return;
      }
      assert.deepEqual(
        [hello.resume?.matchId, hello.resume?.seat, hello.resume?.resumeToken, hello.resume?.lastSequence],
        ["m", 2, "rt", "2"],
      );
      call.write({ sequence: 0, welcome: { sessionId: "s", resumed: true } });
      call.write(decision); // resent: the bot must skip it
      const again = await recv();
      call.write({ sequence: 3, actionRejected: { decisionId: "d1", actionId: again.action?.actionId, decisionOpen: true } });
      await recv(); // the second answer
      call.write({ sequence: 4, matchEnd: { matchId: "m" } });
      call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  let calls = 0;
  const decide = () => (calls++, 7);
  delete process.env.GAIGEL_BOT_NAME;
  try {
    await run({ decide }, { server: `127.0.0.1:${port}`, token: "tok", name: "bob", matches: 1 });
  } finally {
    server.forceShutdown();
  }
  assert.equal(got.length, 2);
  const actions = got.flat().flatMap((r) => (r.action ? [r.action] : []));
  assert.ok(actions.every((a) => a.decisionId === "d1"));
  // The answer, the same answer after Resume, then (after the rejection) the first legal action.
  assert.deepEqual(actions.map((a) => a.actionId), [7, 7, 3]);
  assert.equal(calls, 1);
});

// Compact mode: a DecisionRequest carrying the ended hand's two Events and HandEnd, then the
// next hand's HandStart and two Events, must reach the bot as the same callbacks, in the
// same order, as those six messages sent on their own.
async function playOneDecision(folded: boolean, compact?: boolean, envCompact?: string) {
  let join: PlayRequest__Output["join"];
  const endedHandEvents = [{ cardDrawn: { seat: 2, talonSize: 4 } }, { trickWon: { trickIndex: 5, winnerSeat: 2 } }];
  const handEnd = { handIndex: 0, winnerSides: [0] };
  const handStart = { handIndex: 1, dealerSeat: 1, forehandSeat: 0 };
  const events = [{ handIndex: 1, openingDeclared: { seat: 1 } }, { handIndex: 1, cardPlayed: { seat: 1, faceDown: true } }];
  const request = { decisionId: "d1", legalActions: [{ id: 3 }, { id: 7 }] };
  const script: PlayResponse[] = folded
    ? [{ decisionRequest: { ...request, endedHandEvents, handEnd, handStart, events } }]
    : [...endedHandEvents.map((event) => ({ event })), { handEnd }, { handStart }, ...events.map((event) => ({ event })), { decisionRequest: request }];
  const server = new grpc.Server();
  server.addService(loadProto().gaigel.v1.BotService.service, {
    Play: async (call: grpc.ServerDuplexStream<PlayRequest__Output, PlayResponse>) => {
      const requests = call[Symbol.asyncIterator]();
      join = ((await requests.next()).value as PlayRequest__Output).join;
      call.write({ sequence: 0, welcome: { sessionId: "s" } });
      call.write({ sequence: 1, matchStart: { matchId: "m" } });
      script.forEach((msg, i) => call.write({ ...msg, sequence: 2 + i }));
      while (!((await requests.next()).value as PlayRequest__Output).action); // Leave, then the answer
      call.write({ sequence: 2 + script.length, matchEnd: { matchId: "m" } });
      call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const seen: unknown[] = [];
  const bot = {
    decide: () => (seen.push("decide"), 7),
    onMessage: (msg: PlayResponse__Output) => seen.push({ ...msg, sequence: undefined }),
  };
  delete process.env.GAIGEL_BOT_NAME;
  if (envCompact === undefined) delete process.env.GAIGEL_COMPACT;
  else process.env.GAIGEL_COMPACT = envCompact;
  try {
    await run(bot, { server: `127.0.0.1:${port}`, token: "tok", name: "bob", compact });
  } finally {
    server.forceShutdown();
    delete process.env.GAIGEL_COMPACT;
  }
  return { join, seen };
}

test("unfolds a compact DecisionRequest into the plain-mode callbacks, in order", async () => {
  const compact = await playOneDecision(true);
  const plain = await playOneDecision(false, false);
  assert.equal(compact.join?.compact, true);
  assert.equal(compact.join?.compactHandEnd, true);
  assert.equal(plain.join?.compact, false);
  assert.equal(plain.join?.compactHandEnd, false);
  const kinds = compact.seen.map((m) => (m === "decide" ? m : (m as PlayResponse__Output).event?.kind ?? (m as PlayResponse__Output).message));
  assert.deepEqual(kinds, [
    "welcome", "matchStart", "cardDrawn", "trickWon", "handEnd", "handStart", "openingDeclared", "cardPlayed", "decisionRequest", "decide", "matchEnd",
  ]);
  assert.deepEqual(compact.seen, plain.seen);
});

test("reads GAIGEL_COMPACT as the Python SDK does", () => {
  const cases: [string | undefined, boolean][] = [
    [undefined, true], ["", true], ["1", true], ["true", true], ["yes", true], ["on", true], ["maybe", true], ["2", true],
    ["0", false], ["false", false], ["no", false], ["off", false], ["FALSE", false], [" Off\n", false], ["No", false],
  ];
  for (const [value, want] of cases) {
    assert.equal(compactFromEnv(value === undefined ? {} : { GAIGEL_COMPACT: value }), want, `GAIGEL_COMPACT=${JSON.stringify(value)}`);
  }
});

test("GAIGEL_COMPACT=0 joins plain unless config.compact says otherwise", async () => {
  assert.equal((await playOneDecision(false, undefined, "0")).join?.compact, false);
  assert.equal((await playOneDecision(false, undefined, "1")).join?.compact, true);
  assert.equal((await playOneDecision(true, true, "0")).join?.compact, true); // config wins
  assert.equal((await playOneDecision(false, false, "1")).join?.compact, false);
});

// How many matches a bot plays: a scripted server offers `offered` matches on one stream (one
// decision each) and then, if the bot is still there, ends the stream with OK, as `gaigel try`
// and the arena do. It records what the bot sent (join, leave, action) and who ended the stream.
async function playMatches(offered: number, env: string | undefined, matches?: number) {
  const sent: string[] = [];
  let serverEnded = false;
  const server = new grpc.Server();
  server.addService(loadProto().gaigel.v1.BotService.service, {
    Play: async (call: grpc.ServerDuplexStream<PlayRequest__Output, PlayResponse>) => {
      const requests = call[Symbol.asyncIterator]();
      const gone = new Promise<undefined>((resolve) => call.on("cancelled", () => resolve(undefined)));
      const recv = async () => {
        const next = await Promise.race([requests.next(), gone]);
        const req = next?.done ? undefined : (next?.value as PlayRequest__Output | undefined);
        if (req) sent.push(req.message ?? "?");
        return req;
      };
      await recv(); // Join
      let seq = 0;
      call.write({ sequence: seq++, welcome: { sessionId: "s" } });
      for (let i = 1; i <= offered; i++) {
        call.write({ sequence: seq++, matchStart: { matchId: `m${i}` } });
        call.write({ sequence: seq++, decisionRequest: { decisionId: `d${i}`, legalActions: [{ id: 3 }] } });
        for (;;) {
          const req = await recv();
          if (!req) return; // the bot closed the stream
          if (req.action) break;
        }
        call.write({ sequence: seq++, matchEnd: { matchId: `m${i}` } });
      }
      // The bot may close the stream itself after the last MatchEnd; if it does not, the server ends it.
      const closed = await Promise.race([recv().then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 500))]);
      if (!closed) {
        serverEnded = true;
        call.end();
      }
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  let started = 0;
  delete process.env.GAIGEL_BOT_NAME;
  if (env === undefined) delete process.env.GAIGEL_MATCHES;
  else process.env.GAIGEL_MATCHES = env;
  try {
    await run({ decide: () => 3, startMatch: () => void started++ }, { server: `127.0.0.1:${port}`, token: "tok", name: "bob", matches });
  } finally {
    server.forceShutdown();
    delete process.env.GAIGEL_MATCHES;
  }
  return { sent, started, serverEnded };
}

test("by default plays every match of the session and returns when the server ends it with OK", { timeout: 20_000 }, async () => {
  for (const env of [undefined, "", "0"]) {
    const got = await playMatches(2, env);
    assert.deepEqual(got, { sent: ["join", "action", "action"], started: 2, serverEnded: true }, `GAIGEL_MATCHES=${JSON.stringify(env)}`);
  }
});

test("GAIGEL_MATCHES=N leaves after N matches, sending Leave when the last one starts", { timeout: 20_000 }, async () => {
  assert.deepEqual(await playMatches(3, "1"), { sent: ["join", "leave", "action"], started: 1, serverEnded: false });
  assert.deepEqual(await playMatches(3, "2"), { sent: ["join", "action", "leave", "action"], started: 2, serverEnded: false });
  // config.matches, when set, wins over GAIGEL_MATCHES.
  assert.deepEqual(await playMatches(3, "2", 1), { sent: ["join", "leave", "action"], started: 1, serverEnded: false });
  assert.deepEqual(await playMatches(2, "1", 0), { sent: ["join", "action", "action"], started: 2, serverEnded: true });
});

test("a GAIGEL_MATCHES that is not a non-negative integer is a configuration error", async () => {
  const cases: [string | undefined, number][] = [[undefined, 0], ["", 0], ["0", 0], ["1", 1], ["10", 10]];
  for (const [value, want] of cases) {
    assert.equal(matchesFromEnv(value === undefined ? {} : { GAIGEL_MATCHES: value }), want, `GAIGEL_MATCHES=${JSON.stringify(value)}`);
  }
  for (const value of ["abc", "-1", "1.5", "2x", " ", " 3", "1e3", "99999999999999999999"]) {
    const error = `GAIGEL_MATCHES must be a number, got ${JSON.stringify(value)}`;
    assert.throws(() => matchesFromEnv({ GAIGEL_MATCHES: value }), { name: "GaigelError", message: error });
    process.env.GAIGEL_MATCHES = value;
    try {
      // run reads it before it connects (nothing listens on port 1).
      await assert.rejects(run({ decide: () => 0 }, { server: "127.0.0.1:1", token: "tok", name: "bob", connectTimeoutMs: 100 }), { message: error });
    } finally {
      delete process.env.GAIGEL_MATCHES;
    }
  }
  await assert.rejects(run({ decide: () => 0 }, { server: "127.0.0.1:1", token: "tok", name: "bob", matches: -1, connectTimeoutMs: 100 }), /config.matches must be a non-negative integer, got -1/);
});

test("the example bot names a bad setting in one line and exits 1, without a stack trace", () => {
  const bot = fileURLToPath(new URL("../src/bot.js", import.meta.url));
  const env = { ...process.env, GAIGEL_SERVER: "127.0.0.1:1", GAIGEL_TOKEN: "tok", GAIGEL_MATCHES: "x" };
  const done = spawnSync(process.execPath, [bot], { env, encoding: "utf8", timeout: 30_000 });
  assert.equal(done.status, 1, done.stderr);
  assert.equal(done.stderr, 'gaigel: GAIGEL_MATCHES must be a number, got "x"\n');
  assert.ok(new GaigelError("m") instanceof Error);
});

// The kit used to take it for a lost stream and resume for ever (each Welcome restarted its grace).
test("an error thrown by decide ends the run with that error, not a reconnect", { timeout: 20_000 }, async () => {
  let streams = 0;
  const server = new grpc.Server();
  server.addService(loadProto().gaigel.v1.BotService.service, {
    Play: async (call: grpc.ServerDuplexStream<PlayRequest__Output, PlayResponse>) => {
      streams++;
      await call[Symbol.asyncIterator]().next(); // the Join
      call.write({ sequence: 0, welcome: { sessionId: "s" } });
      call.write({ sequence: 1, matchStart: { matchId: "m", seat: 0, resumeToken: "rt", clock: { resumeGrace: { seconds: 5 } } } });
      call.write({ sequence: 2, decisionRequest: { decisionId: "d1", legalActions: [{ id: 3 }] } });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const bug = new TypeError("a bug in decide");
  const started = Date.now();
  try {
    await assert.rejects(
      run({ decide: () => { throw bug; } }, { server: `127.0.0.1:${port}`, token: "tok", name: "bob" }),
      (e) => e === bug,
    );
  } finally {
    server.forceShutdown();
  }
  assert.equal(streams, 1); // no Resume was tried
  assert.ok(Date.now() - started < 4000, "it did not wait out the resume grace");
});
