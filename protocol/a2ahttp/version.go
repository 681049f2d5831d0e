package a2ahttp

import (
	"strconv"
	"strings"
)

// VersionHeader is the HTTP header in which an A2A client names the protocol
// version it speaks. A request without it is a v0.3 request.
const VersionHeader = "A2A-Version"

// Wire versions the gateway speaks.
const (
	Version03 = "0.3" // JSON-RPC methods message/send, tasks/get, ...: served by a2a-go
	Version10 = "1.0" // JSON-RPC methods SendMessage, GetTask, ...: served by this package
)

// wireVersion maps an A2A-Version header value to Version03 or Version10.
// An empty value is v0.3 (the spec's rule for clients that predate the
// header). Any 0.x version from 0.3 on is v0.3, any 1.x version is v1.0
// (minor versions are compatible within a major one); everything else is
// unsupported and ok is false.
func wireVersion(header string) (v string, ok bool) {
	h := strings.TrimSpace(header)
	if h == "" {
		return Version03, true
	}
	major, minor, good := parseVersion(h)
	switch {
	case !good:
		return "", false
	case major == 0 && minor >= 3:
		return Version03, true
	case major == 1:
		return Version10, true
	}
	return "", false
}

// parseVersion reads "MAJOR[.MINOR[.PATCH]]" with decimal numbers of at most
// four digits.
func parseVersion(s string) (major, minor int, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return 0, 0, false
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		if p == "" || len(p) > 4 {
			return 0, 0, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p[0] == '+' || p[0] == '-' {
			return 0, 0, false
		}
		nums[i] = n
	}
	major = nums[0]
	if len(nums) > 1 {
		minor = nums[1]
	}
	return major, minor, true
}
