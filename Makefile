GO ?= go
PKGS := ./...

.PHONY: help sizes test race lint bench fuzz demo detect traffic pairing massfailure compare scale-4096 procs chaos scale chaos-clean upgrade ui-test chromium broadcast-sim broadcast restarts migration

# Modules of their own, tested and vetted by test and lint besides the
# root's PKGS: examples/raft depends on hashicorp/raft, internal/compare,
# migrate and examples/agent (whose migrate command runs package migrate)
# on hashicorp/memberlist, which the library must not (go test there
# downloads that module's dependencies).
SUBMODULES := examples/raft internal/compare migrate examples/agent

# help: lists the targets, each with the first sentence of the comment
# above it in this file (the comment has the rest: flags, time, needs).
help:
	@awk '/^# [a-z0-9-]+: /{name=$$2; sub(/:$$/,"",name); text=substr($$0, length($$2)+4); collect=1; next} \
	  collect && /^#/{text=text " " substr($$0,3); next} \
	  collect{collect=0; s=text; i=index(s,". "); if (i) s=substr(s,1,i); printf "  %-12s %s\n", name, s}' $(MAKEFILE_LIST)

# sizes: fails when git tracks a file over 1 MiB (a build output or a
# capture committed by mistake; add it to .gitignore instead).
sizes:
	@big=$$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 {print "  " $$2 " (" $$1 " bytes)"}'); \
	  if [ -n "$$big" ]; then echo "tracked files over 1 MiB:"; echo "$$big"; exit 1; fi

