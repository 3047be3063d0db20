# --- fluxhop health: one check, run once on this node ------------------------
#
#   bash health-once.sh CONFIG_DIR CHECK TIMEOUT [RESULTS]
#
# Runs the check's command (bash, with the shipped checks of
# health-checks.sh defined), stopped after TIMEOUT seconds, and leaves its
# result in RESULTS/CHECK: "<status> <first line it printed>". health.sh runs
# a passive check so, with RESULTS. An active check's Flux job runs it as its
# one task on each node, without RESULTS: they are this node's, found from the
# job shell's FLUX_URI (local://<flux root>/run/broker/local-N), and
# RESULTS/.fresh tells this node's runner to settle its drain at once.

set -uo pipefail

config_dir=$1
name=$2
timeout=$3
if [ "$#" -ge 4 ]; then
    results=$4
    fresh=0
else
    socket=${FLUX_URI#local://}
    results="$(dirname "$(dirname "$socket")")/health"
    fresh=1
fi
[ -d "$results" ] || { printf 'fluxhop: health: no %s on this node\n' "$results" >&2; exit 1; }

ascii() {
    # At most 200 bytes, every byte ASCII ("?" for each other one): Flux takes
    # a drain reason only in valid UTF-8, which a cut in a character is not.
    local LC_ALL=C
    local text=${1//[$'\x80'-$'\xff']/?}
    printf '%s' "${text:0:200}"
}

# TERM (the runner stopped, the job cancelled) ends the check at once
child=
trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi; exit 143' TERM INT

out='' status=0 started=$SECONDS
# shellcheck disable=SC2016  # $1 and $2 are the inner bash's arguments
timeout -k 2 "$timeout" bash -c '. "$1" && . "$2"' health \
    "$config_dir/health-checks.sh" "$config_dir/health/$name.sh" \
    >"$results/$name.out" 2>&1 </dev/null &
child=$!
wait "$child" || status=$?
child=
IFS= read -r out <"$results/$name.out" || true
if { [ "$status" = 124 ] || [ "$status" = 137 ]; } && [ $((SECONDS - started)) -ge "$timeout" ]; then
    out="timed out after ${timeout}s"
fi
out=$(ascii "$out") # a drain reason, not a log
printf '%s %s\n' "$status" "${out:-exit $status}" >"$results/$name.new"
mv "$results/$name.new" "$results/$name"
if [ "$fresh" = 1 ]; then : >"$results/.fresh"; fi
exit "$status"
