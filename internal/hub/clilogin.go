package hub

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// cliLoginAPI serves kndl login and logout: the CLI's start and poll, and
// the browser's approval page.
type cliLoginAPI struct {
	core
	// runners are the connected Runners, whose addresses a kndl login's
	// approval page compares its own with (runnersAt).
	runners *runners.Conns
}

// kndl login is the device-code pattern: the CLI makes its own token and
// sends only its hash; the terminal shows a code; a signed-in browser
// approves that code, and the Hub records the hash as a CLI token of the
// person who approved. No secret crosses the Hub, and it keeps only hashes.
const (
	deviceTTL      = 10 * time.Minute
	devicePoll     = 2 * time.Second
	devicesMax     = 1000
	userCodeLetter = "BCDFGHJKLMNPQRSTVWXZ" // no vowels, no look-alikes
)

// deviceRequest is one kndl login waiting for a browser.
type deviceRequest struct {
	code    string // the user code, XXXX-XXXX
	machine string
	address string
	client  string // its User-Agent (clientName)
	// runners are the Runners connected from its address as it started.
	runners   []store.Runner
	tokenHash []byte
	expires   time.Time
	state     string // pending, approved, denied
}

// devices holds waiting logins in memory: they last minutes, and a Hub
// restart only makes someone run kndl login again.
type devices struct {
	mu       sync.Mutex
	byCode   map[string]*deviceRequest
	byDevice map[string]*deviceRequest // by the device code's hash
}

func (d *devices) init() {
	d.byCode, d.byDevice = map[string]*deviceRequest{}, map[string]*deviceRequest{}
}

func (d *devices) sweep() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	for k, req := range d.byDevice {
		if now.After(req.expires) {
			delete(d.byDevice, k)
			delete(d.byCode, req.code)
		}
	}
}

func newUserCode() string {
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = userCodeLetter[int(b[i])%len(userCodeLetter)]
	}
	return string(b[:4]) + "-" + string(b[4:])
}

// normalCode reads a code as a person may type it.
func normalCode(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if unicode.IsLetter(r) {
			b.WriteRune(r)
		}
	}
	c := b.String()
	if len(c) != 8 {
		return ""
	}
	return c[:4] + "-" + c[4:]
}

func (h cliLoginAPI) cliLoginStart(w http.ResponseWriter, r *http.Request, _ Principal) {
	addr := signin.ClientAddr(r)
	if h.guard.starts.Blocked(addr) {
		h.writeError(w, r, fmt.Errorf("too many logins started from your address; wait a minute: %w", errdefs.ErrTooMany))
		return
	}
	var req api.CLILoginStart
	err := readJSON(r, &req)
	hash, herr := hex.DecodeString(req.TokenSHA256)
	req.Machine = strings.TrimSpace(req.Machine)
	switch {
	case err != nil:
	case herr != nil || len(hash) != 32:
		err = fmt.Errorf("token_sha256: want the hex SHA-256 of the token the CLI made: %w", errdefs.ErrInvalid)
	case req.Machine == "" || len(req.Machine) > 64 || strings.ContainsFunc(req.Machine, unicode.IsControl):
		err = fmt.Errorf("machine: name this machine in 1 to 64 printable characters: %w", errdefs.ErrInvalid)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.guard.starts.Take(addr)
	device := randomString()
	d := &h.guard.devices
	d.mu.Lock()
	if len(d.byDevice) >= devicesMax {
		d.mu.Unlock()
		h.writeError(w, r, fmt.Errorf("too many logins are waiting for approval; try again in a few minutes: %w", errdefs.ErrUnavailable))
		return
	}
	code := newUserCode()
	for d.byCode[code] != nil {
		code = newUserCode()
	}
	dr := &deviceRequest{code: code, machine: req.Machine, address: addr, client: clientName(r), runners: h.runnersAt(addr),
		tokenHash: hash, expires: time.Now().Add(deviceTTL), state: "pending"}
	d.byCode[code] = dr
	d.byDevice[string(auth.Hash(device))] = dr
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, api.CLILoginCode{DeviceCode: device, UserCode: code,
		VerificationURL: strings.TrimSuffix(h.cfg.PublicURL, "/") + "/cli/login?code=" + code,
		ExpiresIn:       int(deviceTTL / time.Second), Interval: int(devicePoll / time.Second)})
}

