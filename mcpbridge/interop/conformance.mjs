#!/usr/bin/env node
// Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in package-lock.json) in SERVER mode against a streamable-HTTP MCP
// endpoint, and gates the result on conformance-baseline.json.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp node conformance.mjs
//
// Environment:
//   MCP_URL                   endpoint under test (required; loopback only)
//   MCP_TOKEN                 bearer token the endpoint asks for (a nova-node
//                             face: its data dir's local.token). The suite
//                             has no option for headers, so the harness runs
//                             it against a loopback proxy of its own that
//                             adds "Authorization: Bearer MCP_TOKEN" to each
//                             request and passes everything else through.
//   CONFORMANCE_BASELINE      baseline file (default ./conformance-baseline.json)
//   CONFORMANCE_RESULTS_DIR   where results go (default ./results/conformance;
//                             emptied first). Holds the suite's per-scenario
//                             checks.json dirs, conformance.log (the CLI's
//                             output) and summary.json (this script's verdict).
//   CONFORMANCE_SUITE         active (default) | all | pending
//   CONFORMANCE_SCENARIO      run a single scenario instead of a suite
//   CONFORMANCE_SPEC_VERSION  e.g. 2025-11-25 (passed as --spec-version)
//   CONFORMANCE_TIMEOUT_MS    kill the suite after this long (default 600000)
//
// A scenario FAILS if any of its checks is FAILURE or WARNING (the same rule
// the suite's own --expected-failures mode uses). A baseline entry is
//   {"scenario": "...", "justification": "one line", "failureMatches": "regex"}
// where the optional failureMatches (case-insensitive) must match every
// failing check's "id: message", so a scenario listed for a missing fixture
// still trips the gate if it starts failing for another reason. Exit codes:
//   0  every failure is listed in the baseline and every baseline entry that
//      ran did fail
//   1  an unexpected failure, or a stale baseline entry (listed but passed)
//   2  harness error (bad baseline, suite did not run, no node >= 22, ...)
//
// The conformance CLI needs Node >= 22; it is always run with the node
// binary from the pinned `node` npm package (node_modules/node/bin/node), so
// this script itself may be started with any node >= 18.

import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const PINNED_NODE = path.join(here, 'node_modules', 'node', 'bin', 'node');

class HarnessError extends Error {}

function log(msg = '') {
  process.stdout.write(msg + '\n');
}

function nodeBinary() {
  const candidates = [PINNED_NODE, process.execPath];
  for (const bin of candidates) {
    if (!fs.existsSync(bin)) continue;
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    const m = /^v(\d+)\./.exec(r.stdout ?? '');
    if (r.status === 0 && m && Number(m[1]) >= 22) return { bin, version: r.stdout.trim() };
  }
  throw new HarnessError(`no node >= 22 found (looked at ${candidates.join(', ')}); run \`npm ci\` in ${here}`);
}

function loadBaseline(file) {
  let raw;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new HarnessError(`cannot read baseline ${file}: ${e.message}`);
  }
  const list = raw?.expectedFailures;
  if (!Array.isArray(list)) throw new HarnessError(`${file}: "expectedFailures" must be an array`);
  const map = new Map();
  for (const [i, e] of list.entries()) {
    const where = `${file}: expectedFailures[${i}]`;
    if (typeof e?.scenario !== 'string' || !e.scenario) throw new HarnessError(`${where}: "scenario" must be a non-empty string`);
    if (typeof e.justification !== 'string' || !e.justification.trim() || /[\r\n]/.test(e.justification)) {
      throw new HarnessError(`${where} (${e.scenario}): "justification" must be a non-empty single line`);
    }
    if (map.has(e.scenario)) throw new HarnessError(`${where}: duplicate scenario ${e.scenario}`);
    let reason = null;
    if (e.failureMatches !== undefined) {
      try {
        reason = new RegExp(e.failureMatches, 'i');
      } catch (err) {
        throw new HarnessError(`${where} (${e.scenario}): bad "failureMatches" regex: ${err.message}`);
      }
    }
    map.set(e.scenario, { justification: e.justification, reason });
  }
  return map;
}

function knownScenarios(node) {
  const r = spawnSync(node, [CLI, 'list', '--server'], { encoding: 'utf8' });
  if (r.status !== 0) throw new HarnessError(`conformance list --server failed: ${r.stderr || r.stdout}`);
  const names = [...r.stdout.matchAll(/^\s+-\s+(\S+)/gm)].map((m) => m[1]);
  if (names.length === 0) throw new HarnessError('conformance list --server printed no scenarios');
  return new Set(names);
}

function runSuite(node, args, logFile, timeoutMs) {
  return new Promise((resolve, reject) => {
    const out = fs.openSync(logFile, 'w');
    const child = spawn(node, [CLI, ...args], {
      cwd: here,
      stdio: ['ignore', out, out],
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    });
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      reject(new HarnessError(`conformance suite did not finish within ${timeoutMs} ms (see ${logFile})`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new HarnessError(`cannot start conformance CLI: ${e.message}`));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      fs.closeSync(out);
      resolve({ code, signal });
    });
  });
}

