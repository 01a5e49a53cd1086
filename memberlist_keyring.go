package swim

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Errors of the keyring methods.
var (
	// ErrKeyNotInstalled: UseKey or RemoveKey named a key the keyring
	// does not hold.
	ErrKeyNotInstalled = errors.New("swim: key not installed")
	// ErrRemovePrimary: RemoveKey named the primary key; make another key
	// primary first (UseKey).
	ErrRemovePrimary = errors.New("swim: cannot remove the primary key")
	// ErrKeyringEmpty: the first key of a member that runs without
	// encryption would make it refuse every peer's plaintext at once; set
	// PlaintextSend first (see PlaintextMode).
	ErrKeyringEmpty = errors.New("swim: first key on a member without encryption needs PlaintextSend")
)

// keyring is one immutable state of the member's keys and plaintext mode.
// Readers (every packet, every stream) load it without a lock; changes
// build a new one and swap it in.
type keyring struct {
	keys      [][]byte      // primary first; empty: no encryption
	aeads     []cipher.AEAD // AES-GCM for keys[i]
	plaintext PlaintextMode
}

// encrypting reports whether outgoing traffic is sealed (under keys[0]).
func (k *keyring) encrypting() bool {
	return len(k.keys) > 0 && k.plaintext != PlaintextSend
}

// acceptsPlaintext reports whether unsealed traffic is accepted.
func (k *keyring) acceptsPlaintext() bool {
	return len(k.keys) == 0 || k.plaintext != PlaintextRefuse
}

func newKeyring(keys [][]byte, plaintext PlaintextMode) (*keyring, error) {
	k := &keyring{plaintext: plaintext}
	for _, key := range keys {
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("swim: key %w", err)
		}
		if containsKey(k.keys, key) {
			continue
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("swim: key: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("swim: key: %w", err)
		}
		k.keys = append(k.keys, bytes.Clone(key))
		k.aeads = append(k.aeads, aead)
	}
	return k, nil
}

func containsKey(keys [][]byte, key []byte) bool {
	for _, k := range keys {
		if bytes.Equal(k, key) {
			return true
		}
	}
	return false
}

// keys holds the current keyring; mu serializes changes (readers only
// load).
type keyStore struct {
	mu  sync.Mutex
	cur atomic.Pointer[keyring]
}

func (s *keyStore) load() *keyring { return s.cur.Load() }

// change applies f to a copy of the key list and mode and installs the
// result.
func (s *keyStore) change(f func(keys [][]byte, mode PlaintextMode) ([][]byte, PlaintextMode, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	keys, mode, err := f(append([][]byte(nil), old.keys...), old.plaintext)
	if err != nil {
		return err
	}
	k, err := newKeyring(keys, mode)
	if err != nil {
		return err
	}
	s.cur.Store(k)
	return nil
}

// InstallKey adds key to the keyring, after the keys already there: traffic
// sealed under it is accepted from now on, and it can be made primary with
// UseKey. Installing a key already held changes nothing. A member that has
// no key at all must be set to PlaintextSend first (ErrKeyringEmpty), so
// that its first key does not make it refuse its peers' plaintext; see
// PlaintextMode for the steps.
func (ml *Memberlist) InstallKey(key []byte) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("swim: install key: key %w", err)
	}
	return ml.keys.change(func(keys [][]byte, mode PlaintextMode) ([][]byte, PlaintextMode, error) {
		if len(keys) == 0 && mode != PlaintextSend {
			return nil, 0, ErrKeyringEmpty
		}
		return append(keys, key), mode, nil
	})
}

// UseKey makes an installed key the primary: everything sent from now on
// is sealed under it. Install it on every member before any member uses
// it.
func (ml *Memberlist) UseKey(key []byte) error {
	return ml.keys.change(func(keys [][]byte, mode PlaintextMode) ([][]byte, PlaintextMode, error) {
		for i, k := range keys {
			if bytes.Equal(k, key) {
				keys[0], keys[i] = keys[i], keys[0]
				return keys, mode, nil
			}
		}
		return nil, 0, ErrKeyNotInstalled
	})
}

// RemoveKey removes a key that is not the primary: traffic sealed under it
// is refused from now on. Remove a key only once no member uses it.
func (ml *Memberlist) RemoveKey(key []byte) error {
	return ml.keys.change(func(keys [][]byte, mode PlaintextMode) ([][]byte, PlaintextMode, error) {
		for i, k := range keys {
			if bytes.Equal(k, key) {
				if i == 0 {
					return nil, 0, ErrRemovePrimary
				}
				return append(keys[:i], keys[i+1:]...), mode, nil
			}
		}
		return nil, 0, ErrKeyNotInstalled
	})
}

// ListKeys returns copies of the installed keys, the primary first; nil
// without encryption.
func (ml *Memberlist) ListKeys() [][]byte {
	k := ml.keys.load()
	if len(k.keys) == 0 {
		return nil
	}
	out := make([][]byte, len(k.keys))
	for i, key := range k.keys {
		out[i] = bytes.Clone(key)
	}
	return out
}

// SetPlaintext changes what this member does about plaintext (see
// PlaintextMode), at once. On a member without keys it only prepares the
// first InstallKey.
func (ml *Memberlist) SetPlaintext(mode PlaintextMode) error {
	if mode > PlaintextSend {
		return fmt.Errorf("%w: plaintext mode %d", ErrInvalidConfig, mode)
	}
	return ml.keys.change(func(keys [][]byte, _ PlaintextMode) ([][]byte, PlaintextMode, error) {
		return keys, mode, nil
	})
}

// Plaintext returns the current plaintext mode.
func (ml *Memberlist) Plaintext() PlaintextMode { return ml.keys.load().plaintext }
