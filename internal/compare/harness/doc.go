// Package harness holds what the comparison commands (internal/compare and
// internal/compare/bcast) share to measure swim and hashicorp/memberlist
// side by side in one process: transport wrappers of either library that
// count what each member sends and can drop packets on demand, and the
// process's CPU time and the host's UDP receive drops.
package harness
