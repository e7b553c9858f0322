package hub

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
)

// The audit log records every act that changes who can do what on the Hub,
// or what a Session may reach, each by who did it, when, from where (the
// client address as the rate limits see it, clientAddr) and what it was
// done to, by name: never a secret, a value, a token, a cookie or a link.
// Handlers call Hub.audit once the act is done; appendAudit is the one
// place entries are made. The store chains them by an HMAC under a key
// derived from HUB_SECRETS_KEY (AuditKey, store.AppendAudit).
const (
	auditInviteMade       = "invite.made"
	auditInviteRevoked    = "invite.revoked"
	auditMemberJoined     = "member.joined" // an Invite used, or the Setup link
	auditMemberRemoved    = "member.removed"
	auditRunnerPaired     = "runner.paired"
	auditRunnerRevoked    = "runner.revoked"
	auditRunnerShared     = "runner.shared"
	auditRunnerUnshared   = "runner.unshared"
	auditMetricsMade      = "metrics_token.made"
	auditMetricsRevoked   = "metrics_token.revoked"
	auditVariableSet      = "variable.set"
	auditVariableRemoved  = "variable.removed"
	auditVariableLinked   = "variable.linked"
	auditVariableUnlinked = "variable.unlinked"
	auditTokenStored      = "setup_token.stored"
	auditTokenRemoved     = "setup_token.removed"
	auditCLIApproved      = "cli_login.approved"
	auditCLIDenied        = "cli_login.denied"
	auditCLILogout        = "cli_token.revoked"
	auditSigninRefused    = "signin.refused"
	// MCP servers and their Installations change what a Session may reach.
	auditMCPServerAdded       = "mcp_server.added"
	auditMCPServerEdited      = "mcp_server.edited"
	auditInstallationMade     = "installation.made"
	auditInstallationRepos    = "installation.repos_set"
	auditInstallationValueSet = "installation.value_set"
	auditInstallationClient   = "installation.client_entered"
	auditInstallationConnect  = "installation.connected"
	auditInstallationDisconn  = "installation.disconnected"
	auditInstallationOff      = "installation.turned_off"
	auditInstallationOn       = "installation.turned_on"
	auditEnvironmentApply     = "environment.applied"
	// A notification webhook, named by its host alone: a Slack webhook's
	// path is its credential.
	auditWebhookAdded  = "notify_webhook.added"
	auditWebhookEdited = "notify_webhook.edited"
	// A log chained without a key, by a Hub before the chain had one,
	// chained again with the key.
	auditChainKeyed = "audit_log.keyed"
)

// AuditKey is the audit chain's key, derived from HUB_SECRETS_KEY.
func AuditKey(secretsKey []byte) []byte { return seal.DeriveKey(secretsKey, "audit chain") }

// audit records that p, making request r, did action to target. A failure
// to record is logged; the act stands.
func (h core) audit(r *http.Request, p Principal, action, target, detail string) {
	via := "github" // a sign-in: someone let in, or refused
	switch p.Kind {
	case auth.Cookie:
		via = "browser"
	case auth.CLI:
		via = "cli"
	}
	err := appendAudit(r.Context(), h.store.Audit, h.auditKey, h.log, store.AuditEntry{ActorID: p.User.ID, Actor: cmp.Or(p.User.GitHubLogin, p.User.Name),
		Via: via, Addr: signin.ClientAddr(r), Action: action, Target: target, Detail: detail})
	if err != nil {
		h.log.Error("record an act in the audit log", "action", action, "target", target, "err", err)
	}
}

// onHubMachine is who does what the Hub's machine does.
var onHubMachine = store.AuditEntry{Actor: "the Hub's machine", Via: "hub"}

// AuditOnHubMachine records an act done on the Hub's machine itself, with
// the operating system's authority, working on the store (kndl runner
// token create, kndl hub metrics-token). It chains the entry with a key
// derived from secretsKey, the Hub's HUB_SECRETS_KEY.
func AuditOnHubMachine(ctx context.Context, st *store.Audit, secretsKey string, log *slog.Logger, action, target, detail string) error {
	k, err := seal.ParseKey(secretsKey)
	if err != nil {
		return err
	}
	key := AuditKey(k)
	if err := keyAuditLog(ctx, st, key, log); err != nil {
		return err
	}
	e := onHubMachine
	e.Action, e.Target, e.Detail = action, target, detail
	return appendAudit(ctx, st, key, log, e)
}

// The actions AuditOnHubMachine records: a Runner paired there, the
// metrics token made or revoked.
const (
	AuditRunnerPaired   = auditRunnerPaired
	AuditMetricsMade    = auditMetricsMade
	AuditMetricsRevoked = auditMetricsRevoked
)

// appendAudit is the one place an audit entry is made. Each entry's number
// and hash go to the operator's log too: a copy of the chain's head kept
// apart from the store, against which a log cut short is found.
func appendAudit(ctx context.Context, st *store.Audit, key []byte, log *slog.Logger, e store.AuditEntry) error {
	// The act is done: it is recorded even if its request ends now.
	e, err := st.AppendAudit(context.WithoutCancel(ctx), key, e)
	if err == nil {
		logAudit(log, e)
	}
	return err
}

