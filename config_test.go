package swim

import (
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/swim-go/swim/internal/wire"
)

// TestDefaultConfigsValidate: every preset is valid as it comes.
func TestDefaultConfigsValidate(t *testing.T) {
	for name, cfg := range map[string]func() *Config{
		"LAN":   DefaultLANConfig,
		"WAN":   DefaultWANConfig,
		"Local": DefaultLocalConfig,
	} {
		t.Run(name, func(t *testing.T) {
			c := cfg()
			if c.Name == "" {
				// The presets name the member after the host; a host
				// without a name is the environment's problem.
				c.Name = "member"
			}
			require.NoError(t, c.Validate())
			require.NoError(t, mtConfig().Validate())
		})
	}
}

// TestConfigValidateRejects: each broken field is reported as a
// *ConfigError naming it, matching ErrInvalidConfig.
func TestConfigValidateRejects(t *testing.T) {
	tests := []struct {
		name  string
		field string
		edit  func(c *Config)
	}{
		{"empty Name", "Name", func(c *Config) { c.Name = "" }},
		{"Name too long", "Name", func(c *Config) { c.Name = strings.Repeat("n", wire.MaxNameLen+1) }},
		{"Name not valid UTF-8", "Name", func(c *Config) { c.Name = "node-\xff" }},
		{"negative BindPort", "BindPort", func(c *Config) { c.BindPort = -1 }},
		{"BindPort over 65535", "BindPort", func(c *Config) { c.BindPort = 65536 }},
		{"AdvertisePort over 65535", "AdvertisePort", func(c *Config) { c.AdvertisePort = 70000 }},
		{"bad BindAddr", "BindAddr", func(c *Config) { c.BindAddr = "not-an-ip" }},
		{"BindAddr with a port", "BindAddr", func(c *Config) { c.BindAddr = "10.0.0.1:7946" }},
		{"bad AdvertiseAddr", "AdvertiseAddr", func(c *Config) { c.AdvertiseAddr = "example.com" }},
		{"negative MaxMetaSize", "MaxMetaSize", func(c *Config) { c.MaxMetaSize = -1 }},
		{"MaxMetaSize over the wire limit", "MaxMetaSize", func(c *Config) { c.MaxMetaSize = wire.MaxMetaLen + 1 }},
		{"Meta over MaxMetaSize", "Meta", func(c *Config) { c.MaxMetaSize = 4; c.Meta = []byte("12345") }},
		{"zero ProbeInterval", "ProbeInterval", func(c *Config) { c.ProbeInterval = 0 }},
		{"negative ProbeInterval", "ProbeInterval", func(c *Config) { c.ProbeInterval = -time.Second }},
		{"zero ProbeTimeout", "ProbeTimeout", func(c *Config) { c.ProbeTimeout = 0 }},
		{"ProbeTimeout equal to ProbeInterval", "ProbeTimeout", func(c *Config) { c.ProbeTimeout = c.ProbeInterval }},
		{"ProbeTimeout over ProbeInterval", "ProbeTimeout", func(c *Config) { c.ProbeTimeout = 2 * c.ProbeInterval }},
		{"negative IndirectChecks", "IndirectChecks", func(c *Config) { c.IndirectChecks = -1 }},
		{"zero SuspicionMult", "SuspicionMult", func(c *Config) { c.SuspicionMult = 0 }},
		{"zero SuspicionMaxTimeoutMult", "SuspicionMaxTimeoutMult", func(c *Config) { c.SuspicionMaxTimeoutMult = 0 }},
		{"zero RetransmitMult", "RetransmitMult", func(c *Config) { c.RetransmitMult = 0 }},
		{"negative RetransmitMult", "RetransmitMult", func(c *Config) { c.RetransmitMult = -3 }},
		{"negative GossipInterval", "GossipInterval", func(c *Config) { c.GossipInterval = -time.Millisecond }},
		{"negative GossipNodes", "GossipNodes", func(c *Config) { c.GossipNodes = -1 }},
		{"GossipInterval without GossipNodes", "GossipNodes", func(c *Config) { c.GossipInterval = time.Second; c.GossipNodes = 0 }},
		{"negative GossipToDeadTime", "GossipToDeadTime", func(c *Config) { c.GossipToDeadTime = -time.Second }},
		{"negative PushPullInterval", "PushPullInterval", func(c *Config) { c.PushPullInterval = -time.Second }},
		{"negative ReconnectInterval", "ReconnectInterval", func(c *Config) { c.ReconnectInterval = -time.Second }},
		{"negative ReconnectTimeout", "ReconnectTimeout", func(c *Config) { c.ReconnectTimeout = -time.Second }},
		{"zero StreamTimeout", "StreamTimeout", func(c *Config) { c.StreamTimeout = 0 }},
		{"PacketBudget too small", "PacketBudget", func(c *Config) { c.PacketBudget = 511 }},
		{"zero PacketBudget", "PacketBudget", func(c *Config) { c.PacketBudget = 0 }},
		{"PacketBudget over a UDP packet", "PacketBudget", func(c *Config) { c.PacketBudget = wire.MaxPacketSize + 1 }},
		{"zero DeltaQueueLimit", "DeltaQueueLimit", func(c *Config) { c.DeltaQueueLimit = 0 }},
		{"zero MaxConcurrentStreams", "MaxConcurrentStreams", func(c *Config) { c.MaxConcurrentStreams = 0 }},
		{"zero EventBuffer", "EventBuffer", func(c *Config) { c.EventBuffer = 0 }},
		{"negative PauseTolerance", "PauseTolerance", func(c *Config) { c.PauseTolerance = -time.Second }},
		{"PauseTolerance under ProbeInterval", "PauseTolerance", func(c *Config) { c.PauseTolerance = c.ProbeInterval / 2 }},
		{"zero AwarenessMaxMultiplier", "AwarenessMaxMultiplier", func(c *Config) { c.AwarenessMaxMultiplier = 0 }},
		{"Label too long", "Label", func(c *Config) { c.Label = strings.Repeat("l", wire.MaxLabelLen+1) }},
		{"Plaintext out of range", "Security.Plaintext", func(c *Config) {
			c.Security.Keys = [][]byte{make([]byte, 16)}
			c.Security.Plaintext = PlaintextSend + 1
		}},
		{"PlaintextAccept without Security.Keys", "Security.Plaintext", func(c *Config) { c.Security.Plaintext = PlaintextAccept }},
		{"PlaintextSend without Security.Keys", "Security.Plaintext", func(c *Config) { c.Security.Plaintext = PlaintextSend }},
		{"key of 15 bytes", "Security.Keys[0]", func(c *Config) { c.Security.Keys = [][]byte{make([]byte, 15)} }},
		{"empty key", "Security.Keys[0]", func(c *Config) { c.Security.Keys = [][]byte{{}} }},
		{"second key of 33 bytes", "Security.Keys[1]", func(c *Config) { c.Security.Keys = [][]byte{make([]byte, 32), make([]byte, 33)} }},
		{"invalid Security.AllowedCIDRs prefix", "Security.AllowedCIDRs[1]", func(c *Config) {
			c.Security.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}
		}},
		{"Security.StreamTLS without a certificate", "Security.StreamTLS", func(c *Config) { c.Security.StreamTLS = &tls.Config{MinVersion: tls.VersionTLS13} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultLANConfig()
			c.Name = "member"
			tc.edit(c)
			err := c.Validate()
			require.Error(t, err)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "want a *ConfigError, got %T: %v", err, err)
			require.Equal(t, tc.field, ce.Field)
			require.True(t, errors.Is(err, ErrInvalidConfig))
			require.NotEmpty(t, ce.Reason)
			require.Contains(t, err.Error(), tc.field)

			_, err = NewMachine(c, mtSelfAddr, rand.New(rand.NewPCG(1, 2)), mtStart)
			require.ErrorIs(t, err, ErrInvalidConfig, "NewMachine validates its Config")
		})
	}
}