# test: formatting and vet (lint), no tracked file over 1 MiB (sizes), a
# headless browser for the agent's page (chromium), then every test under
# the race detector, the root's then each submodule's (examples/agent's
# with the browser test of the page, TestAgentPage), and without it the
# join-storm scenario of 1,536 members (35 s; five minutes under the race
# detector) and the trees' repair after crashes at 1,000 members
# (TestTreeRepairsAfterCrashes); about 9 minutes on 2 cores.
test: lint sizes chromium
	SWIM_UI_TEST=$${SWIM_UI_TEST:-require} $(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -timeout 5m -run '^TestScenarioSuspicionsInAJoinStorm$$' ./internal/sim -storm
	$(GO) test -count=1 -timeout 5m -run '^TestTreeRepairsAfterCrashes$$' ./internal/sim -tree.n 1000
	@for m in $(SUBMODULES); do \
	  echo "cd $$m && $(GO) test -race -count=1 -timeout 5m ./..."; \
	  (cd $$m && SWIM_UI_TEST=$${SWIM_UI_TEST:-require} $(GO) test -race -count=1 -timeout 5m ./...) || exit 1; \
	done

# broadcast-sim: the broadcast trees on 10,000 simulated members (virtual
# time, started converged): 16 broadcasts a second from 64 origins for
# 20 s while 100 members crash; every broadcast must reach every live
# member, and the trees mend within two probe intervals of the last crash
# (TestTreeRepairsAfterCrashes; make test runs it at 1,000 members, joined
# through one seed).
broadcast-sim:
	$(GO) test -count=1 -timeout 60m -run '^TestTreeRepairsAfterCrashes$$' -v ./internal/sim -tree.n 10000

# ui-test: the browser test of the agent's live page alone (TestAgentPage
# in examples/agent): three agents, one killed, the page of another read
# by headless Chromium until it shows the victim suspect, then dead;
# about 30 seconds. Screenshots go to UI_ARTIFACTS.
UI_ARTIFACTS ?= $(CURDIR)/examples/agent/testdata-out
ui-test: chromium
	cd examples/agent && UI_ARTIFACTS=$(UI_ARTIFACTS) $(GO) test -count=1 -timeout 5m -run '^TestAgentPage$$' -v .

# chromium: installs Debian's chromium with apt-get when no headless
# browser is on PATH (root needed); fails when it cannot, unless
# SWIM_UI_TEST=skip opts out of the browser test.
chromium:
	@if [ "$$SWIM_UI_TEST" = skip ] || [ -n "$$SWIM_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || \
	    command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then exit 0; fi; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the agent's browser test ..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || exit 1; \
	  else \
	    echo "chromium is missing and cannot be installed here (needs root and apt-get):" >&2; \
	    echo "install it, name a browser with SWIM_CHROMIUM, or set SWIM_UI_TEST=skip" >&2; exit 1; \
	  fi

# race: the same as test.
race: test

# lint: fails if any .go file needs gofmt, then go vet on the root and on
# each submodule.
lint:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@for m in $(SUBMODULES); do \
	  echo "cd $$m && $(GO) vet ./..."; \
	  (cd $$m && $(GO) vet ./...) || exit 1; \
	done

# bench: every benchmark of every package, with -benchmem, no tests.
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# fuzz: each fuzz target of internal/wire in turn, FUZZTIME each.
FUZZTIME ?= 20s
fuzz:
	@for f in $$($(GO) test -list '^Fuzz' ./internal/wire | grep '^Fuzz'); do \
	  echo "== $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./internal/wire || exit 1; \
	done

# demo: five agents on 127.0.0.1 (examples/demo): a crash and a graceful
# leave, and when each survivor saw them. DEMO_FLAGS=-ui has every agent
# serve its live page, prints the first one's address, waits 10s before
# the crash and keeps the cluster up for 5 minutes (-hold 1m to change it;
# Ctrl-C stops it).
DEMO_FLAGS ?=
demo:
	$(GO) run ./examples/demo $(DEMO_FLAGS)

# detect: crash-to-everyone-knows latency over 50 seeds at 64 and 1,000
# members in the simulator (LAN defaults); about 20 minutes on 2 cores.
DETECT_SEEDS ?= 50
DETECT_SIZES ?= 64,1000
detect:
	$(GO) test -count=1 -timeout 2h -parallel 1 -run '^TestDetectionLatency$$' -v ./internal/sim -detect.seeds $(DETECT_SEEDS) -detect.sizes $(DETECT_SIZES)

# traffic: applications' broadcasts by gossip (the trees off, as toward
# members of older releases) beside failure detection in the simulator
# (BenchmarkUserTraffic): 256 and 2,500 members, each member broadcasting
# 10 messages of 100 bytes a second, then the whole cluster 5 a second,
# against the same run without them: crash detection, false suspicions,
# deliveries and rounds to reach everyone. About 3 minutes on 2 cores.
TRAFFIC_SEEDS ?= 3
traffic:
	$(GO) test ./internal/sim -count=1 -timeout 2h -run '^$$' -bench '^BenchmarkUserTraffic$$' -benchtime 1x -traffic.seeds $(TRAFFIC_SEEDS)

# scale: 10,000 simulated members (LAN defaults, converged start, one crash
# a minute) for 10 virtual minutes; prints the virtual/wall ratio,
# members x virtual seconds per wall second and memory per member. About
# 7 minutes and 3 GiB. Flags: make scale SCALE_FLAGS='-n 2000 -duration 1m'.
SCALE_FLAGS ?= -n 10000 -duration 10m
scale:
	$(GO) run ./internal/scale $(SCALE_FLAGS)

# chaos: the chaos suite (internal/chaos): 32 agent processes in a private
# network namespace, faults injected by the kernel (nftables loss, one-way
# links, isolation; SIGKILL, SIGSTOP/SIGCONT, starvation). Linux and root
# only (it skips elsewhere); installs nftables/iproute2 if missing. Three
# passes with the same cases, bounds and zero-false-death assertions, about
# 5 minutes each: "plain", then "secure" (-chaos.secure: every agent with
# one AES-256 key and a cluster label; -chaos.signed: signed claims
# required, each agent under an identity of its own), then "load" (-chaos.load 10: every
# agent broadcasting 10 messages of 100 bytes a second throughout, 320 a
# second for the cluster of 32; plaintext). CHAOS_PASSES=secure runs one;
# extra flags for every pass: make chaos CHAOS_FLAGS='-chaos.fault 120s'.
# Every pass runs even when an earlier one fails, and the status is the
# first failure's.
# The clean-up (internal/chaos/clean.sh) runs after each, pass or fail: the
# suite cleans up after itself, but not when its process is killed (a go
# test -timeout, a signal). `make chaos-clean` runs it alone.
CHAOS_FLAGS ?=
CHAOS_PASSES ?= plain secure load
chaos:
	@status=0; \
	  for pass in $(CHAOS_PASSES); do \
	    case $$pass in \
	      plain) flags= ;; \
	      secure) flags='-chaos.secure -chaos.signed' ;; \
	      load) flags='-chaos.load 10' ;; \
	      *) echo "chaos: unknown pass $$pass (want plain, secure or load)" >&2; exit 2 ;; \
	    esac; \
	    echo "== chaos pass: $$pass"; \
	    rc=0; SWIM_CHAOS=1 $(GO) test -count=1 -timeout 20m -v -run '^TestChaos$$' ./internal/chaos $$flags $(CHAOS_FLAGS) || rc=$$?; \
	    sh internal/chaos/clean.sh || rc=$$((rc ? rc : 1)); \
	    echo "== chaos pass $$pass: $$([ $$rc -eq 0 ] && echo ok || echo "FAILED (status $$rc)")"; \
	    [ $$status -ne 0 ] || status=$$rc; \
	  done; \
	  exit $$status

