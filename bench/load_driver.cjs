// The client side of bench/load.py: K idle Socket.IO clients and S streaming ones, from one Node process.
//
// Python holds a few hundred sockets per process at best; Node holds thousands. Run by bench/load.py, which
// passes one JSON config as the only argument and reads one JSON result line ("RESULT {...}") from stdout.
// Progress goes to stderr. Uses the UI's own socket.io-client (frontend/node_modules).
"use strict";

const fs = require("fs");
const path = require("path");

const ROOT = path.resolve(__dirname, "..");
const { io } = require(path.join(ROOT, "frontend", "node_modules", "socket.io-client"));

const cfg = JSON.parse(process.argv[2]);
const log = (...a) => process.stderr.write(`[driver ${((Date.now() - START) / 1000).toFixed(1)}s] ${a.join(" ")}\n`);
const START = Date.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

// The summed RSS of the server's processes (one, or several behind a balancer).
function rssKb() {
  let total = 0;
  for (const pid of cfg.serverPids) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
      if (!m) return null;
      total += Number(m[1]);
    } catch {
      return null;
    }
  }
  return total;
}

function connect() {
  return new Promise((resolve) => {
    const s = io(cfg.url, { transports: ["websocket"], reconnection: false, timeout: cfg.connectTimeoutMs,
                            forceNew: true });
    const done = (ok) => { s.off("connect"); s.off("connect_error"); resolve({ s, ok }); };
    s.once("connect", () => done(true));
    s.once("connect_error", () => done(false));
  });
}

async function inBatches(n, batch, fn) {
  const out = [];
  for (let i = 0; i < n; i += batch) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(batch, n - i) }, (_, j) => fn(i + j)))));
  }
  return out;
}

async function rest(method, p, body) {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(cfg.url + p, { method, headers: { "Content-Type": "application/json" },
                                             body: body === undefined ? undefined : JSON.stringify(body) });
      const json = await res.json();
      if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    } catch (e) {
      if (attempt >= 4) throw e;
      await sleep(200 * (attempt + 1));
    }
  }
}

const emitAck = (s, ev, data, ms) => new Promise((resolve) => {
  s.timeout(ms).emit(ev, data, (err, ack) => resolve(err ? { success: false, error: String(err) } : ack));
});

// One streaming client: its own conversation and socket, every task event it receives, with times.
async function prepareStream(i) {
  const c = { i, ok: false, events: new Map(), done: null, firstChunk: null, error: null };
  try {
    const conv = await rest("POST", "/api/conversations", { title: `load ${i}` });
    c.conversationId = conv.conversation_id;
    const { s, ok } = await connect();
    c.socket = s;
    if (!ok) throw new Error("connect failed");
    s.onAny((type, data) => {
      if (!data || typeof data !== "object" || data.task_id === undefined || data.idx === undefined) return;
      if (c.taskId === undefined && type === "ai_message_start") c.taskId = data.task_id;
      const t = now();
      let evs = c.events.get(data.task_id);
      if (!evs) c.events.set(data.task_id, (evs = []));
      evs.push({ idx: data.idx, type, t, content: data.content });
      if (type === "text_chunk" && c.firstChunk === null && data.task_id === c.taskId) c.firstChunk = t;
      if (data.task_id === c.taskId && ["task_complete", "task_stopped", "error"].includes(type)) {
        if (type === "task_complete") c.done = t;
        else c.error = c.error || `${type}: ${JSON.stringify(data).slice(0, 200)}`;
        if (c.resolve) c.resolve();
      }
    });
    const joined = await emitAck(s, "join_conversation", { conversation_id: c.conversationId }, cfg.ackTimeoutMs);
    if (!joined || joined.success === false) throw new Error(`join: ${JSON.stringify(joined)}`);
    c.ok = true;
  } catch (e) {
    c.error = String(e);
  }
  return c;
}

async function runStream(c) {
  if (!c.ok) return;
  const finished = new Promise((resolve) => { c.resolve = resolve; });
  c.t0 = now();
  const ack = await emitAck(c.socket, "send_message", { conversation_id: c.conversationId, message: cfg.message },
                            cfg.ackTimeoutMs);
  if (!ack || ack.success === false) { c.error = `send: ${JSON.stringify(ack)}`; return; }
  c.ackAt = now();
  await Promise.race([finished, sleep(cfg.streamTimeoutMs)]);
  if (c.done === null) c.error = c.error || "no task_complete in time";
}

