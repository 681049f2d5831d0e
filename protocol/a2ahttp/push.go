package a2ahttp

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/google/uuid"
)

// Headers of a webhook delivery. The signature is
//
//	X-Nova-Signature: v1=<hex HMAC-SHA256(key, "<X-Nova-Timestamp>.<body>")>
//
// where the key is Config.PushSecret, or the push config's token when no
// secret is configured (no signature when there is neither). Receivers
// check it with [VerifyPushSignature]. X-Nova-Delivery is the same on every
// retry of one notification, for deduplication.
const (
	PushSignatureHeader = "X-Nova-Signature"
	PushTimestampHeader = "X-Nova-Timestamp"
	PushDeliveryHeader  = "X-Nova-Delivery"
	// PushTokenHeader carries the push config's token, as the A2A spec says.
	PushTokenHeader = "X-A2A-Notification-Token"
)

// SignPush returns the value of the X-Nova-Signature header for body sent
// at unix time ts.
func SignPush(key []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is returned by [VerifyPushSignature] for a delivery whose
// signature is missing, malformed, wrong or too old.
var ErrBadSignature = errors.New("a2ahttp: bad push notification signature")

// VerifyPushSignature checks the signature headers of a webhook delivery:
// the HMAC must match and the timestamp must be within tolerance of now
// (replays of old deliveries fail).
func VerifyPushSignature(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(PushTimestampHeader), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp outside tolerance", ErrBadSignature)
	}
	got := h.Get(PushSignatureHeader)
	if !strings.HasPrefix(got, "v1=") {
		return fmt.Errorf("%w: missing", ErrBadSignature)
	}
	if !hmac.Equal([]byte(got), []byte(SignPush(key, ts, body))) {
		return fmt.Errorf("%w: mismatch", ErrBadSignature)
	}
	return nil
}

// pushStore is the a2asrv.PushConfigStore of the gateway, on the task
// store, with URL validation.
type pushStore struct {
	s     *taskStore
	guard *urlGuard
}

var _ a2asrv.PushConfigStore = (*pushStore)(nil)

