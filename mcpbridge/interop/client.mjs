#!/usr/bin/env node
// Independent-client interop probe for the nova-node MCP aggregate face.
//
// Uses the official TypeScript SDK Client (@modelcontextprotocol/sdk, pinned
// in package-lock.json) — i.e. NOT the Go SDK the node is built on — to talk to
// the node over stdio or streamable HTTP, then prints exactly ONE JSON object
// on stdout and exits 0, or prints {"error": ...} and exits 1.
//
// Environment (see README.md):
//   MCP_STDIO_CMD   JSON array argv of a stdio MCP server, e.g.
//                   ["/path/nova-node","mcp","--data-dir","/tmp/x"]
//   MCP_URL         streamable-HTTP endpoint, e.g. http://127.0.0.1:8080/mcp
//                   (exactly one of MCP_STDIO_CMD / MCP_URL must be set)
//   MCP_TOKEN       bearer token sent with every HTTP request (a nova-node
//                   face asks for its data dir's local.token)
//   MCP_TOOL        wire name of a tool to call (optional)
//   MCP_ARGS        JSON object of tool arguments (default {})
//   MCP_RESOURCE    URI of a resource to read (optional)
//   MCP_PROMPT      name of a prompt to get (optional)
//   MCP_PROMPT_ARGS JSON object of prompt arguments (default {})
//   MCP_ALLOW_TOOL_ERROR  "1": a CallToolResult with isError:true is reported
//                   with exit 0 (default: it is a failure, exit 1)
//   MCP_TIMEOUT_MS  per-request and overall timeout base (default 30000)
//   MCP_PROGRESS    "1": the tool call sends a progress token; the
//                   notifications/progress received go in "progress"
//   MCP_LOG_LEVEL   a logging level to set (logging/setLevel) right after
//                   connecting; the notifications/message received go in "logs"
//
// Output: {"transport","serverInfo","protocolVersion","capabilities",
//          "tools":[wire names],"toolTitles":{name:title},
//          "call":CallToolResult|null,"resources":[uris]|null,
//          "resource":ReadResourceResult|null,"prompts":[names]|null,
//          "prompt":GetPromptResult|null,"progress":[params]|null,
//          "logs":[params]|null}
// stdout carries only that object; diagnostics (and a stdio server's stderr)
// go to stderr.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const WIRE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

// pid of a stdio server we spawned; reaped before exiting on every path so a
// failed run never leaves a node process behind (the SDK's own close() is
// fire-and-forget when initialize fails).
let childPid = null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function reap() {
  const pid = childPid;
  childPid = null;
  if (!pid) return;
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  // stdin is already closed by then: give it 2s, then SIGTERM, 2s, SIGKILL.
  for (const [sig, ms] of [[null, 2000], ['SIGTERM', 2000], ['SIGKILL', 0]]) {
    if (!alive()) return;
    if (sig) {
      process.stderr.write(`client.mjs: stdio server ${pid} still running, sending ${sig}\n`);
      try {
        process.kill(pid, sig);
      } catch {}
    }
    for (const end = Date.now() + ms; Date.now() < end && alive(); ) await sleep(50);
  }
}

let done = false;
function finish(code, obj) {
  if (done) return;
  done = true;
  process.stdout.write(JSON.stringify(obj) + '\n', () => {
    reap().finally(() => process.exit(code));
  });
}
function fail(err, extra = {}) {
  const message = err instanceof Error ? err.message : String(err);
  const out = { error: message, ...extra };
  if (err && typeof err === 'object' && 'code' in err && err.code !== undefined) out.code = err.code;
  if (err && typeof err === 'object' && 'data' in err && err.data !== undefined) out.data = err.data;
  finish(1, out);
}

function parseJSONEnv(name, fallback, check) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  let v;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw new Error(`${name} is not valid JSON: ${e.message}`);
  }
  if (check && !check(v)) throw new Error(`${name} has the wrong shape: ${raw}`);
  return v;
}
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

async function listAll(method, key, client, opts) {
  const items = [];
  let cursor;
  for (let page = 0; page < 1000; page++) {
    const res = await client[method](cursor ? { cursor } : undefined, opts);
    items.push(...(res[key] ?? []));
    if (!res.nextCursor) return items;
    cursor = res.nextCursor;
  }
  throw new Error(`${method}: more than 1000 pages`);
}

