//go:build !linux

package chaos

import "testing"

// TestUpgrade needs Linux: it runs its agents in a network namespace, as
// the chaos suite does.
func TestUpgrade(t *testing.T) {
	t.Skip("upgrade test: needs Linux (network namespaces)")
}
