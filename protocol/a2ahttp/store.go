package a2ahttp

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv/push"
	"go.etcd.io/bbolt"
)

// Buckets of the gateway in the node's bbolt file.
var (
	bucketTasks = []byte("a2ahttp.tasks") // task id -> taskRecord (JSON)
	bucketOrder = []byte("a2ahttp.order") // created (8 bytes, big endian ns) + task id -> nil
	bucketPush  = []byte("a2ahttp.push")  // task id + 0 + config id -> pushRecord (JSON)
)

// taskRecord is one stored task: the a2a-go task plus what the gateway
// needs to own it.
type taskRecord struct {
	Agent   string          `json:"agent"`   // canonical address of the mesh agent
	Created int64           `json:"created"` // unix ns
	Updated int64           `json:"updated"` // unix ns, last save
	State   a2a.TaskState   `json:"state"`
	Task    json.RawMessage `json:"task"` // a2a.Task as JSON (v0.3 model)
}

// pushRecord is one stored push notification config.
type pushRecord struct {
	Version string         `json:"version"` // wire version of the request that set it
	Agent   string         `json:"agent"`
	Config  a2a.PushConfig `json:"config"`
}

// taskStore keeps tasks and push configs in bbolt so that tasks/get and
// push delivery survive a restart. It implements a2asrv.TaskStore (used by
// a2a-go's handler) and, through pushStore, a2asrv.PushConfigStore.
//
// At most max tasks are kept: when a new task goes over the cap, terminal
// tasks are deleted oldest (by creation) first; active tasks are never
// deleted, so the count can exceed the cap while more than max tasks are
// active.
//
// Saves of a blocking send (message/send, SendMessage without
// returnImmediately) that do not end its turn stay in memory (pending):
// the client learns the task only from the result, once the turn has ended
// and been written, so a crash before then loses nothing it saw. Every
// other save (and every save of a task with push configs, whose webhooks
// hear each state) is one fsynced bbolt transaction. Reads see pending
// saves first. This makes a blocking send one fsync instead of four.
type taskStore struct {
	db     *bbolt.DB
	ownsDB bool
	max    int
	now    func() time.Time

	// mu guards pending and serializes Save. Lock order: mu, then a bbolt
	// write transaction; nothing takes mu inside a transaction.
	mu      sync.Mutex
	pending map[a2a.TaskID]*pendingRecord
}

// pendingRecord is a save kept in memory; fresh when the task is not in
// bbolt at all yet.
type pendingRecord struct {
	rec   taskRecord
	fresh bool
}

func openStore(db *bbolt.DB, ownsDB bool, max int, now func() time.Time) (*taskStore, error) {
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketTasks, bucketOrder, bucketPush} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("a2ahttp: open task store: %w", err)
	}
	return &taskStore{db: db, ownsDB: ownsDB, max: max, now: now, pending: map[a2a.TaskID]*pendingRecord{}}, nil
}

func (s *taskStore) close() error {
	if s.ownsDB {
		return s.db.Close()
	}
	return nil
}

func orderKey(created int64, id string) []byte {
	k := make([]byte, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(created))
	copy(k[8:], id)
	return k
}

// Save stores task, checking the lifecycle: a new task must be submitted,
// a stored one may only move along a valid transition. The owner of a new
// task is the agent of ctx's route.
func (s *taskStore) Save(ctx context.Context, task *a2a.Task) error {
	if task == nil || task.ID == "" {
		return fmt.Errorf("a2ahttp: save task without id: %w", a2a.ErrInvalidParams)
	}
	body, err := json.Marshal(task)
	if err != nil {
		return fmt.Errorf("a2ahttp: encode task %s: %w", task.ID, err)
	}
	now := s.now().UnixNano()
	agent := ""
	deferred := false
	if r := routeFrom(ctx); r != nil {
		agent = r.agent
		deferred = r.blocking && !r.streaming && !endsTurn(task.Status.State)
	}
	if deferred {
		// A webhook hears every state: a task with push configs is
		// written at once.
		if cfgs, err := s.pushList(task.ID); err != nil || len(cfgs) > 0 {
			deferred = false
		}
	}
	id := []byte(task.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[task.ID]
	// next checks the save against the task's last state (old: nil for a
	// new task) and returns the record to store.
	next := func(old *taskRecord) (taskRecord, error) {
		var rec taskRecord
		from := a2a.TaskState("")
		if old != nil {
			rec, from = *old, old.State
			if agent != "" && rec.Agent != agent {
				return rec, a2a.ErrTaskNotFound
			}
		}
		if err := checkTransition(string(task.ID), from, task.Status.State); err != nil {
			return rec, err
		}
		if old == nil {
			rec = taskRecord{Agent: agent, Created: now}
		}
		rec.Updated, rec.State, rec.Task = now, task.Status.State, body
		return rec, nil
	}
	if deferred {
		var old *taskRecord
		fresh := false
		if p != nil {
			old, fresh = &p.rec, p.fresh
		} else {
			r, err := s.durable(task.ID)
			switch {
			case errors.Is(err, a2a.ErrTaskNotFound):
				fresh = true
			case err != nil:
				return err
			default:
				old = r
			}
		}
		rec, err := next(old)
		if err != nil {
			return err
		}
		s.pending[task.ID] = &pendingRecord{rec: rec, fresh: fresh}
		return nil
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		tasks := tx.Bucket(bucketTasks)
		var old *taskRecord
		raw := tasks.Get(id)
		switch {
		case p != nil:
			old = &p.rec
		case raw != nil:
			old = new(taskRecord)
			if err := json.Unmarshal(raw, old); err != nil {
				return fmt.Errorf("a2ahttp: stored task %s: %w", task.ID, err)
			}
		}
		rec, err := next(old)
		if err != nil {
			return err
		}
		if raw == nil {
			if err := tx.Bucket(bucketOrder).Put(orderKey(rec.Created, string(task.ID)), nil); err != nil {
				return err
			}
		}
		enc, err := json.Marshal(&rec)
		if err != nil {
			return err
		}
		if err := tasks.Put(id, enc); err != nil {
			return err
		}
		if raw == nil {
			return s.pruneTx(tx)
		}
		return nil
	})
	if err == nil {
		delete(s.pending, task.ID)
	}
	return err
}