# migration: a memberlist cluster moved onto swim on real processes
# (TestMigrationOnProcesses in examples/agent/internal/migration): 16
# agents (agent migrate) run
# hashicorp/memberlist v0.7.0 alone with a replicated map on broadcasts and
# state exchange; each is replaced in turn by an agent in migration mode
# (one rolled back to memberlist and forward again on the way, a
# memberlist-only and a bridged one crashed together in the middle); then
# each leaves migration mode, its memberlist port in standby, and one is
# restarted in standby; then one is
# rolled back to memberlist, which brings the others back into migration
# mode, and forward again, and all return to standby. After every step
# every live agent must see every live one and hold its value, and no
# live agent may ever leave a view; each agent answers GET /migration
# (its phase, the processes running memberlist alone). Ports 28100-28115 (memberlist), 29100-29115 (swim)
# and 30100-30115 (HTTP), below the kernel's ephemeral ports, on
# 127.0.0.1; about 3 minutes.
migration:
	cd examples/agent && $(GO) test -count=1 -timeout 15m -v -run '^TestMigrationOnProcesses$$' ./internal/migration -migration.procs

# chaos-clean: removes what chaos, upgrade and procs runs whose process
# was killed left behind (internal/chaos/clean.sh): namespaces, agents, agent
# builds, checkouts of the old commit.
chaos-clean:
	sh internal/chaos/clean.sh

# upgrade: a rolling upgrade on real processes (TestUpgrade in
# internal/chaos, with the chaos suite's namespace and harness; Linux and
# root only). It builds examples/agent at UPGRADE_FROM, from a detached git
# worktree of that commit in a temporary directory (with that commit's own
# go.mod, so a clean clone needs the full history, not a shallow one), and
# from the working tree; starts 16 old agents; replaces each in turn by
# the new one under the same name and port (SIGUSR1 to leave, SIGTERM, then
# the new binary), rolls two back to the old one the same way, and lets
# the mixed cluster run alone for 30s half upgraded and again at the end.
# It fails on any death (nobody crashes), on a stopped member reported
# anything but left, on accusations of running members, or when the
# cluster does not converge after a step; it logs each step's times.
# UPGRADE_FROM should be the previous release tag. v0.1.0 is the first
# release and has no versioned predecessor, so until the next release is
# cut it is ba56520, the last commit before the versioned wire (protocol
# 1); from then on, the release before it. Two passes of about 90 seconds,
# as for chaos: "plain", then "secure" (-upgrade.secure: every agent with
# one AES-256 key and a cluster label); UPGRADE_PASSES=plain runs one;
# extra flags for both: make upgrade UPGRADE_FLAGS='-upgrade.soak 60s'.
# Both passes run even when the first fails; the clean-up (clean.sh) runs
# after each, pass or fail.
UPGRADE_FROM ?= ba56520
UPGRADE_FLAGS ?=
UPGRADE_PASSES ?= plain secure
upgrade:
	@status=0; \
	  for pass in $(UPGRADE_PASSES); do \
	    case $$pass in \
	      plain) flags= ;; \
	      secure) flags=-upgrade.secure ;; \
	      *) echo "upgrade: unknown pass $$pass (want plain or secure)" >&2; exit 2 ;; \
	    esac; \
	    echo "== upgrade pass: $$pass, from $(UPGRADE_FROM)"; \
	    rc=0; SWIM_UPGRADE=1 $(GO) test -count=1 -timeout 15m -v -run '^TestUpgrade$$' ./internal/chaos \
	      -upgrade.from $(UPGRADE_FROM) $$flags $(UPGRADE_FLAGS) || rc=$$?; \
	    sh internal/chaos/clean.sh || rc=$$((rc ? rc : 1)); \
	    echo "== upgrade pass $$pass: $$([ $$rc -eq 0 ] && echo ok || echo "FAILED (status $$rc)")"; \
	    [ $$status -ne 0 ] || status=$$rc; \
	  done; \
	  exit $$status