// TestConfigValidateAcceptsEdges: the limits themselves are valid.
func TestConfigValidateAcceptsEdges(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
	}{
		{"IndirectChecks 0", func(c *Config) { c.IndirectChecks = 0 }},
		{"no periodic gossip", func(c *Config) { c.GossipInterval = 0; c.GossipNodes = 0 }},
		{"PacketBudget 512", func(c *Config) { c.PacketBudget = 512 }},
		{"PacketBudget at MaxPacketSize", func(c *Config) { c.PacketBudget = wire.MaxPacketSize }},
		{"BindPort 0", func(c *Config) { c.BindPort = 0 }},
		{"empty BindAddr", func(c *Config) { c.BindAddr = "" }},
		{"IPv6 BindAddr", func(c *Config) { c.BindAddr = "::1" }},
		{"Meta at MaxMetaSize", func(c *Config) { c.MaxMetaSize = 4; c.Meta = []byte("1234") }},
		{"MaxMetaSize 0 and no Meta", func(c *Config) { c.MaxMetaSize = 0; c.Meta = nil }},
		{"Name at MaxNameLen", func(c *Config) { c.Name = strings.Repeat("n", wire.MaxNameLen) }},
		{"ProbeTimeout just under ProbeInterval", func(c *Config) { c.ProbeTimeout = c.ProbeInterval - 1 }},
		{"no push-pull, reconnect", func(c *Config) { c.PushPullInterval = 0; c.ReconnectInterval = 0 }},
		{"PauseTolerance 0", func(c *Config) { c.PauseTolerance = 0 }},
		{"PauseTolerance at ProbeInterval", func(c *Config) { c.PauseTolerance = c.ProbeInterval }},
		{"AwarenessMaxMultiplier 1", func(c *Config) { c.AwarenessMaxMultiplier = 1 }},
		{"Label at MaxLabelLen", func(c *Config) { c.Label = strings.Repeat("l", wire.MaxLabelLen) }},
		{"AES-128, -192 and -256 keys", func(c *Config) { c.Security.Keys = [][]byte{make([]byte, 16), make([]byte, 24), make([]byte, 32)} }},
		{"PlaintextSend with a key", func(c *Config) { c.Security.Keys = [][]byte{make([]byte, 16)}; c.Security.Plaintext = PlaintextSend }},
		{"PlaintextAccept with a key", func(c *Config) { c.Security.Keys = [][]byte{make([]byte, 16)}; c.Security.Plaintext = PlaintextAccept }},
		{"Security.AllowedCIDRs of both families", func(c *Config) {
			c.Security.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
		}},
		{"Security.StreamTLS with GetCertificate", func(c *Config) {
			c.Security.StreamTLS = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }}
		}},
		{"Security.StreamTLS with a certificate", func(c *Config) { c.Security.StreamTLS = &tls.Config{Certificates: []tls.Certificate{{}}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultLANConfig()
			c.Name = "member"
			tc.edit(c)
			require.NoError(t, c.Validate())
		})
	}
}

func TestDefaultConfigByProfileName(t *testing.T) {
	for name, want := range map[string]*Config{"lan": DefaultLANConfig(), "wan": DefaultWANConfig(), "local": DefaultLocalConfig()} {
		got, err := DefaultConfig(name)
		require.NoError(t, err)
		require.Equal(t, want.ProbeInterval, got.ProbeInterval, name)
		require.Equal(t, want.PauseTolerance, got.PauseTolerance, name)
	}
	_, err := DefaultConfig("lna")
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, `"lna"`)
}
