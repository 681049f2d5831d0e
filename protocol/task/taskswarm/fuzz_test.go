package taskswarm_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/nova-node/nova-node/protocol/task/taskswarm"
)

// Seed corpora live in testdata/fuzz/<Target>/; these are added too.

func FuzzDecodeTask(f *testing.F) {
	for _, s := range []string{
		`{"swarmId":"swarm-1","subTaskId":"st-1","attempt":1,"description":"write the tests","requiredCapabilities":["test.write"]}`,
		`{"swarmId":"s","subTaskId":"t","attempt":3,"description":"x"}`,
		`{"swarmId":"has space","subTaskId":"t","attempt":0,"description":""}`, `[]`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := taskswarm.DecodeTask(b)
		if err != nil {
			if !errors.Is(err, taskswarm.ErrInvalid) {
				t.Fatalf("error without code: %v", err)
			}
			return
		}
		if err := task.Validate(); err != nil {
			t.Fatal(err)
		}
		enc, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		again, err := taskswarm.DecodeTask(enc)
		if err != nil || !reflect.DeepEqual(task, again) {
			t.Fatalf("round trip: %+v -> %s -> %+v (%v)", task, enc, again, err)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`{"swarmId":"swarm-1","subTaskId":"st-1","attempt":1,"result":{"agent":"mars","summary":"ok"}}`,
		`{"swarmId":"swarm-1","subTaskId":"st-1","attempt":2,"error":"boom","code":"TASK_FAILED","message":"boom"}`,
		`{"swarmId":"s","subTaskId":"t","attempt":1,"result": [1, 2 ,3 ]}`, `{"code":"X","message":"y"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := taskswarm.DecodeResult(b)
		if err != nil {
			if !errors.Is(err, taskswarm.ErrInvalid) {
				t.Fatalf("error without code: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := taskswarm.DecodeResult(enc)
		if err != nil || !reflect.DeepEqual(r, again) {
			t.Fatalf("round trip: %+v -> %s -> %+v (%v)", r, enc, again, err)
		}
	})
}

func FuzzDecodeNotice(f *testing.F) {
	f.Add([]byte(`{"kind":"swarm-completed","swarmId":"swarm-1","status":"completed","results":{"st-1":1}}`))
	f.Add([]byte(`{"kind":"other","swarmId":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := taskswarm.DecodeNotice(b)
		if err != nil {
			if !errors.Is(err, taskswarm.ErrInvalid) {
				t.Fatalf("error without code: %v", err)
			}
			return
		}
		if n.SwarmID == "" {
			t.Fatal("notice without swarm id")
		}
	})
}
