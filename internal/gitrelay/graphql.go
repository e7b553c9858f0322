package gitrelay

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// GraphQL through the relay: the operations gh sends for `gh pr create`,
// `gh pr view`, `gh pr checks`, `gh issue view` and `gh run view`, by
// name, and nothing else. The relay reads the document's tokens (it runs
// no GraphQL parser): one named operation, fragments beside it, and the
// operation's top-level fields, which must be those its name allows. A
// query reads; the one mutation, PullRequestCreate, opens a pull request
// from the Session's own branch (its input's headRefName under the
// prefix) and does nothing else. Variables named owner, name and repo, where an
// operation has them, must name the Session's Repo.

// graphQLOp is an operation the relay forwards: its kind and the
// top-level fields it may select.
type graphQLOp struct {
	mutation bool
	fields   []string
}

// graphQLOps are gh 2.23's operations for the five commands, by name
// (captured from gh against the fake GitHub, internal/testkit).
var graphQLOps = map[string]graphQLOp{
	"RepositoryInfo":          {fields: []string{"repository"}}, // gh pr create: the base Repo
	"PullRequestForBranch":    {fields: []string{"repository"}}, // gh pr create (one open already?), pr view, pr checks
	"PullRequestByNumber":     {fields: []string{"repository"}}, // gh pr view <n>, pr checks <n>
	"ReviewsForPullRequest":   {fields: []string{"repository"}}, // gh pr view --comments
	"CommentsForPullRequest":  {fields: []string{"repository"}}, // gh pr view --comments
	"PullRequestStatusChecks": {fields: []string{"node"}},       // gh pr checks
	"IssueByNumber":           {fields: []string{"repository"}}, // gh issue view <n>
	"CommentsForIssue":        {fields: []string{"repository"}}, // gh issue view --comments
	"PullRequestForRun":       {fields: []string{"repository"}}, // gh run view
	"PullRequestCreate":       {mutation: true, fields: []string{"createPullRequest"}},
}

