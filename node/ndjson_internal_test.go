package node

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestServeNDJSON: a stream is status 200, application/x-ndjson, the first
// lines then one line per value of next until next ends it; lines that
// next says are followed at once by another wait for it before a flush.
func TestServeNDJSON(t *testing.T) {
	rec := httptest.NewRecorder()
	more := []int{3, 4, 5}
	flushedAt := []string{}
	serveNDJSON(flushRecorder{rec, &flushedAt}, ndjsonStream[int]{
		first: []int{1, 2},
		next: func() (int, bool) {
			if len(more) == 0 {
				return 0, false
			}
			v := more[0]
			more = more[1:]
			return v, true
		},
		ready: func() bool { return len(more) == 2 }, // 4 follows 3 at once
	})
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if got := rec.Body.String(); got != "1\n2\n3\n4\n5\n" {
		t.Fatalf("body %q", got)
	}
	want := []string{"1\n2\n", "1\n2\n3\n4\n", "1\n2\n3\n4\n5\n"}
	if len(flushedAt) != len(want) {
		t.Fatalf("flushed after %q, want after %q", flushedAt, want)
	}
	for i := range want {
		if flushedAt[i] != want[i] {
			t.Fatalf("flushed after %q, want after %q", flushedAt, want)
		}
	}
}

// TestServeNDJSONClientGone: a failed write (the client went away) ends the
// stream: next is not asked again.
func TestServeNDJSONClientGone(t *testing.T) {
	calls := 0
	serveNDJSON(brokenWriter{httptest.NewRecorder()}, ndjsonStream[int]{
		next: func() (int, bool) { calls++; return calls, true },
	})
	if calls != 1 {
		t.Fatalf("next called %d times after a failed write, want 1", calls)
	}
}

// flushRecorder records what the body held at each flush.
type flushRecorder struct {
	*httptest.ResponseRecorder
	at *[]string
}

func (f flushRecorder) Flush() { *f.at = append(*f.at, f.Body.String()) }

type brokenWriter struct{ *httptest.ResponseRecorder }

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("client gone") }

var _ http.Flusher = flushRecorder{}
