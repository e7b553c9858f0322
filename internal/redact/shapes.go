package redact

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
)

// kndl's own rules of the shape registry (registry.go), beside the ones
// taken from gitleaks (rules_gitleaks.go): for text whose secrets nobody
// told the Hub. A Session's own secrets are known and matched by value
// (Set), which doesn't depend on what they look like; shapes are the
// backstop, in logs and errors and, the Marked ones, in Events.
//
// A marker over a commit hash teaches readers to ignore markers, so every
// shape is anchored on something a credential has and prose doesn't: a
// distinctive prefix, a fixed length, a header keyword, and the looser ones
// must also look generated (a digit, an interior capital in 16 characters,
// or 32 characters) and not be a placeholder ($TOKEN, YOUR_API_TOKEN, %s,
// xxxx, …EXAMPLE, a marker). Where a shape needs a word boundary in
// front, the escape before it is read as what it encodes: the n of a JSON \n
// and a %3D are not letters. Each detector keeps the public lead of what it
// finds (ghp_, sk-ant-api03-, Bearer, a PEM header and END line, a URL's
// user and host) and replaces the rest with its Mark; a JWT goes whole.
//
//	detector                    finds                                        anchored by
//	--------                    -----                                        -----------
//	github-token                ghp_ gho_ ghu_ ghs_ ghr_ + 36+ base62         prefix, length, >= 10 distinct characters
//	github-installation-token   ghs_<7 digits>_<base64url>(.<base64url>)*    prefix and the 7 digits (the long form, 390 characters)
//	github-fine-grained-token   github_pat_ + 40+ [A-Za-z0-9_]               prefix, length, >= 10 distinct characters
//	anthropic-api-key           sk-ant-api03-…, sk-ant-admin01-…             prefix, 20+ characters, >= 10 distinct
//	anthropic-oauth-token       sk-ant-oat01-…, sk-ant-ort01-… (refresh)     prefix, 20+ characters, >= 10 distinct
//	aws-access-key-id           AKIA ASIA ABIA ACCA + 16 [A-Z0-9]            prefix, exact length, a boundary each side; not …EXAMPLE
//	aws-secret-access-key       40 base64 characters after a field named     the field name (aws_secret_access_key, SecretAccessKey, …)
//	                            …secret…access…key, on the same line         and the exact length; not …EXAMPLEKEY
//	private-key                 the body of a PEM private-key block (RSA,    the BEGIN … PRIVATE KEY line and 32+ base64 characters
//	                            EC, OPENSSH, ENCRYPTED, PGP …), to its END   after it in words that end lines; public keys and
//	                                                                         certificates are not secrets
//	authorization-header        the credentials of Authorization: <scheme>   the header name, a known scheme and 8+ characters that look
//	                            <credentials>, as HTTP, JSON, Go print them  generated (Basic: base64 of user:password); no scheme: 20+
//	bearer-token                the token after "Bearer "                    16+ characters that look generated
//	jwt                         header.payload.signature                     eyJ….eyJ…. (JSON objects) and a boundary in front
//	url-password                the password of scheme://user:password@host  the URL shape; not a template (${X}, $X, %s, {x})
//	kndl-token                  kndl's own tokens: kndlk_ kndlc_ kndlr_      prefix and the exact length (32 random bytes, base64url)
//	                            kndlm_ kndls_ kndlo_ kndli_ kndlp_ + 43 base64url
//
// Not matched, by design: shapeless credentials (an AWS secret key outside a
// labelled field, a registry auth blob, base64 of a token in free text),
// public halves (certificates, public keys), and a credential
// percent-encoded from its first byte.
var kndlDetectors = []*Detector{
	{
		Name: "github-token", Description: "A GitHub classic, OAuth, user-to-server, installation or refresh token.", Class: Marked,
		need: []string{"gh"},
		re:   regexp.MustCompile(`gh[pousr]_([A-Za-z0-9]{36,251})`),
		keep: func(t string, m []int) bool { return !wordBefore(t, m[0]) && varied(t[m[2]:m[3]]) },
	},
	{
		Name: "github-installation-token", Description: "The long form of a GitHub App installation token.", Class: Marked,
		need: []string{"ghs_"},
		re:   regexp.MustCompile(`ghs_([0-9]{7}_[A-Za-z0-9_-]{12,}(?:\.[A-Za-z0-9_-]+)*)`),
		keep: func(t string, m []int) bool { return !wordBefore(t, m[0]) },
	},
	{
		Name: "github-fine-grained-token", Description: "A GitHub fine-grained personal access token.", Class: Marked,
		need: []string{"github_pat_"},
		re:   regexp.MustCompile(`github_pat_([A-Za-z0-9_]{40,255})`),
		keep: func(t string, m []int) bool { return !wordBefore(t, m[0]) && varied(t[m[2]:m[3]]) },
	},
	{
		// No boundary in front: what precedes sk-ant- can be another
		// credential it is glued to, and nothing in prose ends in sk-ant-api.
		Name: "anthropic-api-key", Description: "An Anthropic API or admin key.", Class: Marked,
		need: []string{"sk-ant-"},
		re:   regexp.MustCompile(`sk-ant-(?:api|admin)[0-9]{2}-([A-Za-z0-9_-]{20,})`),
		keep: func(t string, m []int) bool { return varied(t[m[2]:m[3]]) && !madeUp(t[m[2]:m[3]]) },
	},
	{
		Name: "anthropic-oauth-token", Description: "An Anthropic OAuth access or refresh token, as Claude Code keeps them.", Class: Marked,
		need: []string{"sk-ant-o"},
		re:   regexp.MustCompile(`sk-ant-o(?:at|rt)[0-9]{2}-([A-Za-z0-9_-]{20,})`),
		keep: func(t string, m []int) bool { return varied(t[m[2]:m[3]]) && !madeUp(t[m[2]:m[3]]) },
	},
	{
		Name: "aws-access-key-id", Description: "An AWS access key id, long-lived or temporary.", Class: Marked,
		need: []string{"AKIA", "ASIA", "ABIA", "ACCA"},
		re:   regexp.MustCompile(`(?:AKIA|ASIA|ABIA|ACCA)([A-Z0-9]{16})`),
		keep: func(t string, m []int) bool {
			v := t[m[2]:m[3]]
			return !wordBefore(t, m[0]) && !wordAt(t, m[1]) && !strings.Contains(v, "EXAMPLE") && !madeUp(v)
		},
	},
	{
		Name: "aws-secret-access-key", Description: "An AWS secret access key in a field named for it.", Class: Named,
		need: []string{"secret"},
		re:   regexp.MustCompile(`(?i)(?:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)\\?["']?[ \t]*[:=][ \t]*\\?["']?([A-Za-z0-9/+]{40})`),
		keep: func(t string, m []int) bool {
			v := t[m[2]:m[3]]
			end := m[1] >= len(t) || !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+=", rune(t[m[1]]))
			return end && looksGenerated(v) && !strings.Contains(v, "EXAMPLE")
		},
	},
	{
		Name: "private-key", Description: "The body of a PEM private key block.", Class: Marked,
		need:  []string{"private key"},
		reach: 64 << 10,
		re:    regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`),
		span:  pemBody,
	},
	{
		Name: "authorization-header", Description: "The credentials of an Authorization header.", Class: Named,
		need: []string{"authorization"},
		re:   regexp.MustCompile(`(?i)(?:proxy-)?authorization\\?["']?[ \t]*[:=][ \t]*\[?\\?["']?[ \t]*(?:(` + authSchemes + `)[ \t]+)?([A-Za-z0-9._~+/=:-]+)`),
		keep: func(t string, m []int) bool {
			if wordBefore(t, m[0]) {
				return false
			}
			v := t[m[4]:m[5]]
			switch {
			case m[2] < 0:
				return len(v) >= 20 && looksGenerated(v)
			case strings.EqualFold(t[m[2]:m[3]], "basic"):
				return basicCredentials(v)
			}
			return len(v) >= 8 && looksGenerated(v)
		},
		group: 2,
	},
	{
		Name: "bearer-token", Description: "A bearer token.", Class: Named,
		need: []string{"bearer"},
		re:   regexp.MustCompile(`(?i)bearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`),
		keep: func(t string, m []int) bool { return !wordBefore(t, m[0]) && looksGenerated(t[m[2]:m[3]]) },
	},
	{
		Name: "jwt", Description: "A JSON Web Token.", Class: Marked,
		need: []string{"eyJ"},
		// The signature may be empty: an unsigned token (alg none) is
		// still what a server that takes one lets its bearer in with.
		re: regexp.MustCompile(`(eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.(?:[A-Za-z0-9_-]{10,})?)`),
		keep: func(t string, m []int) bool {
			return !wordBefore(t, m[0]) && (m[0] == 0 || !strings.ContainsRune("_-.+/", rune(t[m[0]-1])))
		},
	},
	kndlToken,
	{
		Name: "url-password", Description: "The password in a URL.", Class: Named,
		need: []string{"://"},
		re:   regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\[\]"'<>\\]*:([^\s/?#@"'<>\\]+)@[A-Za-z0-9\[]`),
		// A made-up password in an example URL (user:password@,
		// gopher:go@) has none of a generated one's marks.
		keep: func(t string, m []int) bool {
			p, err := url.PathUnescape(t[m[2]:m[3]])
			return err == nil && looksGenerated(p) || err != nil && looksGenerated(t[m[2]:m[3]])
		},
	},
}

// kndlToken finds kndl's own tokens (internal/auth: a kind prefix and 32
// random bytes in base64url).
var kndlToken = &Detector{
	Name: "kndl-token", Description: "One of kndl's own tokens.", Class: Marked,
	need: []string{"kndl"},
	re:   regexp.MustCompile(`kndl[kcrmsoip]_([A-Za-z0-9_-]{43})`),
	keep: func(t string, m []int) bool {
		return !wordBefore(t, m[0]) && !(m[1] < len(t) && (isAlnum(t[m[1]]) || t[m[1]] == '_' || t[m[1]] == '-'))
	},
}

// authSchemes are the HTTP authentication schemes an Authorization header's
// credentials follow.
const authSchemes = `bearer|basic|token|digest|negotiate|ntlm|bot|apikey|api-key|key|jwt|oauth|dpop|ssws|sso-key|aws4-hmac-sha256`

// pemBody returns the body of the private-key block whose header is m: from
// its first base64 character to its last, through armour headers
// (Proc-Type:, DEK-Info:, Version:) and line breaks, literal or escaped, up
// to the END line or the first word a PEM body can't hold. Words of the body
// end a line, or are 40 characters or more (a key put on one line with
// spaces), so prose after a header is not a body. A header with no key
// after it is not a credential. The scan stops at the next "-----", so no
// byte is read for two headers.
func pemBody(t string, m []int) (start, end int, ok bool) {
	i, n := m[1], 0
	start = -1
	newline := false // the last gap held a line break
	for i < len(t) {
		// The gap before a word.
		for i < len(t) {
			switch {
			case t[i] == ' ' || t[i] == '\t':
				i++
				continue
			case t[i] == '\r' || t[i] == '\n':
				i++
			case t[i] == '\\' && i+1 < len(t) && (t[i+1] == 'n' || t[i+1] == 'r'):
				i += 2
			default:
				goto word
			}
			newline = true
		}
	word:
		j := i
		for j < len(t) && (isAlnum(t[j]) || t[j] == '+' || t[j] == '/' || t[j] == '=') {
			j++
		}
		if newline && j < len(t) && (t[j] == '-' || t[j] == ':') && !strings.HasPrefix(t[j:], "-----") {
			// Maybe an armour header, Name: value, to the end of its line.
			k := j
			for k < len(t) && (isAlnum(t[k]) || t[k] == '-') {
				k++
			}
			if k < len(t) && t[k] == ':' && k > i {
				for k < len(t) && t[k] != '\n' && t[k] != '\r' && !(t[k] == '\\' && k+1 < len(t) && t[k+1] == 'n') && !strings.HasPrefix(t[k:], "-----") {
					k++
				}
				if start < 0 {
					start = i
				}
				i, end, newline = k, k, false
				continue
			}
		}
		if j == i {
			break
		}
		// A word of the body ends its line, meets the END line or the
		// end of the text, or is long.
		k := j
		for k < len(t) && (t[k] == ' ' || t[k] == '\t') {
			k++
		}
		lineEnd := k == len(t) || t[k] == '\r' || t[k] == '\n' || strings.HasPrefix(t[k:], "-----") ||
			t[k] == '\\' && k+1 < len(t) && (t[k+1] == 'n' || t[k+1] == 'r')
		if !lineEnd && j-i < 40 {
			break
		}
		if start < 0 {
			if !newline && j-i < 40 {
				break
			}
			start = i
		}
		n += j - i
		i, end, newline = j, j, false
	}
	return start, end, start >= 0 && n >= 32
}

// basicCredentials reports whether v is base64 of user:password.
func basicCredentials(v string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			return len(v) >= 8 && strings.IndexByte(string(b), ':') > 0
		}
	}
	return false
}