func (h cliLoginAPI) cliLoginPoll(w http.ResponseWriter, r *http.Request, _ Principal) {
	var req api.CLILoginPoll
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	d := &h.guard.devices
	key := string(auth.Hash(req.DeviceCode))
	d.mu.Lock()
	dr := d.byDevice[key]
	state := ""
	if dr != nil {
		state = dr.state
		switch {
		case state == "approving":
			state = "pending"
		case time.Now().After(dr.expires) && state == "pending":
			state = "expired"
		}
		if state != "pending" {
			delete(d.byDevice, key)
			delete(d.byCode, dr.code)
		}
	}
	d.mu.Unlock()
	if dr == nil {
		if !h.guard.fails.Take(signin.ClientAddr(r)) {
			h.writeError(w, r, fmt.Errorf("too many wrong device codes from your address; wait a minute: %w", errdefs.ErrTooMany))
			return
		}
		h.writeError(w, r, fmt.Errorf("no such login waiting: run kndl login again: %w", errdefs.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, api.CLILoginStatus{Status: state})
}

// cliLoginView is what the approval page shows of a waiting login: where
// it came from, and whether that is where a Runner of this Hub connects
// from, so a login a Session's Sandbox started (a prompt-injected Claude
// asking its Creator to approve a code) says so.
type cliLoginView struct {
	Code, Machine, Address, Client string
	// FromRunner says its address is a connected Runner's, as it started or
	// now; Which names those the viewer's Sessions may run on and counts
	// the rest.
	FromRunner bool
	Which      string
}

func (h cliLoginAPI) waitingLogin(code string, viewer store.User) (cliLoginView, bool) {
	d := &h.guard.devices
	d.mu.Lock()
	dr := d.byCode[normalCode(code)]
	if dr == nil || dr.state != "pending" || time.Now().After(dr.expires) {
		d.mu.Unlock()
		return cliLoginView{}, false
	}
	v := cliLoginView{Code: dr.code, Machine: dr.machine, Address: dr.address, Client: dr.client}
	at := slices.Clone(dr.runners)
	d.mu.Unlock()
	seen := map[string]bool{}
	var names []string
	others := 0
	for _, rn := range append(at, h.runnersAt(v.Address)...) {
		if seen[rn.ID] {
			continue
		}
		seen[rn.ID], v.FromRunner = true, true
		if rn.UsableBy(viewer.ID) {
			names = append(names, rn.Name)
		} else {
			others++
		}
	}
	switch {
	case others == 1:
		names = append(names, "a Runner you don't use")
	case others > 1:
		names = append(names, fmt.Sprintf("%d Runners you don't use", others))
	}
	v.Which = strings.Join(names, ", ")
	return v, true
}

// runnersAt lists the connected Runners whose connection comes from addr,
// as the Hub sees each request's address (signin.ClientAddr). A Sandbox
// reaches the Hub through its Runner's host, so a request from it comes
// from the Runner's address when the Hub sees both from outside: behind
// one NAT or proxy, every machine there shares it, and kndl dev's own
// Runner shares the loopback with its CLI.
func (h cliLoginAPI) runnersAt(addr string) []store.Runner {
	var out []store.Runner
	for _, rc := range h.runners.All() {
		if rc.Addr == addr {
			out = append(out, rc.Runner)
		}
	}
	return out
}

// maxClientName bounds the User-Agent a login is shown with.
const maxClientName = 200

// clientName is the User-Agent a request named itself with, printable and
// at most maxClientName bytes; it is the requester's word, shown as such.
func clientName(r *http.Request) string {
	ua := strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return -1
		}
		return c
	}, r.UserAgent())
	if len(ua) > maxClientName {
		ua = strings.ToValidUTF8(ua[:maxClientName], "") + "…"
	}
	return ua
}

