package mcpbridge

import (
	"mime"
	"net/url"
)

// checkResource accepts a resource with a non-empty name and an absolute URI
// (with a scheme, as MCP requires) and a MIME type, when given, that
// mime.ParseMediaType accepts.
func checkResource(res Resource) error {
	fail := func(reason string) error { return &DefinitionError{What: "resource", Name: res.URI, Reason: reason} }
	if res.URI == "" {
		return fail("empty URI")
	}
	u, err := url.Parse(res.URI)
	if err != nil {
		return fail("URI does not parse: " + err.Error())
	}
	if u.Scheme == "" {
		return fail("URI has no scheme")
	}
	if res.Name == "" {
		return fail("empty name")
	}
	if res.MIMEType != "" {
		if _, _, err := mime.ParseMediaType(res.MIMEType); err != nil {
			return fail("bad MIME type " + res.MIMEType + ": " + err.Error())
		}
	}
	return nil
}
