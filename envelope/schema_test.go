package envelope_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/envelope"
)

type schemaProp struct {
	Type       string                `json:"type"`
	MinLength  *int                  `json:"minLength"`
	MaxLength  *int                  `json:"maxLength"`
	Minimum    *int                  `json:"minimum"`
	Maximum    *int                  `json:"maximum"`
	Const      any                   `json:"const"`
	Enum       []string              `json:"enum"`
	Required   []string              `json:"required"`
	Properties map[string]schemaProp `json:"properties"`
}

// jsonKeys returns the JSON member names of struct type t and which are
// required (no omitempty).
func jsonKeys(t reflect.Type) (all, required []string) {
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}

func keysOf(m map[string]schemaProp) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The published schema names exactly the envelope's fields, requires the
// ones its JSON always carries, and states the package's limits and types.
func TestJSONSchemaMatchesTheRules(t *testing.T) {
	var s schemaProp
	if err := json.Unmarshal(envelope.JSONSchema(), &s); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	all, req := jsonKeys(reflect.TypeFor[envelope.Envelope]())
	if got := keysOf(s.Properties); !slices.Equal(got, all) {
		t.Fatalf("schema properties %v, envelope fields %v", got, all)
	}
	sreq := slices.Sorted(slices.Values(s.Required))
	if !slices.Equal(sreq, req) {
		t.Fatalf("schema requires %v, the envelope always writes %v", sreq, req)
	}
	mall, mreq := jsonKeys(reflect.TypeFor[envelope.Metadata]())
	meta := s.Properties["metadata"]
	if got := keysOf(meta.Properties); !slices.Equal(got, mall) || !slices.Equal(slices.Sorted(slices.Values(meta.Required)), mreq) {
		t.Fatalf("metadata: schema %v (required %v), struct %v (required %v)", got, meta.Required, mall, mreq)
	}
	limits := map[string]int{"id": envelope.MaxIDLen, "correlationId": envelope.MaxIDLen, "sender": envelope.MaxAgentLen, "recipient": envelope.MaxAgentLen}
	for k, want := range limits {
		if p := s.Properties[k]; p.MaxLength == nil || *p.MaxLength != want {
			t.Errorf("%s: maxLength %v, want %d", k, p.MaxLength, want)
		}
	}
	if p := meta.Properties["sandboxId"]; p.MaxLength == nil || *p.MaxLength != envelope.MaxSandboxLen {
		t.Errorf("sandboxId maxLength %v", p.MaxLength)
	}
	if p := meta.Properties["escalationJustification"]; p.MaxLength == nil || *p.MaxLength != envelope.MaxJustificationLen {
		t.Errorf("escalationJustification maxLength %v", p.MaxLength)
	}
	if c, ok := s.Properties["schemaVersion"].Const.(float64); !ok || int(c) != envelope.SchemaVersion {
		t.Errorf("schemaVersion const %v", s.Properties["schemaVersion"].Const)
	}
	var types []string
	for _, ty := range s.Properties["type"].Enum {
		if !envelope.Type(ty).Valid() {
			t.Errorf("schema type %q is not valid", ty)
		}
		types = append(types, ty)
	}
	if len(types) != 10 {
		t.Errorf("%d types in the schema, want the ten", len(types))
	}
	if h := meta.Properties["routingHint"].Enum; len(h) != 1 || h[0] != envelope.RoutingHintCapability {
		t.Errorf("routingHint enum %v", h)
	}
}