func logAudit(log *slog.Logger, e store.AuditEntry) {
	log.Info("audit", "seq", e.Seq, "action", e.Action, "actor", e.Actor, "via", e.Via, "addr", e.Addr,
		"target", e.Target, "hash", hex.EncodeToString(e.Hash))
}

// keyAuditLog chains a log left by a Hub from before the chain had a key
// again with key, once, as the Hub's machine's act (store.KeyAuditChain).
// The entry says how far and gives the head's hash before, which the
// operator's log also has.
func keyAuditLog(ctx context.Context, st *store.Audit, key []byte, log *slog.Logger) error {
	e, err := st.KeyAuditChain(ctx, key, func(rk store.AuditRekey) store.AuditEntry {
		e := onHubMachine
		e.Action, e.Target = auditChainKeyed, "the audit log"
		e.Detail = fmt.Sprintf("entries 1 to %d chained again with a key derived from HUB_SECRETS_KEY; entry %d's hash before was %x",
			rk.Rows, rk.Rows, rk.OldHead)
		if rk.BrokenAt != 0 {
			e.Detail += fmt.Sprintf("; the chain without a key broke at entry %d (%s), so it and the entries after it were left as they were", rk.BrokenAt, rk.Reason)
		}
		return e
	})
	if err == nil && e.Seq != 0 {
		logAudit(log, e)
	}
	return err
}

// auditRefusal records a sign-in the Hub refused, by its address and what
// it brought (nothing, an Invite, a Setup link), never who GitHub said it
// was: nothing of someone it doesn't let in is kept. Refusals cost nothing
// to make, so at most refusalsPerMinute are recorded a minute; the next
// one recorded says how many were not.
func (h signinAPI) auditRefusal(r *http.Request, claim string) {
	ok, skipped := h.refusals.take(time.Now())
	if !ok {
		return
	}
	brought := "no Invite"
	switch auth.KindOf(claim) {
	case auth.Invite:
		brought = "an Invite that didn't let them in"
	case auth.Setup:
		brought = "a Setup link that didn't let them in"
	}
	detail := "not a Member, with " + brought
	if skipped > 0 {
		detail += "; " + plural(skipped, "refusal") + " before it not recorded (at most 30 a minute)"
	}
	h.audit(r, Principal{}, auditSigninRefused, "", detail)
}

// refusalsPerMinute bounds the sign-in refusals the audit log records.
const refusalsPerMinute = 30

// refusals counts the sign-in refusals recorded in the current minute.
type refusals struct {
	mu      sync.Mutex
	minute  time.Time
	n       int
	skipped int
}

// take reports whether a refusal at now is recorded, and if it is, how
// many before it weren't.
func (rf *refusals) take(now time.Time) (bool, int) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if m := now.Truncate(time.Minute); !m.Equal(rf.minute) {
		rf.minute, rf.n = m, 0
	}
	if rf.n >= refusalsPerMinute {
		rf.skipped++
		return false, 0
	}
	rf.n++
	skipped := rf.skipped
	rf.skipped = 0
	return true, skipped
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// memberTarget names a Member, and the Runners of theirs removing them
// revokes, before they are removed.
func (h membersAPI) memberTarget(ctx context.Context, id string) (string, string) {
	u, err := h.store.Members.UserByID(ctx, id)
	if err != nil {
		return id, ""
	}
	var names []string
	rs, _ := h.store.Runners.List(ctx)
	for _, rn := range rs {
		if rn.CreatedBy == id {
			names = append(names, rn.Name)
		}
	}
	detail := "signed out everywhere"
	if len(names) > 0 {
		detail += "; their Runners revoked with them: " + strings.Join(names, ", ")
	}
	if u.GitHubLogin != "" {
		return "@" + u.GitHubLogin, detail
	}
	return u.Name, detail
}

// inviteTarget names an Invite by the login it is for.
func (h membersAPI) inviteTarget(ctx context.Context, id string) string {
	invs, _ := h.store.Members.Invites(ctx)
	for _, in := range invs {
		if in.ID == id {
			return "@" + in.GitHubLogin + " (Invite " + id + ")"
		}
	}
	return "Invite " + id
}

// variableTarget names a Variable: Shared, or by its Repo.
func (h variablesAPI) variableTarget(ctx context.Context, repoID, name string) string {
	if repoID == "" {
		return "Shared " + name
	}
	repo, _ := h.store.Repos.RepoByID(ctx, repoID)
	return name + " in " + cmp.Or(repo.URL, repoID)
}

// variableDetail says how a Variable was set: never its value.
func variableDetail(req api.VariableRequest, replaced bool) string {
	parts := []string{map[bool]string{true: "Sensitive", false: "plain"}[req.Sensitive]}
	if req.AtBuild {
		parts = append(parts, "at build")
	}
	if req.LoadsCode {
		parts = append(parts, "marked as loading code")
	}
	if replaced {
		parts = append(parts, "replacing the value it had")
	}
	return strings.Join(parts, ", ")
}