# pairing: paired probing against aligned probing in the simulator over
# the same seeds (TestPairingAB, LAN defaults): packets and bytes per
# member per second in steady state, a graceful leave's spread, crash
# detection at 64 and 1,000 members, and accusations and deaths under 10%
# and 30% loss, one-way links, a starved member and pauses at 64. About
# 15 minutes on 2 cores.
PAIRING_SEEDS ?= 8
PAIRING_SIZES ?= 64,1000
pairing:
	$(GO) test ./internal/sim -count=1 -timeout 2h -run '^TestPairingAB$$' -v -pairing.ab -pairing.seeds $(PAIRING_SEEDS) -pairing.sizes $(PAIRING_SIZES)

# massfailure: the simulator's converged cluster of MASSFAILURE_N members
# (4,096) losing 1% at once; what the survivors send in 5 s windows from
# the crash (docs/figures.md, "4,096 members in one process"). About a
# minute on 2 cores.
MASSFAILURE_N ?= 4096
massfailure:
	$(GO) test ./internal/sim -count=1 -timeout 30m -run '^TestMassFailureTraffic$$' -v -massfailure $(MASSFAILURE_N)

# compare: swim and hashicorp/memberlist v0.7.0 side by side at N = 64, 256
# and 1,024 in one process, plus a search for the largest N each keeps
# stable; prints one table. internal/compare is a module of its own, so the
# library never depends on memberlist. About 20-25 minutes on 2 cores; flags in
# COMPARE_FLAGS (see `cd internal/compare && go run . -h`). -encrypt adds a
# pass with encryption (a fixed AES-256 test key) and a label on every
# member of both libraries, and a table of each one's cost against its
# plaintext run; CPU per member with encryption on vs off at 64 members,
# swim only, in about 3 minutes:
#   make compare COMPARE_FLAGS='-encrypt -n 64 -libs swim -matched=false -search=false'
COMPARE_FLAGS ?=
compare:
	cd internal/compare && $(GO) run . $(COMPARE_FLAGS)

# broadcast: the same broadcast load on swim and hashicorp/memberlist
# v0.7.0 (internal/compare/bcast), each at its LAN defaults, N members in
# one process on 127.0.0.1: a fresh cluster per library, N and rate (the
# whole cluster's broadcasts a second, 100-byte payloads, origins round
# robin) for 20s, then up to 30s for stragglers. swim's Broadcast (on its
# epidemic broadcast trees) against memberlist's TransmitLimitedQueue in a
# Delegate, relayed by each member on first delivery (as Serf and dskit
# do). One table per N: the share delivered to every member, p50/p99 until
# the last one has it, copies received per member per broadcast, CPU and
# bytes per member per second; and the highest rate each keeps at 99%
# complete. Rates step up until both libraries fall below 90% complete.
# About 15 minutes per N (64, then 256) on 2 cores, more when memberlist's
# join is slow to converge (a missed join waits for its push-pull, every
# 2 minutes at 256 members; -join-bound, 5 minutes, fails the run); flags in
# BROADCAST_FLAGS (see `cd internal/compare && go run ./bcast -h`), e.g.
# a quick run: make broadcast BROADCAST_FLAGS='-n 8 -rates 5,50 -load 3s -drain 5s -settle 2s'
BROADCAST_FLAGS ?=
broadcast:
	cd internal/compare && $(GO) run ./bcast $(BROADCAST_FLAGS)