// pruneTx deletes terminal tasks, oldest first, until at most s.max remain
// or only active tasks are left.
func (s *taskStore) pruneTx(tx *bbolt.Tx) error {
	tasks, order := tx.Bucket(bucketTasks), tx.Bucket(bucketOrder)
	over := countKeys(tasks) - s.max
	if over <= 0 {
		return nil
	}
	var victims [][]byte
	c := order.Cursor()
	for k, _ := c.First(); k != nil && len(victims) < over; k, _ = c.Next() {
		id := k[8:]
		raw := tasks.Get(id)
		if raw == nil {
			victims = append(victims, slices.Clone(k)) // dangling index entry
			over++
			continue
		}
		var rec taskRecord
		if err := json.Unmarshal(raw, &rec); err != nil || active(rec.State) {
			continue
		}
		victims = append(victims, slices.Clone(k))
	}
	for _, k := range victims {
		id := k[8:]
		if err := order.Delete(k); err != nil {
			return err
		}
		if err := tasks.Delete(id); err != nil {
			return err
		}
		if err := deletePushTx(tx, string(id)); err != nil {
			return err
		}
	}
	return nil
}

// countKeys counts a bucket's keys. (Bucket.Stats misses the writes of the
// transaction in progress.)
func countKeys(b *bbolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// Get returns a copy of the task, or a2a.ErrTaskNotFound when it does not
// exist or belongs to another agent than ctx's route.
func (s *taskStore) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	rec, err := s.record(id)
	if err != nil {
		return nil, err
	}
	if r := routeFrom(ctx); r != nil && r.agent != "" && r.agent != rec.Agent {
		return nil, a2a.ErrTaskNotFound
	}
	return rec.task()
}

func (rec *taskRecord) task() (*a2a.Task, error) {
	var t a2a.Task
	if err := json.Unmarshal(rec.Task, &t); err != nil {
		return nil, fmt.Errorf("a2ahttp: stored task: %w", err)
	}
	return &t, nil
}

// record returns the record of a task: its pending save, else the stored
// one.
func (s *taskStore) record(id a2a.TaskID) (*taskRecord, error) {
	s.mu.Lock()
	p := s.pending[id]
	if p != nil {
		rec := p.rec
		s.mu.Unlock()
		return &rec, nil
	}
	s.mu.Unlock()
	return s.durable(id)
}

// durable returns the record of a task in bbolt.
func (s *taskStore) durable(id a2a.TaskID) (*taskRecord, error) {
	var rec taskRecord
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketTasks).Get([]byte(id))
		if raw == nil {
			return a2a.ErrTaskNotFound
		}
		return json.Unmarshal(raw, &rec)
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// count returns the number of tasks, pending ones included.
func (s *taskStore) count() int {
	n := 0
	_ = s.db.View(func(tx *bbolt.Tx) error {
		n = countKeys(tx.Bucket(bucketTasks))
		return nil
	})
	s.mu.Lock()
	for _, p := range s.pending {
		if p.fresh {
			n++
		}
	}
	s.mu.Unlock()
	return n
}

