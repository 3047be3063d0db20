# --- fluxhop health: the checks of one broker's node (spec.health) -----------
#
#   bash health.sh RANK FLUX RUNDIR     (the entrypoint starts it in every pod)
#
# Each passive check runs here each interval (health-once.sh: bash, stopped
# after its timeout). Each active check runs as a Flux job that rank 0's
# runner submits each interval, one task on each node no job holds: whole
# nodes (--exclusive), the lowest urgency, those ranks only, so the scheduler
# never puts it beside user work; each task leaves its node's result for that
# node's runner. A check's job still waiting at the next interval is
# cancelled (its nodes were taken); one still running skips the round.
# After a round, or an active result:
#   * a check fails: a rank that is not drained is drained with the reason
#     "health: <check>: <first line of its output>", and a rank health drained
#     gets the new reason if it changed; a rank drained by anyone else (any
#     other reason, or none) is left as it is;
#   * every check passes: a rank whose reason is health's is undrained.
# A drained rank gets no active check, so an active failure stands until the
# pod is replaced (a new pod has no results) or someone undrains the rank:
# then the active results are forgotten until those checks run again.
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
    # A passive check, its result in $results/<check>.
    in_background bash "$config_dir/health-once.sh" "$config_dir" "$1" "$2" "$results" || true
}

idle_ranks() {
    # Sets idle and idle_count: the ranks Flux may schedule on that no job holds any of, as
    # a comma list ("free" leaves out drained and offline ranks, "allocated"
    # holds each rank a job has a core of). Fails if Flux did not answer.
    local free='' allocated='' r
    flux resource list -s free -no '{ranks}' || return 1
    IFS= read -r free <"$results/.flux.out" || true
    flux resource list -s allocated -no '{ranks}' || return 1
    IFS= read -r allocated <"$results/.flux.out" || true
    local -A held=()
    for r in $(expand_ids "$allocated"); do held[$r]=1; done
    idle=''
    idle_count=0
    for r in $(expand_ids "$free"); do
        if [ -z "${held[$r]:-}" ]; then
            idle+="${idle:+,}$r"
            idle_count=$((idle_count + 1))
        fi
    done
}

expand_ids() {
    # An RFC 22 idset ("0-2,5") one id per line.
    local part
    local -a parts=()
    IFS=, read -ra parts <<<"$1"
    for part in ${parts[@]+"${parts[@]}"}; do
        if [[ "$part" == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
    done
}

submit_active() {
    # rank 0: the active check's job for this interval, on the idle ranks.
    local name=$1 timeout=$2 job_file="$results/.job.$1" job='' state=''
    if [ -f "$job_file" ]; then
        read -r job <"$job_file" || true
        if flux jobs -no '{state}' "$job"; then
            read -r state <"$results/.flux.out" || true
        elif ! grep -qi -e unknown -e 'invalid JobID' "$results/.flux.out"; then
            return 1 # not answered: asked again next time, not submitted twice
        fi # unknown: a job of an instance before this one (a restarted broker)
        case "$state" in
            RUN | CLEANUP) return 0 ;;                                    # still checking
            DEPEND | PRIORITY | SCHED) flux cancel "$job" || return 1 ;; # its nodes were taken
        esac
        rm -f "$job_file"
    fi
    idle_ranks || return 1
    [ "$idle_count" -gt 0 ] || return 0
    # exit-timeout=none: a task that takes longer than the first is not
    # killed 30 s after it (the job's time limit bounds them all)
    flux submit --job-name="$job_prefix$name" --urgency=1 --exclusive -N "$idle_count" \
        -n "$idle_count" --requires="rank:$idle" -t "$((timeout + flux_timeout))s" \
        -o exit-timeout=none \
        bash "$config_dir/health-once.sh" "$config_dir" "$name" "$timeout" || return 1
    tail -n 1 "$results/.flux.out" >"$job_file"
}

forget_active() {
    local i
    for i in "${!check_names[@]}"; do
        if [ "${check_kinds[i]}" = active ]; then rm -f "$results/${check_names[i]}"; fi
    done
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
    # Drain or undrain this rank as the last results say; fails if Flux did not answer.
    local problem want known=0
    if [ -f "$marker" ]; then
        read_drain || return 1
        known=1
        if [ "$drained" = 0 ]; then
            # someone undrained what health drained: an active check's
            # failure is theirs to judge now, until it runs here again
            forget_active
            rm -f "$marker"
        fi
    fi
    if problem=$(failing); then
        want="$reason_prefix$problem"
        [ "$known" = 1 ] || read_drain || return 1
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
    [ "$known" = 1 ] || read_drain || return 1
    if [ "$drained" = 1 ] && [[ "$reason" == "$reason_prefix"* ]]; then
        flux resource undrain "$rank" || return 1
        log "rank $rank undrained: every check passes"
    fi
    rm -f "$marker"
}

