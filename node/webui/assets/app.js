// nova-node web view: plain JavaScript, no build step, nothing loaded from
// elsewhere. One server-sent events stream (api/stream) brings a snapshot of
// the node whenever it changes, its events and a metrics sample per second;
// the forms call the node's actions (api/send, api/tasks, api/docs/NAME).
// Every request carries the local token, which the page reads from its URL's
// fragment (#token=...) and keeps in this tab's sessionStorage.
'use strict';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'nova-node-token';
const MAX_EVENTS = 2000;
const MAX_SAMPLES = 300;

let token = sessionStorage.getItem(TOKEN_KEY) || '';
{
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    token = decodeURIComponent(m[1]);
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, '', location.pathname + location.search); // the token leaves the address bar
  }
}

const state = { snap: null, events: [], samples: [], docSel: '', docClock: '' };

// ---- helpers

function short(id) {
  if (!id) return '';
  return id.length > 16 ? id.slice(0, 6) + '…' + id.slice(-6) : id;
}
// addr shortens an agent address's peer ID: sun@12D3Ko…YCtrFs.
function addr(a) {
  if (!a) return '';
  const i = a.indexOf('@');
  return i < 0 ? a : a.slice(0, i + 1) + short(a.slice(i + 1));
}
function tier(t) { return typeof t === 'number' ? 'L' + t : String(t ?? ''); }
function when(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? '' : d.toLocaleString();
}
function clockText(c) {
  if (!c) return '';
  let n = 0;
  for (const k in c) n += c[k];
  return String(n);
}
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function nodeName(host) {
  if (!host || (state.snap && host === state.snap.self.peerId)) return 'this node';
  return short(host);
}

// ---- virtualised list: only the rows in view (plus a few) exist in the DOM

class VList {
  // cols are the class names of a row's cells; fmt(item) returns
  // {cells: [...], key, cls}; onpick(item), if given, makes the list a
  // listbox whose row is chosen by click, Enter or Space.
  constructor(root, cols, fmt, empty, onpick) {
    this.root = root; this.cols = cols; this.fmt = fmt; this.onpick = onpick;
    this.items = []; this.rows = []; this.rh = 28; this.sel = -1; this.pending = false;
    this.spacer = el('div', 'spacer');
    this.empty = el('div', 'empty', empty);
    root.append(this.spacer, this.empty);
    root.addEventListener('scroll', () => this.schedule(), { passive: true });
    if (onpick) {
      root.addEventListener('click', (e) => {
        const row = e.target.closest('.vrow');
        if (row) this.pick(+row.dataset.index);
      });
      root.addEventListener('keydown', (e) => this.key(e));
    }
  }
  set(items) { this.items = items; this.schedule(); }
  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }
  draw() {
    const n = this.items.length;
    this.spacer.style.height = n * this.rh + 'px';
    this.empty.hidden = n > 0;
    const top = this.root.scrollTop, h = this.root.clientHeight || 240;
    const first = Math.max(0, Math.floor(top / this.rh) - 4);
    const last = Math.min(n, Math.ceil((top + h) / this.rh) + 4);
    let k = 0;
    for (let i = first; i < last; i++, k++) {
      let row = this.rows[k];
      if (!row) { row = this.row(); this.rows.push(row); }
      this.fill(row, this.items[i], i);
    }
    for (; k < this.rows.length; k++) this.rows[k].hidden = true;
  }
  row() {
    const r = el('div', 'vrow');
    r.setAttribute('role', this.onpick ? 'option' : 'listitem');
    for (const c of this.cols) r.append(el('span', c));
    this.root.append(r);
    return r;
  }
  fill(row, item, i) {
    const f = this.fmt(item);
    row.hidden = false;
    row.style.transform = 'translateY(' + i * this.rh + 'px)';
    row.className = 'vrow' + (f.cls ? ' ' + f.cls : '') + (i === this.sel ? ' sel' : '');
    row.dataset.index = i;
    row.dataset.key = f.key || '';
    if (this.onpick) row.setAttribute('aria-selected', i === this.sel ? 'true' : 'false');
    for (let j = 0; j < this.cols.length; j++) {
      const t = f.cells[j] == null ? '' : String(f.cells[j]);
      const s = row.children[j];
      if (s.textContent !== t) { s.textContent = t; s.title = t; }
    }
  }
  pick(i) {
    if (i < 0 || i >= this.items.length) return;
    this.sel = i;
    const top = i * this.rh, r = this.root;
    if (top < r.scrollTop) r.scrollTop = top;
    else if (top + this.rh > r.scrollTop + r.clientHeight) r.scrollTop = top + this.rh - r.clientHeight;
    this.schedule();
    this.onpick(this.items[i]);
  }
  key(e) {
    const n = this.items.length;
    if (!n) return;
    let i = this.sel;
    if (e.key === 'ArrowDown') i = Math.min(n - 1, i + 1);
    else if (e.key === 'ArrowUp') i = Math.max(0, i - 1);
    else if (e.key === 'Home') i = 0;
    else if (e.key === 'End') i = n - 1;
    else if (e.key === 'Enter' || e.key === ' ') i = Math.max(0, i);
    else return;
    e.preventDefault();
    this.pick(i);
  }
}