async function main() {
  const timeout = Number(process.env.MCP_TIMEOUT_MS || 30000);
  if (!Number.isFinite(timeout) || timeout <= 0) throw new Error('MCP_TIMEOUT_MS must be a positive number');
  // Overall watchdog: a hung server must not hang CI.
  setTimeout(() => fail(new Error(`timed out after ${timeout * 4} ms`)), timeout * 4).unref();
  const reqOpts = { timeout };

  const stdioCmd = parseJSONEnv(
    'MCP_STDIO_CMD',
    null,
    (v) => Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === 'string'),
  );
  const url = process.env.MCP_URL || null;
  if (!!stdioCmd === !!url) throw new Error('set exactly one of MCP_STDIO_CMD (JSON argv array) or MCP_URL');
  const toolName = process.env.MCP_TOOL || null;
  const toolArgs = parseJSONEnv('MCP_ARGS', {}, isObject);
  const resourceURI = process.env.MCP_RESOURCE || null;
  const promptName = process.env.MCP_PROMPT || null;
  const promptArgs = parseJSONEnv('MCP_PROMPT_ARGS', {}, (v) => isObject(v) && Object.values(v).every((x) => typeof x === 'string'));

  let transport;
  let transportName;
  if (stdioCmd) {
    transportName = 'stdio';
    transport = new StdioClientTransport({
      command: stdioCmd[0],
      args: stdioCmd.slice(1),
      // Pass the whole environment through (the SDK default keeps only a few
      // "safe" variables), so the node sees the same env as the harness.
      env: Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)),
      stderr: 'inherit',
    });
    const start = transport.start.bind(transport);
    transport.start = async () => {
      try {
        await start();
      } finally {
        childPid = transport.pid;
      }
    };
  } else {
    transportName = 'streamable-http';
    let u;
    try {
      u = new URL(url);
    } catch {
      throw new Error(`MCP_URL is not a URL: ${url}`);
    }
    const token = process.env.MCP_TOKEN || '';
    transport = new StreamableHTTPClientTransport(u, token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : undefined);
  }

  // Observe incoming messages to record the protocol version the server
  // negotiated in its initialize result (the Client does not expose it).
  let negotiatedVersion = null;
  let onmessage;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () =>
      onmessage &&
      ((msg, extra) => {
        if (negotiatedVersion === null && typeof msg?.result?.protocolVersion === 'string') {
          negotiatedVersion = msg.result.protocolVersion;
        }
        return onmessage(msg, extra);
      }),
    set: (h) => {
      onmessage = h;
    },
  });

  const client = new Client({ name: 'nova-node-interop-client', version: '0.0.0' }, { capabilities: {} });
  client.onerror = (e) => process.stderr.write(`client.mjs: transport error: ${e?.message ?? e}\n`);

  const out = { transport: transportName };
  const logLevel = process.env.MCP_LOG_LEVEL || null;
  if (logLevel) {
    out.logs = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      out.logs.push(n.params);
    });
  }
  try {
    await client.connect(transport, reqOpts);
    if (logLevel) await client.setLoggingLevel(logLevel, reqOpts);
    out.serverInfo = client.getServerVersion() ?? null;
    out.protocolVersion = negotiatedVersion;
    const caps = client.getServerCapabilities() ?? {};
    out.capabilities = caps;

    const tools = caps.tools ? await listAll('listTools', 'tools', client, reqOpts) : [];
    out.tools = tools.map((t) => t.name);
    out.toolTitles = Object.fromEntries(tools.map((t) => [t.name, t.title ?? t.annotations?.title ?? null]));
    const badNames = out.tools.filter((n) => !WIRE_NAME.test(n));
    if (badNames.length) process.stderr.write(`client.mjs: warning: tool names not matching ${WIRE_NAME}: ${badNames.join(', ')}\n`);

    out.call = null;
    if (toolName) {
      if (!out.tools.includes(toolName)) {
        return fail(new Error(`tool ${JSON.stringify(toolName)} not in tools/list`), { tools: out.tools });
      }
      let callOpts = reqOpts;
      if (process.env.MCP_PROGRESS === '1') {
        out.progress = [];
        callOpts = { ...reqOpts, onprogress: (p) => out.progress.push(p) };
      }
      out.call = await client.callTool({ name: toolName, arguments: toolArgs }, undefined, callOpts);
      if (out.call.isError && process.env.MCP_ALLOW_TOOL_ERROR !== '1') {
        return fail(new Error(`tool ${toolName} returned isError: true`), { call: out.call });
      }
    }

    out.resources = caps.resources ? (await listAll('listResources', 'resources', client, reqOpts)).map((r) => r.uri) : null;
    out.resource = null;
    if (resourceURI) {
      out.resource = await client.readResource({ uri: resourceURI }, reqOpts);
    }

    out.prompts = caps.prompts ? (await listAll('listPrompts', 'prompts', client, reqOpts)).map((p) => p.name) : null;
    out.prompt = null;
    if (promptName) {
      out.prompt = await client.getPrompt({ name: promptName, arguments: promptArgs }, reqOpts);
    }
  } finally {
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      // Best effort: end the session (a stateless server answers 405, fine).
      await transport.terminateSession().catch(() => {});
    }
    await client.close().catch(() => {});
  }
  finish(0, out);
}

main().catch((e) => fail(e));
