package mcpbridge

import (
	"fmt"
	"strconv"
)

// Error codes. DUPLICATE_TOOL is from the seed's error table; the others are
// this package's. They cross the wire (in JSON-RPC error data and isError
// results), so they never change.
const (
	// CodeDuplicateTool: a tool with the same canonical name is registered.
	CodeDuplicateTool = "DUPLICATE_TOOL"
	// CodeDuplicateResource: a resource with the same URI is registered.
	CodeDuplicateResource = "DUPLICATE_RESOURCE"
	// CodeDuplicatePrompt: a prompt with the same canonical name is registered.
	CodeDuplicatePrompt = "DUPLICATE_PROMPT"
	// CodeInvalidName: an agent, tool, prompt or argument name breaks the
	// naming rules, or a canonical name cannot be split.
	CodeInvalidName = "INVALID_NAME"
	// CodeInvalidSchema: a tool's input or output schema is not acceptable.
	CodeInvalidSchema = "INVALID_SCHEMA"
	// CodeInvalidDefinition: a registration is malformed in another way (nil
	// handler or loader, bad URI or MIME type, bad prompt arguments).
	CodeInvalidDefinition = "INVALID_DEFINITION"
	// CodeInvalidArguments: tool-call arguments are not a JSON object.
	CodeInvalidArguments = "INVALID_ARGUMENTS"
	// CodeToolNotFound: no tool has the requested canonical or wire name.
	CodeToolNotFound = "TOOL_NOT_FOUND"
	// CodeResourceNotFound: no resource has the requested URI.
	CodeResourceNotFound = "RESOURCE_NOT_FOUND"
	// CodeResourceReadFailed: a resource's loader failed or panicked.
	CodeResourceReadFailed = "RESOURCE_READ_FAILED"
	// CodePromptNotFound: no prompt has the requested name.
	CodePromptNotFound = "PROMPT_NOT_FOUND"
	// CodeMissingArgument: a required prompt argument was not supplied.
	CodeMissingArgument = "MISSING_PROMPT_ARGUMENT"
	// CodeToolFailed: the default code of a failed tool call when the
	// handler's error carries no code of its own.
	CodeToolFailed = "TOOL_EXECUTION_FAILED"
)

// Coded is implemented by every error of this package.
type Coded interface {
	error
	Code() string
}

// codedError is the type of the sentinels.
type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Code() string  { return e.code }

// Sentinels, matched with errors.Is by the typed errors below.
var (
	ErrDuplicateTool      error = &codedError{CodeDuplicateTool, "mcpbridge: duplicate tool"}
	ErrDuplicateResource  error = &codedError{CodeDuplicateResource, "mcpbridge: duplicate resource"}
	ErrDuplicatePrompt    error = &codedError{CodeDuplicatePrompt, "mcpbridge: duplicate prompt"}
	ErrInvalidName        error = &codedError{CodeInvalidName, "mcpbridge: invalid name"}
	ErrInvalidSchema      error = &codedError{CodeInvalidSchema, "mcpbridge: invalid schema"}
	ErrInvalidDefinition  error = &codedError{CodeInvalidDefinition, "mcpbridge: invalid definition"}
	ErrInvalidArguments   error = &codedError{CodeInvalidArguments, "mcpbridge: invalid arguments"}
	ErrToolNotFound       error = &codedError{CodeToolNotFound, "mcpbridge: tool not found"}
	ErrResourceNotFound   error = &codedError{CodeResourceNotFound, "mcpbridge: resource not found"}
	ErrResourceReadFailed error = &codedError{CodeResourceReadFailed, "mcpbridge: resource read failed"}
	ErrPromptNotFound     error = &codedError{CodePromptNotFound, "mcpbridge: prompt not found"}
	ErrMissingArgument    error = &codedError{CodeMissingArgument, "mcpbridge: missing prompt argument"}
)

// DuplicateToolError: a tool with canonical name Name is already registered.
type DuplicateToolError struct{ Name string }

func (e *DuplicateToolError) Error() string {
	return "mcpbridge: " + CodeDuplicateTool + ": tool " + strconv.Quote(e.Name) + " is already registered"
}
func (e *DuplicateToolError) Code() string         { return CodeDuplicateTool }
func (e *DuplicateToolError) Is(target error) bool { return target == ErrDuplicateTool }

// DuplicateResourceError: a resource with this URI is already registered.
type DuplicateResourceError struct{ URI string }

func (e *DuplicateResourceError) Error() string {
	return "mcpbridge: " + CodeDuplicateResource + ": resource " + strconv.Quote(e.URI) + " is already registered"
}
func (e *DuplicateResourceError) Code() string         { return CodeDuplicateResource }
func (e *DuplicateResourceError) Is(target error) bool { return target == ErrDuplicateResource }

// DuplicatePromptError: a prompt with canonical name Name is already registered.
type DuplicatePromptError struct{ Name string }

