package gitrelay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/forge"
)

// The API route: gh in the Sandbox reaches GitHub's REST and GraphQL APIs
// through the relay, with the Session token, and the relay forwards only
// what apiRules and graphQLOps list for the Session's Repo, with the forge
// token it holds. Everything else is refused in GitHub's error shape,
// which gh prints ("gh: kndl: … (HTTP 403)").

// APIHost is the name gh calls the API by: gh 2.23 (Debian's, the test
// image's) speaks plain HTTP only to GitHub's development host,
// github.localhost, whose API it calls at http://api.github.localhost/
// (GraphQL at /graphql). The relay takes a request for it in origin form
// with that Host, or in absolute form (gh behind HTTP_PROXY).
const APIHost = "api.github.localhost"

// GHHost is what GH_HOST names for gh to use APIHost.
const GHHost = "github.localhost"

// maxAPIBody bounds a write's body the relay reads to judge it: a pull
// request's or comment's text is far below it (GitHub caps a body at
// 65,536 characters).
const maxAPIBody = 1 << 20

// apiCheck is what a rule checks beyond its method and path: the body it
// takes (b, read whole) and the pull request it names; "" to forward, or
// why not.
type apiCheck int

const (
	anyRequest    apiCheck = iota
	ownHeadBody            // a new pull request: its head is under the Session's prefix
	ownPull                // the pull request {n} has its head under the prefix
	ownPullFields          // ownPull, and the body sets only title, body, state, base
)

// apiRule is one method and path the relay forwards, below
// repos/{owner}/{repo} of the Session's Repo: "{n}" is a number, "{s}"
// any one segment.
type apiRule struct {
	method, path string
	check        apiCheck
	follow       bool // the forge answers with a redirect to a download: the relay fetches it
}

// apiRules are the REST calls the relay forwards: read issues, pull
// requests, checks and Actions runs and their logs; open and update the
// Session's own pull requests; comment on issues and pull requests;
// request reviewers on its own. Anything else (another Repo, settings,
// merging, deleting, releases, gists, reviews that approve) is refused.
var apiRules = []apiRule{
	{"GET", "", anyRequest, false},
	{"GET", "issues", anyRequest, false},
	{"GET", "issues/{n}", anyRequest, false},
	{"GET", "issues/{n}/comments", anyRequest, false},
	{"POST", "issues/{n}/comments", anyRequest, false},
	{"GET", "pulls", anyRequest, false},
	{"POST", "pulls", ownHeadBody, false},
	{"GET", "pulls/{n}", anyRequest, false},
	{"PATCH", "pulls/{n}", ownPullFields, false},
	{"GET", "pulls/{n}/files", anyRequest, false},
	{"GET", "pulls/{n}/commits", anyRequest, false},
	{"GET", "pulls/{n}/comments", anyRequest, false},
	{"POST", "pulls/{n}/comments", anyRequest, false},
	{"GET", "pulls/{n}/reviews", anyRequest, false},
	{"GET", "pulls/{n}/requested_reviewers", anyRequest, false},
	{"POST", "pulls/{n}/requested_reviewers", ownPull, false},
	{"GET", "commits/{s}/check-runs", anyRequest, false},
	{"GET", "commits/{s}/check-suites", anyRequest, false},
	{"GET", "commits/{s}/status", anyRequest, false},
	{"GET", "commits/{s}/statuses", anyRequest, false},
	{"GET", "check-runs/{n}", anyRequest, false},
	{"GET", "check-runs/{n}/annotations", anyRequest, false},
	{"GET", "actions/runs", anyRequest, false},
	{"GET", "actions/runs/{n}", anyRequest, false},
	{"GET", "actions/runs/{n}/jobs", anyRequest, false},
	{"GET", "actions/runs/{n}/attempts/{n}/jobs", anyRequest, false},
	{"GET", "actions/runs/{n}/logs", anyRequest, true},
	{"GET", "actions/runs/{n}/artifacts", anyRequest, false},
	{"GET", "actions/jobs/{n}", anyRequest, false},
	{"GET", "actions/jobs/{n}/logs", anyRequest, true},
	{"GET", "actions/workflows", anyRequest, false},
	{"GET", "actions/workflows/{s}", anyRequest, false},
}

// pullFields are what an update of the Session's own pull request may set.
var pullFields = map[string]bool{"title": true, "body": true, "state": true, "base": true}

