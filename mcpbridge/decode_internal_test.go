package mcpbridge

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"
)

// sameAsSDK checks that decodeToolResult gives what the go-sdk gives for
// raw: the same value, or an error where the go-sdk fails.
func sameAsSDK(t interface {
	Helper()
	Fatalf(string, ...any)
}, raw string) {
	t.Helper()
	var want, got mcp.CallToolResult
	werr := json.Unmarshal([]byte(raw), &want)
	gerr := decodeToolResult([]byte(raw), &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: go-sdk error %v, ours %v", raw, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%s:\ngo-sdk %#v\nours   %#v", raw, want, got)
	}
}

func TestDecodeToolResultCases(t *testing.T) {
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[]}`,
		`{}`,
		`{"content":null}`,
		`{"content":[null]}`,
		`{"Content":[{"type":"text","text":"hi"}],"IsError":true}`,
		`{"content":[{"type":"text","text":"a","_meta":{"k":[1,2.5,"x",null,true]},"annotations":{"audience":["user"],"priority":0.5}}],"isError":true,"_meta":{"m":{}}}`,
		`{"content":[{"type":"text","text":"a","data":"not base64!"}]}`,
		`{"content":[{"type":"text","text":"a","size":"big"}]}`,
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"a"},{"type":"resource_link","uri":"file:///x","name":"x"}]}`,
		`{"content":[{"type":"unknown"}]}`,
		`{"content":[{"type":"text","text":1}]}`,
		`{"content":{"type":"text","text":"single"}}`,
		`{"content":[],"structuredContent":{"a":[{"b":1e400}]}}`,
		`{"content":[],"structuredContent":{"n":12345678901234567890}}`,
		`{"content":[],"resultType":"complete"}`,
		`{"content":[],"resultType":null}`,
		`{"content":[],"resultType":7}`,
		`{"content":[],"isError":"yes"}`,
		`{"content":[],"requestState":"s","inputRequests":{}}`,
		`{"content":[{"type":"text","text":"\u00e9\ud83d\ude00 \"q\""}]}`,
		`[1]`,
		`null`,
		`{"content":[],"structuredContent":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
		`{"content":[],"structuredContent":` + strings.Repeat("[", 998) + strings.Repeat("]", 998) + `}`,
	} {
		sameAsSDK(t, raw)
	}
}

func TestDecodeToolResultProperty(t *testing.T) {
	value := rapid.SampledFrom([]string{`1`, `-2.5`, `"s"`, `null`, `true`, `{}`, `[]`, `{"a":[1,{"b":null}]}`, `"aGk="`, `["user"]`})
	key := rapid.SampledFrom([]string{"type", "text", "_meta", "annotations", "data", "mimeType", "uri", "name", "size", "Text", "TYPE", "content", "isError", "resource"})
	typ := rapid.SampledFrom([]string{`"text"`, `"text"`, `"text"`, `"image"`, `"Text"`, `1`, `null`})
	topKey := rapid.SampledFrom([]string{"_meta", "structuredContent", "isError", "resultType", "requestState", "Content", "isERROR", "extra"})
	rapid.Check(t, func(t *rapid.T) {
		var items []string
		for range rapid.IntRange(0, 3).Draw(t, "items") {
			if rapid.IntRange(0, 9).Draw(t, "null") == 0 {
				items = append(items, "null")
				continue
			}
			fields := []string{`"type":` + typ.Draw(t, "type")}
			for range rapid.IntRange(0, 3).Draw(t, "fields") {
				fields = append(fields, `"`+key.Draw(t, "key")+`":`+value.Draw(t, "value"))
			}
			items = append(items, "{"+strings.Join(fields, ",")+"}")
		}
		top := []string{`"content":[` + strings.Join(items, ",") + `]`}
		for range rapid.IntRange(0, 2).Draw(t, "top") {
			top = append(top, `"`+topKey.Draw(t, "topKey")+`":`+value.Draw(t, "topValue"))
		}
		sameAsSDK(t, "{"+strings.Join(top, ",")+"}")
	})
}

// A text result is decoded without the go-sdk's 32 KiB stream decoder.
func TestDecodeToolResultSmall(t *testing.T) {
	raw := []byte(`{"content":[{"type":"text","text":"ping"}]}`)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for range 100 {
		var out mcp.CallToolResult
		if err := decodeToolResult(raw, &out); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&ms1)
	if per := (ms1.TotalAlloc - ms0.TotalAlloc) / 100; per > 4<<10 {
		t.Fatalf("a text result's decode allocates %d bytes, want under 4 KiB", per)
	}
}
