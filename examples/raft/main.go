// Command raft is a replicated key-value store on hashicorp/raft whose
// Raft configuration follows a swim cluster: every node embeds one swim
// member and one Raft server and publishes its Raft address in its swim
// metadata, and the Raft leader adds the members that join, removes at
// once those that leave, and removes those that die only after a grace
// period and only while the live voters keep a quorum (see Reconciler and
// docs/raft.md). Five nodes on one machine:
//
//	go run . -name n1 -port 7001 -raft-addr 127.0.0.1:8001 -http 127.0.0.1:9001 -data /tmp/raft/n1 -bootstrap
//	go run . -name n2 -port 7002 -raft-addr 127.0.0.1:8002 -http 127.0.0.1:9002 -data /tmp/raft/n2 -join 127.0.0.1:7001
//	(n3 to n5 alike)
//	curl -L -X PUT -d hello 127.0.0.1:9002/kv/greeting
//	curl 127.0.0.1:9003/kv/greeting
//	curl 127.0.0.1:9001/status
//
// SIGINT or SIGTERM leave gracefully (removed from the configuration at
// once); SIGKILL is a crash (removed after -dead-grace).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/swim-go/swim"
)

func main() {
	host, _ := os.Hostname()
	name := flag.String("name", host, "node name: swim member name and Raft server ID")
	swimAddr := flag.String("swim-addr", "127.0.0.1", "address swim binds (UDP and TCP)")
	port := flag.Int("port", swim.DefaultPort, "swim port")
	raftAddr := flag.String("raft-addr", "127.0.0.1:8300", "Raft transport address (a concrete IP: the others dial it)")
	httpAddr := flag.String("http", "127.0.0.1:8000", "address of the HTTP front")
	data := flag.String("data", "", "data directory (raft.db and snapshots); required")
	join := flag.String("join", "", "comma-separated swim seeds (host:port)")
	bootstrap := flag.Bool("bootstrap", false, "on an empty data directory, start a one-server cluster (one node of a new cluster only)")
	nonvoter := flag.Bool("nonvoter", false, "join the Raft configuration without a vote")
	grace := flag.Duration("dead-grace", DefaultDeadGrace, "how long a dead voter keeps its place before the leader removes it")
	profile := flag.String("profile", "lan", "swim profile: lan, wan or local")
	raftLog := flag.String("raft-log", "warn", "Raft's log level: trace, debug, info, warn, error")
	flag.Parse()
	if err := run(*name, *swimAddr, *port, *raftAddr, *httpAddr, *data, *join, *bootstrap, *nonvoter, *grace, *profile, *raftLog); err != nil {
		fmt.Fprintln(os.Stderr, "raft:", err)
		os.Exit(1)
	}
}

func run(name, swimAddr string, port int, raftAddr, httpAddr, data, join string,
	bootstrap, nonvoter bool, grace time.Duration, profile, raftLog string) error {
	if data == "" {
		return fmt.Errorf("-data is required")
	}
	sc, err := swim.DefaultConfig(profile)
	if err != nil {
		return err
	}
	logger, err := zap.NewDevelopment()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	var seeds []string
	if join != "" {
		seeds = strings.Split(join, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := StartNode(NodeConfig{
		Name: name, SwimAddr: swimAddr, SwimPort: port, RaftAddr: raftAddr, HTTPAddr: httpAddr,
		DataDir: data, Join: seeds, Bootstrap: bootstrap, Nonvoter: nonvoter, DeadGrace: grace,
		Swim: sc, Logger: logger, RaftLog: os.Stderr, RaftLogLevel: raftLog,
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.Leave(lctx)
}