func (p *pushStore) Save(ctx context.Context, taskID a2a.TaskID, c *a2a.PushConfig) (*a2a.PushConfig, error) {
	if c == nil || c.URL == "" {
		return nil, fmt.Errorf("push config needs a url: %w", a2a.ErrInvalidParams)
	}
	if err := p.guard.check(ctx, c.URL); err != nil {
		return nil, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	rec := pushRecord{Version: Version03, Config: *c}
	if rt := routeFrom(ctx); rt != nil {
		rec.Version, rec.Agent = rt.version, rt.agent
	}
	if rec.Config.ID == "" {
		rec.Config.ID = uuid.NewString()
	}
	if err := p.s.pushSave(taskID, rec); err != nil {
		return nil, err
	}
	out := rec.Config
	return &out, nil
}

func (p *pushStore) Get(ctx context.Context, taskID a2a.TaskID, configID string) (*a2a.PushConfig, error) {
	rec, err := p.s.pushGet(taskID, configID)
	if err != nil {
		return nil, err
	}
	return &rec.Config, nil
}

func (p *pushStore) List(ctx context.Context, taskID a2a.TaskID) ([]*a2a.PushConfig, error) {
	recs, err := p.s.pushList(taskID)
	if err != nil {
		return nil, err
	}
	out := make([]*a2a.PushConfig, len(recs))
	for i, r := range recs {
		out[i] = &r.Config
	}
	return out, nil
}

func (p *pushStore) Delete(ctx context.Context, taskID a2a.TaskID, configID string) error {
	return p.s.pushDelete(taskID, configID)
}

func (p *pushStore) DeleteAll(ctx context.Context, taskID a2a.TaskID) error {
	return p.s.pushDeleteAll(taskID)
}

// delivery is one notification to one webhook.
type delivery struct {
	id     string
	config a2a.PushConfig
	body   []byte
}

// pusher delivers push notifications. a2a-go calls SendPush inside its event
// processing, so SendPush only queues; workers deliver, each task's
// notifications in order (a task always maps to the same worker), with
// retries and exponential backoff. A full queue drops the notification
// and counts it: a client that misses one reads the task with tasks/get.
type pusher struct {
	store    *taskStore
	client   *http.Client
	secret   []byte
	attempts int
	backoff  time.Duration
	timeout  time.Duration
	now      func() time.Time
	queues   []chan delivery

	dropped   atomic.Uint64
	delivered atomic.Uint64
	failed    atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

const pushWorkers = 4
const pushQueueLen = 256

func newPusher(store *taskStore, guard *urlGuard, cfg *Config) *pusher {
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would defeat the address checks
		DialContext:           guard.dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.PushTimeout,
	}
	p := &pusher{
		store: store,
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		secret:   cfg.PushSecret,
		attempts: cfg.PushMaxAttempts,
		backoff:  cfg.PushBackoff,
		timeout:  cfg.PushTimeout,
		now:      cfg.Now,
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range pushWorkers {
		p.queues = append(p.queues, make(chan delivery, pushQueueLen))
	}
	return p
}

func (p *pusher) start() {
	for _, q := range p.queues {
		p.wg.Go(func() { p.work(q) })
	}
}

// close stops the workers; queued notifications are dropped.
func (p *pusher) close() {
	p.cancel()
	p.wg.Wait()
	p.client.CloseIdleConnections()
}

// SendPush implements a2asrv.PushSender. It never blocks.
func (p *pusher) SendPush(ctx context.Context, c *a2a.PushConfig, task *a2a.Task) error {
	version := Version03
	if rec, err := p.store.pushGet(task.ID, c.ID); err == nil {
		version = rec.Version
	}
	p.enqueue(*c, version, task)
	return nil
}

// notifyAll queues the task's current state to every webhook of the task
// (used when the gateway changes a task itself, as on timeout).
func (p *pusher) notifyAll(task *a2a.Task) {
	recs, err := p.store.pushList(task.ID)
	if err != nil {
		return
	}
	for _, r := range recs {
		p.enqueue(r.Config, r.Version, task)
	}
}

func (p *pusher) enqueue(c a2a.PushConfig, version string, task *a2a.Task) {
	var body []byte
	var err error
	if version == Version10 {
		body, err = json.Marshal(&v1StreamResponse{Task: taskToV1(task)})
	} else {
		body, err = json.Marshal(task)
	}
	if err != nil {
		log.Debugw("push notification not encoded", "task", task.ID, "err", err)
		return
	}
	h := fnv.New32a()
	h.Write([]byte(task.ID))
	q := p.queues[h.Sum32()%uint32(len(p.queues))]
	select {
	case q <- delivery{id: uuid.NewString(), config: c, body: body}:
	default:
		p.dropped.Add(1)
		log.Debugw("push notification dropped: queue full", "task", task.ID)
	}
}

func (p *pusher) work(q chan delivery) {
	for {
		select {
		case <-p.ctx.Done():
			return
		case d := <-q:
			p.deliver(d)
		}
	}
}

// deliver sends d, retrying network errors, 408, 425, 429 and 5xx answers
// with exponential backoff (with jitter) up to p.attempts times.
func (p *pusher) deliver(d delivery) {
	wait := p.backoff
	for attempt := 1; ; attempt++ {
		retry, err := p.post(d)
		if err == nil {
			p.delivered.Add(1)
			return
		}
		if !retry || attempt >= p.attempts {
			p.failed.Add(1)
			log.Debugw("push notification failed", "url", d.config.URL, "attempts", attempt, "err", err)
			return
		}
		jitter := time.Duration(rand.Int64N(int64(wait)/5 + 1))
		t := time.NewTimer(wait + jitter)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (p *pusher) post(d delivery) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.config.URL, bytes.NewReader(d.body))
	if err != nil {
		return false, err
	}
	ts := p.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nova-node-a2a")
	req.Header.Set(PushDeliveryHeader, d.id)
	req.Header.Set(PushTimestampHeader, strconv.FormatInt(ts, 10))
	key := p.secret
	if len(key) == 0 {
		key = []byte(d.config.Token)
	}
	if len(key) > 0 {
		req.Header.Set(PushSignatureHeader, SignPush(key, ts, d.body))
	}
	if d.config.Token != "" {
		req.Header.Set(PushTokenHeader, d.config.Token)
	}
	if a := d.config.Auth; a != nil && a.Credentials != "" {
	schemes:
		for _, s := range a.Schemes {
			switch strings.ToLower(s) {
			case "bearer":
				req.Header.Set("Authorization", "Bearer "+a.Credentials)
				break schemes
			case "basic":
				req.Header.Set("Authorization", "Basic "+a.Credentials)
				break schemes
			}
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return !errors.Is(err, ErrURLRefused), err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == 408 || c == 425 || c == 429 || c >= 500:
		return true, fmt.Errorf("webhook answered %s", resp.Status)
	default:
		return false, fmt.Errorf("webhook answered %s", resp.Status)
	}
}
