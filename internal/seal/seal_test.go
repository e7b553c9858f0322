package seal

import (
	"bytes"
	"testing"
)

func TestSealOpen(t *testing.T) {
	key, err := ParseKey(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(key)
	s := b.Seal([]byte("sk-ant-oat01-secret"), "claude-token:u1")
	if bytes.Contains(s, []byte("secret")) {
		t.Fatal("sealed value holds the plain text")
	}
	got, err := b.Open(s, "claude-token:u1")
	if err != nil || string(got) != "sk-ant-oat01-secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := b.Open(s, "claude-token:u2"); err == nil {
		t.Fatal("a value sealed for one user opened for another")
	}
	other, _ := ParseKey(NewKey())
	b2, _ := New(other)
	if _, err := b2.Open(s, "claude-token:u1"); err == nil {
		t.Fatal("a value opened under another key")
	}
	s[len(s)-1] ^= 1
	if _, err := b.Open(s, "claude-token:u1"); err == nil {
		t.Fatal("a tampered value opened")
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", true},
		{NewKey(), true},
		{"short", false},
		{"", false},
		{"00112233445566778899aabbccddeeff", false},
	}
	for _, tt := range tests {
		if _, err := ParseKey(tt.in); (err == nil) != tt.ok {
			t.Errorf("ParseKey(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// TestDerivedKeysAreApartFromTheKeyAndEachOther: a derived key is the same
// for the same key and purpose, and differs from the key itself, from
// another purpose's and from another key's.
func TestDerivedKeysAreApartFromTheKeyAndEachOther(t *testing.T) {
	key, _ := ParseKey(NewKey())
	other, _ := ParseKey(NewKey())
	a := DeriveKey(key, "audit chain")
	if len(a) != KeyBytes || !bytes.Equal(a, DeriveKey(key, "audit chain")) {
		t.Fatalf("derived key %x: want 32 bytes, the same each time", a)
	}
	for what, k := range map[string][]byte{"the key": key, "another purpose's": DeriveKey(key, "other"), "another key's": DeriveKey(other, "audit chain")} {
		if bytes.Equal(a, k) {
			t.Errorf("the derived key is %s", what)
		}
	}
}
