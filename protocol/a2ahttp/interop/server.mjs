// Interop server: A2A agents served by @a2a-js/sdk, for the gateway's
// outbound client (a2ahttp.Client) to call. Two servers on 127.0.0.1:
//
//   v1   @a2a-js/sdk 1.3.0 with legacyCompat (speaks v1.0 and v0.3)
//   v03  @a2a-js/sdk 0.3.14 (speaks v0.3)
//
// Each serves the same agents under /<agent>/ (JSON-RPC at /<agent>/, card
// at /<agent>/.well-known/agent-card.json):
//
//   echo    completes with "js echo: <text>" (artifact and status message)
//   direct  answers with a direct message "js direct: <text>"
//   ask     asks "Your name?" (input-required), then completes with "Hi <text>"
//   fail    fails with "js agent failed"
//
// Prints {"v1": "http://127.0.0.1:P", "v03": "http://127.0.0.1:Q"} on one
// line once both listen, and runs until SIGTERM or SIGINT.
import { randomUUID } from 'node:crypto';
import express from 'express';
import * as v1 from '@a2a-js/sdk/server';
import * as v1x from '@a2a-js/sdk/server/express';
import * as o3 from 'a2a-js-03/server';
import * as o3x from 'a2a-js-03/server/express';

const AGENTS = ['echo', 'direct', 'ask', 'fail'];
const now = () => new Date().toISOString();

// --- @a2a-js/sdk 1.3.0 (core model: enums are numbers) -------------------

const S = { submitted: 1, working: 2, completed: 3, failed: 4, canceled: 5, inputRequired: 6 };
const textPart = (s) => ({ content: { $case: 'text', value: s }, mediaType: 'text/plain', filename: '', metadata: {} });
const userText = (m) => m.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');
const agentMsg = (taskId, contextId, s) => ({
  messageId: randomUUID(), contextId, taskId, role: 2, parts: [textPart(s)], metadata: {}, extensions: [], referenceTaskIds: [],
});
const status = (rc, state, text) => v1.AgentEvent.statusUpdate({
  taskId: rc.taskId, contextId: rc.contextId, metadata: {},
  status: { state, message: text === undefined ? undefined : agentMsg(rc.taskId, rc.contextId, text), timestamp: now() },
});
const newTask = (rc, state) => v1.AgentEvent.task({
  id: rc.taskId, contextId: rc.contextId, status: { state, timestamp: now() }, artifacts: [],
  history: [...(rc.task?.history ?? []), rc.userMessage], metadata: {},
});

function executorV1(agent) {
  return {
    async execute(rc, bus) {
      const text = userText(rc.userMessage);
      switch (agent) {
        case 'direct':
          bus.publish(v1.AgentEvent.message({ ...agentMsg('', rc.contextId, `js direct: ${text}`) }));
          break;
        case 'echo': {
          const reply = `js echo: ${text}`;
          bus.publish(newTask(rc, S.submitted));
          bus.publish(status(rc, S.working));
          const others = rc.userMessage.parts.filter((p) => p.content?.$case !== 'text');
          bus.publish(v1.AgentEvent.artifactUpdate({
            taskId: rc.taskId, contextId: rc.contextId, append: false, lastChunk: true, metadata: {},
            artifact: { artifactId: randomUUID(), name: 'response', description: '', parts: [textPart(reply), ...others], metadata: {}, extensions: [] },
          }));
          bus.publish(status(rc, S.completed, reply));
          break;
        }
        case 'ask':
          if (!rc.task) {
            bus.publish(newTask(rc, S.submitted));
            bus.publish(status(rc, S.inputRequired, 'Your name?'));
          } else {
            bus.publish(newTask(rc, S.working));
            bus.publish(status(rc, S.completed, `Hi ${text}`));
          }
          break;
        case 'fail':
          bus.publish(newTask(rc, S.submitted));
          bus.publish(status(rc, S.failed, 'js agent failed'));
          break;
      }
      bus.finished();
    },
    async cancelTask(taskId, bus) {
      bus.publish(v1.AgentEvent.statusUpdate({ taskId, contextId: '', metadata: {}, status: { state: S.canceled, timestamp: now() } }));
      bus.finished();
    },
  };
}

