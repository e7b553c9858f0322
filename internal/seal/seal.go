// Package seal encrypts the Hub's stored secrets (setup tokens, Sensitive
// Variables, header secrets) with AES-256-GCM under HUB_SECRETS_KEY. Each
// sealed value is bound to what it is for (its associated data), so a value
// copied into another row does not open. It also derives HUB_SECRETS_KEY's
// other keys (DeriveKey), such as the audit log's. Only the Hub, and the
// commands that work on its store, import it.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyBytes is the key length: AES-256.
const KeyBytes = 32

// Box seals and opens values under one key.
type Box struct{ aead cipher.AEAD }

// ParseKey reads a key given as 64 hex digits or base64 of 32 bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){hex.DecodeString, base64.StdEncoding.DecodeString, base64.RawURLEncoding.DecodeString} {
		if k, err := dec(s); err == nil && len(k) == KeyBytes {
			return k, nil
		}
	}
	return nil, errors.New("HUB_SECRETS_KEY must be 32 random bytes as 64 hex digits or base64; make one with: head -c32 /dev/urandom | base64")
}

// NewKey returns a fresh random key, base64-encoded.
func NewKey() string {
	k := make([]byte, KeyBytes)
	rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

// DeriveKey derives from key a key of its own for purpose (HKDF-SHA256,
// purpose as its info), so HUB_SECRETS_KEY keys more than sealing without
// one use's key being another's.
func DeriveKey(key []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, key, nil, "kndl "+purpose, KeyBytes)
	if err != nil {
		panic(err) // only for a length HKDF-SHA256 can't give, and KeyBytes isn't one
	}
	return k
}

// New makes a Box from a key.
func New(key []byte) (*Box, error) {
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("secrets key is %d bytes, want %d", len(key), KeyBytes)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plain for the purpose named by ad (such as
// "claude-token:<user id>").
func (b *Box) Seal(plain []byte, ad string) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, plain, []byte(ad))
}

// Open decrypts a sealed value for the same purpose it was sealed for.
func (b *Box) Open(sealed []byte, ad string) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(ad))
	if err != nil {
		return nil, errors.New("sealed value does not open: HUB_SECRETS_KEY changed, or the value was moved")
	}
	return plain, nil
}
