package agentcard_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

func TestValidate(t *testing.T) {
	host := testNodes(t)[1].id
	tests := []struct {
		name   string
		mutate func(c *agentcard.Card)
		fields []string // problem fields, in order; nil means valid
	}{
		{"valid", func(c *agentcard.Card) {}, nil},
		{"empty capabilities are allowed", func(c *agentcard.Card) { c.Capabilities = []agentcard.Capability{} }, nil},
		{"nil capabilities are missing", func(c *agentcard.Card) { c.Capabilities = nil }, []string{"capabilities"}},
		{"host", func(c *agentcard.Card) { c.Host = host.String() }, nil},
		{"prerelease and build", func(c *agentcard.Card) { c.Version = "1.2.3-rc.1+build.5" }, nil},
		{"id with @", func(c *agentcard.Card) { c.ID = "sun@x" }, []string{"id"}},
		{"id leading dot", func(c *agentcard.Card) { c.ID = ".sun" }, []string{"id"}},
		{"id 65 bytes", func(c *agentcard.Card) { c.ID = strings.Repeat("a", 65) }, []string{"id"}},
		{"id 64 bytes", func(c *agentcard.Card) { c.ID = strings.Repeat("a", 64) }, nil},
		{"name too long", func(c *agentcard.Card) { c.Name = strings.Repeat("é", 129) }, []string{"name"}},
		{"name 128 characters", func(c *agentcard.Card) { c.Name = strings.Repeat("é", 128) }, nil},
		{"name invalid utf-8", func(c *agentcard.Card) { c.Name = "a\xffb" }, []string{"name"}},
		{"version v-prefix", func(c *agentcard.Card) { c.Version = "v1.0.0" }, []string{"version"}},
		{"version two parts", func(c *agentcard.Card) { c.Version = "1.0" }, []string{"version"}},
		{"version leading zero", func(c *agentcard.Card) { c.Version = "01.0.0" }, []string{"version"}},
		{"version empty prerelease", func(c *agentcard.Card) { c.Version = "1.0.0-" }, []string{"version"}},
		{"version empty build part", func(c *agentcard.Card) { c.Version = "1.0.0+a..b" }, []string{"version"}},
		{"description too long", func(c *agentcard.Card) { c.Description = strings.Repeat("x", 4097) }, []string{"description"}},
		{"tier", func(c *agentcard.Card) { c.Tier = 7 }, []string{"tier"}},
		{"33 protocols", func(c *agentcard.Card) { c.Protocols = make([]string, 33); fill(c.Protocols, "p") }, []string{"protocols"}},
		{"empty protocol", func(c *agentcard.Card) { c.Protocols = []string{"a", ""} }, []string{"protocols[1]"}},
		{"hyperswarm transport", func(c *agentcard.Card) {
			c.Endpoints = []agentcard.Endpoint{{Transport: "local"}, {Transport: "hyperswarm"}}
		}, []string{"endpoints[1].transport"}},
		{"missing transport", func(c *agentcard.Card) { c.Endpoints = []agentcard.Endpoint{{Address: "x"}} }, []string{"endpoints[0].transport"}},
		{"capability problems", func(c *agentcard.Card) {
			c.Capabilities = []agentcard.Capability{
				{ID: "ok"},
				{ID: ""},
				{ID: "ok"},
				{ID: "bad id"},
				{ID: "s", InputSchema: json.RawMessage(`{`), OutputSchema: json.RawMessage(`nope`)},
				{ID: "n", Name: strings.Repeat("n", 129)},
			}
		}, []string{"capabilities[1].id", "capabilities[2].id", "capabilities[3].id",
			"capabilities[4].inputSchema", "capabilities[4].outputSchema", "capabilities[5].name"}},
		{"sandbox too long", func(c *agentcard.Card) { c.SandboxID = strings.Repeat("s", 129) }, []string{"sandboxId"}},
		{"origin", func(c *agentcard.Card) { c.Origin = "elsewhere" }, []string{"origin"}},
		{"host not a peer id", func(c *agentcard.Card) { c.Host = "not-a-peer" }, []string{"host"}},
		{"too big", func(c *agentcard.Card) {
			for i := range 20 {
				c.Capabilities = append(c.Capabilities, agentcard.Capability{
					ID: "cap" + strings.Repeat("x", i), Description: strings.Repeat("d", 4000)})
			}
		}, []string{"card"}},
		{"everything at once", func(c *agentcard.Card) {
			*c = agentcard.Card{Tier: 9, Origin: "x", Host: "y"}
		}, []string{"id", "name", "version", "tier", "capabilities", "origin", "host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sampleCard("venus", "codegen.react")
			tt.mutate(&c)
			err := c.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ice *agentcard.InvalidCardError
			if !errors.As(err, &ice) {
				t.Fatalf("Validate() = %v, want *InvalidCardError", err)
			}
			var got []string
			for _, p := range ice.Problems {
				got = append(got, p.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Fatalf("problems on %q, want %q\n%v", got, tt.fields, err)
			}
			if !strings.HasPrefix(err.Error(), "agentcard: invalid card: ") {
				t.Fatalf("message %q lacks the prefix", err)
			}
		})
	}
}

func TestInvalidCardErrorMessage(t *testing.T) {
	c := agentcard.Card{Name: "n", Version: "1.0.0", Tier: 7, Capabilities: []agentcard.Capability{}}
	const want = "agentcard: invalid card: id: required; tier: must be 0..3 (got 7)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v\nwant %s", err, want)
	}
}