// ---- the lists

const peerList = new VList($('peers'), ['c-peer', 'c-path', 'c-lat', 'c-basis', 'c-agents'], (p) => ({
  key: p.peerId,
  cls: p.relayed ? 'relayed' : '',
  cells: [short(p.peerId), p.relayed ? 'relayed' : 'direct', p.latencyMs ? p.latencyMs.toFixed(1) + ' ms' : '—',
    p.basis || '', (state.byHost.get(p.peerId) || []).map((a) => a.name || a.address).join(', ')],
}), 'no peers connected');

const agentList = new VList($('agents'), ['c-agent', 'c-node', 'c-tier', 'c-sandbox', 'c-grant', 'c-caps'], (a) => {
  if (a.group !== undefined) return { key: 'node:' + a.group, cls: 'group', cells: [a.label] };
  let standing = a.basis || '';
  if (a.grant) standing += ' ' + a.grant;
  if (a.expires) standing += ' until ' + when(a.expires);
  const t = a.tier === a.claimedTier ? tier(a.tier) : tier(a.tier) + ' (claims ' + tier(a.claimedTier) + ')';
  return { key: a.address, cells: [a.address.split('@')[0], nodeName(a.host), t, a.sandbox || '—', standing, a.capabilities.join(', ')] };
}, 'no agents');

const channelList = new VList($('channels'), ['c-from', 'c-to', 'c-state', 'c-pending', 'c-seq'], (c) => ({
  key: c.id,
  cls: 'st-' + c.state,
  cells: [addr(c.from), addr(c.to), c.state, String(c.pending) + (c.stored ? ' (' + c.stored + ' stored)' : ''), String(c.nextSeq)],
}), 'no channels (one opens with the first message to a remote agent)');

const docList = new VList($('docs'), ['c-doc', 'c-num', 'c-num', 'c-num', 'c-clock'], (d) => ({
  key: d.name,
  cls: d.name === state.docSel ? 'sel' : '',
  cells: [d.name, d.paths, d.updates, d.peers, clockText(d.clock)],
}), 'no shared documents yet', (d) => {
  $('doc-name').value = d.name;
  $('doc-path').value = '';
  readDoc();
});

const eventList = new VList($('events'), ['c-time', 'c-type', 'c-who', 'c-code', 'c-detail'], (e) => ({
  key: e.envelopeId || '',
  cls: e.type === 'security' ? 'sec' : (e.type === 'error' || e.success === false && e.code) ? 'bad' : '',
  cells: [new Date(e.time).toLocaleTimeString(), e.type, who(e), e.code || '', e.detail || e.messageType || ''],
}), 'no events match');

function who(e) {
  if (e.sender || e.recipient) return addr(e.sender || '?') + ' → ' + addr(e.recipient || '?');
  return e.peer ? short(e.peer) : '';
}

// ---- snapshot