function cardV1(base, agent) {
  const url = `${base}/${agent}/`;
  return {
    name: `js-${agent}`, description: `@a2a-js/sdk 1.3.0 test agent ${agent}`, version: '1.3.0',
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
    ],
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [],
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: agent, name: agent, description: `the ${agent} skill`, tags: ['interop'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
}

// --- @a2a-js/sdk 0.3.14 (v0.3 model) --------------------------------------

const text03 = (m) => m.parts.filter((p) => p.kind === 'text').map((p) => p.text).join('\n');
const msg03 = (taskId, contextId, s) => ({
  kind: 'message', messageId: randomUUID(), role: 'agent', parts: [{ kind: 'text', text: s }],
  ...(taskId ? { taskId } : {}), contextId,
});
const status03 = (rc, state, final, s) => ({
  kind: 'status-update', taskId: rc.taskId, contextId: rc.contextId, final,
  status: { state, timestamp: now(), ...(s === undefined ? {} : { message: msg03(rc.taskId, rc.contextId, s) }) },
});
const task03 = (rc, state) => ({
  kind: 'task', id: rc.taskId, contextId: rc.contextId, status: { state, timestamp: now() },
  history: [...(rc.task?.history ?? []), rc.userMessage], artifacts: rc.task?.artifacts ?? [],
});

function executor03(agent) {
  return {
    async execute(rc, bus) {
      const text = text03(rc.userMessage);
      switch (agent) {
        case 'direct':
          bus.publish(msg03(undefined, rc.contextId, `js direct: ${text}`));
          break;
        case 'echo': {
          const reply = `js echo: ${text}`;
          bus.publish(task03(rc, 'submitted'));
          bus.publish(status03(rc, 'working', false));
          bus.publish({
            kind: 'artifact-update', taskId: rc.taskId, contextId: rc.contextId, lastChunk: true,
            artifact: { artifactId: randomUUID(), name: 'response', parts: [{ kind: 'text', text: reply }, ...rc.userMessage.parts.filter((p) => p.kind !== 'text')] },
          });
          bus.publish(status03(rc, 'completed', true, reply));
          break;
        }
        case 'ask':
          if (!rc.task) {
            bus.publish(task03(rc, 'submitted'));
            bus.publish(status03(rc, 'input-required', true, 'Your name?'));
          } else {
            bus.publish(task03(rc, 'working'));
            bus.publish(status03(rc, 'completed', true, `Hi ${text}`));
          }
          break;
        case 'fail':
          bus.publish(task03(rc, 'submitted'));
          bus.publish(status03(rc, 'failed', true, 'js agent failed'));
          break;
      }
      bus.finished();
    },
    async cancelTask(taskId, bus) {
      bus.publish({ kind: 'status-update', taskId, contextId: '', final: true, status: { state: 'canceled', timestamp: now() } });
      bus.finished();
    },
  };
}

function card03(base, agent) {
  return {
    name: `js03-${agent}`, description: `@a2a-js/sdk 0.3.14 test agent ${agent}`, version: '0.3.14',
    protocolVersion: '0.3.0', url: `${base}/${agent}/`, preferredTransport: 'JSONRPC',
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: agent, name: agent, description: `the ${agent} skill`, tags: ['interop'] }],
  };
}

// --- Servers ---------------------------------------------------------------

function listen(app) {
  return new Promise((resolve, reject) => {
    const srv = app.listen(0, '127.0.0.1', () => resolve(srv));
    srv.on('error', reject);
  });
}

async function main() {
  // Listen first, then mount: the cards need the port.
  const appV1 = express();
  const appO3 = express();
  const srvV1 = await listen(appV1);
  const srvO3 = await listen(appO3);
  const baseV1 = `http://127.0.0.1:${srvV1.address().port}`;
  const baseO3 = `http://127.0.0.1:${srvO3.address().port}`;
  for (const agent of AGENTS) {
    const c1 = cardV1(baseV1, agent);
    const h1 = new v1.DefaultRequestHandler(c1, new v1.InMemoryTaskStore(), executorV1(agent));
    appV1.use(`/${agent}/.well-known/agent-card.json`, v1x.agentCardHandler({ agentCardProvider: () => Promise.resolve(c1), legacyCompat: { enabled: true } }));
    appV1.use(`/${agent}`, v1x.jsonRpcHandler({ requestHandler: h1, userBuilder: v1x.UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));

    const c3 = card03(baseO3, agent);
    const h3 = new o3.DefaultRequestHandler(c3, new o3.InMemoryTaskStore(), executor03(agent));
    appO3.use(`/${agent}/.well-known/agent-card.json`, o3x.agentCardHandler({ agentCardProvider: () => Promise.resolve(c3) }));
    appO3.use(`/${agent}`, o3x.jsonRpcHandler({ requestHandler: h3, userBuilder: o3x.UserBuilder.noAuthentication }));
  }
  console.log(JSON.stringify({ v1: baseV1, v03: baseO3 }));
  const stop = () => {
    srvV1.closeAllConnections?.();
    srvO3.closeAllConnections?.();
    srvV1.close();
    srvO3.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
