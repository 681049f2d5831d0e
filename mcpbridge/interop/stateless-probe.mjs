#!/usr/bin/env node
// Raw-HTTP probe of the 2026-07-28 (sessionless, SEP-2567/SEP-2575) route of a
// streamable-HTTP MCP endpoint. Neither the TS SDK 1.32.2 client nor the
// conformance suite 0.1.16 speaks 2026-07-28 (both negotiate <= 2025-11-25, so
// they only ever reach the stateful handler); this probe checks that requests
// carrying `Mcp-Protocol-Version: 2026-07-28` are served statelessly:
//   1. POST tools/list  -> 200, a JSON-RPC result, and NO Mcp-Session-Id header
//   2. POST tools/call MCP_TOOL(MCP_ARGS) -> 200, result (not isError), no session id
//   3. GET (standalone SSE stream) -> 405 (a Stateless go-sdk handler has none)
// The request shape (Mcp-Method/Mcp-Name headers, per-request _meta with
// protocolVersion/clientCapabilities/clientInfo) follows the draft as
// implemented by go-sdk v1.8.0; expect to revisit it when the spec is final.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp MCP_TOOL=echo_say MCP_ARGS='{"text":"hi"}' node stateless-probe.mjs
//
// MCP_TOKEN, if set, is sent as "Authorization: Bearer" with every request
// (a nova-node face asks for its data dir's local.token).
//
// Prints one JSON object {ok, steps:[...]} on stdout; exit 0 if all steps pass, else 1.

const VERSION = '2026-07-28';
const url = process.env.MCP_URL;
const tool = process.env.MCP_TOOL || '';
const timeout = Number(process.env.MCP_TIMEOUT_MS || 30000);
const auth = process.env.MCP_TOKEN ? { authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};

function meta() {
  return {
    'io.modelcontextprotocol/protocolVersion': VERSION,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'nova-node-stateless-probe', version: '0.0.0' },
  };
}

// Returns the first JSON-RPC response in a JSON or text/event-stream body.
function parseBody(contentType, text) {
  if ((contentType || '').includes('text/event-stream')) {
    for (const block of text.split(/\r?\n\r?\n/)) {
      const data = block
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (!data) continue;
      const msg = JSON.parse(data);
      if ('result' in msg || 'error' in msg) return msg;
    }
    return null;
  }
  return text ? JSON.parse(text) : null;
}

async function post(id, method, params, name) {
  const headers = {
    ...auth,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': VERSION,
    'mcp-method': method,
  };
  if (name) headers['mcp-name'] = name;
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta() } }),
    signal: AbortSignal.timeout(timeout),
  });
  const text = await res.text();
  let body;
  try {
    body = parseBody(res.headers.get('content-type'), text);
  } catch {
    body = { unparsable: text.slice(0, 500) };
  }
  return { status: res.status, sessionId: res.headers.get('mcp-session-id'), body };
}

async function main() {
  if (!url) throw new Error('MCP_URL is required');
  const args = process.env.MCP_ARGS ? JSON.parse(process.env.MCP_ARGS) : {};
  const steps = [];
  const step = (name, ok, detail) => steps.push({ name, ok: !!ok, ...detail });

  const list = await post(1, 'tools/list', {});
  const names = list.body?.result?.tools?.map((t) => t.name) ?? null;
  step('tools/list', list.status === 200 && Array.isArray(names) && !list.sessionId, {
    status: list.status,
    sessionId: list.sessionId,
    tools: names,
    error: list.body?.error ?? list.body?.unparsable,
  });

  if (tool) {
    const call = await post(2, 'tools/call', { name: tool, arguments: args }, tool);
    const result = call.body?.result;
    step('tools/call', call.status === 200 && result && !result.isError && !call.sessionId, {
      status: call.status,
      sessionId: call.sessionId,
      result,
      error: call.body?.error ?? call.body?.unparsable,
    });
  }

  const get = await fetch(url, {
    method: 'GET',
    headers: { ...auth, accept: 'text/event-stream', 'mcp-protocol-version': VERSION },
    signal: AbortSignal.timeout(timeout),
  });
  await get.body?.cancel().catch(() => {});
  step('GET standalone stream refused', get.status === 405, { status: get.status });

  const ok = steps.every((s) => s.ok);
  return { ok, steps };
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(out.ok ? 0 : 1)),
  (e) => process.stdout.write(JSON.stringify({ ok: false, error: e.message }) + '\n', () => process.exit(1)),
);