function render() {
  const s = state.snap;
  $('self').textContent = short(s.self.peerId);
  $('self').title = s.self.peerId;
  $('swarmname').textContent = s.self.swarm ? 'swarm ' + s.self.swarm : '';
  state.byHost = new Map();
  for (const a of s.agents) {
    const h = a.host || s.self.peerId;
    if (!state.byHost.has(h)) state.byHost.set(h, []);
    state.byHost.get(h).push(a);
  }
  $('peer-count').textContent = s.peers.length + (s.peers.length === 1 ? ' peer' : ' peers');
  peerList.set(s.peers);
  drawGraph(s);
  renderAgents();
  $('channel-count').textContent = String(s.channels.length);
  channelList.set(s.channels);
  renderSwarms(s.swarms);
  $('doc-count').textContent = String(s.docs.length);
  docList.set(s.docs);
  const sel = s.docs.find((d) => d.name === state.docSel);
  if (sel && JSON.stringify(sel.clock) !== state.docClock) readDoc(true);
  const names = $('agent-names');
  const want = s.agents.map((a) => a.address).join('\n');
  if (names.dataset.list !== want) {
    names.dataset.list = want;
    names.replaceChildren(...s.agents.slice(0, 500).map((a) => { const o = el('option'); o.value = a.address; return o; }));
  }
  const locals = $('local-names');
  const mine = s.agents.filter((a) => a.host === s.self.peerId || !a.host).map((a) => a.address.split('@')[0]);
  if (locals.dataset.list !== mine.join('\n')) {
    locals.dataset.list = mine.join('\n');
    locals.replaceChildren(...mine.map((n) => { const o = el('option'); o.value = n; return o; }));
  }
  const m = s.metrics;
  $('totals').textContent = 'sent ' + m.totalMessagesSent + ' · received ' + m.totalMessagesReceived +
    ' · errors ' + m.errorCount + ' · security ' + m.securityEvents + ' · avg latency ' + m.averageRoutingLatencyMs.toFixed(2) + ' ms';
}

function renderAgents() {
  const s = state.snap;
  if (!s) return;
  const q = $('agent-filter').value.trim().toLowerCase();
  const rows = [];
  let shown = 0;
  const hosts = [s.self.peerId, ...s.peers.map((p) => p.peerId)];
  for (const h of state.byHost.keys()) if (!hosts.includes(h)) hosts.push(h);
  for (const h of hosts) {
    const list = (state.byHost.get(h) || []).filter((a) => !q || (a.address + ' ' + a.name + ' ' + nodeName(a.host) + ' ' +
      tier(a.tier) + ' ' + (a.sandbox || '') + ' ' + a.basis + ' ' + a.capabilities.join(' ')).toLowerCase().includes(q));
    if (!list.length) continue;
    rows.push({ group: h, label: (h === s.self.peerId ? 'this node' : 'node ' + short(h)) + ' — ' + list.length + (list.length === 1 ? ' agent' : ' agents') });
    rows.push(...list);
    shown += list.length;
  }
  $('agent-count').textContent = q ? shown + ' of ' + s.agents.length : String(s.agents.length);
  agentList.set(rows);
}
$('agent-filter').addEventListener('input', renderAgents);

