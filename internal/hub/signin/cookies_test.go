package signin

import "testing"

// TestLocalPathKeepsSignInOnTheHub: where sign-in, dev sign-in and a
// forward origin send the browser next is a path on the same origin, or
// "/": every way a browser reads a Location as another host is refused.
func TestLocalPathKeepsSignInOnTheHub(t *testing.T) {
	tests := map[string]string{
		"/cli/login?code=ABCD-EFGH": "/cli/login?code=ABCD-EFGH",
		"/sessions/x?next=%2Fa&b=c": "/sessions/x?next=%2Fa&b=c",
		"/":                         "/",
		"":                          "/",
		"https://evil.example/":     "/",
		"//evil.example/":           "/",
		"///evil.example/":          "/",
		"/\\evil.example":           "/",
		"\\/evil.example":           "/",
		"/\t/evil.example":          "/",
		"/\n/evil.example":          "/",
		"/\r/evil.example":          "/",
		"/\x00/evil.example":        "/",
		"/\x7f/evil.example":        "/",
		"\t//evil.example":          "/",
		" //evil.example":           "/",
		"/ /evil.example":           "/",
		"/\u00a0/evil.example":      "/",
		"/\uff0fevil.example":       "/",
		"%2F%2Fevil.example":        "/",
		"/%2Fevil.example":          "/",
		"/%09/evil.example":         "/",
		"/%0a/evil.example":         "/",
		"/%5Cevil.example":          "/",
		"/%zz":                      "/",
		"javascript:alert(1)":       "/",
		"evil.example":              "/",
		"HTTPS://evil.example":      "/",
	}
	for in, want := range tests {
		if got := LocalPath(in); got != want {
			t.Errorf("LocalPath(%q) = %q, want %q", in, got, want)
		}
	}
}
