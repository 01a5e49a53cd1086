#!/bin/sh
# Removes what chaos suite, upgrade test and per-process comparison runs
# (internal/compare/procs, which uses the suite's namespaces and build
# directories) whose process has died left behind (`make chaos`, `make
# upgrade` and `make procs` run this after the run, pass or fail; `make
# chaos-clean` alone).
# Each cleans up after itself, but not when its process is killed: a go
# test -timeout, a signal, a CI job cancelled. Its names carry the pid of
# the process that made them (netns.go), so a run still going is left alone:
#
#   - each namespace swimchaos-<pid>, with the agents still in it (SIGCONT
#     first, for stopped ones, then SIGKILL);
#   - each agent build $TMPDIR/swimchaos-bin-<pid>-* (with the comparison's
#     agents' logs);
#   - each checkout of an older commit $TMPDIR/swimchaos-src-<pid>-*: its
#     git worktree src is removed from the repository (this script runs from
#     the repository's top directory), then the directory.
#
# The logs of failed runs ($TMPDIR/swimchaos-logs-*) stay, to be read.

# alive reports whether process $1 runs: it exists and is no zombie (a
# zombie whose parent has not reaped it yet still answers kill -0).
alive() {
	state=$(sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$1/stat" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ]
}

status=0
if command -v ip >/dev/null; then
	for ns in $(ip netns list | awk '$1 ~ /^swimchaos-[0-9]+$/ { print $1 }'); do
		pid=${ns#swimchaos-}
		alive "$pid" && continue
		echo "chaos-clean: namespace $ns (its creator, pid $pid, has exited): killing its processes, deleting it"
		for p in $(ip netns pids "$ns"); do
			kill -CONT "$p" 2>/dev/null
			kill -KILL "$p" 2>/dev/null
		done
		ip netns del "$ns" || status=1
	done
fi
for d in "${TMPDIR:-/tmp}"/swimchaos-bin-*; do
	[ -d "$d" ] || continue
	pid=${d##*/swimchaos-bin-}
	pid=${pid%%-*}
	alive "$pid" && continue
	echo "chaos-clean: removing $d"
	rm -rf "$d" || status=1
done
for d in "${TMPDIR:-/tmp}"/swimchaos-src-*; do
	[ -d "$d" ] || continue
	pid=${d##*/swimchaos-src-}
	pid=${pid%%-*}
	alive "$pid" && continue
	echo "chaos-clean: removing the checkout $d"
	# Fails when the worktree was never added or is gone already.
	git worktree remove --force "$d/src" 2>/dev/null
	rm -rf "$d" || status=1
done
exit $status
