package localapi

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/protocol"
)

// APIError is an error as the API reports it: a seed code and a message.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error is the message and the code, once: a peer's refusal names its
// code already.
func (e *APIError) Error() string {
	if strings.HasSuffix(e.Message, "("+e.Code+")") {
		return e.Message
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// Is matches the sentinel of the same seed code.
func (e *APIError) Is(target error) bool {
	s := protocol.SentinelFor(e.Code)
	return s != nil && s == target
}

// ErrNoNode means no node answers on the data dir's socket.
var ErrNoNode = errors.New("node: no running nova-node on this data dir")

// CodeDocTypeMismatch: a set or counter operation on a path that holds
// another kind of value (crdt.KindError on the node).
const CodeDocTypeMismatch = "DOC_TYPE_MISMATCH"

// CodeDocNotFound: a read (GET /v1/crdt/{doc}) of a document that neither
// the node nor its connected peers hold, or a forget of one the node does
// not hold (crdt.NotFoundError on the node). Nothing is created.
const CodeDocNotFound = crdt.CodeDocNotFound

// streamBrokenError is an events stream cut off without the node saying it
// stops. When the connection ended mid-stream (the node was killed or
// crashed), it is also an [ErrNoNode]: no node runs there any more.
type streamBrokenError struct {
	path string
	err  error
}

func (e *streamBrokenError) Error() string {
	return fmt.Sprintf("node: the events stream from %s broke off (was the node killed?): %v", e.path, e.err)
}

func (e *streamBrokenError) Unwrap() []error {
	if errors.Is(e.err, io.ErrUnexpectedEOF) || errors.Is(e.err, syscall.ECONNRESET) {
		return []error{e.err, ErrNoNode}
	}
	return []error{e.err}
}

// docStreamBrokenError is a watch stream cut off without the node saying
// it stops: a [streamBrokenError] (an [ErrNoNode] when the connection
// ended mid-stream) that names the document's stream.
type docStreamBrokenError struct {
	doc string
	streamBrokenError
}

func (e *docStreamBrokenError) Error() string {
	return fmt.Sprintf("node: the watch stream of %q from %s broke off (was the node killed?): %v", e.doc, e.path, e.err)
}

func (e *docStreamBrokenError) Unwrap() []error { return e.streamBrokenError.Unwrap() }
