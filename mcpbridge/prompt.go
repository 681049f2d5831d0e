package mcpbridge

import (
	"regexp"
	"strings"
)

var argRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// placeholderRe matches {{name}} and {{ name }}.
var placeholderRe = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// Render substitutes args into p.Template.
//
//   - A required argument missing from args is a *[MissingArgumentError]
//     naming it (the first in declaration order).
//   - A placeholder {{name}} (or {{ name }}) whose name is a declared
//     argument is replaced by args[name], or by "" for an optional argument
//     that was not supplied.
//   - Any other text, including a placeholder whose name is not declared
//     (an "unknown placeholder"), is kept verbatim; supplied arguments that
//     are not declared are ignored.
//   - Substitution is a single pass: braces inside a value are not expanded.
func Render(p Prompt, args map[string]string) (string, error) {
	declared := make(map[string]bool, len(p.Arguments))
	for _, a := range p.Arguments {
		declared[a.Name] = true
		if _, ok := args[a.Name]; a.Required && !ok {
			return "", &MissingArgumentError{Prompt: p.Agent + "." + p.Name, Argument: a.Name}
		}
	}
	var b strings.Builder
	last := 0
	for _, m := range placeholderRe.FindAllStringSubmatchIndex(p.Template, -1) {
		name := p.Template[m[2]:m[3]]
		if !declared[name] {
			continue
		}
		b.WriteString(p.Template[last:m[0]])
		b.WriteString(args[name])
		last = m[1]
	}
	b.WriteString(p.Template[last:])
	return b.String(), nil
}