// Fail fast (exit 2) when nothing answers at MCP_URL, rather than reporting
// a server that is down as a list of conformance failures. Any HTTP answer
// (even 4xx/405) is fine here.
async function preflight(url) {
  try {
    const res = await fetch(url, { method: 'GET', headers: { accept: 'text/event-stream' }, signal: AbortSignal.timeout(10000) });
    await res.body?.cancel().catch(() => {});
  } catch (e) {
    throw new HarnessError(`nothing answers at MCP_URL=${url}: ${e.cause?.message || e.message}`);
  }
}

// authProxy listens on 127.0.0.1 and forwards every request to target with
// "Authorization: Bearer token", streaming both bodies (SSE included) as
// they come. Host and Origin headers naming the proxy's port name target's
// instead, and are passed on otherwise as sent, so that the suite's DNS
// rebinding checks still reach the endpoint's own. It resolves to the
// proxy's URL for target's path, and a close function.
function authProxy(target, token) {
  const t = new URL(target);
  const tport = t.port || '80';
  const server = http.createServer((req, res) => {
    const ours = `:${req.socket.localPort}`;
    const retarget = (v) => (typeof v === 'string' && v.endsWith(ours) ? v.slice(0, -ours.length) + `:${tport}` : v);
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    headers.host = retarget(headers.host);
    if (headers.origin) headers.origin = retarget(headers.origin);
    const up = http.request({ host: t.hostname.replace(/^\[|\]$/g, ''), port: t.port || 80, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    });
    up.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${e.message}`);
    });
    req.pipe(up);
    res.on('close', () => up.destroy());
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}${t.pathname}${t.search}`, close: () => { server.closeAllConnections?.(); server.close(); } });
    });
  });
}

// Result dirs are named server-<scenario>-<ISO timestamp with : and . as ->.
const RESULT_DIR = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;

function collect(resultsDir, ran) {
  const dirs = new Map();
  for (const d of fs.readdirSync(resultsDir)) {
    const m = RESULT_DIR.exec(d);
    if (m) dirs.set(m[1], path.join(resultsDir, d));
  }
  const results = new Map();
  for (const scenario of ran) {
    const dir = dirs.get(scenario);
    const file = dir && path.join(dir, 'checks.json');
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (!Array.isArray(checks)) throw new Error('not an array');
    } catch {
      // The CLI writes checks.json only when a scenario returns; a thrown
      // scenario is reported in conformance.log only.
      checks = [{ id: scenario, status: 'FAILURE', errorMessage: 'scenario crashed: no checks.json written (see conformance.log)' }];
    }
    results.set(scenario, checks);
  }
  return results;
}

async function main() {
  const url = process.env.MCP_URL;
  if (!url) throw new HarnessError('MCP_URL is required (e.g. http://127.0.0.1:8080/mcp)');
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new HarnessError(`MCP_URL is not a URL: ${url}`);
  }
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname) && !u.hostname.startsWith('127.')) {
    throw new HarnessError(`MCP_URL must point at a loopback address, got ${u.hostname}`);
  }
  const baselineFile = path.resolve(process.env.CONFORMANCE_BASELINE || path.join(here, 'conformance-baseline.json'));
  const resultsDir = path.resolve(process.env.CONFORMANCE_RESULTS_DIR || path.join(here, 'results', 'conformance'));
  const suite = process.env.CONFORMANCE_SUITE || 'active';
  const scenario = process.env.CONFORMANCE_SCENARIO || '';
  const specVersion = process.env.CONFORMANCE_SPEC_VERSION || '';
  const timeoutMs = Number(process.env.CONFORMANCE_TIMEOUT_MS || 600000);

  const baseline = loadBaseline(baselineFile);
  const proxy = process.env.MCP_TOKEN ? await authProxy(url, process.env.MCP_TOKEN) : null;
  const suiteURL = proxy ? proxy.url : url;
  try {
    return await runAgainst(suiteURL, { url, baseline, baselineFile, resultsDir, suite, scenario, specVersion, timeoutMs });
  } finally {
    proxy?.close();
  }
}

