package mcpbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nova-node/nova-node/mcpbridge"
	"pgregory.net/rapid"
)

var wireRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func genAgent() *rapid.Generator[string] {
	return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9_-]{0,20}`)
}

func genTool() *rapid.Generator[string] {
	return rapid.StringMatching(`[A-Za-z0-9_.-]{1,30}`)
}

func genSchema() *rapid.Generator[json.RawMessage] {
	return rapid.Custom(func(t *rapid.T) json.RawMessage {
		props := rapid.SliceOfDistinct(rapid.StringMatching(`[a-z]{1,8}`), func(s string) string { return s }).Draw(t, "props")
		m := map[string]any{"type": "object"}
		p := map[string]any{}
		for _, k := range props {
			p[k] = map[string]any{"type": rapid.SampledFrom([]string{"string", "number", "boolean"}).Draw(t, "type")}
		}
		m["properties"] = p
		b, _ := json.Marshal(m)
		return b
	})
}

func genTools(t *rapid.T) []mcpbridge.Tool {
	agents := rapid.SliceOfNDistinct(genAgent(), 1, 5, strings.ToLower).Draw(t, "agents")
	var tools []mcpbridge.Tool
	seen := map[string]bool{}
	n := rapid.IntRange(1, 20).Draw(t, "n")
	for i := 0; i < n; i++ {
		a := rapid.SampledFrom(agents).Draw(t, "agent")
		name := genTool().Draw(t, "tool")
		if seen[a+"."+name] {
			continue
		}
		seen[a+"."+name] = true
		tl := mcpbridge.Tool{Agent: a, Name: name, Description: rapid.String().Draw(t, "desc"), InputSchema: genSchema().Draw(t, "in")}
		if rapid.Bool().Draw(t, "hasOut") {
			tl.OutputSchema = genSchema().Draw(t, "out")
		}
		tools = append(tools, tl)
	}
	return tools
}

func echoHandler(tag string) mcpbridge.ToolHandler {
	return func(_ context.Context, args json.RawMessage) (mcpbridge.Result, error) {
		b, _ := json.Marshal(map[string]any{"handler": tag, "args": args})
		return mcpbridge.Result{Content: b}, nil
	}
}

// Feature: a2a-mcp-protocols, Property 18: MCP tool registration and listing
func TestProperty18_ToolRegistrationAndListing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tools := genTools(t)
		r := mcpbridge.NewRegistry()
		for _, tl := range tools {
			if err := r.RegisterTool(tl, echoHandler(tl.Agent+"."+tl.Name)); err != nil {
				t.Fatalf("register %v: %v", tl, err)
			}
		}
		list := r.ListTools()
		if len(list) != len(tools) {
			t.Fatalf("listed %d tools, registered %d", len(list), len(tools))
		}
		want := map[string]mcpbridge.Tool{}
		for _, tl := range tools {
			want[tl.Agent+"."+tl.Name] = tl
		}
		for i, got := range list {
			if i > 0 && list[i-1].Canonical >= got.Canonical {
				t.Fatalf("not sorted at %d", i)
			}
			w, ok := want[got.Canonical]
			if !ok {
				t.Fatalf("unexpected tool %q", got.Canonical)
			}
			if got.Canonical != got.Agent+"."+got.Name || got.Agent != w.Agent || got.Name != w.Name || got.Description != w.Description ||
				!bytes.Equal(got.InputSchema, w.InputSchema) || !bytes.Equal(got.OutputSchema, w.OutputSchema) {
				t.Fatalf("listed %+v, registered %+v", got, w)
			}
			if !wireRe.MatchString(got.Wire) {
				t.Fatalf("illegal wire name %q", got.Wire)
			}
		}
	})
}

// Feature: a2a-mcp-protocols, Property 19: MCP tool invocation routing
func TestProperty19_ToolInvocationRouting(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tools := genTools(t)
		r := mcpbridge.NewRegistry()
		for _, tl := range tools {
			if err := r.RegisterTool(tl, echoHandler(tl.Agent+"."+tl.Name)); err != nil {
				t.Fatal(err)
			}
		}
		list := r.ListTools()
		for i := 0; i < 10; i++ {
			ti := rapid.SampledFrom(list).Draw(t, "target")
			name := ti.Canonical
			if rapid.Bool().Draw(t, "byWire") {
				name = ti.Wire
			}
			args, _ := json.Marshal(map[string]string{"k": rapid.String().Draw(t, "v")})
			res, err := r.CallTool(context.Background(), name, args)
			if err != nil || res.IsError {
				t.Fatalf("call %q: %v %+v", name, err, res)
			}
			want, _ := json.Marshal(map[string]any{"handler": ti.Canonical, "args": json.RawMessage(args)})
			if !bytes.Equal(res.Content, want) {
				t.Fatalf("got %s, want %s", res.Content, want)
			}
		}
	})
}

// Feature: a2a-mcp-protocols, Property 20: MCP tool name uniqueness
func TestProperty20_ToolNameUniqueness(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tools := genTools(t)
		r := mcpbridge.NewRegistry()
		for _, tl := range tools {
			if err := r.RegisterTool(tl, echoHandler("first")); err != nil {
				t.Fatal(err)
			}
		}
		dup := rapid.SampledFrom(tools).Draw(t, "dup")
		dup.Description = "second"
		err := r.RegisterTool(dup, echoHandler("second"))
		var de *mcpbridge.DuplicateToolError
		if !errors.As(err, &de) || !errors.Is(err, mcpbridge.ErrDuplicateTool) || de.Code() != mcpbridge.CodeDuplicateTool {
			t.Fatalf("second registration: %v", err)
		}
		canon := dup.Agent + "." + dup.Name
		if de.Name != canon || !strings.Contains(err.Error(), canon) {
			t.Fatalf("error does not name the tool: %v", err)
		}
		if len(r.ListTools()) != len(tools) {
			t.Fatal("registry changed")
		}
		res, _ := r.CallTool(context.Background(), canon, nil)
		if !bytes.Contains(res.Content, []byte(`"first"`)) {
			t.Fatalf("first handler replaced: %s", res.Content)
		}
	})
}

// Feature: a2a-mcp-protocols, Property 21: MCP resource registration and read round trip
func TestProperty21_ResourceReadRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := mcpbridge.NewRegistry()
		paths := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z0-9/]{1,20}`), 1, 10, func(s string) string { return s }).Draw(t, "paths")
		type rec struct {
			res  mcpbridge.Resource
			data []byte
		}
		var all []rec
		for _, p := range paths {
			res := mcpbridge.Resource{
				URI:      "nova://" + p,
				Name:     "res " + p,
				MIMEType: rapid.SampledFrom([]string{"", "text/plain", "application/json", "text/markdown; charset=utf-8"}).Draw(t, "mime"),
				Agent:    genAgent().Draw(t, "agent"),
			}
			data := rapid.SliceOf(rapid.Byte()).Draw(t, "data")
			if err := r.RegisterResource(res, func(context.Context) ([]byte, error) { return data, nil }); err != nil {
				t.Fatal(err)
			}
			all = append(all, rec{res, data})
		}
		for _, a := range all {
			c, err := r.ReadResource(context.Background(), a.res.URI)
			if err != nil {
				t.Fatal(err)
			}
			if c.URI != a.res.URI || c.MIMEType != a.res.MIMEType || !bytes.Equal(c.Data, a.data) {
				t.Fatalf("read %+v, want %+v", c, a)
			}
		}
		_, err := r.ReadResource(context.Background(), "nova://missing:")
		var nf *mcpbridge.ResourceNotFoundError
		if !errors.As(err, &nf) || nf.URI != "nova://missing:" {
			t.Fatalf("missing resource: %v", err)
		}
	})
}

