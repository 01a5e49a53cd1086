// Package chaos is the chaos suite: real agent processes (examples/agent) in
// a private network namespace, faults injected by the kernel, and assertions
// on the JSON event lines the agents print.
//
// The suite itself is TestChaos (run it with `make chaos`). TestUpgrade
// (`make upgrade`) uses the same harness for a rolling upgrade: agents built
// at an older commit (AddCheckout, BuildAgentAt) replaced one at a time by
// the working tree's (Cluster.Restart). This package holds their helpers:
//
//   - EnsureTools installs ip, nft and setpriv when they are missing, and
//     CleanStaleNamespaces removes what an earlier run that died left behind.
//   - Namespace is one network namespace (`ip netns`) with its loopback up.
//     Nothing else is in it, so the agents' traffic cannot go anywhere but
//     that loopback.
//   - Cluster starts N agents in a namespace on 127.0.0.1, each under a uid
//     of its own (setpriv) so that nftables can tell whose socket a packet
//     comes from, and records every event line in an EventLog.
//   - Faults are nftables rules in one table of the namespace (random UDP or
//     TCP loss, one-way link failures, deafness: loss of what is sent to one
//     member, isolation of a member; each with a counter of the packets it
//     dropped) and signals: SIGKILL for crashes,
//     SIGSTOP and SIGCONT for pauses, and a Starver that lets members run
//     only a slice of every period, as a scheduler starving them of CPU.
//
// It runs on Linux as root only; elsewhere the suite skips.
package chaos
