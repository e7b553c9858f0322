package testkit

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fake GitHub's issues, their comments, and the App's webhook: GET
// /app (the App's slug), POST /repos/{owner}/{repo}/issues/{n}/comments and
// PATCH /repos/{owner}/{repo}/issues/comments/{id} for an installation
// token with issues write, and issue_comment and issues deliveries signed
// as GitHub signs them (X-Hub-Signature-256, HMAC-SHA256 of the body under
// the webhook's secret), each with its X-GitHub-Delivery id. The App's own
// comments are delivered too, from a Bot, as GitHub does.

// AppSlug is the fake App's slug: people mention it as @kndl-test.
const AppSlug = "kndl-test"

// Issue is an issue on the fake GitHub.
type Issue struct {
	Number   int
	Title    string
	Body     string
	Author   string
	Comments []IssueComment
	pull     bool // a pull request: GitHub numbers them with the issues, and its comments are an issue's
}

// IssueComment is a comment in an issue's thread.
type IssueComment struct {
	ID     int64
	Author string // the App's is AppSlug+"[bot]"
	Body   string
	Edits  int // how many times it was edited
}

// Delivery is one webhook delivery, as GitHub keeps it to redeliver.
type Delivery struct {
	ID, Event string
	Body      []byte
	Signature string // X-Hub-Signature-256
}

// fakeIssues is the fake's issues and webhook, under GitHub.mu.
type fakeIssues struct {
	issues      map[string][]*Issue // by lower-case owner/repo, numbered from 1
	nextComment int64
	hookURL     string
	hookSecret  []byte
	deliveries  []Delivery
}

func (g *GitHub) serveIssues(mux *http.ServeMux) {
	g.iss.issues = map[string][]*Issue{}
	g.iss.nextComment = 9000
	mux.HandleFunc("GET /app", g.app)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{n}/comments", g.createComment)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", g.editComment)
}

// SetWebhook makes the App deliver its events to url, signed with secret.
func (g *GitHub) SetWebhook(url, secret string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.iss.hookURL, g.iss.hookSecret = url, []byte(secret)
}

// OpenIssue opens an issue on ownerRepo as login and returns its number. It
// delivers nothing: an opened issue triggers nothing.
func (g *GitHub) OpenIssue(ownerRepo, login, title, body string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newNumber(strings.ToLower(ownerRepo), &Issue{Title: title, Body: body, Author: login})
}

// newNumber gives is the repository's next number, shared by issues and
// pull requests as on GitHub, and records it. Call with g.mu held.
func (g *GitHub) newNumber(repo string, is *Issue) int {
	is.Number = len(g.iss.issues[repo]) + 1
	g.iss.issues[repo] = append(g.iss.issues[repo], is)
	return is.Number
}

// Comments lists issue n's comments on ownerRepo, oldest first.
func (g *GitHub) Comments(ownerRepo string, n int) []IssueComment {
	g.mu.Lock()
	defer g.mu.Unlock()
	is := g.issue(strings.ToLower(ownerRepo), n)
	if is == nil {
		return nil
	}
	return slices.Clone(is.Comments)
}

// Comment adds login's comment to issue n of ownerRepo and delivers its
// issue_comment event, returning the delivery and the Hub's status.
func (g *GitHub) Comment(t testing.TB, ownerRepo string, n int, login, body string) (Delivery, int) {
	t.Helper()
	d := g.addComment(ownerRepo, n, login, body, false)
	return d, g.Deliver(t, d)
}

// Label delivers the issues event of login adding label to issue n.
func (g *GitHub) Label(t testing.TB, ownerRepo string, n int, login, label string) (Delivery, int) {
	t.Helper()
	g.mu.Lock()
	repo := strings.ToLower(ownerRepo)
	payload := map[string]any{"action": "labeled", "issue": g.issuePayload(repo, g.issue(repo, n)), "label": map[string]any{"name": label},
		"repository": g.repoPayload(ownerRepo), "sender": g.userPayload(login, false)}
	d := g.newDelivery("issues", payload)
	g.mu.Unlock()
	return d, g.Deliver(t, d)
}

// Deliver posts a delivery to the webhook, as GitHub does (again, for a
// redelivery: the same id), and returns the status it got.
func (g *GitHub) Deliver(t testing.TB, d Delivery) int {
	t.Helper()
	status, err := g.post(d)
	if err != nil {
		t.Fatalf("deliver %s %s: %v", d.Event, d.ID, err)
	}
	return status
}

func (g *GitHub) post(d Delivery) (int, error) {
	g.mu.Lock()
	url := g.iss.hookURL
	g.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", d.Event)
	req.Header.Set("X-GitHub-Delivery", d.ID)
	req.Header.Set("X-Hub-Signature-256", d.Signature)
	// GitHub gives up on a delivery after 10 s.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Deliveries lists every delivery made so far, oldest first.
func (g *GitHub) Deliveries() []Delivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.iss.deliveries)
}

// addComment records a comment and makes its issue_comment delivery.
func (g *GitHub) addComment(ownerRepo string, n int, login, body string, bot bool) Delivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	repo := strings.ToLower(ownerRepo)
	is := g.issue(repo, n)
	g.iss.nextComment++
	c := IssueComment{ID: g.iss.nextComment, Author: login, Body: body}
	is.Comments = append(is.Comments, c)
	payload := map[string]any{"action": "created", "issue": g.issuePayload(repo, is),
		"comment": map[string]any{"id": c.ID, "body": body, "user": g.userPayload(login, bot),
			"html_url": fmt.Sprintf("%s#issuecomment-%d", g.issueURL(repo, is), c.ID)},
		"repository": g.repoPayload(ownerRepo), "sender": g.userPayload(login, bot)}
	return g.newDelivery("issue_comment", payload)
}