// judgeGraphQL decides a GraphQL request's body: the body to forward, or
// why not.
func judgeGraphQL(body []byte, s served) ([]byte, string) {
	var req struct {
		Query         string                     `json:"query"`
		Variables     map[string]json.RawMessage `json:"variables"`
		OperationName string                     `json:"operationName"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "a GraphQL request is a JSON object with a query"
	}
	kind, name, fields, err := readOperation(req.Query)
	if err != nil {
		return nil, "GraphQL: " + err.Error()
	}
	op, ok := graphQLOps[name]
	if !ok || op.mutation != (kind == "mutation") || (req.OperationName != "" && req.OperationName != name) {
		return nil, fmt.Sprintf("the GitHub relay forwards only the GraphQL operations gh pr create, pr view, pr checks, issue view and run view send, not %s %s", kind, name)
	}
	for _, f := range fields {
		if !slices.Contains(op.fields, f) {
			return nil, fmt.Sprintf("GraphQL operation %s selects %s, which the relay does not forward", name, f)
		}
	}
	owner, repo, _ := strings.Cut(s.path, "/")
	for v, want := range map[string]string{"owner": owner, "name": repo, "repo": repo} {
		raw, ok := req.Variables[v]
		if !ok {
			continue
		}
		var got string
		if json.Unmarshal(raw, &got) != nil || !strings.EqualFold(got, want) {
			return nil, fmt.Sprintf("this Session reaches GitHub's API for %s alone, not $%s %s", s.path, v, raw)
		}
	}
	if op.mutation {
		var input struct {
			HeadRefName      string `json:"headRefName"`
			HeadRepositoryID string `json:"headRepositoryId"`
		}
		if json.Unmarshal(req.Variables["input"], &input) != nil {
			return nil, "PullRequestCreate takes its input as the variable $input"
		}
		if _, branch, ok := strings.Cut(input.HeadRefName, ":"); ok || input.HeadRepositoryID != "" {
			return nil, "a pull request from another repository is not this Session's (" + input.HeadRefName + branch + ")"
		}
		if !strings.HasPrefix(input.HeadRefName, s.prefix) {
			return nil, fmt.Sprintf("this Session opens pull requests only from its own branches, under %s, not %q; push to one (git push -u origin HEAD:%swork) and open it from there", s.prefix, input.HeadRefName, s.prefix)
		}
	}
	out, _ := json.Marshal(map[string]any{"query": req.Query, "variables": req.Variables})
	return out, ""
}

// readOperation reads a GraphQL document's tokens: one named operation
// (query or mutation) and any fragments, and returns the operation's kind,
// name and top-level fields (not aliases). A fragment spread at the top
// level, a subscription, an anonymous operation or a second one is an
// error.
func readOperation(doc string) (kind, name string, fields []string, err error) {
	toks, err := lexGraphQL(doc)
	if err != nil {
		return "", "", nil, err
	}
	for i := 0; i < len(toks); {
		t := toks[i]
		switch t {
		case "fragment", "query", "mutation":
		default:
			return "", "", nil, fmt.Errorf("a document of named operations and fragments only, not %q", t)
		}
		if i+1 >= len(toks) || !isName(toks[i+1]) {
			return "", "", nil, fmt.Errorf("an unnamed %s", t)
		}
		// Find the definition's selection set.
		j, parens := i+2, 0 // past variables, whose defaults may hold braces
		for ; j < len(toks) && (parens > 0 || toks[j] != "{"); j++ {
			switch toks[j] {
			case "(":
				parens++
			case ")":
				parens--
			}
		}
		end, top, spread, err := selection(toks, j)
		if err != nil {
			return "", "", nil, err
		}
		if t != "fragment" {
			if kind != "" {
				return "", "", nil, fmt.Errorf("one operation a request, not %s and %s", name, toks[i+1])
			}
			if spread {
				return "", "", nil, fmt.Errorf("operation %s spreads a fragment at its top level", toks[i+1])
			}
			kind, name, fields = t, toks[i+1], top
		}
		i = end
	}
	if kind == "" {
		return "", "", nil, fmt.Errorf("no operation")
	}
	return kind, name, fields, nil
}

// selection reads the selection set opening at toks[i] ("{"), and returns
// the index after its "}", its top-level field names and whether a
// fragment spread or inline fragment is among them.
func selection(toks []string, i int) (end int, fields []string, spread bool, err error) {
	if i >= len(toks) || toks[i] != "{" {
		return 0, nil, false, fmt.Errorf("a definition without a selection set")
	}
	depth, parens := 0, 0
	for ; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "(":
			parens++
		case t == ")":
			parens--
		case parens > 0:
		case t == "{":
			depth++
		case t == "}":
			depth--
			if depth == 0 {
				return i + 1, fields, spread, nil
			}
		case depth == 1 && t == "...":
			spread = true
		case depth == 1 && t == "@":
			i++ // a directive's name
		case depth == 1 && isName(t):
			if i+1 < len(toks) && toks[i+1] == ":" {
				i += 2 // an alias: the field is after it
				if i >= len(toks) || !isName(toks[i]) {
					return 0, nil, false, fmt.Errorf("an alias of nothing")
				}
			}
			if !(i > 0 && toks[i-1] == "...") {
				fields = append(fields, toks[i])
			}
		}
	}
	return 0, nil, false, fmt.Errorf("an unclosed selection set")
}

func isName(t string) bool {
	if t == "" {
		return false
	}
	for i, c := range t {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// lexGraphQL splits a document into its tokens (GraphQL's October 2021
// lexical grammar): names, punctuators, and numbers and strings as
// placeholders; whitespace, commas and comments dropped.
func lexGraphQL(doc string) ([]string, error) {
	if len(doc) > maxAPIBody {
		return nil, fmt.Errorf("a document past %d bytes", maxAPIBody)
	}
	var toks []string
	for i := 0; i < len(doc); {
		c := doc[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
		case strings.HasPrefix(doc[i:], "\ufeff"):
			i += 3
		case c == '#':
			for i < len(doc) && doc[i] != '\n' && doc[i] != '\r' {
				i++
			}
		case strings.HasPrefix(doc[i:], `"""`):
			j := i + 3
			for ; ; j++ {
				if j >= len(doc) {
					return nil, fmt.Errorf("an unclosed block string")
				}
				if strings.HasPrefix(doc[j:], `\"""`) {
					j += 3
				} else if strings.HasPrefix(doc[j:], `"""`) {
					break
				}
			}
			toks, i = append(toks, `"s"`), j+3
		case c == '"':
			j := i + 1
			for ; ; j++ {
				if j >= len(doc) || doc[j] == '\n' {
					return nil, fmt.Errorf("an unclosed string")
				}
				if doc[j] == '\\' {
					j++
				} else if doc[j] == '"' {
					break
				}
			}
			toks, i = append(toks, `"s"`), j+1
		case strings.HasPrefix(doc[i:], "..."):
			toks, i = append(toks, "..."), i+3
		case strings.IndexByte("!$&()::=@[]{}|", c) >= 0:
			toks, i = append(toks, string(c)), i+1
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(doc) && strings.IndexByte("0123456789.eE+-", doc[j]) >= 0 {
				j++
			}
			toks, i = append(toks, "0"), j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(doc) && (doc[j] == '_' || doc[j] >= 'a' && doc[j] <= 'z' || doc[j] >= 'A' && doc[j] <= 'Z' || doc[j] >= '0' && doc[j] <= '9') {
				j++
			}
			toks, i = append(toks, doc[i:j]), j
		default:
			return nil, fmt.Errorf("an unexpected character %q", c)
		}
	}
	return toks, nil
}
