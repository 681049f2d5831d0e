package protocol

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// handlerCtx behaves as context.WithTimeout whether or not Done is ever
// called.
func TestHandlerCtx(t *testing.T) {
	t.Run("deadline without Done", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newHandlerCtx(context.Background(), time.Now(), time.Second)
			defer c.release()
			if c.Err() != nil {
				t.Fatal("ended early")
			}
			time.Sleep(time.Second)
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Fatalf("Err after the deadline: %v", c.Err())
			}
			select {
			case <-c.Done(): // made after the end: closed at once
			default:
				t.Fatal("Done not closed after the deadline")
			}
		})
	})
	t.Run("deadline with Done", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newHandlerCtx(context.Background(), time.Now(), time.Second)
			defer c.release()
			start := time.Now()
			<-c.Done()
			if d := time.Since(start); d != time.Second || !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Fatalf("Done after %v, Err %v", d, c.Err())
			}
		})
	})
	t.Run("parent ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			c := newHandlerCtx(parent, time.Now(), time.Hour)
			defer c.release()
			done := c.Done()
			cancel()
			<-done
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("Err %v", c.Err())
			}
			parent2, cancel2 := context.WithCancel(context.Background())
			cancel2()
			if c2 := newHandlerCtx(parent2, time.Now(), time.Hour); !errors.Is(c2.Err(), context.Canceled) {
				t.Fatal("an ended parent is not seen without Done")
			}
		})
	})
	t.Run("release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newHandlerCtx(context.Background(), time.Now(), time.Hour)
			child, stop := context.WithCancel(c) // asks for Done
			defer stop()
			c.release()
			<-child.Done()
			if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
				t.Fatalf("Err %v, child %v", c.Err(), child.Err())
			}
			c.release() // idempotent
		})
	})
	t.Run("parent deadline is earlier", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c := newHandlerCtx(parent, time.Now(), time.Hour)
			defer c.release()
			if dl, ok := c.Deadline(); !ok || time.Until(dl) != time.Second {
				t.Fatalf("deadline %v", dl)
			}
		})
	})
}