// newDelivery signs a payload as a new delivery. Call with g.mu held.
func (g *GitHub) newDelivery(event string, payload any) Delivery {
	body, _ := json.Marshal(payload)
	d := Delivery{ID: newDeliveryID(), Event: event, Body: body, Signature: SignWebhook(g.iss.hookSecret, body)}
	g.iss.deliveries = append(g.iss.deliveries, d)
	return d
}

// SignWebhook is GitHub's X-Hub-Signature-256 of body under secret. It
// computes the HMAC itself rather than through auth.MAC, which the Hub
// checks deliveries with, on purpose: a fault there must not sign the
// fake's deliveries alike and so pass both sides of a test.
func SignWebhook(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// newDeliveryID is a GUID, as GitHub's delivery ids are.
func newDeliveryID() string {
	b := make([]byte, 16)
	rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// issue is issue n of repo, nil if none. Call with g.mu held.
func (g *GitHub) issue(repo string, n int) *Issue {
	if n < 1 || n > len(g.iss.issues[repo]) {
		return nil
	}
	return g.iss.issues[repo][n-1]
}

// The payloads' parts, as GitHub sends them (what kndl reads, and a little
// more). Call with g.mu held.
func (g *GitHub) issuePayload(repo string, is *Issue) map[string]any {
	p := map[string]any{"number": is.Number, "title": is.Title, "body": is.Body, "state": "open",
		"html_url": g.issueURL(repo, is), "user": g.userPayload(is.Author, false)}
	if is.pull {
		p["pull_request"] = map[string]any{"url": fmt.Sprintf("%s/repos/%s/pulls/%d", g.URL, repo, is.Number), "html_url": g.issueURL(repo, is)}
	}
	return p
}

// issueURL is the issue's page, or the pull request's for one.
func (g *GitHub) issueURL(repo string, is *Issue) string {
	if is.pull {
		return fmt.Sprintf("%s/%s/pull/%d", g.URL, repo, is.Number)
	}
	return fmt.Sprintf("%s/%s/issues/%d", g.URL, repo, is.Number)
}

func (g *GitHub) repoPayload(ownerRepo string) map[string]any {
	owner, name, _ := strings.Cut(ownerRepo, "/")
	return map[string]any{"id": repoID(ownerRepo), "name": name, "full_name": ownerRepo, "owner": map[string]any{"login": owner},
		"html_url": g.URL + "/" + ownerRepo, "clone_url": g.RepoURL(ownerRepo)}
}

func (g *GitHub) userPayload(login string, bot bool) map[string]any {
	if bot {
		return map[string]any{"login": login, "id": 1, "type": "Bot"}
	}
	u := g.users[strings.ToLower(login)]
	if u == nil {
		return map[string]any{"login": login, "id": 0, "type": "User"}
	}
	return map[string]any{"login": u.Login, "id": u.ID, "type": "User"}
}

// app answers GET /app for the App's JWT.
func (g *GitHub) app(w http.ResponseWriter, r *http.Request) {
	g.count("app")
	if !g.appAuthorized(r) {
		ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	ghJSON(w, http.StatusOK, map[string]any{"id": g.AppID, "slug": AppSlug, "name": "kndl (test)"})
}

// createComment adds the App's comment to an issue, for a token with
// issues write, and delivers it as GitHub does, from the App's Bot.
func (g *GitHub) createComment(w http.ResponseWriter, r *http.Request) {
	g.count("create_comment")
	ownerRepo := r.PathValue("owner") + "/" + r.PathValue("repo")
	n, _ := strconv.Atoi(r.PathValue("n"))
	body, ok := g.commentBody(w, r, ownerRepo)
	if !ok {
		return
	}
	g.mu.Lock()
	exists := g.issue(strings.ToLower(ownerRepo), n) != nil
	g.mu.Unlock()
	if !exists {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	d := g.addComment(ownerRepo, n, AppSlug+"[bot]", body, true)
	var c struct {
		Comment struct {
			ID int64 `json:"id"`
		} `json:"comment"`
	}
	json.Unmarshal(d.Body, &c)
	go g.post(d) // GitHub delivers after it answers
	ghJSON(w, http.StatusCreated, map[string]any{"id": c.Comment.ID, "body": body, "user": g.userPayload(AppSlug+"[bot]", true)})
}

// editComment replaces one of the App's comments' body, for a token with
// issues write.
func (g *GitHub) editComment(w http.ResponseWriter, r *http.Request) {
	g.count("edit_comment")
	ownerRepo := r.PathValue("owner") + "/" + r.PathValue("repo")
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	body, ok := g.commentBody(w, r, ownerRepo)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, is := range g.iss.issues[strings.ToLower(ownerRepo)] {
		for i, c := range is.Comments {
			if c.ID == id && c.Author == AppSlug+"[bot]" {
				is.Comments[i].Body, is.Comments[i].Edits = body, c.Edits+1
				ghJSON(w, http.StatusOK, map[string]any{"id": id, "body": body})
				return
			}
		}
	}
	ghError(w, http.StatusNotFound, "Not Found")
}

// commentBody checks the request's token has issues write on ownerRepo
// and reads the comment's body.
func (g *GitHub) commentBody(w http.ResponseWriter, r *http.Request, ownerRepo string) (string, bool) {
	if !g.allows(apiToken(r), ownerRepo, "issues", "write") {
		ghError(w, http.StatusForbidden, "Resource not accessible by integration")
		return "", false
	}
	var req struct {
		Body string `json:"body"`
	}
	if json.NewDecoder(r.Body).Decode(&req) != nil || req.Body == "" {
		ghError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return "", false
	}
	return req.Body, true
}