// Every received event of the streamed task against its durable log (`?from=0`), up to task_complete.
async function verify(c) {
  c.lost = 0; c.extra = 0; c.logEvents = 0; c.chunkRows = 0; c.text = ""; c.logText = "";
  if (c.taskId === undefined) return;
  const log = [];
  for (let from = 0; ; ) {
    const page = await rest("GET", `/api/tasks/${c.taskId}?from=${from}`);
    log.push(...page.events);
    if (!page.events.length || page.next_offset === from) break;
    from = page.next_offset;
  }
  const got = c.events.get(c.taskId) || [];
  const end = got.find((e) => ["task_complete", "task_stopped", "error"].includes(e.type));
  const last = end ? end.idx : Math.max(-1, ...got.map((e) => e.idx));
  const byIdx = new Map(got.map((e) => [e.idx, e]));
  for (const e of log) {
    if (e.idx > last) continue;
    c.logEvents++;
    if (e.type === "text_chunk") { c.chunkRows++; c.logText += e.data.content; }
    const mine = byIdx.get(e.idx);
    if (!mine || mine.type !== e.type) c.lost++;
  }
  for (const e of got) {
    if (e.idx <= last && e.type === "text_chunk") c.text += e.content;
  }
  const idxs = got.map((e) => e.idx);
  c.outOfOrder = idxs.some((v, k) => k > 0 && v <= idxs[k - 1]);
  c.extra = got.filter((e) => e.idx <= last && !log.some((l) => l.idx === e.idx)).length;
}

async function wave(n, label) {
  const clients = await inBatches(n, cfg.batch, prepareStream);
  log(`${label}: ${clients.filter((c) => c.ok).length}/${n} streaming clients joined; sending`);
  const t0 = now();
  const sendWallMs = Date.now();
  let peak = rssKb();
  const sampler = setInterval(() => { const r = rssKb(); if (r && r > peak) peak = r; }, 250);
  await Promise.all(clients.map(runStream));
  clearInterval(sampler);
  const wall = (now() - t0) / 1000;
  log(`${label}: streams ended in ${wall.toFixed(1)} s; verifying against the durable logs`);
  await inBatches(clients.length, 50, (k) => verify(clients[k]));
  const r = {
    streams: n, joined: clients.filter((c) => c.ok).length, completed: clients.filter((c) => c.done !== null).length,
    lost: clients.reduce((a, c) => a + c.lost + c.extra, 0),
    outOfOrder: clients.filter((c) => c.outOfOrder).length,
    textMismatch: clients.filter((c) => c.done !== null && c.text !== c.logText).length,
    events: clients.reduce((a, c) => a + [...c.events.values()].reduce((b, evs) => b + evs.length, 0), 0),
    logEvents: clients.reduce((a, c) => a + c.logEvents, 0),
    chunkRows: clients.reduce((a, c) => a + c.chunkRows, 0),
    firstChunkS: clients.filter((c) => c.firstChunk !== null).map((c) => (c.firstChunk - c.t0) / 1000),
    completionS: clients.filter((c) => c.done !== null).map((c) => (c.done - c.t0) / 1000),
    ackS: clients.filter((c) => c.ackAt).map((c) => (c.ackAt - c.t0) / 1000),
    errors: [...new Set(clients.filter((c) => c.error).map((c) => c.error))].slice(0, 5),
    wallS: wall, peakRssKb: peak, sendWallMs,
  };
  for (const c of clients) if (c.socket) c.socket.disconnect();
  return r;
}

async function main() {
  const out = { rssBaseKb: rssKb() };
  const idle = await inBatches(cfg.idle, cfg.batch, () => connect());
  out.idleConnected = idle.filter((x) => x.ok).length;
  await sleep(500);
  out.rssIdleKb = rssKb();
  log(`idle: ${out.idleConnected}/${cfg.idle} connected; server RSS ${out.rssIdleKb} kB`);
  if (cfg.soakS > 0) {
    out.waves = [];
    const until = now() + cfg.soakS * 1000;
    for (let k = 1; now() < until; k++) {
      const w = await wave(cfg.streams, `wave ${k}`);
      w.rssAfterKb = rssKb();
      w.atS = (Date.now() - START) / 1000;
      log(`wave ${k}: ${w.completed}/${w.streams} completed, ${w.lost} lost, server RSS ${w.rssAfterKb} kB`);
      delete w.firstChunkS; delete w.ackS;
      out.waves.push(w);
    }
  } else {
    out.run = await wave(cfg.streams, "streams");
  }
  out.idleStillConnected = idle.filter((x) => x.ok && x.s.connected).length;
  out.rssEndKb = rssKb();
  for (const x of idle) x.s.disconnect();
  // Exit only once the (long) line is out: a pipe takes it in 64 kB pieces.
  process.stdout.write(`RESULT ${JSON.stringify(out)}\n`, () => process.exit(0));
}

main().catch((e) => { log(`failed: ${e.stack || e}`); process.exit(1); });
