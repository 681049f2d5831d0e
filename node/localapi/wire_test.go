package localapi_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/protocol"
	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// TestWireJSON pins the JSON of every body the socket carries, byte for
// byte: a CLI and a node of different builds must understand each other.
// Each value encodes to its golden line, and the golden line decodes to a
// value that encodes to the same line again. A failure here is a change of
// the wire format: make it on purpose, or not at all.
func TestWireJSON(t *testing.T) {
	ae := &localapi.APIError{Code: "TIER_VIOLATION", Message: "no"}
	id := localapi.IDInfo{PeerID: "12D3", Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, Version: "v", Swarm: "s", DataDir: "/d", Agents: []string{"a@12D3"}, Peers: 2, MetricsURL: "http://m/metrics", MCPURL: "http://m/mcp", A2AURL: "http://a"}
	for _, c := range []struct {
		name   string
		v      any
		golden string
	}{
		{"APIError", &localapi.APIError{Code: "TIER_VIOLATION", Message: "no"}, `{"code":"TIER_VIOLATION","message":"no"}`},
		{"IDInfo", id, `{"peerId":"12D3","addrs":["/ip4/127.0.0.1/tcp/1"],"version":"v","swarm":"s","dataDir":"/d","agents":["a@12D3"],"connectedPeers":2,"metricsUrl":"http://m/metrics","mcpUrl":"http://m/mcp","a2aUrl":"http://a"}`},
		{"SendRequest", localapi.SendRequest{From: "a", To: "b", Type: envelope.TypeRequest, Payload: json.RawMessage(`{"x":1}`), CorrelationID: "c", Capability: true, Justification: "j", NoWait: true}, `{"from":"a","to":"b","type":"request","payload":{"x":1},"correlationId":"c","capability":true,"escalationJustification":"j","noWait":true}`},
		{"SendResult", localapi.SendResult{Result: protocol.RoutingResult{}, RoundTripMs: 1.5, Error: ae}, `{"result":{"delivered":false,"path":"","targetAgentId":"","latencyMs":0},"roundTripMs":1.5,"error":{"code":"TIER_VIOLATION","message":"no"}}`},
		{"Status", localapi.Status{IDInfo: id, PeerList: []localapi.PeerStatus{{PeerID: "p", Addrs: []string{"x"}, Relayed: true, Agents: []string{"b"}}}, Channels: []protocol.ChannelInfo{}, RecentErrors: []localapi.Event{{Type: "error", Time: time.Unix(5, 0).UTC(), SourceTier: -1, TargetTier: -1}},
			Metrics: localapi.Metrics{TotalMessagesSent: 1, TotalMessagesReceived: 2, MessagesByType: map[envelope.Type]uint64{envelope.TypeRequest: 3}, AverageRoutingLatencyMs: 0.5, ErrorCount: 4, SecurityEvents: 5, AuditWriteErrors: 6, AuditSuppressed: 7}}, `{"peerId":"12D3","addrs":["/ip4/127.0.0.1/tcp/1"],"version":"v","swarm":"s","dataDir":"/d","agents":["a@12D3"],"connectedPeers":2,"metricsUrl":"http://m/metrics","mcpUrl":"http://m/mcp","a2aUrl":"http://a","reach":{"relaying":false},"peers":[{"peerId":"p","addrs":["x"],"relayed":true,"agents":["b"]}],"channels":[],"metrics":{"totalMessagesSent":1,"totalMessagesReceived":2,"messagesByType":{"request":3},"averageRoutingLatencyMs":0.5,"errorCount":4,"securityEvents":5,"auditWriteErrors":6,"auditSuppressed":7},"recentErrors":[{"type":"error","time":"1970-01-01T00:00:05Z","success":false,"sourceTier":-1,"targetTier":-1}]}`},
		{"PingResult", localapi.PingResult{Peer: "p", Agent: "a@p", Path: "direct", Addr: "/ip4/127.0.0.1/tcp/1", RTTs: []float64{1.25, 2}, Average: 1.625}, `{"peer":"p","agent":"a@p","path":"direct","addr":"/ip4/127.0.0.1/tcp/1","rttMs":[1.25,2],"avgMs":1.625}`},
		{"DocOp", localapi.DocOp{Op: "incr", Path: "/n", Value: json.RawMessage(`1`), By: 2, Agent: "a"}, `{"op":"incr","path":"/n","value":1,"by":2,"agent":"a"}`},
		{"DocView", localapi.DocView{Doc: "d", Path: "/p", Value: json.RawMessage(`"v"`), Values: []json.RawMessage{json.RawMessage(`"v"`), json.RawMessage(`"w"`)}, Clock: map[string]uint64{"r": 3}}, `{"doc":"d","path":"/p","value":"v","values":["v","w"],"clock":{"r":3}}`},
		{"ProposeRequest", localapi.ProposeRequest{From: "a", To: "b", ByCapability: true, Task: "t", Capabilities: []string{"c"}, Complexity: "simple", TimeoutMs: 5, DeadlineMs: 6, Justification: "j"}, `{"from":"a","to":"b","byCapability":true,"task":"t","capabilities":["c"],"complexity":"simple","timeoutMs":5,"deadlineMs":6,"justification":"j"}`},
		{"AnswerRequest", localapi.AnswerRequest{EstimatedCompletionMs: 7, Reason: "BUSY", Alternative: "c"}, `{"estimatedCompletionMs":7,"reason":"BUSY","alternative":"c"}`},
		{"CreateSwarmRequest", localapi.CreateSwarmRequest{As: "a", Task: "t", Capabilities: []string{"c"}, SubTasks: []localapi.SubTaskRequest{{Description: "d", Capabilities: []string{"c"}}}, Justification: "j", Complexity: "complex", RecruitTimeoutMs: 1000}, `{"as":"a","task":"t","capabilities":["c"],"subTasks":[{"description":"d","capabilities":["c"]}],"justification":"j","complexity":"complex","recruitTimeoutMs":1000}`},
		{"SwarmCreated", localapi.SwarmCreated{Swarm: taskswarm.Swarm{ID: "swarm-1"}, Error: ae}, `{"swarm":{"id":"swarm-1","taskDescription":"","creator":"","requiredCapabilities":null,"participants":null,"recruits":null,"subTasks":null,"status":"","sharedState":null,"results":null,"thread":"","complexity":"","recruitDeadlineMs":0,"createdAt":0,"updatedAt":0},"error":{"code":"TIER_VIOLATION","message":"no"}}`},
		{"PeerStatus standing", localapi.PeerStatus{PeerID: "p", Addrs: []string{}, Agents: []string{"b"}, Basis: "grant", Expires: time.Unix(7, 0).UTC()}, `{"peerId":"p","addrs":[],"relayed":false,"agents":["b"],"basis":"grant","expires":"1970-01-01T00:00:07Z"}`},
		{"AuthorityStatus", localapi.AuthorityStatus{Authority: "A", Self: "S", IsAdmin: true, Admins: []string{"A"}, LogLength: 1,
			Grants: []localapi.GrantInfo{{Serial: 9, Peer: "P", Agent: "a", MaxTier: "L1", Sandboxes: []string{"lab"}, Capabilities: []string{"c"}, NotBefore: time.Unix(1, 0).UTC(), Expires: time.Unix(2, 0).UTC(), Issuer: "A", State: "valid"}},
			Trusts: []localapi.TrustInfo{{Peer: "P", MaxTier: "L2", Note: "n", Expired: true}},
			Agents: []localapi.AgentStanding{{Address: "a@P", Peer: "P", ClaimedTier: "L0", Tier: "L3", Basis: "none", Note: "no grant"}}},
			`{"authority":"A","self":"S","isAdmin":true,"admins":["A"],"logLength":1,"grants":[{"serial":9,"peer":"P","agent":"a","maxTier":"L1","sandboxes":["lab"],"capabilities":["c"],"notBefore":"1970-01-01T00:00:01Z","expires":"1970-01-01T00:00:02Z","issuer":"A","state":"valid"}],"trusts":[{"peer":"P","maxTier":"L2","note":"n","expired":true}],"agents":[{"address":"a@P","peer":"P","claimedTier":"L0","tier":"L3","basis":"none","note":"no grant"}]}`},
		{"GrantRequest", localapi.GrantRequest{Peer: "P", Agent: "a", MaxTier: "L1", Sandboxes: []string{"lab"}, Expires: time.Unix(2, 0).UTC()}, `{"peer":"P","agent":"a","maxTier":"L1","sandboxes":["lab"],"expires":"1970-01-01T00:00:02Z"}`},
		{"GrantIssued", localapi.GrantIssued{GrantInfo: localapi.GrantInfo{Serial: 9, Peer: "P", MaxTier: "L1", Issuer: "A", State: "valid"}, Signed: "xyz"}, `{"serial":9,"peer":"P","maxTier":"L1","issuer":"A","state":"valid","signed":"xyz"}`},
		{"RevokeRequest", localapi.RevokeRequest{Serial: 9, Reason: "r"}, `{"serial":9,"reason":"r"}`},
		{"Revoked", localapi.Revoked{Serial: 9, Peer: "P"}, `{"serial":9,"peer":"P"}`},
		{"AdminsRequest", localapi.AdminsRequest{Add: []string{"B"}}, `{"add":["B"]}`},
		{"TrustRequest", localapi.TrustRequest{Peer: "P", MaxTier: "L1", Note: "n"}, `{"peer":"P","maxTier":"L1","note":"n"}`},
		{"TrustRemoved", localapi.TrustRemoved{Peer: "P", Removed: 2}, `{"peer":"P","removed":2}`},
		{"empty CreateSwarmRequest", localapi.CreateSwarmRequest{}, `{"task":"","capabilities":null}`},
		{"empty SendRequest", localapi.SendRequest{}, `{"to":"","type":""}`},
		{"empty DocOp", localapi.DocOp{}, `{"op":"","path":""}`},
		{"empty SendResult", localapi.SendResult{}, `{"result":{"delivered":false,"path":"","targetAgentId":"","latencyMs":0}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.golden {
				t.Fatalf("encodes to\n%s\nwant\n%s", b, c.golden)
			}
			p := reflect.New(reflect.TypeOf(c.v))
			if err := json.Unmarshal([]byte(c.golden), p.Interface()); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(p.Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("round trip changes it:\n%s\nwant\n%s", again, b)
			}
		})
	}
}
