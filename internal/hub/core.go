package hub

import (
	"log/slog"

	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
)

// core is what every handler type shares, and the helpers they all call:
// replying (errors.go), rendering a page, recording an act in the audit
// log, opening a Session's socket, naming Members, and minting a Repo's
// token of the GitHub App (sandboxtokens.go). What a caller may see or
// change is the guard's to say (guard.go, access.go, filter.go).
// The Hub embeds it; each handler type embeds a copy with the parts of the
// Hub it uses beside it, so no handler reaches the whole Hub.
type core struct {
	cfg      Config
	log      *slog.Logger
	store    store.Domains    // the store's queries; the whole store is the Hub's alone
	full     func(error) bool // store.Store.Full: the store's disk is full
	auditKey []byte           // chains the audit log: AuditKey
	guard    *guard           // sign-in, Repo access and who is connected: guard.go
	catchUp  catchUps         // watchers reading a Session's history at once
}

// vault opens and seals what the store keeps sealed: the Hub's, and the
// Variables' handlers' too.
type vault struct {
	secrets *seal.Box
}