const SVG = 'http://www.w3.org/2000/svg';
let graphKey = '';
function drawGraph(s) {
  const key = s.self.peerId + '|' + s.peers.map((p) => p.peerId + (p.relayed ? 'r' : 'd') + Math.round(p.latencyMs)).join(',');
  if (key === graphKey) return;
  graphKey = key;
  const g = $('graph');
  const title = g.querySelector('title');
  g.replaceChildren(title);
  const n = s.peers.length, r = 100, labels = n <= 24;
  s.peers.forEach((p, i) => {
    const a = (2 * Math.PI * i) / Math.max(n, 1) - Math.PI / 2;
    const x = Math.cos(a) * r, y = Math.sin(a) * r;
    const line = document.createElementNS(SVG, 'line');
    line.setAttribute('x1', 0); line.setAttribute('y1', 0); line.setAttribute('x2', x); line.setAttribute('y2', y);
    if (p.relayed) line.setAttribute('class', 'relayed');
    g.append(line);
    const c = document.createElementNS(SVG, 'circle');
    c.setAttribute('cx', x); c.setAttribute('cy', y); c.setAttribute('r', n > 60 ? 3 : 6);
    const t = document.createElementNS(SVG, 'title');
    t.textContent = p.peerId + (p.relayed ? ' (relayed)' : ' (direct)') + (p.latencyMs ? ', ' + p.latencyMs.toFixed(1) + ' ms' : '');
    c.append(t);
    g.append(c);
    if (labels) {
      const tx = document.createElementNS(SVG, 'text');
      tx.setAttribute('x', x + (x >= 0 ? 8 : -8)); tx.setAttribute('y', y + 3);
      tx.setAttribute('text-anchor', x >= 0 ? 'start' : 'end');
      tx.textContent = p.peerId.slice(-6) + (p.latencyMs ? ' ' + p.latencyMs.toFixed(0) + 'ms' : '');
      g.append(tx);
    }
  });
  const self = document.createElementNS(SVG, 'circle');
  self.setAttribute('cx', 0); self.setAttribute('cy', 0); self.setAttribute('r', 9); self.setAttribute('class', 'self');
  const st = document.createElementNS(SVG, 'title');
  st.textContent = 'this node ' + s.self.peerId;
  self.append(st);
  g.append(self);
}

function renderSwarms(swarms) {
  $('swarm-count').textContent = String(swarms.length);
  const box = $('swarms');
  const key = JSON.stringify(swarms);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  if (!swarms.length) { box.replaceChildren(el('div', 'empty', 'no task swarms coordinated by this node')); return; }
  box.replaceChildren(...swarms.slice().reverse().map((sw) => {
    const d = el('div', 'swarm');
    d.setAttribute('role', 'listitem');
    const head = el('div');
    head.append(el('strong', '', sw.taskDescription), ' ', el('span', 'small', '(' + sw.status + ', ' + short(sw.id) + ')'));
    d.append(head);
    let prog = null;
    try { prog = sw.sharedState && sw.sharedState.progress; } catch (_) { /* not an object */ }
    if (prog && prog.total) {
      const p = el('progress');
      p.max = prog.total; p.value = prog.completed;
      p.setAttribute('aria-label', 'progress of ' + sw.taskDescription);
      d.append(p, ' ' + prog.completed + '/' + prog.total);
    }
    const recruits = sw.recruits || [];
    const accepted = recruits.filter((r) => r.status === 'accepted').length;
    d.append(el('div', 'small', 'recruits: ' + recruits.length + ' proposed, ' + accepted + ' accepted' +
      (recruits.some((r) => r.gone) ? ', some gone' : '')));
    const ul = el('ul');
    for (const t of sw.subTasks || []) {
      let text = t.description + ' — ' + t.status + (t.assignedAgent ? ' · ' + t.assignedAgent : '');
      if (t.attempts > 1) text += ' · reassigned ' + (t.attempts - 1) + '×';
      if (t.error) text += ' · ' + t.error;
      ul.append(el('li', t.status === 'failed' ? 'bad' : '', text));
    }
    d.append(ul);
    if (sw.error) d.append(el('div', 'result err', sw.error));
    return d;
  }));
}

// ---- events

let eventsDue = false;
function scheduleEvents() {
  if (eventsDue) return;
  eventsDue = true;
  requestAnimationFrame(() => { eventsDue = false; renderEvents(); });
}
const KINDS = {
  all: () => true,
  security: (e) => e.type === 'security',
  error: (e) => e.type === 'security' || e.type === 'error' || (e.success === false && !!e.code),
  message: (e) => e.type.startsWith('message') || e.type === 'routing-decision',
  peer: (e) => e.type.startsWith('peer') || e.type === 'cards-received' || e.type === 'channel',
};
function renderEvents() {
  const kind = KINDS[$('event-kind').value] || KINDS.all;
  const q = $('event-filter').value.trim().toLowerCase();
  const out = [];
  for (let i = state.events.length - 1; i >= 0; i--) {
    const e = state.events[i];
    if (!kind(e)) continue;
    if (q && !(e.type + ' ' + (e.sender || '') + ' ' + (e.recipient || '') + ' ' + (e.code || '') + ' ' + (e.detail || '') + ' ' + (e.peer || '')).toLowerCase().includes(q)) continue;
    out.push(e);
  }
  $('event-count').textContent = out.length === state.events.length ? String(out.length) : out.length + ' of ' + state.events.length;
  eventList.set(out);
}
$('event-kind').addEventListener('change', renderEvents);
$('event-filter').addEventListener('input', renderEvents);

