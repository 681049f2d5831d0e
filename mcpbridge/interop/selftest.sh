#!/usr/bin/env bash
# Self-test of the interop harness against the go-sdk v1.8.0 reference server
# (testdata/refserver/main.go), so the harness is checked without a nova-node.
# Builds the reference server in a scratch Go module outside the repo, serves
# it over stdio and over streamable HTTP on 127.0.0.1 (random port), and runs
# client.mjs (both transports), stateless-probe.mjs and conformance.mjs
# against it. Needs: `npm ci` done in this directory, go, the Go module proxy.
#
#   bash mcpbridge/interop/selftest.sh
#
# Env: CONFORMANCE_SUITE (default "all" here, so the baseline's pending-suite
# entries are exercised too). Ends with "selftest: N passed, N failed".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
node="$here/node_modules/node/bin/node"
if [[ ! -x "$node" ]]; then
  echo "selftest: $node missing: run 'npm ci' in $here first" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/nova-interop-selftest.XXXXXX")
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "selftest: building refserver (go-sdk v1.8.0) in $work"
mkdir -p "$work/refserver"
cp "$here/testdata/refserver/main.go" "$work/refserver/main.go"
(
  cd "$work/refserver" &&
    go mod init refserver >/dev/null 2>&1 &&
    go get github.com/modelcontextprotocol/go-sdk/mcp@v1.8.0 >/dev/null 2>&1 &&
    go build -o refserver main.go # naming the file overrides //go:build ignore
) || { echo "selftest: cannot build refserver" >&2; exit 2; }
ref="$work/refserver/refserver"

"$ref" -http 127.0.0.1:0 -url-file "$work/url" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do [[ -s "$work/url" ]] && break; sleep 0.1; done
if [[ ! -s "$work/url" ]]; then
  echo "selftest: refserver did not start:" >&2; cat "$work/server.log" >&2; exit 2
fi
url=$(cat "$work/url")
echo "selftest: refserver at $url"

passed=0 failed=0
# check NAME EXPECTED_EXIT JS_ASSERTION -- runs the command in "$@" after --,
# checks its exit code and evaluates JS_ASSERTION with `out` = its stdout JSON.
check() {
  local name=$1 want=$2 assertion=$3; shift 4
  local out rc
  out=$("$@" 2>"$work/stderr"); rc=$?
  if [[ $rc -eq $want ]] && OUT="$out" "$node" -e "const out = JSON.parse(process.env.OUT); if (!($assertion)) process.exit(1)" 2>>"$work/stderr"; then
    echo "ok   $name"; passed=$((passed + 1))
  else
    echo "FAIL $name (exit $rc, want $want)"; echo "     stdout: $out"; sed 's/^/     stderr: /' "$work/stderr"
    failed=$((failed + 1))
  fi
}

full_env=(MCP_TOOL=echo_say 'MCP_ARGS={"text":"hello interop"}' MCP_RESOURCE=nova://test/readme
  MCP_PROMPT=greet 'MCP_PROMPT_ARGS={"name":"Ada"}')
full_ok='out.tools.includes("echo_say") && out.toolTitles.echo_say === "echo.say"
  && out.call.content[0].text === "hello interop" && !out.call.isError
  && out.resources.includes("nova://test/readme") && out.resource.contents[0].text.includes("reference server")
  && out.prompts.includes("greet") && out.prompt.messages[0].content.text === "Hello, Ada!"'

check "client.mjs stdio: list/call/read/get" 0 "$full_ok && out.transport === 'stdio'" -- \
  env "${full_env[@]}" "MCP_STDIO_CMD=[\"$ref\"]" "$node" "$here/client.mjs"
check "client.mjs http: list/call/read/get" 0 "$full_ok && out.transport === 'streamable-http'" -- \
  env "${full_env[@]}" "MCP_URL=$url" "$node" "$here/client.mjs"
check "client.mjs http: list only" 0 'out.tools.length === 1 && out.call === null && out.resource === null && out.prompt === null' -- \
  env "MCP_URL=$url" "$node" "$here/client.mjs"
check "client.mjs: unknown tool -> exit 1" 1 '/not in tools\/list/.test(out.error)' -- \
  env "MCP_URL=$url" MCP_TOOL=no_such_tool "$node" "$here/client.mjs"
check "client.mjs: tool isError -> exit 1" 1 'out.call.isError === true' -- \
  env "MCP_URL=$url" MCP_TOOL=echo_say 'MCP_ARGS={"text":5}' "$node" "$here/client.mjs"
check "client.mjs: MCP_ALLOW_TOOL_ERROR=1 -> exit 0" 0 'out.call.isError === true' -- \
  env "MCP_URL=$url" MCP_TOOL=echo_say 'MCP_ARGS={"text":5}' MCP_ALLOW_TOOL_ERROR=1 "$node" "$here/client.mjs"
check "client.mjs: unknown resource -> exit 1" 1 'typeof out.error === "string"' -- \
  env "MCP_URL=$url" MCP_RESOURCE=nova://test/nope "$node" "$here/client.mjs"
check "client.mjs: stdio server that never answers -> exit 1" 1 '/timed out/i.test(out.error)' -- \
  env 'MCP_STDIO_CMD=["sleep","60"]' MCP_TIMEOUT_MS=500 "$node" "$here/client.mjs"
check "stateless-probe.mjs (2026-07-28 route)" 0 'out.ok && out.steps.every(s => s.sessionId == null)' -- \
  env "MCP_URL=$url" MCP_TOOL=echo_say 'MCP_ARGS={"text":"x"}' "$node" "$here/stateless-probe.mjs"

echo "selftest: conformance suite (${CONFORMANCE_SUITE:-all}) against $url"
if MCP_URL=$url CONFORMANCE_SUITE=${CONFORMANCE_SUITE:-all} \
  CONFORMANCE_BASELINE="$here/testdata/refserver/conformance-baseline.json" \
  CONFORMANCE_RESULTS_DIR="$here/results/selftest-conformance" "$node" "$here/conformance.mjs"; then
  echo "ok   conformance.mjs matches testdata/refserver/conformance-baseline.json"; passed=$((passed + 1))
else
  echo "FAIL conformance.mjs (see $here/results/selftest-conformance)"; failed=$((failed + 1))
fi

echo "selftest: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
