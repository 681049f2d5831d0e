package mcpbridge

import (
	"encoding/json"
	"testing"
)

// A stdio server's successful result stays the bytes it sent; an isError
// one is decoded for its code; one the SDK cannot read fails the call.
func TestFromSentResult(t *testing.T) {
	ok := json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1}}`)
	res, err := fromSentResult(ok)
	if err != nil || !res.sent || res.IsError || string(res.Content) != string(ok) {
		t.Fatalf("success: %v %+v", err, res)
	}
	if out := toMCPResult(res, false); out.IsError || len(out.Content) != 1 {
		t.Fatalf("success served: %+v", out)
	}

	failed := json.RawMessage(`{"content":[{"type":"text","text":"no"}],"isError":true,"_meta":{"nova/error":{"code":"BACKEND_UNAVAILABLE","message":"down"}}}`)
	res, err = fromSentResult(failed)
	if err != nil || res.sent || !res.IsError || res.Error == nil || res.Error.ErrCode != "BACKEND_UNAVAILABLE" {
		t.Fatalf("isError: %v %+v %+v", err, res, res.Error)
	}

	if _, err := fromSentResult(json.RawMessage(`{"content":`)); err == nil {
		t.Fatal("truncated result accepted")
	}
	res, err = fromSentResult(json.RawMessage(`{"content":[{"type":"hologram"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if out := toMCPResult(res, true); !out.IsError || out.StructuredContent != nil {
		t.Fatalf("unreadable content served as a success: %+v", out)
	}
}