// ---- charts

// chart draws each series (values one second apart, oldest first) as a
// line, the newest at the right edge, over at least a minute.
function chart(canvas, series, colors) {
  const ctx = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height;
  const span = Math.max(60, ...series.map((s) => s.length)) - 1;
  ctx.clearRect(0, 0, w, h);
  let max = 1;
  for (const s of series) for (const v of s) if (v > max) max = v;
  series.forEach((s, k) => {
    ctx.strokeStyle = colors[k];
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    s.forEach((v, i) => {
      const x = w - ((s.length - 1 - i) / span) * w;
      const y = h - 4 - (v / max) * (h - 14);
      if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    });
    ctx.stroke();
  });
  ctx.fillStyle = '#4f5863';
  ctx.font = '10px system-ui, sans-serif';
  ctx.fillText('max ' + (max < 10 ? max.toFixed(2) : Math.round(max)) + ' · ' + Math.round(span / 60) + ' min', 4, 10);
}
function drawCharts() {
  const s = state.samples;
  const rate = [], errs = [], sec = [], lat = [];
  for (let i = 1; i < s.length; i++) {
    const dt = Math.max((s[i].t - s[i - 1].t) / 1000, 0.001);
    rate.push(Math.max(0, (s[i].sent + s[i].received - s[i - 1].sent - s[i - 1].received) / dt));
    errs.push(Math.max(0, (s[i].errors - s[i - 1].errors) / dt));
    sec.push(Math.max(0, (s[i].security - s[i - 1].security) / dt));
    lat.push(s[i].latencyMs);
  }
  chart($('chart-rate'), [rate], ['#0b5cad']);
  chart($('chart-err'), [errs, sec], ['#8a5300', '#b3261e']);
  chart($('chart-lat'), [lat], ['#1a6e34']);
}

// ---- the stream

function setLive(on, text) {
  const b = $('live');
  b.className = 'badge ' + (on ? 'on' : 'off');
  b.textContent = text;
}

function onMessage(name, data) {
  switch (name) {
    case 'hello':
      state.events = data.events;
      state.samples = data.samples;
      renderEvents();
      drawCharts();
      break;
    case 'snapshot':
      state.snap = data;
      render();
      break;
    case 'events':
      state.events.push(...data);
      if (state.events.length > MAX_EVENTS) state.events.splice(0, state.events.length - MAX_EVENTS);
      scheduleEvents();
      break;
    case 'sample':
      state.samples.push(data);
      if (state.samples.length > MAX_SAMPLES) state.samples.splice(0, state.samples.length - MAX_SAMPLES);
      drawCharts();
      break;
  }
}

function needToken(why) {
  $('login').hidden = false;
  if (why) $('login-why').textContent = why;
  setLive(false, 'no token');
  $('login-token').focus();
}

async function stream() {
  let delay = 500;
  for (;;) {
    try {
      const res = await fetch('api/stream', { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' });
      if (res.status === 401) {
        needToken('The node refused the token (401). Run `nova-node open` for a fresh URL, or paste the token from the data dir.');
        return;
      }
      if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
      setLive(true, 'live');
      delay = 500;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let name = 'message', data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) name = line.slice(7);
            else if (line.startsWith('data: ')) data += (data ? '\n' : '') + line.slice(6);
          }
          if (data) onMessage(name, JSON.parse(data));
        }
      }
    } catch (_) {
      // the node went away or the connection broke: try again below
    }
    setLive(false, 'reconnecting…');
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

// ---- actions

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  });
  let json = null;
  try { json = await res.json(); } catch (_) { /* not JSON */ }
  if (res.status === 401) needToken('The node refused the token (401).');
  return { status: res.status, json };
}