// Feature: a2a-mcp-protocols, Property 22: MCP prompt template substitution
func TestProperty22_PromptTemplateSubstitution(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z_][a-z0-9_]{0,8}`), 0, 6, func(s string) string { return s }).Draw(t, "names")
		// Literal text without braces, placeholders interleaved.
		lit := rapid.StringMatching(`[^{}]{0,10}`)
		var tmpl, want strings.Builder
		args := map[string]string{}
		var decl []mcpbridge.PromptArg
		for _, n := range names {
			v := rapid.String().Draw(t, "value")
			args[n] = v
			decl = append(decl, mcpbridge.PromptArg{Name: n, Required: rapid.Bool().Draw(t, "req")})
		}
		k := rapid.IntRange(0, 12).Draw(t, "k")
		for i := 0; i < k; i++ {
			l := lit.Draw(t, "lit")
			tmpl.WriteString(l)
			want.WriteString(l)
			if len(names) > 0 {
				n := rapid.SampledFrom(names).Draw(t, "ph")
				if rapid.Bool().Draw(t, "spaced") {
					tmpl.WriteString("{{ " + n + " }}")
				} else {
					tmpl.WriteString("{{" + n + "}}")
				}
				want.WriteString(args[n])
			}
		}
		r := mcpbridge.NewRegistry()
		p := mcpbridge.Prompt{Agent: "venus", Name: "p", Arguments: decl, Template: tmpl.String()}
		if err := r.RegisterPrompt(p); err != nil {
			t.Fatal(err)
		}
		got, err := r.GetPrompt("venus.p", args)
		if err != nil {
			t.Fatal(err)
		}
		if got != want.String() {
			t.Fatalf("rendered %q, want %q (template %q)", got, want.String(), tmpl.String())
		}
	})
}

// Feature: a2a-mcp-protocols, Property 33: MCP tool invocation metrics accuracy
//
// Each handler runs for a duration the test draws, on synctest's fake
// clock, so the call takes exactly that long: the snapshot's average must
// be the mean of the durations the test chose, each record passed to the
// hook must carry its call's duration, and the counts (total, per tool,
// errors) must match the calls the test made.
func TestProperty33_ToolInvocationMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// rapid asks a *testing.T for its deadline, which a bubble forbids:
		// given only the TB, it counts from the (fake) clock instead.
		rapid.Check(struct{ testing.TB }{t}, func(t *rapid.T) {
			tools := genTools(t)
			r := mcpbridge.NewRegistry()
			var hooked []mcpbridge.InvocationRecord
			r.SetInvocationHook(func(rec mcpbridge.InvocationRecord) { hooked = append(hooked, rec) })
			var runFor time.Duration // the next call's duration, set before the call
			for _, tl := range tools {
				h := func(_ context.Context, args json.RawMessage) (mcpbridge.Result, error) {
					time.Sleep(runFor) // the fake clock: exactly runFor passes
					if bytes.Contains(args, []byte("fail")) {
						return mcpbridge.Result{}, errors.New("boom")
					}
					return mcpbridge.Result{Content: json.RawMessage(`"ok"`)}, nil
				}
				if err := r.RegisterTool(tl, h); err != nil {
					t.Fatal(err)
				}
			}
			list := r.ListTools()
			n := rapid.IntRange(0, 40).Draw(t, "n")
			byTool := map[string]int64{}
			var errs int64
			var totalMs float64 // of the durations drawn below
			for i := 0; i < n; i++ {
				ti := rapid.SampledFrom(list).Draw(t, "tool")
				args := `{"x":"ok"}`
				if rapid.Bool().Draw(t, "fail") {
					args = `{"x":"fail"}`
					errs++
				}
				runFor = time.Duration(rapid.Int64Range(0, 5_000_000).Draw(t, "µs")) * time.Microsecond
				if _, err := r.CallTool(context.Background(), ti.Wire, json.RawMessage(args)); err != nil {
					t.Fatal(err)
				}
				ms := float64(runFor) / float64(time.Millisecond)
				totalMs += ms
				if len(hooked) != i+1 || hooked[i].DurationMs != ms || hooked[i].Tool != ti.Canonical {
					t.Fatalf("call %d of %s for %v: hook got %d records, the last %+v", i, ti.Canonical, runFor, len(hooked), hooked[len(hooked)-1])
				}
				byTool[ti.Canonical]++
			}
			s := r.Metrics().Snapshot()
			if s.TotalToolInvocations != int64(n) || s.ErrorCount != errs {
				t.Fatalf("snapshot %+v, want total %d errors %d", s, n, errs)
			}
			if !reflect.DeepEqual(s.ToolInvocationsByTool, byTool) {
				t.Fatalf("by tool %v, want %v", s.ToolInvocationsByTool, byTool)
			}
			want := 0.0
			if n > 0 {
				want = totalMs / float64(n)
			}
			if math.Abs(s.AverageToolDurationMs-want) > 1e-9*math.Max(1, want) {
				t.Fatalf("average %v ms, want %v ms (the mean of the %d durations the handlers ran for)", s.AverageToolDurationMs, want, n)
			}
			r.Metrics().Reset()
			if s := r.Metrics().Snapshot(); s.TotalToolInvocations != 0 || len(s.ToolInvocationsByTool) != 0 || s.ErrorCount != 0 || s.AverageToolDurationMs != 0 {
				t.Fatalf("after reset: %+v", s)
			}
		})
	})
}

func genJSON() *rapid.Generator[json.RawMessage] {
	return rapid.Custom(func(t *rapid.T) json.RawMessage {
		m := rapid.MapOf(rapid.StringMatching(`[a-z]{1,5}`), rapid.OneOf(
			rapid.Map(rapid.String(), func(s string) any { return s }),
			rapid.Map(rapid.Int64(), func(i int64) any { return i }),
			rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		)).Draw(t, "obj")
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// Feature: a2a-mcp-protocols, Property 34: MCP invocation record serialization round trip
//
// The records are real: made by CallTool for calls with drawn arguments,
// results and failures (a handler error, an isError result, a panic) and
// taken from the invocation hook, as a node takes them. Each survives its
// JSON form unchanged. A node does not write records in this form: its hook
// turns each into an mcp-invocation event, which node's
// TestProperty34_InvocationEventsRoundTrip follows through the node's API.
func TestProperty34_InvocationRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := mcpbridge.NewRegistry()
		var recs []mcpbridge.InvocationRecord
		r.SetInvocationHook(func(rec mcpbridge.InvocationRecord) { recs = append(recs, rec) })
		var result json.RawMessage
		var outcome string
		tools := genTools(t)
		for _, tl := range tools {
			h := func(context.Context, json.RawMessage) (mcpbridge.Result, error) {
				switch outcome {
				case "error":
					return mcpbridge.Result{}, errors.New(rapid.String().Draw(t, "err"))
				case "isError":
					return mcpbridge.Result{Content: result, IsError: true}, nil
				case "panic":
					panic("tool broke")
				}
				return mcpbridge.Result{Content: result}, nil
			}
			if err := r.RegisterTool(tl, h); err != nil {
				t.Fatal(err)
			}
		}
		list := r.ListTools()
		for i, n := 0, rapid.IntRange(1, 5).Draw(t, "calls"); i < n; i++ {
			ti := rapid.SampledFrom(list).Draw(t, "tool")
			var args json.RawMessage
			if rapid.Bool().Draw(t, "hasArgs") {
				args = genJSON().Draw(t, "args")
			}
			result = nil
			if rapid.Bool().Draw(t, "hasResult") {
				result = genJSON().Draw(t, "result")
			}
			outcome = rapid.SampledFrom([]string{"ok", "error", "isError", "panic"}).Draw(t, "outcome")
			if _, err := r.CallTool(context.Background(), ti.Wire, args); err != nil {
				t.Fatal(err)
			}
			if len(recs) != i+1 {
				t.Fatalf("%d records after %d calls", len(recs), i+1)
			}
			rec := recs[i]
			if rec.Tool != ti.Canonical || rec.Agent != ti.Agent || rec.Success != (outcome == "ok") || (rec.Error == "") != rec.Success {
				t.Fatalf("call of %s (%s): record %+v", ti.Canonical, outcome, rec)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			var back mcpbridge.InvocationRecord
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rec, back) {
				t.Fatalf("round trip:\n%+v\n%+v", rec, back)
			}
		}
	})
}

// The wire-name mapping: round trip, legality, length, no collisions.
func TestPropertyWireNameMapping(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := mcpbridge.NewWireNames()
		// Agents that sanitize alike, long names and dotted tools, to force
		// disambiguation.
		agent := rapid.OneOf(genAgent(), rapid.StringMatching(`[a-z][a-z_-]{40,63}`), rapid.SampledFrom([]string{"a", "a_b", "a-b"}))
		tool := rapid.OneOf(genTool(), rapid.StringMatching(`[a-z.]{60,128}`), rapid.SampledFrom([]string{"c", "b_c", "b.c"}))
		pairs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) [2]string {
			return [2]string{agent.Draw(t, "agent"), tool.Draw(t, "tool")}
		}), 1, 60).Draw(t, "pairs")
		assigned := map[string]string{}
		for _, p := range pairs {
			wire, err := w.Assign(p[0], p[1])
			if err != nil {
				t.Fatal(err)
			}
			canon, _ := mcpbridge.Canonical(p[0], p[1])
			if prev, ok := assigned[canon]; ok && prev != wire {
				t.Fatalf("unstable: %q then %q", prev, wire)
			}
			assigned[canon] = wire
			if !wireRe.MatchString(wire) || len(wire) > 64 {
				t.Fatalf("illegal wire name %q", wire)
			}
		}
		seen := map[string]string{}
		for canon, wire := range assigned {
			if other, ok := seen[wire]; ok {
				t.Fatalf("collision: %q and %q both %q", other, canon, wire)
			}
			seen[wire] = canon
			if back, ok := w.Canonical(wire); !ok || back != canon {
				t.Fatalf("wire %q maps back to %q, want %q", wire, back, canon)
			}
			if fw, _ := w.Wire(canon); fw != wire {
				t.Fatalf("Wire(%q) = %q", canon, fw)
			}
			a, tl, err := mcpbridge.SplitCanonical(canon)
			if err != nil || a+"."+tl != canon {
				t.Fatalf("split %q: %q %q %v", canon, a, tl, err)
			}
		}
		if w.Len() != len(assigned) {
			t.Fatalf("len %d, want %d", w.Len(), len(assigned))
		}
	})
}

func FuzzWireName(f *testing.F) {
	for _, s := range [][2]string{{"a", "b"}, {"", ""}, {"venus", "search.web"}, {"ä", "\x00"}, {strings.Repeat("x", 100), strings.Repeat("y", 100)}} {
		f.Add(s[0], s[1], false)
	}
	f.Fuzz(func(t *testing.T, agent, tool string, takePlain bool) {
		taken := func(s string) bool {
			return takePlain && !strings.Contains(s, "-") || takePlain && len(s) == 64 && s[55] == '-' && s[56] < '8'
		}
		for _, tk := range []func(string) bool{nil, taken} {
			wire := mcpbridge.WireName(agent, tool, tk)
			if !wireRe.MatchString(wire) {
				t.Fatalf("WireName(%q, %q) = %q: illegal", agent, tool, wire)
			}
			if tk != nil && tk(wire) {
				t.Fatalf("WireName(%q, %q) = %q: taken", agent, tool, wire)
			}
		}
	})
}
