// Interop client: drives the nova-node A2A gateway with an independent
// client, @a2a-js/sdk, in one of three modes:
//
//   v1      @a2a-js/sdk 1.3.0, default (A2A v1.0 wire)
//   legacy  @a2a-js/sdk 1.3.0 with legacyCompat (A2A v0.3 wire), from the
//           pre-0.3 card path .well-known/agent.json (a v0.3-only card)
//   v03     @a2a-js/sdk 0.3.14 (A2A v0.3 wire)
//   rest    @a2a-js/sdk 1.3.0 with its REST transport (A2A v1.0 HTTP+JSON
//           binding), chosen from the card's HTTP+JSON interface
//
// Environment: GATEWAY_URL (e.g. http://127.0.0.1:4712), A2A_TOKEN (the
// bearer token the gateway accepts), and for the jwt scenario (v1, rest)
// A2A_JWT_ECHO (a JWT whose scopes open echo only) and A2A_JWT_EXPIRED. The gateway must front the
// deterministic agents of a2ahttptest.DemoMesh (echo, direct, slow, wait,
// ask). Prints one JSON line per scenario, {"scenario","ok","detail"}, then
// {"done":true,"passed":N,"failed":M}; exits 1 if a scenario failed.
import { randomUUID } from 'node:crypto';

const mode = process.argv[2];
const BASE = (process.env.GATEWAY_URL || '').replace(/\/$/, '');
const TOKEN = process.env.A2A_TOKEN || '';
if (!['v1', 'legacy', 'v03', 'rest'].includes(mode) || !BASE) {
  console.error('usage: GATEWAY_URL=... A2A_TOKEN=... node client.mjs v1|legacy|v03|rest');
  process.exit(2);
}

const fetchWith = (token) => (url, init = {}) => {
  const headers = new Headers(init.headers);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};
const authFetch = fetchWith(TOKEN);

const STATES = ['unspecified', 'submitted', 'working', 'completed', 'failed', 'canceled', 'input-required', 'rejected', 'auth-required'];

// --- One small API over the three clients, in v0.3 terms -----------------

function normPartCore(p) {
  const c = p.content || {};
  switch (c.$case) {
    case 'text': return { kind: 'text', text: c.value };
    case 'raw': return { kind: 'file', bytes: Buffer.from(c.value).toString('base64'), name: p.filename, mimeType: p.mediaType };
    case 'url': return { kind: 'file', uri: c.value, name: p.filename, mimeType: p.mediaType };
    case 'data': return { kind: 'data', data: c.value };
  }
  return { kind: 'unknown' };
}

function normPart03(p) {
  if (p.kind === 'file') return { kind: 'file', bytes: p.file.bytes, uri: p.file.uri, name: p.file.name, mimeType: p.file.mimeType };
  return { ...p };
}

function toPartCore(p) {
  const base = { mediaType: p.mimeType || '', filename: p.name || '', metadata: undefined };
  switch (p.kind) {
    case 'text': return { ...base, content: { $case: 'text', value: p.text } };
    case 'file': return p.bytes
      ? { ...base, content: { $case: 'raw', value: Buffer.from(p.bytes, 'base64') } }
      : { ...base, content: { $case: 'url', value: p.uri } };
    case 'data': return { ...base, content: { $case: 'data', value: p.data } };
  }
}

function toPart03(p) {
  if (p.kind === 'file') {
    const file = p.bytes ? { bytes: p.bytes } : { uri: p.uri };
    if (p.name) file.name = p.name;
    if (p.mimeType) file.mimeType = p.mimeType;
    return { kind: 'file', file };
  }
  return p;
}

function normTaskCore(t) {
  return {
    kind: 'task', id: t.id, contextId: t.contextId, state: STATES[t.status?.state] ?? String(t.status?.state),
    statusText: (t.status?.message?.parts || []).map(normPartCore).filter((p) => p.kind === 'text').map((p) => p.text).join('\n'),
    artifacts: (t.artifacts || []).map((a) => ({ name: a.name, parts: a.parts.map(normPartCore) })),
    history: (t.history || []).map((m) => ({ role: m.role === 2 ? 'agent' : 'user', text: m.parts.map(normPartCore).filter((p) => p.kind === 'text').map((p) => p.text).join('\n') })),
  };
}

