# --- fluxhop health: the passive checks of one broker's node (spec.health) ---
#
#   bash health.sh RANK FLUX RUNDIR     (the entrypoint starts it in every pod)
#
# Every check runs each interval (bash, stopped after its timeout), with the
# shipped checks of health-checks.sh defined. A failing check drains this
# rank with "health: <check>: <first line of its output>" (-u: a rank already
# drained, by an admin or by health, keeps its reason); once every check
# passes, the rank is undrained only if its reason is health's. Each check's
# last result is in RUNDIR/../health/<check> ("<status> <first line>").

set -uo pipefail

rank=$1
flux_bin=$2
run_dir=$3
config_dir="${FLUXHOP_CONFIG_DIR:-$default_config_dir}"
results="$(dirname "$run_dir")/health"
export FLUX_URI="local://$run_dir/local-$rank"
export FLUXHOP_GPUS_PER_NODE="$gpus_per_node"
mkdir -p "$results"
# bash holds a trap until its foreground command ends: checks and sleeps run
# in the background and are waited for, so that TERM ends them at once
child=
trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi; exit 0' TERM INT

in_background() {
    "$@" &
    child=$!
    local status=0
    wait "$child" || status=$?
    child=
    return "$status"
}

flux() {
    # a broker that does not answer (starting, restarting) costs one round
    timeout -k 2 "$flux_timeout" "$flux_bin" "$@"
}

run_check() {
    # The check's status and the first line of what it printed.
    local name=$1 timeout=$2 out='' status=0
    # shellcheck disable=SC2016  # $1 and $2 are the inner bash's arguments
    in_background timeout -k 2 "$timeout" bash -c '. "$1" && . "$2"' health \
        "$config_dir/health-checks.sh" "$config_dir/health/$name.sh" \
        >"$results/$name.out" 2>&1 </dev/null || status=$?
    IFS= read -r out <"$results/$name.out" || true
    if [ "$status" = 124 ] || [ "$status" = 137 ]; then
        out="timed out after ${timeout}s"
    fi
    printf '%s %s\n' "$status" "${out:-exit $status}" >"$results/$name.new"
    mv "$results/$name.new" "$results/$name"
}

failing() {
    # "<check>: <first line>" of the first failing check, in spec order.
    local name status line
    for name in "${check_names[@]}"; do
        [ -f "$results/$name" ] || continue
        read -r status line <"$results/$name"
        if [ "$status" != 0 ]; then
            printf '%s: %s' "$name" "$line"
            return 0
        fi
    done
    return 1
}

drain_reason() {
    flux resource drain -n -i "$rank" -o '{reason}' 2>/dev/null
}

declare -a due
for i in "${!check_names[@]}"; do due[i]=0; done
until flux uptime >/dev/null 2>&1; do in_background sleep 1; done
while :; do
    ran=0
    for i in "${!check_names[@]}"; do
        if [ "$SECONDS" -ge "${due[i]}" ]; then
            due[i]=$((SECONDS + check_intervals[i]))
            run_check "${check_names[i]}" "${check_timeouts[i]}"
            ran=1
        fi
    done
    if [ "$ran" = 0 ]; then
        in_background sleep 1
        continue
    fi
    # decided after every round of checks: within one interval of a change
    if problem=$(failing); then
        flux resource drain -u "$rank" "$reason_prefix$problem" >/dev/null 2>&1
    else
        reason=$(drain_reason) || reason=
        case "$reason" in
            "$reason_prefix"*) flux resource undrain "$rank" >/dev/null 2>&1 ;;
        esac
    fi
    in_background sleep 1
done
