package agentcard

import "time"

// DefaultRemoteTTL is how long a remote card stays visible after it was
// last merged, unless [WithRemoteTTL] says otherwise.
const DefaultRemoteTTL = 10 * time.Minute

// Option configures a [Registry].
type Option func(*options)

type options struct {
	now func() time.Time
	ttl time.Duration
}

func defaults() options {
	return options{now: time.Now, ttl: DefaultRemoteTTL}
}

// WithClock sets the registry's clock (default time.Now). The registry reads
// it once per call to stamp LastSeenAt and to decide which remote cards have
// expired. A nil function keeps the default.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithRemoteTTL sets how long a remote card stays visible after it was last
// merged (default [DefaultRemoteTTL], 10 minutes). A card whose TTL has
// elapsed is invisible to every query and is dropped by [Registry.Expire].
// A zero or negative d means remote cards never expire.
func WithRemoteTTL(d time.Duration) Option {
	return func(o *options) { o.ttl = d }
}