// cliLoginPage shows a waiting login for a signed-in browser to approve.
func (h cliLoginAPI) cliLoginPage(w http.ResponseWriter, r *http.Request, p Principal) {
	data := struct {
		User    string
		Request *cliLoginView
		Error   string
		// SignInAgain is where to sign in again and come back, when the
		// browser's sign-in is too old to approve (checkRecent).
		SignInAgain, MaxAge string
	}{User: p.User.Name, MaxAge: minutes(h.cfg.SudoMaxAge)}
	if code := r.URL.Query().Get("code"); code != "" {
		if v, ok := h.waitingLogin(code, p.User); ok {
			data.Request = &v
			if _, err := h.checkRecent(r.Context(), p); err != nil {
				data.SignInAgain = signInAgain(r.URL.RequestURI())
			}
		} else {
			data.Error = "No login is waiting with that code. Check it, or run kndl login again."
		}
	}
	renderPage(h.log, w, http.StatusOK, web.CLI, data)
}

// cliLoginDecide approves or denies a waiting login. Only a signed-in
// browser can, from the Hub's own page.
func (h cliLoginAPI) cliLoginDecide(w http.ResponseWriter, r *http.Request, p Principal) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		messagePage(h.log, w, http.StatusBadRequest, "Not understood", "The form was not understood.")
		return
	}
	approve := r.PostForm.Get("action") == "approve"
	var signedIn time.Time
	if approve {
		// A CLI token is never fresher than the sign-in that approved it.
		var err error
		if signedIn, err = h.checkRecent(r.Context(), p); err != nil {
			renderPage(h.log, w, statusOf(err), web.Message.WithTitle("Sign in again"), struct{ Text, Link string }{
				err.Error(), signInAgain("/cli/login?code=" + url.QueryEscape(r.PostForm.Get("code")))})
			return
		}
	}
	d := &h.guard.devices
	d.mu.Lock()
	dr := d.byCode[normalCode(r.PostForm.Get("code"))]
	ok := dr != nil && dr.state == "pending" && time.Now().Before(dr.expires)
	if ok {
		// "approving" still polls as pending: the token works only once
		// it is recorded.
		dr.state = map[bool]string{true: "approving", false: "denied"}[approve]
	}
	var hash []byte
	var machine, address string
	var from []store.Runner
	if ok {
		hash, machine, address, from = dr.tokenHash, dr.machine, dr.address, dr.runners
	}
	d.mu.Unlock()
	if !ok {
		messagePage(h.log, w, http.StatusNotFound, "No such login", "No login is waiting with that code. Run kndl login again.")
		return
	}
	if !approve {
		h.audit(r, p, auditCLIDenied, machine, "")
		noticePage(h.log, w, "Denied", "The login was denied. Nothing was signed in.")
		return
	}
	err := h.store.Members.AddCLIToken(r.Context(), p.User.ID, machine, hash, signedIn)
	d.mu.Lock()
	dr.state = "approved"
	if err != nil {
		dr.state = "pending"
	}
	d.mu.Unlock()
	if err != nil {
		h.log.Error("add CLI token", "err", err)
		messagePage(h.log, w, http.StatusInternalServerError, "Not signed in", "The Hub failed to record the login; its log has the detail.")
		return
	}
	h.log.Info("CLI signed in", "user", p.User.Name, "machine", machine)
	detail := "a kndl login from " + address
	if len(from) > 0 {
		detail += ", a connected Runner's address"
	}
	h.audit(r, p, auditCLIApproved, machine, detail)
	noticePage(h.log, w, "Signed in", "The kndl CLI on "+machine+" is signed in as you. Go back to your terminal.")
}

// cliLogout revokes the CLI token it is called with, and ends what it
// opened.
func (h cliLoginAPI) cliLogout(w http.ResponseWriter, r *http.Request, p Principal) {
	tok, _ := bearer(r)
	if err := h.store.Signins.RevokeCLIToken(r.Context(), tok); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.guard.endCredential(p.cred, errCredentialUp)
	h.audit(r, p, auditCLILogout, "", "kndl logout")
	w.WriteHeader(http.StatusNoContent)
}
