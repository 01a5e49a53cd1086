package main

import (
	"io"

	"github.com/swim-go/swim/examples/agent/internal/migration"
)

// commands are the agent's commands besides running a member,
// `agent COMMAND ARGS`: the operator's, which make the files the signing
// flags read and exit, and migrate, which runs a process of a cluster
// being moved from hashicorp/memberlist (docs/migrating.md).
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"identity": cmdIdentity,
	"root":     cmdRoot,
	"pubkey":   cmdPubkey,
	"cert":     cmdCert,
	"migrate":  cmdMigrate,
}

// cmdMigrate runs one process in a migration from memberlist: memberlist
// alone, migration mode, or swim alone (-mode), with a replicated map on
// top; SIGUSR1 leaves migration mode.
func cmdMigrate(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("migrate", "-name NAME -mode memberlist|bridge|standby|swim [-port N] [-join ADDRS] [flags]", stderr)
	o := migration.Flags(fs)
	if err := parseCommand(fs, args, 0); err != nil {
		return err
	}
	if err := o.Check(); err != nil {
		return usageErr(err)
	}
	return migration.Run(o, stdout, leaveSignals)
}
