package agentcard

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// UnmarshalJSON decodes a card strictly, because signed cards come from
// other nodes and every implementation must read them the same way: keys
// match exactly (no case-insensitive matching), unknown and duplicate keys
// are rejected, and a failure is an [*InvalidCardError] naming the field
// ("capabilities[1].id"). The tier may be a number 0..3 or a string
// "L0".."L3", and it must be there: a card without a "tier" key (or with
// "tier": null) is rejected rather than read as L0, the zero value, which
// would give it the least restricted tier. JSON null for the whole card
// leaves the card unchanged, as encoding/json recommends. Apart from the
// tier, decoding does not validate: call [Card.Validate]. Encoding uses the
// struct tags, which always write the tier; there is no MarshalJSON.
func (c *Card) UnmarshalJSON(data []byte) error {
	return c.decode(data, "")
}

// UnmarshalJSON decodes a capability strictly, like [Card.UnmarshalJSON].
// Schemas are kept byte for byte.
func (cp *Capability) UnmarshalJSON(data []byte) error {
	return cp.decode(data, "")
}

// UnmarshalJSON decodes an endpoint strictly, like [Card.UnmarshalJSON].
func (e *Endpoint) UnmarshalJSON(data []byte) error {
	return e.decode(data, "")
}

func (c *Card) decode(data []byte, path string) error {
	var out Card
	hasTier := false
	null, err := decodeObject(data, path, func(key string, v []byte, field string) error {
		switch key {
		case "id":
			return decodeString(v, &out.ID)
		case "name":
			return decodeString(v, &out.Name)
		case "version":
			return decodeString(v, &out.Version)
		case "description":
			return decodeString(v, &out.Description)
		case "tier":
			if string(v) == "null" {
				return nil // as if absent: refused below
			}
			hasTier = true
			return json.Unmarshal(v, &out.Tier)
		case "protocols":
			return json.Unmarshal(v, &out.Protocols)
		case "endpoints":
			eps, err := decodeArray(v, field, func(raw []byte, p string) (e Endpoint, err error) {
				return e, e.decode(raw, p)
			})
			out.Endpoints = eps
			return err
		case "capabilities":
			caps, err := decodeArray(v, field, func(raw []byte, p string) (cp Capability, err error) {
				return cp, cp.decode(raw, p)
			})
			out.Capabilities = caps
			return err
		case "revision":
			return json.Unmarshal(v, &out.Revision)
		case "sandboxId":
			return decodeString(v, &out.SandboxID)
		case "origin":
			return decodeString(v, (*string)(&out.Origin))
		case "lastSeenAt":
			return json.Unmarshal(v, &out.LastSeenAt)
		case "host":
			return decodeString(v, &out.Host)
		}
		return errUnknownField
	})
	if err != nil || null {
		return err
	}
	if !hasTier {
		return invalid(joinPath(path, "tier"), "missing: must be a number 0..3 or a string L0..L3")
	}
	*c = out
	return nil
}

func (cp *Capability) decode(data []byte, path string) error {
	var out Capability
	null, err := decodeObject(data, path, func(key string, v []byte, _ string) error {
		switch key {
		case "id":
			return decodeString(v, &out.ID)
		case "name":
			return decodeString(v, &out.Name)
		case "description":
			return decodeString(v, &out.Description)
		case "inputSchema":
			out.InputSchema = append(json.RawMessage{}, v...)
			return nil
		case "outputSchema":
			out.OutputSchema = append(json.RawMessage{}, v...)
			return nil
		}
		return errUnknownField
	})
	if err != nil || null {
		return err
	}
	*cp = out
	return nil
}

func (e *Endpoint) decode(data []byte, path string) error {
	var out Endpoint
	null, err := decodeObject(data, path, func(key string, v []byte, _ string) error {
		switch key {
		case "transport":
			return decodeString(v, &out.Transport)
		case "address":
			return decodeString(v, &out.Address)
		}
		return errUnknownField
	})
	if err != nil || null {
		return err
	}
	*e = out
	return nil
}

