# shellcheck shell=bash disable=SC2154  # t0 is set by the script that sources this
# Sourced by the device scripts: a run-wide time guard. The caller sets
# t0=$(date +%s) and DEADLINE (seconds) first.
# stamp MSG...: "== <seconds since t0> s: MSG".
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
# guarded LIMIT CMD...: CMD with timeout min(LIMIT, time left); skipped under 10 s left.
guarded() {
  local lim=$1; shift
  local left=$(( DEADLINE - ($(date +%s) - t0) ))
  if [ "$left" -lt 10 ]; then echo "SKIPPED (time guard): $*"; return 124; fi
  [ "$lim" -gt "$left" ] && lim=$left
  timeout "$lim" "$@"
}