function normTask03(t) {
  return {
    kind: 'task', id: t.id, contextId: t.contextId, state: t.status?.state,
    statusText: (t.status?.message?.parts || []).filter((p) => p.kind === 'text').map((p) => p.text).join('\n'),
    artifacts: (t.artifacts || []).map((a) => ({ name: a.name, parts: a.parts.map(normPart03) })),
    history: (t.history || []).map((m) => ({ role: m.role, text: m.parts.filter((p) => p.kind === 'text').map((p) => p.text).join('\n') })),
  };
}

function normResultCore(r) {
  if ('status' in r) return normTaskCore(r);
  return { kind: 'message', role: r.role === 2 ? 'agent' : 'user', text: r.parts.map(normPartCore).filter((p) => p.kind === 'text').map((p) => p.text).join('\n'), taskId: r.taskId };
}

function normResult03(r) {
  if (r.kind === 'task') return normTask03(r);
  return { kind: 'message', role: r.role, text: r.parts.filter((p) => p.kind === 'text').map((p) => p.text).join('\n'), taskId: r.taskId };
}

async function makeApi() {
  if (mode === 'v03') {
    const sdk = await import('a2a-js-03/client');
    const factory = new sdk.ClientFactory(sdk.ClientFactoryOptions.createFrom(sdk.ClientFactoryOptions.default, {
      transports: [new sdk.JsonRpcTransportFactory({ fetchImpl: authFetch })],
      cardResolver: new sdk.DefaultAgentCardResolver({ fetchImpl: authFetch }),
    }));
    const clients = {};
    const client = async (agent) => (clients[agent] ??= await factory.createFromUrl(`${BASE}/a2a/${agent}/`));
    const message = (parts, o = {}) => ({
      kind: 'message', messageId: randomUUID(), role: 'user', parts: parts.map(toPart03),
      ...(o.taskId ? { taskId: o.taskId } : {}), ...(o.contextId ? { contextId: o.contextId } : {}),
    });
    return {
      card: async (agent) => {
        const c = await client(agent);
        const card = await c.getAgentCard();
        return { name: card.name, streaming: !!card.capabilities?.streaming, version: card.protocolVersion };
      },
      send: async (agent, parts, o = {}) => normResult03(await (await client(agent)).sendMessage({
        message: message(parts, o), ...(o.blocking === false ? { configuration: { blocking: false } } : {}),
      })),
      stream: async (agent, parts) => {
        const out = [];
        for await (const ev of (await client(agent)).sendMessageStream({ message: message(parts) })) {
          if (ev.kind === 'task') out.push(`task:${ev.status.state}`);
          else if (ev.kind === 'status-update') out.push(`status:${ev.status.state}`);
          else if (ev.kind === 'artifact-update') out.push('artifact');
          else out.push(ev.kind);
        }
        return out;
      },
      get: async (agent, id) => normTask03(await (await client(agent)).getTask({ id })),
      cancel: async (agent, id) => normTask03(await (await client(agent)).cancelTask({ id })),
      clientWithoutToken: async (agent) => {
        const f = new sdk.ClientFactory();
        const c = await f.createFromUrl(`${BASE}/a2a/${agent}/`);
        return () => c.sendMessage({ message: message([{ kind: 'text', text: 'x' }]) });
      },
    };
  }

  const sdk = await import('@a2a-js/sdk/client');
  const legacy = mode === 'legacy' ? { legacyCompat: { enabled: true } } : {};
  // rest: only the REST transport gets the token, and it is preferred, so
  // a JSON-RPC request would fail with 401.
  const factoryWith = (fetchImpl) => new sdk.ClientFactory(sdk.ClientFactoryOptions.createFrom(sdk.ClientFactoryOptions.default, mode === 'rest' ? {
    transports: [new sdk.RestTransportFactory({ fetchImpl })],
    cardResolver: new sdk.DefaultAgentCardResolver({ fetchImpl }),
    preferredTransports: ['HTTP+JSON'],
  } : {
    transports: [new sdk.JsonRpcTransportFactory({ fetchImpl, ...legacy })],
    cardResolver: new sdk.DefaultAgentCardResolver({ fetchImpl, ...legacy }),
  }));
  const factory = factoryWith(authFetch);
  const cardPath = mode === 'legacy' ? '.well-known/agent.json' : undefined;
  const clients = {};
  const client = async (agent) => (clients[agent] ??= await factory.createFromUrl(`${BASE}/a2a/${agent}/`, cardPath));
  const message = (parts, o = {}) => ({
    messageId: randomUUID(), role: 1, parts: parts.map(toPartCore), contextId: o.contextId || '', taskId: o.taskId || '',
    metadata: undefined, extensions: [], referenceTaskIds: [],
  });
  return {
    card: async (agent) => {
      const c = await client(agent);
      const card = await c.getAgentCard();
      return {
        name: card.name, streaming: !!card.capabilities?.streaming,
        version: c.protocolVersion, interfaces: (card.supportedInterfaces || []).map((i) => i.protocolVersion),
      };
    },
    send: async (agent, parts, o = {}) => normResultCore(await (await client(agent)).sendMessage({
      message: message(parts, o), ...(o.blocking === false ? { configuration: { returnImmediately: true } } : {}),
    })),
    stream: async (agent, parts) => {
      const out = [];
      for await (const ev of (await client(agent)).sendMessageStream({ message: message(parts) })) {
        const p = ev.payload;
        if (p.$case === 'task') out.push(`task:${STATES[p.value.status.state]}`);
        else if (p.$case === 'statusUpdate') out.push(`status:${STATES[p.value.status.state]}`);
        else if (p.$case === 'artifactUpdate') out.push('artifact');
        else out.push(p.$case);
      }
      return out;
    },
    get: async (agent, id) => normTaskCore(await (await client(agent)).getTask({ id })),
    cancel: async (agent, id) => normTaskCore(await (await client(agent)).cancelTask({ id })),
    clientWithoutToken: async (agent) => {
      const c = await factoryWith(fetch).createFromUrl(`${BASE}/a2a/${agent}/`, cardPath);
      return () => c.sendMessage({ message: message([{ kind: 'text', text: 'x' }]) });
    },
    // The 1.3.0 client's own calls, for the v1.0 scenarios.
    raw: client,
    message,
    // A client of agent that sends token; the card is fetched with the
    // gateway's token, since a local gateway asks it for its cards too.
    withToken: async (agent, token) => {
      const card = await (await client(agent)).getAgentCard();
      return factoryWith(fetchWith(token)).createFromAgentCard(card);
    },
    transportName: async (agent) => (await client(agent)).transport?.protocolName,
  };
}

