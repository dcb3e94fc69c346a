// The session loop against a scripted in-process server: Join, a dropped stream, Resume
// with the right token and sequence, the answer sent again, a rejection, MatchEnd.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { compactFromEnv, loadProto, run } from "../src/client.js";
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
    await run({ decide }, { server: `127.0.0.1:${port}`, token: "tok", name: "bob" });
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