// list returns the records of agent's tasks ("" for all), pending saves
// first, most recently updated first.
func (s *taskStore) list(agent string) ([]*taskRecord, error) {
	var out []*taskRecord
	s.mu.Lock()
	pending := make(map[a2a.TaskID]taskRecord, len(s.pending))
	for id, p := range s.pending {
		pending[id] = p.rec
	}
	s.mu.Unlock()
	for _, rec := range pending {
		if agent == "" || rec.Agent == agent {
			out = append(out, &rec)
		}
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
			if _, ok := pending[a2a.TaskID(k)]; ok {
				return nil
			}
			var rec taskRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return nil // skip a damaged record
			}
			if agent == "" || rec.Agent == agent {
				out = append(out, &rec)
			}
			return nil
		})
	})
	slices.SortStableFunc(out, func(a, b *taskRecord) int {
		switch {
		case a.Updated > b.Updated:
			return -1
		case a.Updated < b.Updated:
			return 1
		}
		return 0
	})
	return out, err
}

// dropPending forgets pending saves older than cutoff of tasks without a
// live execution: an execution that ended without writing the end of its
// turn (none should) leaves the stored task as the truth.
func (s *taskStore) dropPending(cutoff time.Time, live func(a2a.TaskID) bool) {
	// live takes the gateway's lock: call it without s.mu held.
	old := map[a2a.TaskID]int64{}
	s.mu.Lock()
	for id, p := range s.pending {
		if p.rec.Updated < cutoff.UnixNano() {
			old[id] = p.rec.Updated
		}
	}
	s.mu.Unlock()
	for id, updated := range old {
		if live(id) {
			continue
		}
		s.mu.Lock()
		if p := s.pending[id]; p != nil && p.rec.Updated == updated {
			delete(s.pending, id)
		}
		s.mu.Unlock()
	}
}

// stale returns the ids of submitted or working tasks last saved before
// cutoff.
func (s *taskStore) stale(cutoff time.Time) ([]a2a.TaskID, error) {
	var ids []a2a.TaskID
	c := cutoff.UnixNano()
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
			var rec taskRecord
			if json.Unmarshal(v, &rec) != nil {
				return nil
			}
			if (rec.State == a2a.TaskStateWorking || rec.State == a2a.TaskStateSubmitted) && rec.Updated < c {
				ids = append(ids, a2a.TaskID(k))
			}
			return nil
		})
	})
	return ids, err
}

// expire moves a task that is still submitted or working and was last saved
// before cutoff to failed, with an agent status message text. It reports
// whether it did, and returns the new task.
func (s *taskStore) expire(id a2a.TaskID, cutoff time.Time, text string) (*a2a.Task, bool, error) {
	var out *a2a.Task
	now := s.now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		tasks := tx.Bucket(bucketTasks)
		raw := tasks.Get([]byte(id))
		if raw == nil {
			return nil
		}
		var rec taskRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil
		}
		if (rec.State != a2a.TaskStateWorking && rec.State != a2a.TaskStateSubmitted) || rec.Updated >= cutoff.UnixNano() {
			return nil
		}
		t, err := rec.task()
		if err != nil {
			return nil
		}
		if t.Status.Message != nil {
			t.History = append(t.History, t.Status.Message)
		}
		ts := now
		t.Status = a2a.TaskStatus{
			State:     a2a.TaskStateFailed,
			Message:   agentText(t, text),
			Timestamp: &ts,
		}
		body, err := json.Marshal(t)
		if err != nil {
			return err
		}
		rec.State, rec.Updated, rec.Task = a2a.TaskStateFailed, now.UnixNano(), body
		enc, err := json.Marshal(&rec)
		if err != nil {
			return err
		}
		out = t
		return tasks.Put([]byte(id), enc)
	})
	return out, out != nil, err
}

// agentText is an agent message with one text part, for task t.
func agentText(t a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: text})
}

// Push configs.

func pushKey(taskID a2a.TaskID, configID string) []byte {
	return append(append([]byte(taskID), 0), configID...)
}

func deletePushTx(tx *bbolt.Tx, taskID string) error {
	b := tx.Bucket(bucketPush)
	prefix := append([]byte(taskID), 0)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (s *taskStore) pushSave(taskID a2a.TaskID, rec pushRecord) error {
	enc, err := json.Marshal(&rec)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPush).Put(pushKey(taskID, rec.Config.ID), enc)
	})
}

func (s *taskStore) pushGet(taskID a2a.TaskID, configID string) (*pushRecord, error) {
	var rec *pushRecord
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketPush).Get(pushKey(taskID, configID))
		if raw == nil {
			return push.ErrPushConfigNotFound
		}
		rec = new(pushRecord)
		return json.Unmarshal(raw, rec)
	})
	return rec, err
}

func (s *taskStore) pushList(taskID a2a.TaskID) ([]*pushRecord, error) {
	var out []*pushRecord
	prefix := append([]byte(taskID), 0)
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketPush).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var rec pushRecord
			if json.Unmarshal(v, &rec) == nil {
				out = append(out, &rec)
			}
		}
		return nil
	})
	return out, err
}

func (s *taskStore) pushDelete(taskID a2a.TaskID, configID string) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPush).Delete(pushKey(taskID, configID))
	})
}

func (s *taskStore) pushDeleteAll(taskID a2a.TaskID) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return deletePushTx(tx, string(taskID)) })
}
