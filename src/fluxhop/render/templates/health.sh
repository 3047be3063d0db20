# --- fluxhop health: the passive checks of one broker's node (spec.health) ---
#
#   bash health.sh RANK FLUX RUNDIR     (the entrypoint starts it in every pod)
#
# Every check runs each interval (bash, stopped after its timeout), with the
# shipped checks of health-checks.sh defined. After a round:
#   * a check fails: a rank that is not drained is drained with the reason
#     "health: <check>: <first line of its output>", and a rank health drained
#     gets the new reason if it changed; a rank drained by anyone else (any
#     other reason, or none) is left as it is;
#   * every check passes: a rank whose reason is health's is undrained.
# A Flux call that fails (the broker or its resource module not up yet) is
# tried again each second, not each interval. Each check's last result is in
# RUNDIR/../health/<check> ("<status> <first line>"); changes are logged.

set -uo pipefail

rank=$1
flux_bin=$2
run_dir=$3
config_dir="${FLUXHOP_CONFIG_DIR:-$default_config_dir}"
results="$(dirname "$run_dir")/health"
marker="$results/.drained"  # health drained this rank: the only case it undrains without asking
export FLUX_URI="local://$run_dir/local-$rank"
export FLUXHOP_GPUS_PER_NODE="$gpus_per_node"
mkdir -p "$results"

log() {
    printf 'fluxhop: health: %s\n' "$*" >&2
}

if ! command -v timeout >/dev/null 2>&1; then
    log "no timeout command in this image: the health checks do not run"
    exit 0
fi

# bash holds a trap until its foreground command ends: checks, Flux calls and
# sleeps run in the background and are waited for, so that TERM ends them at once
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
    # its output in $results/.flux.out; a broker that does not answer costs one pass
    in_background timeout -k 2 "$flux_timeout" "$flux_bin" "$@" >"$results/.flux.out" 2>&1 </dev/null
}

run_check() {
    # The check's status and the first line of what it printed.
    local name=$1 timeout=$2 out='' status=0 started=$SECONDS
    # shellcheck disable=SC2016  # $1 and $2 are the inner bash's arguments
    in_background timeout -k 2 "$timeout" bash -c '. "$1" && . "$2"' health \
        "$config_dir/health-checks.sh" "$config_dir/health/$name.sh" \
        >"$results/$name.out" 2>&1 </dev/null || status=$?
    IFS= read -r out <"$results/$name.out" || true
    if { [ "$status" = 124 ] || [ "$status" = 137 ]; } && [ $((SECONDS - started)) -ge "$timeout" ]; then
        out="timed out after ${timeout}s"
    fi
    out=${out:0:200}  # a drain reason, not a log
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

read_drain() {
    # This rank's drain: drained (0 or 1) and its reason.
    flux resource drain -n -i "$rank" -o '{ranks}|{reason}' || return 1
    local line=''
    IFS= read -r line <"$results/.flux.out" || true
    drained=0
    reason=''
    if [ -n "$line" ]; then
        drained=1
        reason=${line#*|}
    fi
}

settle() {
    # Drain or undrain this rank as the last round says; fails if Flux did not answer.
    local problem want
    if problem=$(failing); then
        want="$reason_prefix$problem"
        read_drain || return 1
        if [ "$drained" = 0 ]; then
            flux resource drain "$rank" "$want" || return 1
            log "rank $rank drained: $want"
        elif [[ "$reason" == "$reason_prefix"* ]]; then
            if [ "$reason" != "$want" ]; then
                flux resource drain -f "$rank" "$want" || return 1
                log "rank $rank drained: $want"
            fi
        else
            rm -f "$marker"  # someone else's drain: theirs to lift
            return 0
        fi
        printf '%s\n' "$want" >"$marker"
        return 0
    fi
    [ -f "$marker" ] || [ "$first" = 1 ] || return 0
    read_drain || return 1
    if [ "$drained" = 1 ] && [[ "$reason" == "$reason_prefix"* ]]; then
        flux resource undrain "$rank" || return 1
        log "rank $rank undrained: every check passes"
    fi
    rm -f "$marker"
}

declare -a due
for i in "${!check_names[@]}"; do due[i]=0; done
first=1   # a pod restarted while health had its rank drained: asked once
pending=0 # the last settle failed: tried again each second
until flux uptime; do in_background sleep 1; done
while :; do
    ran=0
    for i in "${!check_names[@]}"; do
        if [ "$SECONDS" -ge "${due[i]}" ]; then
            due[i]=$((SECONDS + check_intervals[i]))
            run_check "${check_names[i]}" "${check_timeouts[i]}"
            ran=1
        fi
    done
    if [ "$ran" = 1 ] || [ "$pending" = 1 ]; then
        if settle; then
            pending=0
            first=0
        else
            pending=1
        fi
    fi
    in_background sleep 1
done
