package a2ahttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/nova-node/nova-node/agentcard"
)

// Agent cards, produced from mesh cards. Each agent has a v0.3 card (the
// default, and the only one at the pre-0.3 path agent.json) and a v1.0 card
// (for requests with A2A-Version: 1.x). The v0.3 card at agent-card.json
// also lists the v1.0 "supportedInterfaces", as @a2a-js/sdk's compat layer
// does, so one fetch serves clients of either version.

const (
	bearerScheme = "bearer" // static tokens (and JWTs, without JWT.TokenURL)
	oauth2Scheme = "oauth2" // JWTs from JWT.Issuer, with JWT.TokenURL
)

var (
	defaultInputModes  = []string{"text/plain", "application/json", "application/octet-stream"}
	defaultOutputModes = []string{"text/plain", "application/json"}
)

// v1 card types.

type v1AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
}

type v1Provider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

type v1Capabilities struct {
	Streaming         *bool `json:"streaming,omitempty"`
	PushNotifications *bool `json:"pushNotifications,omitempty"`
	ExtendedAgentCard *bool `json:"extendedAgentCard,omitempty"`
}

type v1Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

type v1StringList struct {
	List []string `json:"list"`
}

type v1SecurityRequirement struct {
	Schemes map[string]v1StringList `json:"schemes"`
}