function show(out, err, text) {
  out.className = 'result ' + (err ? 'err' : 'ok');
  out.dataset.code = err || '';
  out.textContent = text;
}
function showError(out, e) {
  const code = (e && e.code) || 'ERROR';
  show(out, code, code + ': ' + ((e && (e.message || e.error)) || 'the request failed'));
}

$('send-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const out = $('send-result');
  let payload;
  try { payload = JSON.parse($('send-payload').value || 'null'); } catch (e) {
    show(out, 'INVALID_PAYLOAD', 'INVALID_PAYLOAD: the payload is not JSON (' + e.message + ')');
    return;
  }
  show(out, '', 'sending…');
  try {
    const r = await api('POST', 'api/send', {
      from: $('send-from').value.trim() || undefined, to: $('send-to').value.trim(), type: $('send-type').value, payload,
      capability: $('send-cap').checked, escalationJustification: $('send-just').value.trim() || undefined,
    });
    const res = r.json || {};
    if (res.error || r.status >= 300) { showError(out, res.error || res); return; }
    let text = 'delivered to ' + addr(res.result.targetAgentId || $('send-to').value) + ' (' + res.result.path + ', ' + res.result.latencyMs.toFixed(1) + ' ms)';
    if (res.response) text += '\nanswer: ' + JSON.stringify(res.response.payload);
    show(out, '', text);
  } catch (e) { show(out, 'UNREACHABLE', 'UNREACHABLE: the node did not answer (' + e.message + ')'); }
});

$('propose-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const out = $('propose-result');
  show(out, '', 'proposing…');
  try {
    const caps = $('propose-caps').value.split(',').map((s) => s.trim()).filter(Boolean);
    const r = await api('POST', 'api/tasks', {
      from: $('propose-from').value.trim() || undefined, to: $('propose-to').value.trim(), byCapability: $('propose-cap').checked, task: $('propose-task').value, capabilities: caps,
    });
    if (r.status >= 300) { showError(out, r.json); return; }
    show(out, '', 'proposal ' + r.json.proposalId + ': ' + (r.json.status || 'sent'));
  } catch (e) { show(out, 'UNREACHABLE', 'UNREACHABLE: the node did not answer (' + e.message + ')'); }
});

async function readDoc(quiet) {
  const out = $('doc-result');
  const name = $('doc-name').value.trim();
  if (!name) return;
  const path = $('doc-path').value.trim();
  try {
    const r = await api('GET', 'api/docs/' + encodeURIComponent(name) + (path ? '?path=' + encodeURIComponent(path) : ''));
    if (r.status >= 300) { showError(out, r.json); return; }
    state.docSel = name;
    state.docClock = JSON.stringify(r.json.clock);
    $('doc-view').textContent = JSON.stringify(r.json.value, null, 2);
    if (!quiet) show(out, '', name + (path ? ' at ' + path : '') + ', clock ' + clockText(r.json.clock));
    docList.schedule();
  } catch (e) { show(out, 'UNREACHABLE', 'UNREACHABLE: the node did not answer (' + e.message + ')'); }
}
$('doc-read').addEventListener('click', () => readDoc());

$('doc-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const out = $('doc-result');
  const name = $('doc-name').value.trim();
  const raw = $('doc-value').value;
  let value;
  try { value = JSON.parse(raw); } catch (_) { value = raw; } // not JSON: the text itself, as a string
  try {
    const r = await api('POST', 'api/docs/' + encodeURIComponent(name), { op: 'set', path: $('doc-path').value.trim(), value });
    if (r.status >= 300) { showError(out, r.json); return; }
    state.docSel = name;
    state.docClock = JSON.stringify(r.json.clock);
    show(out, '', 'set ' + (r.json.path || '(root)') + ' in ' + name);
    readDoc(true);
  } catch (e) { show(out, 'UNREACHABLE', 'UNREACHABLE: the node did not answer (' + e.message + ')'); }
});

$('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  token = $('login-token').value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  $('login').hidden = true;
  stream();
});

state.byHost = new Map();
if (token) stream(); else needToken();