// --- Scenarios ------------------------------------------------------------

function check(cond, detail) {
  if (!cond) throw new Error(detail);
}

const text = (s) => ({ kind: 'text', text: s });

function errorIs(err, name, code) {
  const s = `${err?.name} ${err?.constructor?.name} ${err?.message} ${err?.code ?? ''} ${err?.envelopeCode ?? ''} ${JSON.stringify(err?.response ?? err?.errorResponse ?? {})}`;
  return s.includes(name) || s.includes(String(code));
}

async function poll(f, until, ms = 5000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (until(v)) return v;
    if (Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const scenarios = {
  'card': async (api) => {
    const c = await api.card('echo');
    check(c.name === 'echo' && c.streaming, `card ${JSON.stringify(c)}`);
    if (mode === 'v1') check(c.version === '1.0' && c.interfaces.includes('1.0'), `v1 card ${JSON.stringify(c)}`);
    if (mode === 'legacy') check(c.version === '0.3', `legacy transport ${JSON.stringify(c)}`);
    if (mode === 'rest') {
      const name = await api.transportName('echo');
      check(c.version === '1.0' && name === 'HTTP+JSON', `rest transport ${name} ${JSON.stringify(c)}`);
    }
    return JSON.stringify(c);
  },
  'send-task': async (api) => {
    const r = await api.send('echo', [text('hello')]);
    check(r.kind === 'task' && r.state === 'completed' && r.statusText === 'echo: hello', JSON.stringify(r));
    check(r.artifacts.length === 1 && r.artifacts[0].parts[0].text === 'echo: hello', JSON.stringify(r.artifacts));
    return `${r.id} ${r.state}`;
  },
  'send-message': async (api) => {
    const r = await api.send('direct', [text('hi')]);
    check(r.kind === 'message' && r.role === 'agent' && r.text === 'hello from direct', JSON.stringify(r));
    return r.text;
  },
  'stream-order': async (api) => {
    const evs = await api.stream('echo', [text('s')]);
    const want = 'task:submitted status:working artifact status:completed';
    check(evs.join(' ') === want, `events "${evs.join(' ')}", want "${want}"`);
    return evs.join(' ');
  },
  'nonblocking-poll': async (api) => {
    const r = await api.send('slow', [text('later')], { blocking: false });
    check(r.kind === 'task' && ['submitted', 'working'].includes(r.state), `returned ${JSON.stringify(r)}`);
    const t = await poll(() => api.get('slow', r.id), (t) => t.state === 'completed');
    check(t.state === 'completed' && t.statusText === 'done: later', `polled ${JSON.stringify(t)}`);
    return `${r.state} -> ${t.state}`;
  },
  'cancel-running': async (api) => {
    const r = await api.send('wait', [text('forever')], { blocking: false });
    const c = await api.cancel('wait', r.id);
    check(c.state === 'canceled', `cancel ${JSON.stringify(c)}`);
    const t = await api.get('wait', r.id);
    check(t.state === 'canceled', `after cancel ${JSON.stringify(t)}`);
    return c.state;
  },
  'cancel-completed': async (api) => {
    const r = await api.send('echo', [text('done')]);
    try {
      await api.cancel('echo', r.id);
    } catch (err) {
      check(errorIs(err, 'NotCancelable', -32002), `error ${err?.name}: ${err?.message}`);
      return `${err?.name}: ${err?.message}`;
    }
    throw new Error('cancel of a completed task succeeded');
  },
  'unknown-task': async (api) => {
    try {
      await api.get('echo', 'no-such-task');
    } catch (err) {
      check(errorIs(err, 'TaskNotFound', -32001), `error ${err?.name}: ${err?.message}`);
      return `${err?.name}: ${err?.message}`;
    }
    throw new Error('getTask of an unknown task succeeded');
  },
  'multi-turn': async (api) => {
    const r = await api.send('ask', [text('hi')]);
    check(r.kind === 'task' && r.state === 'input-required' && r.statusText === 'What is your name?', `first ${JSON.stringify(r)}`);
    const r2 = await api.send('ask', [text('Ada')], { taskId: r.id, contextId: r.contextId });
    check(r2.id === r.id && r2.state === 'completed' && r2.statusText === 'Hello, Ada!', `second ${JSON.stringify(r2)}`);
    return `${r.state} -> ${r2.state}`;
  },
  'file-data-parts': async (api) => {
    const parts = [
      text('parts'),
      { kind: 'file', bytes: Buffer.from('hello file').toString('base64'), name: 'a.txt', mimeType: 'text/plain' },
      { kind: 'file', uri: 'https://example.com/pic.png', mimeType: 'image/png' },
      { kind: 'data', data: { answer: 42, list: ['x'] } },
    ];
    const r = await api.send('echo', parts);
    const got = r.artifacts[0]?.parts || [];
    check(got.length === 4, `parts ${JSON.stringify(got)}`);
    check(got[1].kind === 'file' && Buffer.from(got[1].bytes, 'base64').toString() === 'hello file' && got[1].name === 'a.txt' && got[1].mimeType === 'text/plain', `file ${JSON.stringify(got[1])}`);
    check(got[2].kind === 'file' && got[2].uri === 'https://example.com/pic.png', `uri ${JSON.stringify(got[2])}`);
    check(got[3].kind === 'data' && got[3].data.answer === 42 && got[3].data.list[0] === 'x', `data ${JSON.stringify(got[3])}`);
    return got.map((p) => p.kind).join(',');
  },
  'unauthorized': async (api) => {
    const headers = { 'Content-Type': 'application/json' };
    if (mode === 'v1') headers['A2A-Version'] = '1.0';
    const resp = await fetch(`${BASE}/a2a/echo/`, {
      method: 'POST', headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: mode === 'v1' ? 'GetTask' : 'tasks/get', params: { id: 'x' } }),
    });
    check(resp.status === 401, `status ${resp.status}`);
    check(/^Bearer /.test(resp.headers.get('www-authenticate') || ''), `WWW-Authenticate ${resp.headers.get('www-authenticate')}`);
    // The SDK's own client, without the token, fails too: at the send, or
    // already at the card on a loopback nova-node gateway, where every
    // request needs the token (beyond loopback the cards stay public).
    try {
      const send = await api.clientWithoutToken('echo');
      await send();
    } catch (err) {
      check(/401/.test(String(err?.message)), `SDK error ${err?.message}`);
      return `401, SDK: ${String(err?.message).slice(0, 80)}`;
    }
    throw new Error('a send without token succeeded');
  },
};