# scale-4096: 4,096 swim members in one process, each with its own sockets,
# joining through member 0 at 15 joins a second, then a 2-minute steady
# window and a 1% crash, watched for false deaths until 30 s after every
# survivor knew of it; fails unless all see all within 6 minutes with no
# false death. About 8 minutes on 2 cores and 5 GiB (docs/figures.md,
# "4,096 members in one process").
SCALE4096_FLAGS ?= -libs swim -matched=false -n 4096 -search=false -loss 0 -isolate=false -trace -join-rate 15 -boot-bound 6m -settle 15s -window 2m -crash-bound 30s -crash-watch 30s -require-stable
scale-4096:
	cd internal/compare && $(GO) run . $(SCALE4096_FLAGS)

# procs: swim and hashicorp/memberlist v0.7.0 on real processes
# (internal/compare/procs): 64 processes per library, one member each,
# each library's LAN defaults, GOMAXPROCS=1, on 127.0.0.1 in a private
# network namespace (the chaos suite's), one library after the other in
# the same run. It times the join through one seed until all see all and
# until the median member does (a refused join is retried 100ms later,
# and counted), then, from 40s after it, takes three 60s windows: CPU per
# member (utime+stime from /proc/<pid>/stat), bytes per member with IP and
# UDP/TCP headers and packets per member (the namespace loopback's tx
# counters; a probe checks what they count first) and RSS per member
# (median VmRSS); it prints one table of the medians over the windows,
# with the ratio swim/memberlist. Linux and root only (it skips
# elsewhere); installs iproute2 if missing. About 8 minutes on 2 cores, up
# to 10 when memberlist's join takes its 2 minutes. Flags in PROCS_FLAGS
# (see `cd internal/compare && go run ./procs -h`), e.g. a quick run:
#   make procs PROCS_FLAGS='-n 8 -settle 5s -window 5s'
# and swim with signed claims required beside it (a third library,
# swim-signed, with the ratios signed/unsigned):
#   make procs PROCS_FLAGS='-libs swim,swim-signed,memberlist'
# The driver cleans up after itself (agents, namespace, builds); clean.sh
# runs after it, pass or fail, for what a killed driver left behind.
PROCS_FLAGS ?=
procs:
	@rc=0; (cd internal/compare && $(GO) run ./procs $(PROCS_FLAGS)) || rc=$$?; \
	  sh internal/chaos/clean.sh || rc=$$((rc ? rc : 1)); \
	  exit $$rc

# restarts: a mass restart on real processes, swim against memberlist
# v0.7.0 (internal/compare/procs -mass-restart): 32 agents per library
# joined through the first, then every agent but the first killed, one
# every 100 ms, and a new process started at its port, its state lost,
# RESTART_DOWN after its kill, each joining through the first; it prints
# the time until every agent sees 32 again, whether all still do 30 s
# later, the deaths reported of members whose new process was running,
# and how many members were told of each restart. Linux and root only,
# as procs. About 3 minutes per value of RESTART_DOWN.
RESTART_DOWN ?= 0s 3s 10s
restarts:
	@rc=0; for down in $(RESTART_DOWN); do \
	  echo "== restart-down $$down"; \
	  (cd internal/compare && $(GO) run ./procs -n 32 -settle 10s -mass-restart -restart-down $$down) || rc=$$?; \
	  sh internal/chaos/clean.sh || rc=$$((rc ? rc : 1)); \
	done; exit $$rc