func TestAddress(t *testing.T) {
	host := testNodes(t)[2].id
	c := sampleCard("mars")
	if got := c.Address(); got != "mars" {
		t.Fatalf("Address() = %q", got)
	}
	c.Host = host.String()
	if got, want := c.Address(), "mars@"+host.String(); got != want {
		t.Fatalf("Address() = %q, want %q", got, want)
	}
	id, h, err := agentcard.SplitAddress(c.Address())
	if err != nil || id != "mars" || h != host {
		t.Fatalf("SplitAddress(%q) = %q, %q, %v", c.Address(), id, h, err)
	}
}

func TestSplitAddress(t *testing.T) {
	host := testNodes(t)[3].id
	tests := []struct {
		in   string
		id   string
		host string
		ok   bool
	}{
		{"sun", "sun", "", true},
		{"sun@" + host.String(), "sun", host.String(), true},
		{"codegen.v2-b_c", "codegen.v2-b_c", "", true},
		{"", "", "", false},
		{"@" + host.String(), "", "", false},
		{"sun@", "", "", false},
		{"sun@nope", "", "", false},
		{"sun@" + host.String() + "@x", "", "", false},
		{"-sun", "", "", false},
		{"s u n", "", "", false},
	}
	for _, tt := range tests {
		id, h, err := agentcard.SplitAddress(tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("SplitAddress(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if !tt.ok {
			var ae *agentcard.AddressError
			if !errors.As(err, &ae) || !errors.Is(err, agentcard.ErrAgentNotFound) {
				t.Errorf("SplitAddress(%q) error %T %v, want *AddressError matching ErrAgentNotFound", tt.in, err, err)
			}
			continue
		}
		hs := ""
		if h != "" {
			hs = h.String()
		}
		if id != tt.id || hs != tt.host {
			t.Errorf("SplitAddress(%q) = %q, %q", tt.in, id, hs)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	c := sampleCard("io", "a", "b")
	c.Capabilities[0].InputSchema = json.RawMessage(`{"type":"object"}`)
	d := c.Clone()
	if !reflect.DeepEqual(c, d) {
		t.Fatalf("Clone differs")
	}
	d.Protocols[0] = "changed"
	d.Endpoints[0].Transport = "changed"
	d.Capabilities[0].ID = "changed"
	d.Capabilities[0].InputSchema[2] = 'X'
	if c.Protocols[0] == "changed" || c.Endpoints[0].Transport == "changed" ||
		c.Capabilities[0].ID == "changed" || c.Capabilities[0].InputSchema[2] == 'X' {
		t.Fatalf("Clone shares memory with the original: %+v", c)
	}
	var nilCaps agentcard.Card
	if nilCaps.Clone().Capabilities != nil {
		t.Fatalf("Clone turned nil capabilities into empty")
	}
}

func TestHasCapability(t *testing.T) {
	c := sampleCard("io", "a", "b")
	if !c.HasCapability("b") || c.HasCapability("c") {
		t.Fatal("HasCapability is wrong")
	}
}

func TestEqual(t *testing.T) {
	a := sampleCard("io", "a")
	a.Capabilities[0].InputSchema = json.RawMessage(`{"a": [1, "<"]}`)
	b := a.Clone()
	b.Capabilities[0].InputSchema = json.RawMessage(`{"a":[1,"\u003c"]}`)
	if !a.Equal(b) {
		t.Fatal("schemas that differ only in formatting are not Equal")
	}
	b.Capabilities[0].InputSchema = json.RawMessage(`{"a":[1.0,"<"]}`)
	if a.Equal(b) {
		t.Fatal("1 and 1.0 compare equal")
	}
	c := a.Clone()
	c.Protocols, c.Endpoints = nil, nil
	d := a.Clone()
	d.Protocols, d.Endpoints = []string{}, []agentcard.Endpoint{}
	if !c.Equal(d) {
		t.Fatal("nil and empty protocols/endpoints differ")
	}
	e := a.Clone()
	e.Capabilities = nil
	f := a.Clone()
	f.Capabilities = []agentcard.Capability{}
	if e.Equal(f) {
		t.Fatal("nil (missing) and empty capabilities compare equal")
	}
	g := a.Clone()
	g.Revision++
	if a.Equal(g) {
		t.Fatal("revision ignored by Equal")
	}
}

func TestJSONFieldNames(t *testing.T) {
	host := testNodes(t)[1].id
	c := sampleCard("venus", "codegen.react")
	c.Tier = tiers.L2
	c.Revision = 3
	c.SandboxID = "sb"
	c.Origin = agentcard.OriginLocal
	c.LastSeenAt = 1700000000000
	c.Host = host.String()
	c.Capabilities[0].InputSchema = json.RawMessage(`{"type":"object"}`)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"venus","name":"venus","version":"1.0.0","description":"test agent venus","tier":2,` +
		`"protocols":["a2a/1.0"],"endpoints":[{"transport":"local"}],` +
		`"capabilities":[{"id":"codegen.react","name":"codegen.react","description":"","inputSchema":{"type":"object"}}],` +
		`"revision":3,"sandboxId":"sb","origin":"local","lastSeenAt":1700000000000,"host":"` + host.String() + `"}`
	if string(b) != want {
		t.Fatalf("JSON\n got %s\nwant %s", b, want)
	}
}

func TestUnmarshalStrict(t *testing.T) {
	base := `"name":"n","version":"1.0.0","description":"","tier":1,"protocols":[],"endpoints":[],"capabilities":[],"revision":0,"origin":"","lastSeenAt":0`
	tests := []struct {
		name  string
		in    string
		field string // problem field; "" means accepted
	}{
		{"ok", `{"id":"a",` + base + `}`, ""},
		{"tier as text", `{"id":"a","name":"n","version":"1.0.0","tier":"L3","capabilities":[]}`, ""},
		{"unknown field", `{"id":"a","extra":1,` + base + `}`, "extra"},
		{"case-insensitive key", `{"ID":"a",` + base + `}`, "ID"},
		{"duplicate key", `{"id":"a","id":"b",` + base + `}`, "id"},
		{"escaped duplicate key", `{"id":"a","i\u0064":"b",` + base + `}`, "id"},
		{"wrong type", `{"id":5,` + base + `}`, "id"},
		{"negative revision", `{"id":"a","name":"n","version":"1.0.0","revision":-1}`, "revision"},
		{"fractional lastSeenAt", `{"id":"a","lastSeenAt":1.5}`, "lastSeenAt"},
		{"bad tier", `{"id":"a","tier":7}`, "tier"},
		{"unknown tier name", `{"id":"a","tier":"L4"}`, "tier"},
		{"missing tier", `{"id":"a","name":"n","version":"1.0.0","capabilities":[]}`, "tier"},
		{"null tier", `{"id":"a","name":"n","version":"1.0.0","tier":null,"capabilities":[]}`, "tier"},
		{"unknown capability field", `{"id":"a","capabilities":[{"id":"x"},{"id":"y","skills":[]}]}`, "capabilities[1].skills"},
		{"endpoint not an object", `{"id":"a","endpoints":[1]}`, "endpoints[0]"},
		{"capabilities not an array", `{"id":"a","capabilities":{}}`, "capabilities"},
		{"not an object", `[1,2]`, "card"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c agentcard.Card
			err := json.Unmarshal([]byte(tt.in), &c)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Unmarshal: %v", err)
				}
				return
			}
			var ice *agentcard.InvalidCardError
			if !errors.As(err, &ice) || !ice.HasField(tt.field) {
				t.Fatalf("Unmarshal error = %v, want a problem on %q", err, tt.field)
			}
		})
	}
}

func TestUnmarshalNullsAndEmpties(t *testing.T) {
	var c agentcard.Card
	if err := json.Unmarshal([]byte(`{"id":"a","tier":0,"capabilities":null,"protocols":null}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Capabilities != nil || c.Protocols != nil {
		t.Fatalf("null did not decode to nil: %#v", c)
	}
	if err := json.Unmarshal([]byte(`{"id":"a","tier":0,"capabilities":[]}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Capabilities == nil || len(c.Capabilities) != 0 {
		t.Fatalf("[] did not decode to an empty slice: %#v", c.Capabilities)
	}
	before := c.Clone()
	if err := json.Unmarshal([]byte(`null`), &c); err != nil || !reflect.DeepEqual(c, before) {
		t.Fatalf("null changed the card: %v", err)
	}
}

func fill(s []string, prefix string) {
	for i := range s {
		s[i] = prefix + strings.Repeat("x", i)
	}
}