async function runAgainst(suiteURL, { url, baseline, baselineFile, resultsDir, suite, scenario, specVersion, timeoutMs }) {
  await preflight(suiteURL);
  const { bin: node, version: nodeVersion } = nodeBinary();
  const known = knownScenarios(node);
  const unknown = [...baseline.keys()].filter((s) => !known.has(s));
  if (unknown.length) throw new HarnessError(`${baselineFile} names unknown scenarios: ${unknown.join(', ')}`);
  if (scenario && !known.has(scenario)) throw new HarnessError(`unknown CONFORMANCE_SCENARIO ${scenario}`);

  fs.rmSync(resultsDir, { recursive: true, force: true });
  fs.mkdirSync(resultsDir, { recursive: true });
  const logFile = path.join(resultsDir, 'conformance.log');
  const args = ['server', '--url', suiteURL, '-o', resultsDir];
  if (scenario) args.push('--scenario', scenario);
  else args.push('--suite', suite);
  if (specVersion) args.push('--spec-version', specVersion);

  log(`conformance: ${path.relative(here, CLI)} (node ${nodeVersion}) ${args.join(' ')}`);
  const { code, signal } = await runSuite(node, args, logFile, timeoutMs);
  const output = fs.readFileSync(logFile, 'utf8');
  const ran = scenario ? [scenario] : [...output.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
  if (signal) throw new HarnessError(`conformance CLI killed by ${signal} (see ${logFile})`);
  if (ran.length === 0) throw new HarnessError(`conformance CLI ran no scenario (exit ${code}); see ${logFile}:\n${output.slice(-2000)}`);
  if (!scenario && !/^=== SUMMARY ===$/m.test(output)) {
    throw new HarnessError(`conformance CLI exited ${code} before its summary; see ${logFile}:\n${output.slice(-2000)}`);
  }

  const results = collect(resultsDir, ran);
  const summary = {
    url,
    suite: scenario ? null : suite,
    scenario: scenario || null,
    specVersion: specVersion || null,
    baseline: baselineFile,
    cliExitCode: code,
    scenarios: {},
    unexpectedFailures: [],
    staleBaselineEntries: [],
    expectedFailures: [],
    passed: [],
  };
  log('');
  for (const [name, checks] of results) {
    const count = (s) => checks.filter((c) => c.status === s).length;
    const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
    const failed = bad.length > 0;
    const expected = baseline.has(name);
    const reason = expected ? baseline.get(name).reason : null;
    // With "failureMatches", an expected failure only counts as expected when
    // every failing check fails for the documented reason.
    const rightReason = !reason || bad.every((c) => reason.test(`${c.id}: ${c.errorMessage || c.description || ''}`));
    let verdict;
    if (failed && expected && !rightReason) verdict = 'UNEXPECTED-FAILURE';
    else if (failed && expected) verdict = 'expected-failure';
    else if (failed) verdict = 'UNEXPECTED-FAILURE';
    else if (expected) verdict = 'STALE-BASELINE';
    else verdict = 'pass';
    summary.scenarios[name] = {
      verdict,
      success: count('SUCCESS'),
      failure: count('FAILURE'),
      warning: count('WARNING'),
      problems: bad.map((c) => `${c.status} ${c.id}: ${c.errorMessage || c.description || ''}`.trim()),
      ...(expected ? { justification: baseline.get(name).justification } : {}),
      ...(failed && expected && !rightReason ? { wrongReason: `failing checks do not match failureMatches /${reason.source}/i` } : {}),
    };
    ({
      'expected-failure': summary.expectedFailures,
      'UNEXPECTED-FAILURE': summary.unexpectedFailures,
      'STALE-BASELINE': summary.staleBaselineEntries,
      pass: summary.passed,
    })[verdict].push(name);
    log(`  ${verdict.padEnd(18)} ${name}`);
    if (verdict === 'UNEXPECTED-FAILURE') {
      if (summary.scenarios[name].wrongReason) log(`      in baseline, but ${summary.scenarios[name].wrongReason}`);
      for (const p of summary.scenarios[name].problems) log(`      ${p}`);
    }
    if (verdict === 'STALE-BASELINE') log(`      now passes: remove it from ${path.basename(baselineFile)}`);
  }
  summary.baselineEntriesNotRun = [...baseline.keys()].filter((s) => !results.has(s));
  fs.writeFileSync(path.join(resultsDir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');

  const bad = summary.unexpectedFailures.length + summary.staleBaselineEntries.length;
  log('');
  log(
    `conformant: ${summary.passed.length}, expected failures: ${summary.expectedFailures.length}, ` +
      `unexpected failures: ${summary.unexpectedFailures.length}, stale baseline entries: ${summary.staleBaselineEntries.length}` +
      (summary.baselineEntriesNotRun.length ? `, baseline entries not run: ${summary.baselineEntriesNotRun.length}` : ''),
  );
  log(`results: ${path.relative(process.cwd(), resultsDir) || '.'} (summary.json, conformance.log, per-scenario checks.json)`);
  // Closing line: a scenario "passes" the gate when its outcome matches the
  // baseline (conformant, or an expected failure).
  log(`conformance baseline: ${results.size - bad} passed, ${bad} failed`);
  return bad ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`conformance.mjs: ${e instanceof HarnessError ? '' : 'internal error: '}${e.stack && !(e instanceof HarnessError) ? e.stack : e.message}\n`);
    process.exit(2);
  },
);