publish() {
    # This rank's last results, for metrics.py (flux_health_checks, fluxhop
    # status): in the KVS when they changed, or when the broker was restarted
    # (its socket is new: a new instance has not got them). Fails when Flux
    # did not take them (tried again each second).
    local json='' i name status line socket
    for i in "${!check_names[@]}"; do
        name=${check_names[i]}
        [ -f "$results/$name" ] || continue
        read -r status line <"$results/$name" || continue
        line=${line//\\/\\\\}
        line=${line//\"/\\\"}
        line=${line//[[:cntrl:]]/ }
        json+="${json:+,}\"$name\":[$status,\"$line\"]"
    done
    # inode and change time: a socket made again can reuse the inode
    socket=$(stat -c '%i.%Z' "$run_dir/local-$rank" 2>/dev/null) || socket=''
    local seen=''
    if [ -f "$results/.published" ]; then IFS= read -r seen <"$results/.published" || true; fi
    [ "$seen" != "$socket {$json}" ] || return 0
    flux kvs put "$kvs_dir.$rank={$json}" || return 1
    printf '%s\n' "$socket {$json}" >"$results/.published"
}

clock() {
    # now: milliseconds, from EPOCHREALTIME (bash 5; its separator is the
    # locale's) or, in an older bash, whole seconds
    if [ -n "${EPOCHREALTIME:-}" ]; then
        now=${EPOCHREALTIME//[!0-9]/}
        now=$((10#$now / 1000))
    else
        now=$((SECONDS * 1000))
    fi
}

# Each check is due every interval from its first run (not from the end of
# the last one), so a failure is seen at most an interval, the check's own
# time and one Flux call after it happens.
declare -a due
first=1   # a pod restarted while health had its rank drained: asked once
pending=0 # the last settle failed: tried again each second
until flux uptime; do in_background sleep 1; done
clock
for i in "${!check_names[@]}"; do
    # an active check's first job waits an interval: a batch job comes first
    due[i]=$now
    if [ "${check_kinds[i]}" = active ]; then due[i]=$((now + check_intervals[i] * 1000)); fi
done
while :; do
    ran=0
    for i in "${!check_names[@]}"; do
        clock
        [ "$now" -ge "${due[i]}" ] || continue
        due[i]=$((due[i] + check_intervals[i] * 1000))
        if [ "${due[i]}" -le "$now" ]; then due[i]=$((now + check_intervals[i] * 1000)); fi
        if [ "${check_kinds[i]}" = passive ]; then
            run_check "${check_names[i]}" "${check_timeouts[i]}"
            ran=1
        elif [ "$rank" = 0 ] && ! submit_active "${check_names[i]}" "${check_timeouts[i]}"; then
            log "active check ${check_names[i]} not submitted: $(head -n 1 "$results/.flux.out")"
        fi
    done
    if [ -f "$results/.fresh" ]; then
        rm -f "$results/.fresh" # an active check's task left a result
        ran=1
    fi
    # (the first settle comes at once: a pod whose checks are all active
    # lifts the drain its rank had before it all the same)
    if [ "$ran" = 1 ] || [ "$pending" = 1 ] || [ "$first" = 1 ]; then
        # the results before the drain they cause: whoever sees the drain
        # (fluxhop status, the operator's status.health) sees its failure;
        # and again after, for what settle forgot (a drain someone lifted)
        pending=0
        publish || pending=1
        if settle; then first=0; else pending=1; fi
        publish || pending=1
    fi
    # until the next check is due, looking each second for an active result
    clock
    pause=1000
    for i in "${!due[@]}"; do
        if [ $((due[i] - now)) -lt "$pause" ]; then pause=$((due[i] - now)); fi
    done
    if [ "$pause" -lt 10 ]; then pause=10; fi
    printf -v pause '%d.%03d' $((pause / 1000)) $((pause % 1000))
    in_background sleep "$pause"
done
