package localhttp

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/nova-node/nova-node/internal/secretfile"
)

// TokenFile is the local token's file inside the data dir.
const TokenFile = "local.token"

// Token lengths: a generated token is 32 random bytes in base64url (43
// characters); a token written by hand must have at least minTokenLen
// characters, at most maxTokenLen.
const (
	tokenBytes  = 32
	minTokenLen = 32
	maxTokenLen = 512
)

// TokenPath is the local token's path in dataDir.
func TokenPath(dataDir string) string { return filepath.Join(dataDir, TokenFile) }

// TokenError says the local token file cannot be used: it is readable by
// other users, not a regular file, or holds no valid token.
type TokenError struct {
	Path string
	// Mode is the file's permission bits when they let others in (0
	// otherwise).
	Mode fs.FileMode
	// Reason says what is wrong when Mode does not.
	Reason string
}

func (e *TokenError) Error() string {
	if e.Mode != 0 {
		return fmt.Sprintf("localhttp: %s is readable or writable by other users (mode %04o): anyone who reads it can drive the node's local HTTP faces", e.Path, e.Mode)
	}
	return fmt.Sprintf("localhttp: %s: %s", e.Path, e.Reason)
}

// Code is the error's code for the CLI.
func (e *TokenError) Code() string { return "LOCAL_TOKEN_INVALID" }

// Hint says what to do about it.
func (e *TokenError) Hint() string {
	if e.Mode != 0 {
		return "run `chmod 600 " + e.Path + "`; if other users may have read it, delete it instead: the node makes a new token when it starts"
	}
	return "delete " + e.Path + ": the node makes a new token when it starts"
}

// EnsureToken returns the local token of dataDir, creating the token file
// (mode 0600, 32 random bytes in base64url) if it does not exist. The file
// is created whole and once ([secretfile.Create]): a reader never sees half
// a token, and of two processes creating it at once, the one that loses
// reads the winner's. A file other users may read or write is refused
// ([TokenError]): its token is no longer a secret.
func EnsureToken(dataDir string) (string, error) {
	tok, err := ReadToken(dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("localhttp: local token: %w", err)
	}
	tok = base64.RawURLEncoding.EncodeToString(b)
	if err := secretfile.Create(TokenPath(dataDir), []byte(tok+"\n")); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ReadToken(dataDir)
		}
		return "", fmt.Errorf("localhttp: write the local token: %w", err)
	}
	return tok, nil
}

// ReadToken reads the local token of dataDir: what a client of the node's
// local HTTP faces sends as "Authorization: Bearer <token>". The error
// wraps fs.ErrNotExist when there is no token file (the node has not
// started on dataDir yet), fs.ErrPermission when the caller may not read
// it (it is not the node's owner), and is a [TokenError] when the file is
// open to other users or holds no token.
func ReadToken(dataDir string) (string, error) {
	path := TokenPath(dataDir)
	b, err := secretfile.Read(path)
	var me *secretfile.ModeError
	switch {
	case errors.As(err, &me):
		return "", &TokenError{Path: path, Mode: me.Mode}
	case errors.Is(err, secretfile.ErrNotRegular):
		return "", &TokenError{Path: path, Reason: "not a regular file"}
	case err != nil:
		return "", fmt.Errorf("localhttp: local token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if !validToken(tok) {
		return "", &TokenError{Path: path, Reason: fmt.Sprintf("does not hold a token (one line of %d to %d letters, digits or -._~+/=)", minTokenLen, maxTokenLen)}
	}
	return tok, nil
}

// validToken reports whether tok can travel as an RFC 6750 bearer token
// (token68 characters) and is long enough to be a secret.
func validToken(tok string) bool {
	if len(tok) < minTokenLen || len(tok) > maxTokenLen {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0) {
			return false
		}
	}
	return true
}