var number = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[1-9][0-9]{0,18}$`) })

// matchRule finds the rule for method and rest, the path below the Repo,
// and the pull request number it names ("" if none).
func matchRule(method, rest string) (apiRule, string, bool) {
	segs := strings.Split(rest, "/")
	if rest == "" {
		segs = nil
	}
	for _, r := range apiRules {
		if r.method != method {
			continue
		}
		want := strings.Split(r.path, "/")
		if r.path == "" {
			want = nil
		}
		if len(want) != len(segs) {
			continue
		}
		n, ok := "", true
		for i, w := range want {
			switch {
			case w == "{n}":
				ok = number().MatchString(segs[i])
				if i == 1 && want[0] == "pulls" {
					n = segs[i]
				}
			case w == "{s}":
				ok = segs[i] != "" && segs[i] != "." && segs[i] != ".."
			default:
				ok = w == segs[i]
			}
			if !ok {
				break
			}
		}
		if ok {
			return r, n, true
		}
	}
	return apiRule{}, "", false
}

// ServeAPI serves gh's call to GitHub's API for a Session whose Session
// token the caller checked: p is the request's path, such as
// /repos/acme/app/pulls or /graphql.
func (r *Relay) ServeAPI(w http.ResponseWriter, req *http.Request, sessionID string) {
	s, ok := r.session(sessionID)
	if !ok {
		apiRefuse(w, http.StatusServiceUnavailable, "kndl: this Session's GitHub relay is not open yet; try again in a moment")
		return
	}
	api, ok := r.forge.(forge.API)
	if !ok {
		apiRefuse(w, http.StatusNotFound, "kndl: the git relay's forge has no API")
		return
	}
	p := req.URL.EscapedPath()
	if req.URL.RawPath == "" {
		p = req.URL.Path
	}
	if strings.Contains(p, "%") || strings.Contains(p, "//") || strings.Contains(p+"/", "/./") || strings.Contains(p+"/", "/../") {
		apiRefuse(w, http.StatusBadRequest, "kndl: the GitHub relay takes plain paths, not "+p)
		return
	}
	p = strings.TrimPrefix(p, "/api/v3") // gh's enterprise form, should it be used
	var body []byte
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxAPIBody+1))
		if err != nil || len(b) > maxAPIBody {
			apiRefuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("kndl: the GitHub relay takes a body of at most %d bytes", maxAPIBody))
			return
		}
		body = b
	}
	if p == "/graphql" && req.Method == http.MethodPost {
		out, why := judgeGraphQL(body, s)
		if why != "" {
			apiRefuse(w, http.StatusForbidden, "kndl: "+why)
			return
		}
		r.forwardAPI(w, req, s, api, "/graphql", out, false)
		return
	}
	rest, ok := strings.CutPrefix(p, "/repos/")
	owner, name, below := "", "", ""
	if ok {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) >= 2 {
			owner, name = parts[0], parts[1]
		}
		if len(parts) == 3 {
			below = strings.TrimSuffix(parts[2], "/")
		}
	}
	if !ok || !strings.EqualFold(owner+"/"+name, s.path) {
		apiRefuse(w, http.StatusForbidden, fmt.Sprintf("kndl: this Session reaches GitHub's API for %s alone, and only to read it, open and update its own pull requests, comment and request reviewers; not %s %s", s.path, req.Method, p))
		return
	}
	rule, n, ok := matchRule(req.Method, below)
	if !ok {
		apiRefuse(w, http.StatusForbidden, fmt.Sprintf("kndl: %s %s is not among the calls the GitHub relay forwards (read issues, pull requests, checks and Actions runs; open and update the Session's own pull requests; comment; request reviewers); merging, deleting, settings and releases are a person's to do on GitHub", req.Method, p))
		return
	}
	if why := r.checkAPI(req, s, api, rule.check, n, &body); why != "" {
		apiRefuse(w, http.StatusForbidden, "kndl: "+why)
		return
	}
	target := p
	if req.URL.RawQuery != "" {
		target += "?" + req.URL.RawQuery
	}
	r.forwardAPI(w, req, s, api, target, body, rule.follow)
}

// checkAPI applies a rule's check; it may rewrite body to what it judged.
func (r *Relay) checkAPI(req *http.Request, s served, api forge.API, c apiCheck, n string, body *[]byte) string {
	switch c {
	case ownHeadBody:
		var fields map[string]json.RawMessage
		if json.Unmarshal(*body, &fields) != nil {
			return "a new pull request's body is a JSON object"
		}
		var head string
		json.Unmarshal(fields["head"], &head)
		if _, ok := fields["head_repo"]; ok {
			return "a pull request from another repository is not this Session's"
		}
		if o, b, ok := strings.Cut(head, ":"); ok {
			if owner, _, _ := strings.Cut(s.path, "/"); !strings.EqualFold(o, owner) {
				return "a pull request's head is this Session's own branch in " + s.path + ", not " + head
			}
			head = b
		}
		if !strings.HasPrefix(head, s.prefix) {
			return fmt.Sprintf("this Session opens pull requests only from its own branches, under %s, not %q; push to one (git push -u origin HEAD:%swork) and open it from there", s.prefix, head, s.prefix)
		}
		// What was judged is what the forge reads: one of each field.
		*body, _ = json.Marshal(fields)
		return ""
	case ownPull, ownPullFields:
		if c == ownPullFields {
			var fields map[string]json.RawMessage
			if json.Unmarshal(*body, &fields) != nil {
				return "an update of a pull request is a JSON object"
			}
			for f := range fields {
				if !pullFields[f] {
					return fmt.Sprintf("an update of this Session's pull request sets its title, body, state or base, not %q", f)
				}
			}
			*body, _ = json.Marshal(fields)
		}
		head, err := r.pullHead(req, s, api, n)
		if err != nil {
			return err.Error()
		}
		if !strings.HasPrefix(head, s.prefix) {
			return fmt.Sprintf("pull request #%s is not this Session's: its head %q is not under %s", n, head, s.prefix)
		}
	}
	return ""
}

// pullHead asks the forge for pull request n's head branch, "" for one
// from another repository.
func (r *Relay) pullHead(req *http.Request, s served, api forge.API, n string) (string, error) {
	u := api.API(s.repo).JoinPath("repos", s.path, "pulls", n)
	out, err := http.NewRequestWithContext(req.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	out.Header.Set("Accept", "application/vnd.github+json")
	api.AuthorizeAPI(out, r.tokenOf(s.id))
	resp, err := r.client.Do(out)
	if err != nil {
		return "", fmt.Errorf("the GitHub relay could not reach %s; try again", u.Host)
	}
	defer resp.Body.Close()
	var pull struct {
		Head struct {
			Ref  string `json:"ref"`
			Repo struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"head"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, maxAPIBody)).Decode(&pull) != nil {
		return "", fmt.Errorf("pull request #%s of %s could not be read (%s)", n, s.path, resp.Status)
	}
	if fn := pull.Head.Repo.FullName; fn != "" && !strings.EqualFold(fn, s.path) {
		return "", fmt.Errorf("pull request #%s is not this Session's: its head is in %s", n, fn)
	}
	return pull.Head.Ref, nil
}

// forwardAPI sends a call on to the forge's API with the Session's forge
// token, and streams the answer back. follow fetches a redirect's target
// (a log's download, on another host) without the token.
func (r *Relay) forwardAPI(w http.ResponseWriter, req *http.Request, s served, api forge.API, target string, body []byte, follow bool) {
	token := r.tokenOf(s.id)
	if token == "" {
		apiRefuse(w, http.StatusServiceUnavailable, "kndl: the Runner holds no GitHub token for this Session yet; the Session's log says why")
		return
	}
	base := api.API(s.repo)
	u, err := url.Parse(base.String() + target)
	if err != nil {
		apiRefuse(w, http.StatusBadRequest, "kndl: the GitHub relay can't forward "+target)
		return
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, u.String(), rd)
	if err != nil {
		apiRefuse(w, http.StatusBadRequest, "kndl: the GitHub relay can't forward "+target)
		return
	}
	for _, h := range []string{"Accept", "Content-Type", "User-Agent", "X-Github-Api-Version", "Graphql-Features", "If-None-Match", "If-Modified-Since"} {
		if v := req.Header.Values(h); len(v) > 0 {
			out.Header[h] = v
		}
	}
	api.AuthorizeAPI(out, token)
	resp, err := r.client.Do(out)
	if err == nil && follow && resp.StatusCode == http.StatusFound {
		loc, lerr := resp.Request.URL.Parse(resp.Header.Get("Location"))
		resp.Body.Close()
		if lerr != nil || (loc.Scheme != "https" && loc.Host != u.Host) {
			apiRefuse(w, http.StatusBadGateway, "kndl: the forge sent the log elsewhere than a download")
			return
		}
		dl, _ := http.NewRequestWithContext(req.Context(), http.MethodGet, loc.String(), nil)
		resp, err = r.client.Do(dl) // no token: the URL is signed
	}
	if err != nil {
		r.log.Warn("forge API unreachable", "err", err)
		apiRefuse(w, http.StatusBadGateway, "kndl: the GitHub relay could not reach "+base.Host+"; try again")
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Content-Encoding", "Content-Disposition", "Etag", "Last-Modified", "Link", "X-Github-Request-Id", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Github-Media-Type"} {
		for _, v := range resp.Header.Values(h) {
			if h == "Link" {
				// gh follows the next page itself: through the relay too.
				v = strings.ReplaceAll(v, base.String(), "http://"+APIHost)
			}
			w.Header().Add(h, v)
		}
	}
	var from io.Reader = resp.Body
	if !follow && resp.Header.Get("Content-Encoding") == "" && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// gh follows the API URLs in an answer too (a run's jobs_url, gh
		// run view): through the relay, which it reaches, not the forge,
		// which it does not. The answer is the forge's, not the Sandbox's.
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIAnswer+1))
		if err != nil || len(b) > maxAPIAnswer {
			apiRefuse(w, http.StatusBadGateway, fmt.Sprintf("kndl: the forge's answer was cut short or larger than the relay takes (%d bytes)", maxAPIAnswer))
			return
		}
		from = bytes.NewReader(bytes.ReplaceAll(b, []byte(base.String()), []byte("http://"+APIHost)))
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(flushWriter{w}, from)
}

// maxAPIAnswer bounds a JSON answer of the forge's API the relay reads
// whole to point its URLs at itself: GitHub pages its lists at 100 items,
// far below it.
const maxAPIAnswer = 32 << 20

// apiRefuse answers as GitHub's API refuses: JSON with a message and a
// documentation_url, which gh prints as "gh: <message> (HTTP <status>)".
func apiRefuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Kndl-Refused", "1")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": "https://kndl.dev/docs/security#the-git-relay"})
}