var errUnknownField = errors.New("unknown field")

// decodeObject checks that data is one valid JSON value and walks it as an
// object, calling field with each key and the raw bytes of its value. It
// rejects duplicate keys, keys field does not know (errUnknownField) and
// anything but an object or null. It reports null for a JSON null. Errors
// are *InvalidCardError naming the JSON path of the bad value.
func decodeObject(data []byte, path string, field func(key string, value []byte, path string) error) (null bool, err error) {
	where := path
	if where == "" {
		where = "card"
	}
	if !json.Valid(data) {
		return false, invalid(where, "malformed JSON: %s", syntaxReason(data))
	}
	// From here on data is valid JSON, which the walk below relies on.
	i := skipSpace(data, 0)
	switch data[i] {
	case 'n':
		return true, nil
	case '{':
	default:
		return false, invalid(where, "must be a JSON object")
	}
	var seen [16]string // cards have 13 keys; more spill into a map
	n := 0
	var more map[string]struct{}
	for i = skipSpace(data, i+1); data[i] != '}'; {
		ks := i
		i = skipString(data, i)
		key, err := decodeKey(data[ks:i])
		if err != nil {
			return false, invalid(where, "malformed key: %s", jsonReason(err))
		}
		f := joinPath(path, key)
		i = skipSpace(data, skipSpace(data, i)+1) // past ':'
		vs := i
		i = skipValue(data, i)
		value := data[vs:i]

		dup := slices.Contains(seen[:n], key)
		if !dup && n == len(seen) {
			_, dup = more[key]
		}
		if dup {
			return false, invalid(f, "duplicate key")
		}
		if n < len(seen) {
			seen[n] = key
			n++
		} else {
			if more == nil {
				more = make(map[string]struct{})
			}
			more[key] = struct{}{}
		}

		if err := field(key, value, f); err != nil {
			var ice *InvalidCardError
			switch {
			case errors.As(err, &ice):
				return false, ice
			case err == errUnknownField:
				return false, invalid(f, "unknown field")
			default:
				return false, invalid(f, "%s", jsonReason(err))
			}
		}
		i = skipSpace(data, i)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return false, nil
}

// decodeArray decodes a valid JSON array (or null, giving a nil slice)
// whose elements each decodes, naming them path[i]. An empty array gives an
// empty non-nil slice.
func decodeArray[T any](data []byte, path string, each func(raw []byte, path string) (T, error)) ([]T, error) {
	if !json.Valid(data) {
		return nil, invalid(path, "malformed JSON: %s", syntaxReason(data))
	}
	i := skipSpace(data, 0)
	switch data[i] {
	case 'n':
		return nil, nil
	case '[':
	default:
		return nil, invalid(path, "must be an array")
	}
	out := []T{}
	for i = skipSpace(data, i+1); data[i] != ']'; {
		vs := i
		i = skipValue(data, i)
		v, err := each(data[vs:i], path+"["+strconv.Itoa(len(out))+"]")
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		i = skipSpace(data, i)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return out, nil
}

// The skip functions walk JSON that json.Valid has accepted; they do not
// check syntax.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++
	}
	return i
}

// decodeKey unquotes an object key, with a fast path for keys without
// escapes.
func decodeKey(raw []byte) (string, error) {
	var s string
	err := decodeString(raw, &s)
	return s, err
}

// decodeString decodes a JSON string (or null, leaving s unchanged) as
// encoding/json does, without its overhead for plain strings.
func decodeString(raw []byte, s *string) error {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		*s = string(raw[1 : len(raw)-1])
		return nil
	}
	return json.Unmarshal(raw, s)
}

func syntaxReason(data []byte) string {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return jsonReason(err)
	}
	return "invalid JSON"
}

func joinPath(path, key string) string {
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "..."
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonReason(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}