type v1AgentCard struct {
	Name                 string                     `json:"name"`
	Description          string                     `json:"description"`
	SupportedInterfaces  []v1AgentInterface         `json:"supportedInterfaces"`
	Provider             *v1Provider                `json:"provider,omitempty"`
	Version              string                     `json:"version"`
	DocumentationURL     string                     `json:"documentationUrl,omitempty"`
	Capabilities         v1Capabilities             `json:"capabilities"`
	SecuritySchemes      map[string]json.RawMessage `json:"securitySchemes,omitempty"`
	SecurityRequirements []v1SecurityRequirement    `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                   `json:"defaultInputModes"`
	DefaultOutputModes   []string                   `json:"defaultOutputModes"`
	Skills               []v1Skill                  `json:"skills"`
	IconURL              string                     `json:"iconUrl,omitempty"`
}

// v03Card is a2a-go's card plus the v1.0 interfaces.
type v03Card struct {
	a2a.AgentCard
	SupportedInterfaces []v1AgentInterface `json:"supportedInterfaces,omitempty"`
}

// cardInfo is what both versions of one card are built from.
type cardInfo struct {
	name, description, version string
	endpoint                   string // JSON-RPC URL
	rest                       string // HTTP+JSON (REST) interface URL
	skills                     []a2a.AgentSkill
	push, auth                 bool
	jwt                        *JWTConfig // JWTs accepted
	scopes                     []string   // the scopes that open SendMessage here
	providerOrg, providerURL   string
}

// agentEndpoint is the JSON-RPC URL of an agent: base + /a2a/<name>/.
func agentEndpoint(base, name string) string {
	return strings.TrimSuffix(base, "/") + "/a2a/" + url.PathEscape(name) + "/"
}

// agentREST is the REST interface URL of an agent: base + /a2a/<name>/v1.
func agentREST(base, name string) string { return agentEndpoint(base, name) + "v1" }

// skillsOf maps a mesh card's capabilities to skills. An MCP tool published
// through the bridge is a capability "<agent>.<tool>"; its skill is named
// after the tool and tagged "mcp-tool". A card without capabilities gets one
// skill named after the agent, so that the list is never empty.
func skillsOf(c agentcard.Card) []a2a.AgentSkill {
	tier := "tier:" + c.Tier.String()
	var out []a2a.AgentSkill
	for _, cp := range c.Capabilities {
		s := a2a.AgentSkill{
			ID:          cp.ID,
			Name:        cp.Name,
			Description: cp.Description,
			Tags:        []string{"nova", tier},
		}
		if tool, ok := strings.CutPrefix(cp.ID, c.ID+"."); ok && tool != "" {
			s.Tags = append(s.Tags, "mcp-tool")
			if s.Name == "" {
				s.Name = tool
			}
		}
		if s.Name == "" {
			s.Name = cp.ID
		}
		if s.Description == "" {
			s.Description = s.Name
		}
		if len(cp.InputSchema) > 0 {
			s.InputModes = []string{"application/json"}
		}
		if len(cp.OutputSchema) > 0 {
			s.OutputModes = []string{"application/json"}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		name := c.Name
		if name == "" {
			name = c.ID
		}
		out = append(out, a2a.AgentSkill{
			ID: c.ID, Name: name, Description: describe(c), Tags: []string{"nova", tier},
		})
	}
	return out
}

func describe(c agentcard.Card) string {
	if c.Description != "" {
		return c.Description
	}
	return fmt.Sprintf("nova-node mesh agent %s", c.Address())
}

// authInfo fills what the cards say about auth: the schemes, and the
// scopes that open SendMessage on the agent (id, addr; "" for the node).
func (g *Gateway) authInfo(ci *cardInfo, id, addr string) {
	ci.auth = g.authOn()
	if g.jwt != nil {
		ci.jwt = &g.jwt.cfg
		ci.scopes = g.jwt.cfg.scopesFor("SendMessage", id, addr)
	}
}

func (g *Gateway) agentInfo(base, name string, c agentcard.Card) cardInfo {
	n := c.Name
	if n == "" {
		n = c.ID
	}
	v := c.Version
	if v == "" {
		v = "0.0.0"
	}
	ci := cardInfo{
		name: n, description: describe(c), version: v,
		endpoint: agentEndpoint(base, name), rest: agentREST(base, name),
		skills:      skillsOf(c),
		push:        g.cfg.PushEnabled,
		providerOrg: g.cfg.ProviderOrganization, providerURL: g.cfg.ProviderURL,
	}
	g.authInfo(&ci, c.ID, c.Address())
	return ci
}

// nodeInfo is the aggregate card: one skill per agent (its skills' union
// would hide which agent offers what), JSON-RPC at /a2a/ with routing by
// message.metadata.agent.
func (g *Gateway) nodeInfo(base string, agents []agentcard.Card) cardInfo {
	info := cardInfo{
		name: g.cfg.NodeName, description: g.cfg.NodeDescription, version: g.cfg.NodeVersion,
		endpoint: strings.TrimSuffix(base, "/") + "/a2a/", rest: strings.TrimSuffix(base, "/") + "/v1",
		push:        g.cfg.PushEnabled,
		providerOrg: g.cfg.ProviderOrganization, providerURL: g.cfg.ProviderURL,
	}
	g.authInfo(&info, "", "")
	for _, c := range agents {
		ex := fmt.Sprintf(`send with message.metadata.agent = %q, or use %s`, c.Address(), agentEndpoint(base, c.Address()))
		info.skills = append(info.skills, a2a.AgentSkill{
			ID: c.Address(), Name: firstNonEmpty(c.Name, c.ID), Description: describe(c),
			Tags: []string{"nova", "agent", "tier:" + c.Tier.String()}, Examples: []string{ex},
		})
	}
	if info.skills == nil {
		info.skills = []a2a.AgentSkill{}
	}
	return info
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// interfaces are the card's v1.0 supportedInterfaces, JSON-RPC first (the
// binding clients pick by default), then REST (v1.0 only).
func (ci cardInfo) interfaces() []v1AgentInterface {
	out := []v1AgentInterface{
		{URL: ci.endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: Version10},
		{URL: ci.endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: Version03},
	}
	if ci.rest != "" {
		out = append(out, v1AgentInterface{URL: ci.rest, ProtocolBinding: "HTTP+JSON", ProtocolVersion: Version10})
	}
	return out
}

// scopeDescriptions describes the OAuth scopes of the JWT config.
func (ci cardInfo) scopeDescriptions() map[string]string {
	out := map[string]string{}
	for _, r := range ci.jwt.Scopes {
		out[r.Scope] = fmt.Sprintf("A2A methods %s on agents %s", strings.Join(r.Methods, ", "), strings.Join(r.Agents, ", "))
	}
	return out
}

const bearerDescription = "Bearer token issued by the node operator"

// v03 returns the v0.3 card; withV1 adds the v1.0 interfaces.
func (ci cardInfo) v03(withV1 bool) *v03Card {
	c := &v03Card{AgentCard: a2a.AgentCard{
		Name:        ci.name,
		Description: ci.description,
		Version:     ci.version,
		URL:         ci.endpoint,
		// Always set: a2a-go's client rejects a card without it.
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Capabilities: a2a.AgentCapabilities{
			Streaming:         true,
			PushNotifications: ci.push,
		},
		DefaultInputModes:  defaultInputModes,
		DefaultOutputModes: defaultOutputModes,
		Skills:             ci.skills,
	}}
	if ci.providerOrg != "" {
		c.Provider = &a2a.AgentProvider{Org: ci.providerOrg, URL: ci.providerURL}
	}
	if ci.auth {
		c.SupportsAuthenticatedExtendedCard = true
		c.SecuritySchemes = a2a.NamedSecuritySchemes{
			bearerScheme: a2a.HTTPAuthSecurityScheme{Scheme: "bearer", Description: bearerDescription},
		}
		c.Security = []a2a.SecurityRequirements{{bearerScheme: a2a.SecuritySchemeScopes{}}}
		switch {
		case ci.jwt != nil && ci.jwt.TokenURL != "":
			c.SecuritySchemes[oauth2Scheme] = a2a.OAuth2SecurityScheme{
				Description: "OAuth 2.0 access token (JWT) from " + ci.jwt.Issuer,
				Flows: a2a.OAuthFlows{ClientCredentials: &a2a.ClientCredentialsOAuthFlow{
					TokenURL: ci.jwt.TokenURL, Scopes: ci.scopeDescriptions(),
				}},
			}
			c.Security = append(c.Security, a2a.SecurityRequirements{oauth2Scheme: a2a.SecuritySchemeScopes(ci.scopes)})
		case ci.jwt != nil:
			c.SecuritySchemes[bearerScheme] = a2a.HTTPAuthSecurityScheme{Scheme: "bearer", BearerFormat: "JWT",
				Description: bearerDescription + ", or a JWT access token from " + ci.jwt.Issuer}
		}
	}
	if withV1 {
		c.SupportedInterfaces = ci.interfaces()
	}
	return c
}

func (ci cardInfo) v1() *v1AgentCard {
	t, push, ext := true, ci.push, ci.auth
	c := &v1AgentCard{
		Name:                ci.name,
		Description:         ci.description,
		Version:             ci.version,
		SupportedInterfaces: ci.interfaces(),
		Capabilities:        v1Capabilities{Streaming: &t, PushNotifications: &push, ExtendedAgentCard: &ext},
		DefaultInputModes:   defaultInputModes,
		DefaultOutputModes:  defaultOutputModes,
		Skills:              make([]v1Skill, 0, len(ci.skills)),
	}
	if ci.providerOrg != "" {
		c.Provider = &v1Provider{Organization: ci.providerOrg, URL: ci.providerURL}
	}
	for _, s := range ci.skills {
		c.Skills = append(c.Skills, v1Skill{
			ID: s.ID, Name: s.Name, Description: s.Description, Tags: s.Tags,
			Examples: s.Examples, InputModes: s.InputModes, OutputModes: s.OutputModes,
		})
	}
	if ci.auth {
		bearer := map[string]string{"scheme": "Bearer", "description": bearerDescription}
		c.SecurityRequirements = []v1SecurityRequirement{{Schemes: map[string]v1StringList{bearerScheme: {List: []string{}}}}}
		switch {
		case ci.jwt != nil && ci.jwt.TokenURL != "":
			oauth, _ := json.Marshal(map[string]any{"oauth2SecurityScheme": map[string]any{
				"description": "OAuth 2.0 access token (JWT) from " + ci.jwt.Issuer,
				"flows": map[string]any{"clientCredentials": map[string]any{
					"tokenUrl": ci.jwt.TokenURL, "scopes": ci.scopeDescriptions(),
				}},
			}})
			c.SecuritySchemes = map[string]json.RawMessage{oauth2Scheme: oauth}
			scopes := ci.scopes
			if scopes == nil {
				scopes = []string{}
			}
			c.SecurityRequirements = append(c.SecurityRequirements, v1SecurityRequirement{Schemes: map[string]v1StringList{oauth2Scheme: {List: scopes}}})
		case ci.jwt != nil:
			bearer["bearerFormat"] = "JWT"
			bearer["description"] = bearerDescription + ", or a JWT access token from " + ci.jwt.Issuer
		}
		b, _ := json.Marshal(map[string]any{"httpAuthSecurityScheme": bearer})
		if c.SecuritySchemes == nil {
			c.SecuritySchemes = map[string]json.RawMessage{}
		}
		c.SecuritySchemes[bearerScheme] = b
	}
	return c
}

// extendedInfo is the authenticated extended card of the route's agent
// (or of the node): the public card, plus what only a caller holding a
// credential sees: the agent's canonical mesh address and tier, the JSON
// Schemas of its skills' inputs and outputs, and the gateway's limits;
// on the node card, only the agents the caller may send to.
func (g *Gateway) extendedInfo(ctx context.Context) (cardInfo, error) {
	who, rt := callerFrom(ctx), routeFrom(ctx)
	if !g.authOn() {
		return cardInfo{}, fmt.Errorf("%w: no credential is configured, so there is no authenticated extended card", a2a.ErrUnsupportedOperation)
	}
	if who == nil || !who.authenticated || rt == nil {
		return cardInfo{}, fmt.Errorf("%w: the extended card needs an authenticated caller", a2a.ErrInvalidRequest)
	}
	limits := fmt.Sprintf("Limits: request body %d bytes, task timeout %s, %d concurrent requests.",
		g.cfg.MaxBodyBytes, g.cfg.TaskTimeout, g.cfg.MaxConcurrentRequests)
	if rt.node {
		var visible []agentcard.Card
		for _, c := range g.mesh.Agents(ctx) {
			if g.permit(who, "SendMessage", c.ID, c.Address()) == nil {
				visible = append(visible, c)
			}
		}
		ci := g.nodeInfo(rt.base, visible)
		ci.description += " " + limits
		return ci, nil
	}
	c, err := g.mesh.Resolve(ctx, rt.agent)
	if err != nil {
		return cardInfo{}, fmt.Errorf("agent %q: %v: %w", rt.agent, err, a2a.ErrTaskNotFound)
	}
	ci := g.agentInfo(rt.base, firstNonEmpty(rt.name, rt.agent), c)
	ci.description += fmt.Sprintf(" Mesh address %s, tier %s. %s", c.Address(), c.Tier, limits)
	for i, cp := range c.Capabilities {
		if i >= len(ci.skills) {
			break
		}
		if len(cp.InputSchema) > 0 {
			ci.skills[i].Examples = append(ci.skills[i].Examples, "input JSON Schema: "+string(cp.InputSchema))
		}
		if len(cp.OutputSchema) > 0 {
			ci.skills[i].Examples = append(ci.skills[i].Examples, "output JSON Schema: "+string(cp.OutputSchema))
		}
	}
	return ci, nil
}
