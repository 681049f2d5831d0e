package a2ahttp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
)

func TestPushSignature(t *testing.T) {
	key := []byte("k3y")
	body := []byte(`{"id":"t1"}`)
	now := time.Unix(1_700_000_000, 0)
	h := http.Header{}
	h.Set(a2ahttp.PushTimestampHeader, strconv.FormatInt(now.Unix(), 10))
	h.Set(a2ahttp.PushSignatureHeader, a2ahttp.SignPush(key, now.Unix(), body))
	if err := a2ahttp.VerifyPushSignature(key, h, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("valid signature: %v", err)
	}
	bad := []struct {
		name string
		key  []byte
		body []byte
		at   time.Time
		mod  func(http.Header)
	}{
		{"tampered body", key, []byte(`{"id":"t2"}`), now, nil},
		{"wrong key", []byte("other"), body, now, nil},
		{"too old", key, body, now.Add(10 * time.Minute), nil},
		{"from the future", key, body, now.Add(-10 * time.Minute), nil},
		{"no signature", key, body, now, func(h http.Header) { h.Del(a2ahttp.PushSignatureHeader) }},
		{"no timestamp", key, body, now, func(h http.Header) { h.Del(a2ahttp.PushTimestampHeader) }},
		{"other timestamp", key, body, now, func(h http.Header) { h.Set(a2ahttp.PushTimestampHeader, strconv.FormatInt(now.Unix()+1, 10)) }},
	}
	for _, tc := range bad {
		hh := h.Clone()
		if tc.mod != nil {
			tc.mod(hh)
		}
		if err := a2ahttp.VerifyPushSignature(tc.key, hh, tc.body, tc.at, 5*time.Minute); !errors.Is(err, a2ahttp.ErrBadSignature) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// hook is a webhook receiver on 127.0.0.1 that fails its first fails calls.
type hook struct {
	mu      sync.Mutex
	fails   int
	calls   int
	bodies  [][]byte
	headers []http.Header
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls <= h.fails {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.bodies = append(h.bodies, body)
	h.headers = append(h.headers, r.Header.Clone())
}

func (h *hook) received() ([][]byte, []http.Header, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.bodies...), append([]http.Header(nil), h.headers...), h.calls
}

func TestPushDelivery(t *testing.T) {
	checkLeaks(t)
	secret := []byte("push-secret")
	e := newEnv(t, func(c *a2ahttp.Config) {
		c.PushSecret = secret
		c.PushBackoff = 10 * time.Millisecond
	})
	h := &hook{fails: 2}
	hs := httptest.NewServer(h)
	defer hs.Close()

	// v0.3: the config comes with the message; retries get past two 503s.
	p := send03(user03(text03("x")), true)
	p["configuration"] = map[string]any{"pushNotificationConfig": map[string]any{"url": hs.URL + "/hook", "token": "tok"}}
	var task task03
	call{url: e.srv.URL + "/a2a/echo/"}.ok(t, "message/send", p, &task)
	waitfor.Eventually(t, 5*time.Second, func() error {
		bodies, _, _ := h.received()
		for _, b := range bodies {
			var got task03
			if json.Unmarshal(b, &got) == nil && got.ID == task.ID && got.Status.State == "completed" {
				return nil
			}
		}
		return fmt.Errorf("%d notifications, none completed", len(bodies))
	})
	bodies, headers, calls := h.received()
	if calls < len(bodies)+2 {
		t.Fatalf("%d calls for %d deliveries: no retries?", calls, len(bodies))
	}
	var states []string
	for i, b := range bodies {
		if err := a2ahttp.VerifyPushSignature(secret, headers[i], b, time.Now(), time.Minute); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if headers[i].Get(a2ahttp.PushTokenHeader) != "tok" || headers[i].Get(a2ahttp.PushDeliveryHeader) == "" {
			t.Fatalf("headers %v", headers[i])
		}
		var got task03
		_ = json.Unmarshal(b, &got)
		if n := len(states); n == 0 || states[n-1] != got.Status.State {
			states = append(states, got.Status.State) // an artifact repeats the state
		}
	}
	if fmt.Sprint(states) != "[submitted working completed]" {
		t.Fatalf("states in order: %v", states)
	}

	// v1.0: the payload is a StreamResponse.
	h2 := &hook{}
	hs2 := httptest.NewServer(h2)
	defer hs2.Close()
	p1 := send10(user10(text10("y")), false)
	p1["configuration"] = map[string]any{"taskPushNotificationConfig": map[string]any{"url": hs2.URL}}
	var res stream10
	v1(e, "echo").ok(t, "SendMessage", p1, &res)
	waitfor.Eventually(t, 5*time.Second, func() error {
		bodies, _, _ := h2.received()
		for _, b := range bodies {
			var sr stream10
			if json.Unmarshal(b, &sr) == nil && sr.Task != nil && sr.Task.Status.State == "TASK_STATE_COMPLETED" {
				return nil
			}
		}
		return fmt.Errorf("%d notifications, none completed", len(bodies))
	})
}
