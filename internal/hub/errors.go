package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"kndl.dev/kndl/internal/errdefs"
)

// apiError is every error the API sends: a sentence a person can act on.
type apiError struct {
	Message string `json:"message"`
	Detail  string `json:"detail,omitempty"`
}

// statusOf maps an error's class to its HTTP status: the one place this is
// decided.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, errdefs.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, errdefs.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, errdefs.ErrTooMany):
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

func (h core) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	msg := err.Error()
	if h.full(err) {
		h.log.Error("the store's disk is full: nothing can be saved until space is freed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, apiError{Message: "The Hub's disk is full, so it saved nothing of this request: free space on the disk that holds its store, then try again."})
		return
	}
	if status == http.StatusInternalServerError {
		h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "The Hub failed to handle this request; its log has the detail."
	}
	writeJSON(w, status, apiError{Message: msg})
}

// reply writes err, or v with status: the end of every handler that
// calls one thing and answers what it gave.
func (h core) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// answerNoContent writes err, or 204.
func (h core) answerNoContent(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// maxBody bounds every request body the API reads.
const maxBody = 1 << 20

// readJSON decodes a bounded JSON body into v, refusing unknown fields.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body over %d bytes: %w", maxBody, errdefs.ErrTooLarge)
		}
		return fmt.Errorf("request body is not the JSON this endpoint takes: %v: %w", err, errdefs.ErrInvalid)
	}
	return nil
}