func (e *DuplicatePromptError) Error() string {
	return "mcpbridge: " + CodeDuplicatePrompt + ": prompt " + strconv.Quote(e.Name) + " is already registered"
}
func (e *DuplicatePromptError) Code() string         { return CodeDuplicatePrompt }
func (e *DuplicatePromptError) Is(target error) bool { return target == ErrDuplicatePrompt }

// NameError: Name (of kind Kind: "agent", "tool", "prompt", "argument",
// "canonical name") breaks the naming rules.
type NameError struct {
	Kind   string
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: %s name %q: %s", CodeInvalidName, e.Kind, e.Name, e.Reason)
}
func (e *NameError) Code() string         { return CodeInvalidName }
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// SchemaError: a tool's schema (Field is "inputSchema" or "outputSchema") is
// refused before it reaches the SDK.
type SchemaError struct {
	Tool   string
	Field  string
	Reason string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: tool %q: %s: %s", CodeInvalidSchema, e.Tool, e.Field, e.Reason)
}
func (e *SchemaError) Code() string         { return CodeInvalidSchema }
func (e *SchemaError) Is(target error) bool { return target == ErrInvalidSchema }

// DefinitionError: a registration of What ("tool", "resource", "prompt")
// named Name is malformed for Reason.
type DefinitionError struct {
	What   string
	Name   string
	Reason string
}

func (e *DefinitionError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: %s %q: %s", CodeInvalidDefinition, e.What, e.Name, e.Reason)
}
func (e *DefinitionError) Code() string         { return CodeInvalidDefinition }
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// ArgumentsError: the arguments of a call to Tool are not a JSON object.
type ArgumentsError struct {
	Tool   string
	Reason string
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: tool %q: %s", CodeInvalidArguments, e.Tool, e.Reason)
}
func (e *ArgumentsError) Code() string         { return CodeInvalidArguments }
func (e *ArgumentsError) Is(target error) bool { return target == ErrInvalidArguments }

// ToolNotFoundError: no tool has the canonical or wire name Name.
type ToolNotFoundError struct{ Name string }

func (e *ToolNotFoundError) Error() string {
	return "mcpbridge: " + CodeToolNotFound + ": no tool named " + strconv.Quote(e.Name)
}
func (e *ToolNotFoundError) Code() string         { return CodeToolNotFound }
func (e *ToolNotFoundError) Is(target error) bool { return target == ErrToolNotFound }

// ResourceNotFoundError: no resource has the requested URI (requirement 6.3).
type ResourceNotFoundError struct{ URI string }

func (e *ResourceNotFoundError) Error() string {
	return "mcpbridge: " + CodeResourceNotFound + ": no resource with URI " + strconv.Quote(e.URI)
}
func (e *ResourceNotFoundError) Code() string         { return CodeResourceNotFound }
func (e *ResourceNotFoundError) Is(target error) bool { return target == ErrResourceNotFound }

// ResourceReadError: the loader of the resource URI, published by Agent,
// failed (Err) or panicked.
type ResourceReadError struct {
	URI   string
	Agent string
	Err   error
}

func (e *ResourceReadError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: resource %q of agent %q: %v", CodeResourceReadFailed, e.URI, e.Agent, e.Err)
}
func (e *ResourceReadError) Code() string         { return CodeResourceReadFailed }
func (e *ResourceReadError) Is(target error) bool { return target == ErrResourceReadFailed }
func (e *ResourceReadError) Unwrap() error        { return e.Err }

// PromptNotFoundError: no prompt has the canonical or wire name Name.
type PromptNotFoundError struct{ Name string }

func (e *PromptNotFoundError) Error() string {
	return "mcpbridge: " + CodePromptNotFound + ": no prompt named " + strconv.Quote(e.Name)
}
func (e *PromptNotFoundError) Code() string         { return CodePromptNotFound }
func (e *PromptNotFoundError) Is(target error) bool { return target == ErrPromptNotFound }

// MissingArgumentError: prompt Prompt was requested without its required
// argument Argument.
type MissingArgumentError struct {
	Prompt   string
	Argument string
}

func (e *MissingArgumentError) Error() string {
	return fmt.Sprintf("mcpbridge: %s: prompt %q needs argument %q", CodeMissingArgument, e.Prompt, e.Argument)
}
func (e *MissingArgumentError) Code() string         { return CodeMissingArgument }
func (e *MissingArgumentError) Is(target error) bool { return target == ErrMissingArgument }

// ToolError is the structured error of a failed tool call (requirement
// 5.4): the code, the message and the source agent. It is carried in a
// [Result] with IsError set, not returned as the call's error.
type ToolError struct {
	ErrCode string `json:"code"`
	Message string `json:"message"`
	Agent   string `json:"agent"`
	Tool    string `json:"tool"`
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("mcpbridge: tool %q of agent %q failed: %s: %s", e.Tool, e.Agent, e.ErrCode, e.Message)
}

// Code returns the failure's code.
func (e *ToolError) Code() string { return e.ErrCode }
