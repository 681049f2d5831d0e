package a2ahttp

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nova-node/nova-node/agentcard"
)

// nopMesh is a mesh without agents.
type nopMesh struct{}

func (nopMesh) Agents(context.Context) []agentcard.Card { return nil }
func (nopMesh) Resolve(context.Context, string) (agentcard.Card, error) {
	return agentcard.Card{}, errors.New("no agents")
}
func (nopMesh) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no agents")
}
func (nopMesh) Ready() bool { return true }
