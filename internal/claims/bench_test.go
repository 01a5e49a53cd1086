package claims

import (
	"testing"
)

// BenchmarkSignedAlive: what signing, verifying and re-checking one alive
// claim cost (go test -run '^$' -bench SignedAlive ./internal/claims).
func BenchmarkSignedAlive(b *testing.B) {
	tb := newTable(ModeRequired)
	a := signed(testAlive("a", 1, 1), "", 1)
	claim := AppendAlive(nil, "", a)
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			tb.sign(claim)
		}
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			clear(tb.verified)
			if !tb.verify(a.Key, tb.aliveClaim(a), a.Sig) {
				b.Fatal("not verified")
			}
		}
	})
	b.Run("verified copy", func(b *testing.B) {
		for b.Loop() {
			if !tb.verify(a.Key, tb.aliveClaim(a), a.Sig) {
				b.Fatal("not verified")
			}
		}
	})
}
