package front

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// keyPair serves the certificate in files the operator keeps, reading
// them again at the first handshake after either changed: certbot and
// its kind renew by writing new files (or pointing a symlink at them),
// and the Hub picks them up with no restart. A pair that doesn't load,
// such as a certificate renewed before its key, leaves the one before
// serving, said once in the log, and is tried again at the next change.
type keyPair struct {
	cert, key string
	log       *slog.Logger

	mu     sync.Mutex
	stamp  [2]stamp // the files' when it was loaded or last failed
	loaded *tls.Certificate
}

// stamp is what tells a file changed: its identity, size and time.
type stamp struct {
	ino  uint64
	size int64
	mod  time.Time
}

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	st := stamp{size: fi.Size(), mod: fi.ModTime()}
	if sys, ok := fi.Sys().(interface{ Ino() uint64 }); ok {
		st.ino = sys.Ino()
	}
	return st, nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, errC := stampOf(k.cert)
	key, errK := stampOf(k.key)
	now := [2]stamp{c, key}
	if errC == nil && errK == nil && (k.loaded == nil || now != k.stamp) {
		k.stamp = now
		pair, err := tls.LoadX509KeyPair(k.cert, k.key)
		switch {
		case err == nil:
			k.loaded = &pair
			if k.log != nil {
				k.log.Info("loaded the TLS certificate", "cert", k.cert)
			}
		case k.loaded == nil:
			return nil, fmt.Errorf("HUB_TLS_CERT and HUB_TLS_KEY: %w", err)
		case k.log != nil:
			k.log.Warn("the TLS certificate's files changed but don't load: serving the one before until they change again", "cert", k.cert, "err", err)
		}
	}
	if k.loaded == nil {
		return nil, fmt.Errorf("HUB_TLS_CERT and HUB_TLS_KEY: %w", firstErr(errC, errK))
	}
	return k.loaded, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
