package a2ahttp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"iter"
)

// maxSSEEvent caps one server-sent event (4 MiB, as @a2a-js/sdk does).
const maxSSEEvent = 4 << 20

// errSSETooLarge is returned for an event over maxSSEEvent.
var errSSETooLarge = errors.New("a2ahttp: SSE event too large")

// readSSE yields the data of each event of a text/event-stream body: the
// "data:" lines of the event joined with "\n". Comments, ids, event names
// and retry fields are skipped.
func readSSE(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var data []byte
		have := false
		for {
			line, err := readLine(br, maxSSEEvent)
			if err != nil && len(line) == 0 {
				if have && errors.Is(err, io.EOF) {
					yield(data, nil)
					return
				}
				if !errors.Is(err, io.EOF) {
					yield(nil, err)
				}
				return
			}
			if len(line) == 0 { // end of an event
				if have {
					if !yield(data, nil) {
						return
					}
				}
				data, have = nil, false
				continue
			}
			if line[0] == ':' {
				continue
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) != "data" {
				continue
			}
			if have {
				data = append(data, '\n')
			}
			if len(data)+len(value) > maxSSEEvent {
				yield(nil, errSSETooLarge)
				return
			}
			data = append(data, value...)
			have = true
		}
	}
}

// readLine reads one line without its CR, LF or CRLF ending, of at most
// max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max+2 {
			return nil, errSSETooLarge
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if err != nil && len(line) > 0 && errors.Is(err, io.EOF) {
			return line, nil
		}
		return line, err
	}
}
