package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pending is what a connection that sends requests past the go-sdk's
// sessions keeps: its calls waiting for their answers, by the ids it gave
// them (strings: the go-sdk's are numbers, so an answer tells whose it
// is), and why the connection ended. Its zero value is not usable: init
// it first.
type pending struct {
	prefix string // of the ids: one per kind of connection, for the logs

	mu      sync.Mutex
	waiting map[string]chan *jsonrpc.Response
	ended   error         // why the connection ended; nil while open
	done    chan struct{} // closed when the connection ends
	next    atomic.Uint64
	notices sync.WaitGroup // the cancel callbacks running; none start once ended
}

func (p *pending) init(prefix string) {
	p.prefix = prefix
	p.waiting = map[string]chan *jsonrpc.Response{}
	p.done = make(chan struct{})
}

// end records why the connection ended (io.EOF for nil) and fails the
// calls in flight; only the first reason counts.
func (p *pending) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended != nil {
		return
	}
	if err == nil {
		err = io.EOF
	}
	p.ended = err
	close(p.done)
}

// answer hands r to the call waiting for it, if any.
func (p *pending) answer(r *jsonrpc.Response) bool {
	id, ok := r.ID.Raw().(string)
	if !ok {
		return false
	}
	p.mu.Lock()
	ch, ok := p.waiting[id]
	delete(p.waiting, id)
	p.mu.Unlock()
	if ok {
		ch <- r
	}
	return ok
}

// wait waits for the cancel callbacks started by call; call it once the
// connection has ended (end), as none starts after that.
func (p *pending) wait() { p.notices.Wait() }

// notify runs f on a goroutine that wait waits for, unless the
// connection has ended.
func (p *pending) notify(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended != nil {
		return // the peer is gone: nothing to tell it
	}
	p.notices.Go(f)
}

// call sends a request for method under a new id with send and waits
// for its answer. When ctx ends first, cancel(id) tells the peer, on a
// goroutine of the connection's (notify): it writes, and the caller is not
// kept waiting. cancel must bound its own time: the connection's Close
// waits for it.
func (p *pending) call(ctx context.Context, method string, send func(id string) error, cancel func(id string)) (json.RawMessage, error) {
	id := p.prefix + strconv.FormatUint(p.next.Add(1), 10)
	ch := make(chan *jsonrpc.Response, 1)
	p.mu.Lock()
	if p.ended != nil {
		err := p.ended
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method, err)
	}
	p.waiting[id] = ch
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}
	if err := send(id); err != nil {
		forget()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, fmt.Errorf("calling %q: %w", method, r.Error)
		}
		return r.Result, nil
	case <-ctx.Done():
		forget()
		p.notify(func() { cancel(id) })
		return nil, ctx.Err()
	case <-p.done:
		forget()
		p.mu.Lock()
		err := p.ended
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, method, err)
	}
}
