//go:build !linux

package chaos

import "testing"

// TestChaos needs Linux: network namespaces, nftables and the signals it
// sends to the agents.
func TestChaos(t *testing.T) {
	t.Skip("chaos suite: needs Linux (network namespaces, nftables)")
}
