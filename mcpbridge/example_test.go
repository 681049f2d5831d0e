package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nova-node/nova-node/mcpbridge"
)

func search(_ context.Context, args json.RawMessage) (mcpbridge.Result, error) {
	return mcpbridge.Result{Content: json.RawMessage(`{"hits":3}`)}, nil
}

func Example() {
	r := mcpbridge.NewRegistry()
	_ = r.RegisterTool(mcpbridge.Tool{
		Agent:       "venus",
		Name:        "web.search",
		Description: "Search the web",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
	}, search)
	err := r.RegisterTool(mcpbridge.Tool{Agent: "venus", Name: "web.search"}, search)
	fmt.Println(err.(mcpbridge.Coded).Code())

	for _, t := range r.ListTools() {
		fmt.Println(t.Canonical, "->", t.Wire)
	}
	res, _ := r.CallTool(context.Background(), "venus_web_search", json.RawMessage(`{"q":"mesh"}`))
	fmt.Println(string(res.Content), r.Metrics().Snapshot().TotalToolInvocations)

	_ = r.RegisterPrompt(mcpbridge.Prompt{Agent: "venus", Name: "greet", Template: "Hello, {{who}}!",
		Arguments: []mcpbridge.PromptArg{{Name: "who", Required: true}}})
	text, _ := r.GetPrompt("venus.greet", map[string]string{"who": "Mars"})
	fmt.Println(text)
	// Output:
	// DUPLICATE_TOOL
	// venus.web.search -> venus_web_search
	// {"hits":3} 1
	// Hello, Mars!
}
