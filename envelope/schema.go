package envelope

import _ "embed"

// jsonSchema is envelope.schema.json: the envelope's JSON form as a JSON
// Schema (draft 2020-12), for tools and other implementations. Its limits
// are this package's; TestJSONSchemaMatchesTheRules keeps them in step.
//
//go:embed envelope.schema.json
var jsonSchema []byte

// JSONSchema returns the envelope's JSON Schema (a copy).
func JSONSchema() []byte { return append([]byte(nil), jsonSchema...) }
