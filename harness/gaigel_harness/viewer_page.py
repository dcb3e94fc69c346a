"""The viewer page's stylesheet and script (inline in every page, or shared by the arena report's
pages as ``viewer.css`` and ``viewer.js`` beside them: no network, no CDN).

Kept as strings in a module so they ship with the package without package-data rules.
The script reads the step data from ``<script id="match-data">`` and the step and seat
from the URL fragment (``#step=N&seat=S``, ``#step=end`` for the last), so a link or a headless browser can open any
step directly. A compact page (``build_view(..., compact=True)``) holds its steps packed and
gzipped; the script unpacks them and derives every seat's view before it draws (``READY``).
"""

from __future__ import annotations

CSS = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; background: #f4f1ea; }
header { padding: 0.6em 1.2em 0.2em; }
h1 { font-size: 1.25em; margin: 0.2em 0; }
h2 { font-size: 1em; margin: 0 0 0.4em; color: #444; }
#summary { margin: 0.2em 0 0.4em; color: #444; font-size: 0.92em; }
nav { display: flex; flex-wrap: wrap; gap: 0.35em; align-items: center; padding: 0.5em 1.2em;
      background: #e8e2d4; border-top: 1px solid #d6cfbd; border-bottom: 1px solid #d6cfbd; }
nav button { font: inherit; padding: 0.2em 0.6em; cursor: pointer; }
#slider { flex: 1 1 10em; min-width: 8em; }
#position { font-variant-numeric: tabular-nums; color: #333; margin-left: 0.4em; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 22em; gap: 1em; padding: 1em 1.2em; }
aside section { background: #fff; border: 1px solid #d6cfbd; border-radius: 6px; padding: 0.6em 0.8em;
                margin-bottom: 0.8em; font-size: 0.92em; }
#table { background: #2f6b45; border-radius: 10px; padding: 0.8em; color: #f5f5f5; }
.seat { background: rgba(0, 0, 0, 0.16); border-radius: 8px; padding: 0.4em 0.6em; margin-bottom: 0.6em;
        border: 2px solid transparent; }
.seat.to-act { border-color: #ffd54f; }
.seat.viewer { background: rgba(255, 255, 255, 0.12); }
.seat-head { font-size: 0.9em; margin-bottom: 0.3em; }
.seat-head .tag { display: inline-block; background: #f5f5f5; color: #2f6b45; border-radius: 3px;
                  padding: 0 0.35em; margin-left: 0.3em; font-size: 0.85em; font-weight: 600; }
.seat-head .tag.act { background: #ffd54f; color: #222; }
.hand { display: flex; flex-wrap: wrap; gap: 0.25em; min-height: 3.6em; }
#center { display: flex; flex-wrap: wrap; gap: 1.4em; align-items: flex-start; background: rgba(0, 0, 0, 0.22);
          border-radius: 8px; padding: 0.6em; margin-bottom: 0.6em; }
#center .label { font-size: 0.8em; margin-bottom: 0.2em; color: #dfe; }
.trick-cards { display: flex; gap: 0.5em; }
.played { text-align: center; font-size: 0.75em; }
.card { display: inline-flex; flex-direction: column; justify-content: space-between; box-sizing: border-box;
        width: 2.6em; height: 3.6em; border-radius: 5px; background: #fff; border: 1px solid #999;
        padding: 0.15em 0.25em; font-weight: 700; line-height: 1; box-shadow: 0 1px 2px rgba(0,0,0,.35);
        position: relative; }
.card .rank { font-size: 1.05em; }
.card .pip { font-size: 1.45em; align-self: flex-end; }
.card .code { font-size: 0.55em; font-weight: 400; color: #333; align-self: center; }
.card.small { width: 2em; height: 2.8em; font-size: 0.8em; }
.suit-E { color: #7a4a12; } .suit-B { color: #2e7d32; } .suit-H { color: #c62828; } .suit-S { color: #d48800; }
.card.back { background: repeating-linear-gradient(45deg, #24518f 0 4px, #3566ad 4px 8px); border-color: #163560; }
.card.down { outline: 2px dashed #ffd54f; outline-offset: 1px; }
.played .note { color: #ffd54f; }
.step-fault { background: #fde0dc; border-left: 4px solid #d32f2f; padding: 0.2em 0.4em; margin: 0.3em 0; }
.inline-cards { display: inline-flex; gap: 0.2em; align-items: center; vertical-align: middle; }
#event-list li { margin-bottom: 0.3em; }
.talon-list { display: flex; flex-wrap: wrap; gap: 0.15em; max-width: 26em; }
.muted { color: #777; }
#table .muted { color: #cfe3d6; }
table.scores { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
table.scores th, table.scores td { white-space: nowrap; border-bottom: 1px solid #e3ddd0; padding: 0.15em 0.25em; text-align: right; }
table.scores th:first-child, table.scores td:first-child { text-align: left; }
.changed { background: #fff3b0; }
ul.legal { list-style: none; padding: 0; margin: 0.3em 0 0; display: flex; flex-wrap: wrap; gap: 0.25em; }
ul.legal li { border: 1px solid #ccc; border-radius: 3px; padding: 0 0.3em; font-size: 0.85em; background: #fafafa; }
ul.legal li.chosen { background: #2f6b45; color: #fff; border-color: #2f6b45; }
.flag { background: #fde0dc; color: #a01818; border-radius: 3px; padding: 0 0.3em; font-size: 0.85em; }
#faults { padding-left: 1.4em; margin: 0; }
#faults li { margin-bottom: 0.35em; }
#faults li.current { background: #fde0dc; outline: 2px solid #d32f2f; border-radius: 3px; }
code.reason { background: #d32f2f; color: #fff; padding: 0 0.3em; border-radius: 3px; font-size: 0.9em; }
.outcome { background: #fff3b0; border-radius: 4px; padding: 0.3em 0.5em; color: #222; }
"""

JS = r"""
"use strict";
const DATA = JSON.parse(document.getElementById("match-data").textContent);
let STEPS = null;  // set by start(): a compact page's steps are gzipped (packed_gz) and unpacked first

// A packed step holds what changed since the step before ("~": the keys gone); see pack_steps.
function unpack(packed) {
  const out = [];
  let prev = {views: {}};
  for (const d of packed.steps) {
    const step = Object.assign({}, prev, d);
    for (const k of d["~"] || []) delete step[k];
    delete step["~"];
    step.views = {};
    for (const key of Object.keys(d.views)) {
      const delta = d.views[key], before = prev.views[key] || {};
      const view = Object.assign({}, before, delta);
      for (const k of delta["~"] || []) delete view[k];
      delete view["~"];
      if (typeof delta.talon === "number") view.talon = before.talon.slice(delta.talon);
      if (delta.hands && !Array.isArray(delta.hands)) {
        view.hands = before.hands.map((hand, s) => delta.hands[String(s)] || hand);
      }
      if (delta.decision) {
        const d = delta.decision;
        view.decision = Object.assign({}, d, {label: packed.labels[d.label], flags: d.flags || [],
                                              legal: d.legal === null ? null : d.legal.map(i => packed.labels[i])});
      }
      step.views[key] = view;
    }
    out.push(step);
    prev = step;
  }
  return out;
}

// A compact page holds the omniscient view only: each seat's view is what the viewer's
// _seat_view builds, from it, the publicly known cards and who missed a face-down card.
function seatView(step, all, seat) {
  const view = Object.assign({}, all);
  view.hands = all.hands.map((hand, s) => s === seat ? hand
    : step.known[s].concat(new Array(hand.length - step.known[s].length).fill(null)));
  view.trick = all.trick.map(t => ({seat: t.seat, card: t.down && t.seat !== seat ? null : t.card, down: t.down}));
  view.talon = null;
  view.scores = DATA.expose_scores ? all.scores : null;
  if (all.decision) {
    const d = all.decision, mine = d.seat === seat;
    const hidden = !mine && (d.hidden_from || []).includes(seat);
    view.decision = {seat: d.seat, label: hidden ? "play (a face-down card)" : d.label, ms: d.ms, flags: d.flags,
                     legal: mine ? d.legal : null};
  }
  return view;
}

function deriveViews(steps) {
  for (const step of steps) {
    for (let s = 0; s < DATA.players; s++) step.views[String(s)] = seatView(step, step.views.all, s);
  }
  return steps;
}
const SUITS = {E: ["\u2663", "Eichel"], B: ["\u2660", "Blatt"], H: ["\u2665", "Herz"], S: ["\u2666", "Schellen"]};
const RANKS = {A: "A", T: "10", K: "K", O: "O", U: "U", "7": "7"};
let cur = 0;
let viewKey = DATA.views[0];

// base64 of gzipped JSON (the arena report's pages: a tenth of the size) to the value
async function gunzipJSON(b64) {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

// Without packed_gz this runs at once, to setup(), before any later script of the page.
async function start() {
  const packed = DATA.packed_gz ? await gunzipJSON(DATA.packed_gz) : DATA.packed;
  STEPS = packed ? deriveViews(unpack(packed)) : DATA.steps;
  setup();
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function card(code, extra) {
  if (!code) return el("span", {class: "card back " + (extra || ""), "data-card": "", title: "hidden card"});
  const [pip, suitName] = SUITS[code[0]];
  return el("span", {class: "card suit-" + code[0] + " " + (extra || ""), "data-card": code,
                     title: suitName + " " + RANKS[code[1]] + " (" + code + ")"},
            el("span", {class: "rank"}, RANKS[code[1]]), el("span", {class: "pip"}, pip),
            el("span", {class: "code"}, code));
}

function seatName(s) {
  const seat = DATA.seats[s];
  return "seat " + s + " (" + seat.bot + ")";
}

function sideOf(s) { return DATA.seats[s].side; }

function parseHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const step = params.get("step") === "end" ? STEPS.length - 1 : parseInt(params.get("step") || "0", 10);
  cur = Math.max(0, Math.min(STEPS.length - 1, isNaN(step) ? 0 : step));
  const seat = params.get("seat");
  viewKey = seat !== null && DATA.views.includes(seat) ? seat : DATA.views[0];
}

function go(step) {
  cur = Math.max(0, Math.min(STEPS.length - 1, step));
  history.replaceState(null, "", "#step=" + cur + "&seat=" + viewKey);
  render();
}

function trickStart(n) {
  const s = STEPS[n];
  while (n > 0 && STEPS[n - 1].hand === s.hand && STEPS[n - 1].trick_no === s.trick_no) n--;
  return n;
}

function nextTrick() {
  const s = STEPS[cur];
  let n = cur;
  while (n < STEPS.length - 1 && STEPS[n].hand === s.hand && STEPS[n].trick_no === s.trick_no) n++;
  go(n);
}

function prevTrick() {
  const start = trickStart(cur);
  go(start < cur ? start : trickStart(Math.max(0, cur - 1)));
}

function handStart(n) {
  while (n > 0 && STEPS[n - 1].hand === STEPS[n].hand) n--;
  return n;
}

function nextHand() {
  let n = cur;
  while (n < STEPS.length - 1 && STEPS[n].hand === STEPS[cur].hand) n++;
  go(n);
}

function prevHand() {
  const start = handStart(cur);
  go(start < cur ? start : handStart(Math.max(0, cur - 1)));
}

function renderSummary() {
  const bots = DATA.seats.map(s => "seat " + s.seat + ": " + s.bot + (s.version ? " " + s.version : "") +
                                    " (side " + s.side + ")").join(", ");
  const r = DATA.result;
  let result = "unfinished";
  if (r) result = r.termination + ", winners: side " + r.winners.join(", ") + "; dashes " +
                  r.sides.map(x => x.dashes).join(":");
  document.getElementById("summary").textContent =
      bots + " \u00b7 seed " + DATA.seed + " \u00b7 " + result + " \u00b7 " + DATA.faults.length + " fault(s)";
}

function renderSeat(s, step, view) {
  const tags = [];
  if (s === step.dealer) tags.push(el("span", {class: "tag", title: "dealer"}, "dealer"));
  if (s === step.forehand) tags.push(el("span", {class: "tag", title: "forehand"}, "forehand"));
  if (view.to_act === s) tags.push(el("span", {class: "tag act"}, "to act"));
  const cards = view.hands[s];
  const hand = el("div", {class: "hand"}, cards.map(c => card(c)));
  if (!cards.length) hand.append(el("span", {class: "muted"}, "no cards"));
  const cls = "seat" + (view.to_act === s ? " to-act" : "") + (String(s) === viewKey ? " viewer" : "");
  return el("div", {class: cls, id: "seat-" + s, "data-seat": s, "data-cards": cards.length},
            el("div", {class: "seat-head"}, el("b", {}, seatName(s)), " side " + sideOf(s), tags), hand);
}

function renderCenter(step, view) {
  // the face-up card is the trump card until someone robs it for the trump seven
  const trump = el("div", {id: "trump", "data-trump": view.trump}, el("div", {class: "label"},
      "trump " + SUITS[view.trump[0]][1] + (view.face_up ? " (face up)" : " (drawn)")),
      card(view.face_up || view.trump, view.face_up ? "" : "small"));
  const talon = el("div", {id: "talon", "data-size": view.talon_size},
      el("div", {class: "label"}, "talon: " + view.talon_size + " card(s)" + (view.talon ? ", in drawing order" : "")));
  if (view.talon) talon.append(el("div", {class: "talon-list"}, view.talon.map(c => card(c, "small"))));
  else if (view.talon_size) talon.append(card(null, "small"));
  const trick = el("div", {id: "trick"});
  if (view.trick.length) {
    trick.append(el("div", {class: "label"}, "trick " + step.trick_no + ", led by seat " + view.leader));
    trick.append(el("div", {class: "trick-cards"}, view.trick.map(t =>
        el("div", {class: "played", "data-seat": t.seat}, card(t.card, t.down ? "down" : ""), el("div", {}, "seat " + t.seat),
           t.down ? el("div", {class: "note"}, "face down") : null))));
  } else if (view.last_trick) {
    const lt = view.last_trick;
    trick.append(el("div", {class: "label"}, "trick " + lt.index + " won by seat " + lt.winner));
    trick.append(el("div", {class: "trick-cards", id: "last-trick"}, lt.cards.map((c, i) =>
        el("div", {class: "played"}, card(c), el("div", {}, "seat " + ((lt.leader + i) % DATA.players))))));
  } else {
    trick.append(el("div", {class: "label"}, "no trick yet"));
  }
  const center = el("div", {id: "center"}, trump, talon, trick);
  if (step.outcome) center.append(el("div", {class: "outcome", id: "outcome"},
      "hand over: " + step.outcome.termination + "; winners side " + (step.outcome.winners.join(", ") || "none") +
      "; points " + step.outcome.points.join(":") + "; dashes " + step.outcome.dashes.join(":")));
  return center;
}

function renderScores(step, view) {
  const prev = cur > 0 && STEPS[cur - 1].hand === step.hand ? STEPS[cur - 1].views[viewKey] : null;
  const rows = [el("tr", {}, el("th", {}, "side"), el("th", {}, "points"), el("th", {}, "tricks"),
                     el("th", {}, "dashes"), el("th", {title: "hands won"}, "won"))];
  DATA.sides.forEach((seats, x) => {
    const sc = view.scores ? view.scores[x] : null;
    const changed = sc && prev && prev.scores && prev.scores[x].total !== sc.total;
    const points = sc ? sc.total + " (" + sc.cards + "+" + sc.melds + ")" : "hidden";
    rows.push(el("tr", {"data-side": x}, el("td", {title: "seats " + seats.join(", ")}, String(x)),
        el("td", {class: changed ? "changed" : null}, points), el("td", {}, view.tricks_won[x]),
        el("td", {}, step.dashes[x]), el("td", {}, step.hands_won[x])));
  });
  const box = document.getElementById("scores");
  box.replaceChildren(el("table", {class: "scores"}, rows));
  if (!view.scores) box.append(el("p", {class: "muted"}, "Points are not shown to bots under this ruleset."));
}

function stepFaults(step) {
  return (step.faults || []).map(i => DATA.faults[i]).map(f =>
      el("div", {class: "step-fault"}, el("code", {class: "reason"}, f.reason), " " + seatName(f.seat) + ": " + f.message));
}

function renderDecision(step, view) {
  const box = document.getElementById("decision");
  const d = view.decision;
  if (!d) {
    box.replaceChildren(el("p", {}, step.outcome ? "The hand is over." : "No decision recorded (hand cut short)."),
                        ...stepFaults(step));
    return;
  }
  const parts = [...stepFaults(step), el("p", {}, el("b", {}, seatName(d.seat)), " chose ", el("b", {id: "chosen"}, d.label),
                            d.ms === null || d.ms === undefined ? "" : " in " + d.ms + " ms")];
  if (d.flags.length) parts.push(el("p", {}, d.flags.map(f => el("span", {class: "flag"}, f))));
  if (d.legal) {
    parts.push(el("div", {}, d.legal.length + " legal action(s):"));
    parts.push(el("ul", {class: "legal", id: "legal"}, d.legal.map(l =>
        el("li", {class: l === d.label ? "chosen" : null}, l))));
  } else {
    parts.push(el("p", {class: "muted"}, "Another seat's legal actions are not shown in this view."));
  }
  box.replaceChildren(...parts);
}

function renderEvents(view) {
  const items = [];
  if (view.opening) items.push(el("li", {}, "opening: " + view.opening));
  if (view.robbed) items.push(el("li", {id: "robbed"}, seatName(view.robbed.seat) + " robbed: ",
      el("span", {class: "inline-cards"}, "gave ", card(view.robbed.cards[0], "small"), " for ",
         card(view.robbed.cards[1], "small"))));
  if (view.rob_reserved !== null) items.push(el("li", {}, seatName(view.rob_reserved) + " reserved the rob"));
  for (const [i, m] of view.melds.entries()) {
    items.push(el("li", {class: "meld", id: "meld-" + i}, seatName(m.seat) + (m.double ? " double marriage " : " marriage ") +
                  SUITS[m.suit][1] + " +" + m.points + " ",
                  el("span", {class: "inline-cards"}, m.cards.map(c => card(c, "small")))));
  }
  const box = document.getElementById("events");
  box.replaceChildren(items.length ? el("ul", {id: "event-list"}, items) : el("p", {class: "muted"}, "none yet"));
}

function renderFaults(step) {
  const here = new Set(step.faults || []);
  const list = document.getElementById("faults");
  list.replaceChildren(...DATA.faults.map((f, i) => {
    const where = f.hand === null || f.hand === undefined ? "between hands" :
        "hand " + f.hand + (f.step === null || f.step === undefined ? "" : " step " + f.step);
    const link = el("a", {href: "#step=" + f.at + "&seat=" + viewKey}, where);
    return el("li", {class: "fault" + (here.has(i) ? " current" : ""), "data-at": f.at, "data-reason": f.reason},
              el("code", {class: "reason"}, f.reason), " " + seatName(f.seat) + ", ", link, ": " + f.message);
  }));
  list.hidden = !DATA.faults.length;
  document.getElementById("no-faults").hidden = DATA.faults.length > 0;
}

function render() {
  const step = STEPS[cur];
  const view = step.views[viewKey];
  const table = document.getElementById("table");
  table.setAttribute("data-step", cur);
  table.setAttribute("data-view", viewKey);
  const seats = [];
  for (let s = 0; s < DATA.players; s++) seats.push(renderSeat(s, step, view));
  table.replaceChildren(renderCenter(step, view), ...seats);
  renderScores(step, view);
  renderDecision(step, view);
  renderEvents(view);
  renderFaults(step);
  // hand, step and trick as the record, gaigel try and the protocol's trick_index number them (from 0)
  // a hand cut short ends at the decision that was never answered: name that step
  const where = step.i < step.n ? "hand " + step.hand + " step " + step.i + " of " + step.n
      : step.outcome ? "hand " + step.hand + " over (" + step.n + " steps)"
      : "hand " + step.hand + " step " + step.n + " (cut short: no answer recorded)";
  document.getElementById("position").textContent =
      where + " \u00b7 trick " + step.trick_no + " \u00b7 page step " + cur + "/" + (STEPS.length - 1);
  const slider = document.getElementById("slider");
  slider.max = STEPS.length - 1;
  slider.value = cur;
  document.getElementById("seat-filter").value = viewKey;
}

function setup() {
  const select = document.getElementById("seat-filter");
  for (const key of DATA.views) {
    const label = key === "all" ? "everything (all hands)" : "what " + seatName(Number(key)) + " knew";
    select.append(el("option", {value: key}, label));
  }
  select.disabled = DATA.views.length < 2;
  select.addEventListener("change", () => { viewKey = select.value; go(cur); });
  const actions = {first: () => go(0), last: () => go(STEPS.length - 1), prev: () => go(cur - 1),
                   next: () => go(cur + 1), "prev-trick": prevTrick, "next-trick": nextTrick,
                   "prev-hand": prevHand, "next-hand": nextHand};
  for (const [id, fn] of Object.entries(actions)) document.getElementById(id).addEventListener("click", fn);
  document.getElementById("slider").addEventListener("input", e => go(Number(e.target.value)));
  const keys = {ArrowRight: actions.next, ArrowLeft: actions.prev, ArrowDown: nextTrick, ArrowUp: prevTrick,
                PageDown: nextHand, PageUp: prevHand, Home: actions.first, End: actions.last};
  document.addEventListener("keydown", e => {
    if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT" || !keys[e.key]) return;
    e.preventDefault();
    keys[e.key]();
  });
  window.addEventListener("hashchange", () => { parseHash(); render(); });
  renderSummary();
  parseHash();
  render();
}

const READY = start();  // resolves once the page is drawn
"""