// looksGenerated: a digit, an interior capital in 16 or more characters, or
// 32 characters; and not a placeholder.
func looksGenerated(v string) bool {
	if template(v) || !varied(v) {
		return false
	}
	digit, capital := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case '0' <= c && c <= '9':
			digit = true
		case 'A' <= c && c <= 'Z' && i > 0 && 'a' <= v[i-1] && v[i-1] <= 'z':
			capital = true
		}
	}
	return digit || capital && len(v) >= 16 || len(v) >= 32
}

// template reports a placeholder where a secret would be: ${X}, $X, %s, {x},
// YOUR_TOKEN, xxxx, abcdef or 123456, stars, or a redaction mark.
func template(v string) bool {
	switch {
	case v == "":
		return true
	case v[0] == '$' || v[0] == '{' || v[0] == '<':
		return true
	case len(v) >= 2 && v[0] == '%' && !isHex(v[1]):
		return true
	case strings.Contains(v, "REDACTED") || strings.Contains(v, "[masked:") || strings.Trim(v, "*") == "":
		return true
	case madeUp(v):
		return true
	case allCapitals(v):
		return true
	}
	return false
}

// allCapitals reports whether every byte of v is a capital or '_' (a
// name, YOUR_TOKEN): strings.Trim with those bytes leaving nothing, read
// without building its set at every secret found.
func allCapitals(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '_' && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// madeUp reports the marks of a value someone typed to stand for a
// secret: xxxx, or a run such as abcdef or 123456.
func madeUp(v string) bool {
	// xRun(v, 4) || sequence(v, 6), read in one pass.
	xs, run := 0, 1
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c|0x20 != 'x' {
			xs = 0
		} else if xs++; xs >= 4 {
			return true
		}
		if i == 0 {
			continue
		}
		if p := v[i-1]; c|0x20 == p|0x20+1 && isAlnum(p) && isAlnum(c) {
			if run++; run >= 6 {
				return true
			}
		} else {
			run = 1
		}
	}
	return false
}

// varied: at least 10 distinct characters, which a generated secret of 16
// or more has and ghp_aaaa…, 0000… or 1234123412341234 don't.
func varied(v string) bool {
	var seen [256]bool
	n := 0
	for i := 0; i < len(v); i++ {
		if !seen[v[i]] {
			seen[v[i]] = true
			n++
		}
	}
	return n >= 10
}

// wordBefore reports whether text[i] follows a letter or digit, reading an
// escape in front of it as what it encodes: the n of \n is a line break,
// %3D is '='.
func wordBefore(t string, i int) bool {
	if i >= 3 && t[i-3] == '%' && isHex(t[i-2]) && isHex(t[i-1]) {
		return isAlnum(unhex(t[i-2])<<4 | unhex(t[i-1]))
	}
	if i >= 2 && t[i-2] == '\\' && strings.IndexByte("nrtbf", t[i-1]) >= 0 {
		return false
	}
	return i > 0 && isAlnum(t[i-1])
}

// wordAt reports whether text[i] is a letter or digit.
func wordAt(t string, i int) bool { return i < len(t) && isAlnum(t[i]) }

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
