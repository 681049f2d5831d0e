package taskswarm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// The probes may say yes to a payload that is not a sub-task or notice, but
// never no to one that decodes as one: a node would then hand a sub-task to
// the agent's own handler. Payloads are built from keys and values that
// encoding/json matches in surprising ways (case, U+017F and U+212A
// folding, \u escapes).
func TestProbesNeverRefuseWhatDecodes(t *testing.T) {
	keys := []string{
		`"swarmId"`, `"SWARMID"`, `"swarmid"`, `"ſwarmId"`, `"\u0073warmId"`, `"swarm\u0049d"`, `"swarmld"`,
		`"subTaskId"`, `"SubTaskID"`, `"subtaſkid"`, `"subTas\u212Aid"`, `"attempt"`, `"ATTEMPT"`,
		`"description"`, `"Description"`, `"requiredCapabilities"`, `"kind"`, `"KIND"`, `"ḱind"`,
		`"taskDescription"`, `"other"`,
	}
	values := []string{
		`"s1"`, `"t1"`, `1`, `2`, `"do it"`, `[]`, `["code.write"]`, `"swarm-status"`, `"swarm\u002dstatus"`,
		`"\u0073warm-done"`, `"swarm-"`, `"swarm"`, `null`, `{}`, `"ok"`,
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "fields")
		var b strings.Builder
		b.WriteString(rapid.SampledFrom([]string{"", " ", "\n\t"}).Draw(t, "lead"))
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(rapid.SampledFrom(keys).Draw(t, "key"))
			b.WriteByte(':')
			b.WriteString(rapid.SampledFrom(values).Draw(t, "value"))
		}
		b.WriteByte('}')
		p := []byte(b.String())
		if _, err := taskswarm.DecodeTask(p); err == nil && !taskswarm.MayBeTask(p) {
			t.Fatalf("MayBeTask refuses a sub-task: %s", p)
		}
		if _, err := taskswarm.DecodeNotice(p); err == nil && !taskswarm.MayBeNotice(p) {
			t.Fatalf("MayBeNotice refuses a notice: %s", p)
		}
	})
}

func TestProbes(t *testing.T) {
	for _, tc := range []struct {
		payload      string
		task, notice bool
	}{
		{`{"swarmId":"s","subTaskId":"t","attempt":1,"description":"d"}`, true, false},
		{`{"SWARMID":"s","subtaskid":"t","attempt":1,"description":"d"}`, true, false},
		{`{"ſwarmId":"s"}`, true, false},     // long s folds to s: the probe looks for "warmid"
		{`{"swarm\u0049d":"s"}`, true, true}, // an escape: only a decode can tell
		{`{"kind":"swarm-done","swarmId":"s"}`, true, true},
		{`{"kind":"note","text":"hello"}`, false, false},
		{`{"question":"what is the swarm-size?"}`, false, false}, // no opening quote before swarm-
		{`"just a string"`, false, false},
		{`[1,2]`, false, false},
		{``, false, false},
	} {
		p := []byte(tc.payload)
		if got := taskswarm.MayBeTask(p); got != tc.task {
			t.Errorf("MayBeTask(%s) = %v, want %v", p, got, tc.task)
		}
		if got := taskswarm.MayBeNotice(p); got != tc.notice {
			t.Errorf("MayBeNotice(%s) = %v, want %v", p, got, tc.notice)
		}
	}
	// Refusals keep their reasons: not an object, too large, not a task.
	if _, err := taskswarm.DecodeTask([]byte(`"x"`)); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("DecodeTask of a string: %v", err)
	}
	if _, err := taskswarm.DecodeTask([]byte(`{"` + strings.Repeat("x", taskswarm.MaxPayloadSize) + `":1}`)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("DecodeTask of an oversized payload: %v", err)
	}
	if _, err := taskswarm.DecodeTask([]byte(`{"question":"hi"}`)); err == nil || !strings.Contains(err.Error(), "swarmId") {
		t.Errorf("DecodeTask of another object: %v", err)
	}
}

// BenchmarkProbeTask is the cost a node pays per request its agents get to
// tell a sub-task from anything else, next to decoding to find out.
func BenchmarkProbeTask(b *testing.B) {
	p := []byte(`{"question":"` + strings.Repeat("What is the weather like in Lisbon? ", 30) + `","lang":"en"}`)
	b.Run("probe", func(b *testing.B) {
		for b.Loop() {
			if taskswarm.MayBeTask(p) {
				b.Fatal("probe says task")
			}
		}
	})
	b.Run("json-decode", func(b *testing.B) { // what DecodeTask did before the probe
		for b.Loop() {
			var task taskswarm.Task
			if err := json.Unmarshal(p, &task); err != nil || task.SwarmID != "" {
				b.Fatal("decoded a task")
			}
		}
	})
}