// Scenarios of the 1.3.0 client's v1.0 surface (v1 and rest modes).
const v1Scenarios = {
  'extended-card': async (api) => {
    // getAgentCard fetches the extended card when the card offers one.
    const card = await (await api.raw('echo')).getAgentCard();
    check(card.capabilities?.extendedAgentCard === true, `capabilities ${JSON.stringify(card.capabilities)}`);
    check(/Mesh address echo/.test(card.description) && /Limits:/.test(card.description), `extended card description ${card.description}`);
    return card.description.slice(0, 80);
  },
  'list-tasks': async (api) => {
    const c = await api.raw('echo');
    const sent = await c.sendMessage({ message: api.message([text('listed')]) });
    const id = sent.id;
    const res = await c.listTasks({ pageSize: 100, status: 3 /* TASK_STATE_COMPLETED */, includeArtifacts: true });
    const t = res.tasks.find((x) => x.id === id);
    check(t && t.status.state === 3 && t.artifacts.length === 1, `listTasks ${JSON.stringify(res).slice(0, 300)}`);
    return `${res.tasks.length} tasks`;
  },
  'push-config': async (api) => {
    const c = await api.raw('echo');
    const sent = await c.sendMessage({ message: api.message([text('pushed')]) });
    const cfg = await c.createTaskPushNotificationConfig({ taskId: sent.id, url: 'http://127.0.0.1:9/hook', token: 'tok', id: '', tenant: '' });
    check(cfg.id && cfg.taskId === sent.id, `create ${JSON.stringify(cfg)}`);
    const got = await c.getTaskPushNotificationConfig({ taskId: sent.id, id: cfg.id, tenant: '' });
    check(got.url === 'http://127.0.0.1:9/hook', `get ${JSON.stringify(got)}`);
    const list = await c.listTaskPushNotificationConfig({ taskId: sent.id, pageSize: 0, pageToken: '', tenant: '' });
    check(list.configs.length === 1, `list ${JSON.stringify(list)}`);
    await c.deleteTaskPushNotificationConfig({ taskId: sent.id, id: cfg.id, tenant: '' });
    try {
      await c.getTaskPushNotificationConfig({ taskId: sent.id, id: cfg.id, tenant: '' });
    } catch (err) {
      check(errorIs(err, 'TaskNotFound', -32001), `after delete: ${err?.name}: ${err?.message}`);
      return 'create get list delete';
    }
    throw new Error('the deleted config is still there');
  },
  'subscribe': async (api) => {
    const c = await api.raw('slow');
    const sent = await c.sendMessage({ message: api.message([text('follow')]), configuration: { returnImmediately: true, acceptedOutputModes: [] } });
    const out = [];
    for await (const ev of c.resubscribeTask({ id: sent.id, tenant: '' })) {
      const p = ev.payload;
      out.push(p.$case === 'task' ? `task:${STATES[p.value.status.state]}` : p.$case === 'statusUpdate' ? `status:${STATES[p.value.status.state]}` : p.$case);
    }
    check(out[0]?.startsWith('task:') && /completed$/.test(out[out.length - 1]), `events ${out.join(' ')}`);
    return out.join(' ');
  },
  'jwt': async (api) => {
    const echoJWT = process.env.A2A_JWT_ECHO;
    const expired = process.env.A2A_JWT_EXPIRED;
    check(echoJWT && expired, 'A2A_JWT_ECHO and A2A_JWT_EXPIRED are not set');
    const ok = await (await api.withToken('echo', echoJWT)).sendMessage({ message: api.message([text('jwt')]) });
    check(ok.status?.state === 3, `send with a JWT ${JSON.stringify(ok).slice(0, 200)}`);
    const status = async (agent, token) => {
      try {
        await (await api.withToken(agent, token)).sendMessage({ message: api.message([text('x')]) });
      } catch (err) {
        return `${err?.statusCode ?? ''} ${err?.message}`;
      }
      return 'ok';
    };
    const forbidden = await status('direct', echoJWT);
    check(/403/.test(forbidden), `other agent with the echo scope: ${forbidden}`);
    const unauthorized = await status('echo', expired);
    check(/401/.test(unauthorized), `expired JWT: ${unauthorized}`);
    return `ok, ${forbidden.slice(0, 40)}, ${unauthorized.slice(0, 40)}`;
  },
};
if (mode === 'v1' || mode === 'rest') Object.assign(scenarios, v1Scenarios);

const api = await makeApi();
let passed = 0;
let failed = 0;
for (const [name, run] of Object.entries(scenarios)) {
  try {
    const detail = await run(api);
    passed++;
    console.log(JSON.stringify({ scenario: name, ok: true, detail: String(detail ?? '') }));
  } catch (err) {
    failed++;
    console.log(JSON.stringify({ scenario: name, ok: false, detail: String(err?.stack || err) }));
  }
}
console.log(JSON.stringify({ done: true, mode, passed, failed }));
process.exit(failed ? 1 : 0);
