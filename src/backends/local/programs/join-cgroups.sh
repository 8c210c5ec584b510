#!/bin/sh
# For shells in a pod (see pod/shell.ts): joins the pod's cgroups, as the supervisor does, then
# becomes the command. Arguments: `:`-separated cgroup.procs files (or ''), then the command.
# Exits 125 (CGROUP_JOIN_FAILED in supervisor.ts) when a cgroup cannot be joined.
set -eu
cgroups=$1
shift
IFS=:
for f in $cgroups; do
  echo $$ >"$f" || exit 125
done
unset IFS
exec "$@"
