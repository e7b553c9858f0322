// Package errdefs holds the few error classes every component uses, so an
// error can cross packages and still be mapped to an HTTP status (in
// internal/hub) or a protocol error code in one place. Any package may
// import it.
package errdefs

import "errors"

// The classes. Wrap them: fmt.Errorf("runner %s: %w", id, errdefs.ErrNotFound).
var (
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrInvalid      = errors.New("invalid")
	ErrTooLarge     = errors.New("too large")
	ErrUnavailable  = errors.New("unavailable")
	ErrForbidden    = errors.New("forbidden")
	ErrUnauthorized = errors.New("unauthorized")
	ErrTooMany      = errors.New("too many requests")
)
