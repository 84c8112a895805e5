#!/usr/bin/env bash
# `apt-get update`, as the setup scripts run it: a mirror caught mid-sync answers an index of the
# wrong size ("Mirror sync in progress?"), which passes in a minute, so each failure is tried again
# after a pause; after the last, the lists apt already has stand and the install that follows says
# whether they were enough (a package it cannot find fails there, with apt's own message).
set -uo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
for attempt in 1 2 3; do
  if $SUDO apt-get update -q; then
    exit 0
  fi
  [ "$attempt" -lt 3 ] || break
  echo "apt-update: attempt $attempt failed; trying again in $((attempt * 15)) s" >&2
  sleep $((attempt * 15))
done
echo "apt-update: the package lists could not all be refreshed; going on with those apt has" >&2
exit 0
