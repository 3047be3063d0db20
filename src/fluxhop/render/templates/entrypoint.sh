# --- fluxhop entrypoint: the same script runs in every pod -------------------
#
# Rank 0 runs the user's command under `flux start ... flux run`, with the
# command's argv passed through untouched ("$@"), and exits with the job's exit
# code. The other ranks start a broker with no initial program and wait in
# join (ZeroMQ retries the connection by itself); after an abnormal exit they
# restart with a short, bounded backoff, and they exit 0 when the instance
# shuts down normally. With spec.leadState (an interactive instance), rank 0
# keeps its statedir on a volume: stopped, it saves the instance on a claim
# for the rank 0 that replaces it (save_lead; an emptyDir goes with the pod);
# started where a saved state is, or restarted after its broker failed, it
# restarts the instance from it (start_lead, resume_lead).
#
# Directories can be moved with FLUXHOP_CONFIG_DIR, FLUXHOP_CURVE_DIR,
# FLUXHOP_FLUX_ROOT and FLUXHOP_BROKER_CONFIG; FLUXHOP_RANK and
# FLUXHOP_HOSTNAME override the rank and the broker's host name (flux-core
# 0.82+ -Shostname), which is how fluxhop runs several brokers on one host;
# FLUXHOP_MAX_RESTARTS bounds the restarts of a worker broker, and rank 0
# touches FLUXHOP_READY_FILE when its initial program starts (all joined).

set -euo pipefail

# TERM/INT are trapped from the very start, not only while a broker runs: the
# kubelet may stop the pod at any moment, and bash as PID 1 would otherwise
# die (or ignore the signal) before the trap exists. A signal that comes
# before the broker has started means it is never started.
terminating=0
signal_status=0
child=
broker_env=()
# shellcheck disable=SC2329  # invoked by the traps below
on_signal() {
    terminating=1
    signal_status=$1
    if [ -n "$child" ]; then stop_broker; fi
}
# shellcheck disable=SC2329  # invoked by on_signal and run_broker
stop_broker() {
    # Rank 0's broker stopped by SIGTERM shuts the whole instance down
    # cleanly: every worker's broker exits 0 and its pod ends as a rank done,
    # so the rank 0 that replaces an evicted one would wait for them for
    # ever. Killed, it leaves the workers to find their parent gone: they
    # restart (short backoff) and join the new rank 0. With spec.leadState
    # the instance's state is saved first, for the new rank 0 (save_lead).
    # (The Job is what ends a MiniCluster, not this.)
    # Without workers (maxSize 1) SIGTERM it is: the clean shutdown lets
    # `flux run` print the job's last output, which a kill could lose.
    if [ "${rank:-}" = 0 ] && [ "$signal_status" = 143 ] && [ -n "$lead_state_claim" ]; then
        save_lead
        kill -KILL "$child" 2>/dev/null || true
    elif [ "${rank:-}" = 0 ] && [ "$signal_status" = 143 ] && [ "$max_nodes" -gt 1 ]; then
        kill -KILL "$child" 2>/dev/null || true
    else
        kill -TERM "$child" 2>/dev/null || true
        # A worker leaves cleanly in a fraction of a second while rank 0
        # runs; when rank 0 is gone too (the whole MiniCluster stopped: a
        # Kueue preemption, a deletion) flux-core's broker waits ~20 s on
        # SIGTERM for a parent that never answers. Its pod is going: bound it.
        if [ "${rank:-}" != 0 ]; then
            (sleep "$worker_leave_seconds" && kill -KILL "$child" 2>/dev/null) &
        fi
    fi
}
worker_leave_seconds=3
trap 'on_signal 143' TERM
trap 'on_signal 130' INT

# Flux's rc scripts run bash, and bash sources ~/.bashrc when SHLVL is unset
# (or 0); a heavy .bashrc (conda, pyenv) then slows or hangs the broker's
# bootstrap. bash lowers SHLVL in a child it execs, so the broker is started
# with an explicit SHLVL (run_broker).
export SHLVL="${SHLVL:-1}"

config_dir="${FLUXHOP_CONFIG_DIR:-$default_config_dir}"
curve_dir="${FLUXHOP_CURVE_DIR:-$default_curve_dir}"
flux_root="${FLUXHOP_FLUX_ROOT:-$default_flux_root}"
max_restarts="${FLUXHOP_MAX_RESTARTS:-$max_restarts}"
broker_config="${FLUXHOP_BROKER_CONFIG:-$config_dir${broker_subdir:+/$broker_subdir}}"
view="$flux_root/view"
runtime="$flux_root/run"

say() {
    if [ "$quiet" != 1 ]; then printf 'fluxhop: %s\n' "$*" >&2; fi
}

die() {
    printf 'fluxhop: error: %s\n' "$*" >&2
    exit 1
}

run_snippet() {
    # Source commands.<name> from the config map in this shell, so that its
    # exports reach the broker. logging.strict makes a failure fatal.
    local file="$config_dir/commands/$1.sh"
    [ -f "$file" ] || return 0
    say "running commands.$1"
    if [ "$strict" = 1 ]; then
        # shellcheck disable=SC1090
        . "$file"
    else
        set +eu
        # shellcheck disable=SC1090
        . "$file"
        local status=$?
        set -eu
        if [ "$status" != 0 ]; then
            say "commands.$1 exited with status $status; continuing (set logging.strict to stop)"
        fi
    fi
}

find_flux() {
    if [ "$view_enabled" = 1 ]; then
        [ -x "$view/bin/flux" ] || die "no flux in $view/bin: the Flux view ($view_name) has none; set flux.container.image to a Flux view image"
        export PATH="$PATH:$view/bin"
        # The view's files are links into /opt/software: the pod mounts the
        # init container's copy of it there (read-only), nothing is copied.
        # Load Fluxion as the view's Spack packages set it up: rc scripts from
        # <prefix>/etc/flux/rc1.d, modules from <prefix>/lib/flux/modules/sched.
        if [ "$scheduler_simple" != 1 ] && [ -d "$view/etc/flux/rc1.d" ]; then
            export FLUX_RC_EXTRA="$view/etc/flux"
            if [ -d "$view/lib/flux/modules/sched" ]; then
                export FLUX_MODULE_PATH_PREPEND="$view/lib/flux/modules/sched${FLUX_MODULE_PATH_PREPEND:+:$FLUX_MODULE_PATH_PREPEND}"
            fi
        fi
        flux_bin="$view/bin/flux"
    else
        flux_bin=$(command -v flux) ||
            die "flux is not on PATH in this image; enable the Flux view (drop flux.container.disable)"
    fi
}

configure_fluxion() {
    # Fluxion's modprobe entries load its resource modules with
    # load-allowlist=node,core,gpu, which the reader of an R without a
    # scheduling key (rv1exec: what fluxhop writes) does not support, so both
    # modules warn at every start. Empty options (flux-core's modprobe takes
    # them as no arguments) leave them nothing to warn about; options the
    # user set are kept.
    export FLUXION_RESOURCE_OPTIONS="${FLUXION_RESOURCE_OPTIONS-}"
}

install_cert() {
    # Flux refuses a certificate that group or others can read, and the copy
    # must belong to whoever runs the broker: make a private copy.
    local target="$runtime/curve.cert"
    rm -f "$target"
    cp "$curve_dir/curve.cert" "$target" 2>/dev/null ||
        die "cannot read $curve_dir/curve.cert as $(id -un) (uid $(id -u)); for a non-root pod set securityContext.fsGroup"
    chmod 0400 "$target"
}

ids() {
    # The RFC 22 idset 0..n-1: "0" for one, since Flux's idset parser refuses
    # "0-0" (flux R encode --cores=0-0 fails; --gpus=0-0 drops the GPU).
    if [ "$1" -eq 1 ]; then echo 0; else echo "0-$(($1 - 1))"; fi
}

write_resources() {
    # Only when the spec declared no CPU count: count this pod's CPUs once and
    # describe every node alike (so the nodes must be alike).
    [ "$detect_cores" = 1 ] || return 0
    local cores gpus_flag=()
    # GNU nproc obeys OMP_NUM_THREADS / OMP_THREAD_LIMIT, which MPI+OpenMP jobs
    # set: R would then claim that many cores (Flux drains a node whose R claims
    # cores it lacks, and leaves the rest unused). Count the CPUs themselves.
    cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    if [ "$gpus_per_node" -gt 0 ]; then gpus_flag=("--gpus=$(ids "$gpus_per_node")"); fi
    "$flux_bin" R encode --hosts="$(cat "$config_dir/hostlist")" --cores="$(ids "$cores")" \
        ${gpus_flag[@]+"${gpus_flag[@]}"} >"$runtime/R.new"
    mv "$runtime/R.new" "$runtime/R"
    say "resources: $cores cores per node (detected with nproc)"
}

write_node_env() {
    # This pod's own values of the variables that differ from pod to pod
    # (node_env): every job shell on this pod gives them to its tasks
    # (node-env.lua, found through FLUX_SHELL_RC_PATH in the job's
    # environment), where the job's environment, its submitter's, has rank
    # 0's. The rc path goes to the broker and so to the jobs it starts, and to
    # env.sh for the jobs submitted from inside the pod.
    local name nl=$'\n'
    for name in ${node_env[@]+"${node_env[@]}"}; do
        if [ -z "${!name+set}" ]; then continue; fi
        if [[ "${!name}" == *"$nl"* ]]; then
            say "$name has a line break: a job's tasks get the submitter's value"
            continue
        fi
        printf '%s=%s\n' "$name" "${!name}"
    done >"$runtime/node.env.new"
    mv "$runtime/node.env.new" "$runtime/node.env"
    export FLUX_SHELL_RC_PATH="$config_dir${shell_subdir:+/$shell_subdir}${FLUX_SHELL_RC_PATH:+:$FLUX_SHELL_RC_PATH}"
}

write_env() {
    # For people who exec into the pod: `. $runtime/env.sh` gives them flux.
    {
        printf 'export PATH=%q\n' "$PATH"
        printf 'export FLUX_URI=%q\n' "local://$runtime/broker/local-$rank"
        printf 'export FLUX_SHELL_RC_PATH=%q\n' "$FLUX_SHELL_RC_PATH"
        if [ -n "${FLUX_RC_EXTRA:-}" ]; then printf 'export FLUX_RC_EXTRA=%q\n' "$FLUX_RC_EXTRA"; fi
        if [ -n "${FLUX_MODULE_PATH_PREPEND:-}" ]; then
            printf 'export FLUX_MODULE_PATH_PREPEND=%q\n' "$FLUX_MODULE_PATH_PREPEND"
        fi
        printf 'flux_bin=%q\n' "$flux_bin"
    } >"$runtime/env.sh"
}

run_broker() {
    # Run `flux start` in the background and pass TERM/INT on to it (on_signal).
    if [ "$terminating" = 1 ]; then return "$signal_status"; fi
    env SHLVL="$SHLVL" ${broker_env[@]+"${broker_env[@]}"} "$flux_bin" start ${broker_args[@]+"${broker_args[@]}"} "$@" &
    child=$!
    # a signal between the fork and the assignment above found no child yet
    if [ "$terminating" = 1 ]; then stop_broker; fi
    local status=0
    while :; do
        status=0
        # (2>/dev/null: bash's "Killed" notice for a child it killed is no
        # output of the job's)
        wait "$child" 2>/dev/null || status=$?
        kill -0 "$child" 2>/dev/null || break
    done
    child=
    return "$status"
}

start_metrics() {
    # Serve the instance's Prometheus metrics on the port named "metrics":
    # metrics.py from the ConfigMap, run by the instance's own Python with
    # Flux's bindings. It answers 500 until the broker is up, so it starts
    # first, and it is stopped when the broker is gone.
    [ "$metrics_port" -gt 0 ] || return 0
    FLUX_URI="local://$runtime/broker/local-0" "$flux_bin" python "$config_dir/metrics.py" \
        --port "$metrics_port" &
    metrics_pid=$!
    say "Prometheus metrics on port $metrics_port (/metrics)"
}

stop_metrics() {
    if [ -n "${metrics_pid:-}" ]; then
        kill -TERM "$metrics_pid" 2>/dev/null || true
        wait "$metrics_pid" 2>/dev/null || true
        metrics_pid=
    fi
}

start_health() {
    # spec.health's checks of this node, for the life of the pod (a
    # worker's broker restarts under it): health.sh drains and undrains this
    # rank through the local broker.
    [ "$health_enabled" = 1 ] || return 0
    bash "$config_dir/health.sh" "$rank" "$flux_bin" "$runtime/broker" &
    health_pid=$!
    say "health checks running (spec.health)"
}

stop_health() {
    if [ -n "${health_pid:-}" ]; then
        kill -TERM "$health_pid" 2>/dev/null || true
        wait "$health_pid" 2>/dev/null || true
        health_pid=
    fi
}

lead_flux() {
    # a flux command to rank 0's own broker, never hanging a stopping pod
    FLUX_URI="local://$runtime/broker/local-0" timeout 5 "$flux_bin" "$@"
}

running_jobs() {
    # the ids of the jobs in RUN or CLEANUP; fails while no job-list answers
    lead_flux jobs --filter=running --no-header --format='{id}' 2>/dev/null
}

# shellcheck disable=SC2329  # invoked by stop_broker
save_lead() {
    # spec.leadState: rank 0's pod is stopping and its replacement restarts
    # the instance from the volume. No job starts from here on (the queue
    # stops, and that is not checkpointed, so the new rank 0 schedules
    # again), the running ones end with an exception that says why, and the
    # KVS is written to the volume. Bounded well within the pod's grace
    # period (30 s): a broker that does not answer is not waited for.
    local note="rank 0's pod was stopped; the instance restarts from its saved state"
    local deadline=$((SECONDS + 12)) running
    lead_flux queue stop --all --nocheckpoint --quiet >/dev/null 2>&1 || true
    lead_flux job raiseall --severity=0 --user=all --states=run --force lead-lost "$note" \
        >/dev/null 2>&1 || true
    while [ "$SECONDS" -lt "$deadline" ]; do
        running=$(running_jobs) || break
        [ -n "$running" ] || break
        sleep 0.1
    done
    if lead_flux kvs sync >/dev/null 2>&1; then
        say "instance state saved in $lead_state_dir"
    else
        say "could not save the instance's state; the new rank 0 has the last checkpoint"
    fi
    # Tell rank 0's children to go: their brokers exit at once and restart
    # (run_worker), to join the new rank 0. Left alone, a child finds its
    # parent gone only once its TCP times out (tbon.tcp_user_timeout, 20 s,
    # after its next message): it joined 45 s after the loss on the test
    # cluster.
    lead_flux python -c "$disconnect_children" >/dev/null 2>&1 || true
}

# flux python: rank 0's children, each told to disconnect
disconnect_children='
import flux
h = flux.Flux()
children = h.rpc("overlay.topology", {"rank": 0}, nodeid=0).get()["children"]
sent = [h.rpc("overlay.disconnect-subtree", {"rank": c["rank"]}, nodeid=0) for c in children]
for future in sent:
    try:
        future.get()
    except OSError:
        pass  # an offline child
'

resume_lead() {
    # A restart from the kept state, started without a scheduler
    # (FLUX_MODPROBE_DISABLE=sched): job-exec ends the jobs that were
    # running when the old rank 0 was lost (their tasks are gone), and the
    # scheduler is loaded only once they have ended. Loaded before, Fluxion
    # takes their resources as allocated and never frees them, and the
    # pending jobs never run (flux-core#6121).
    local _ running
    for _ in $(seq 600); do
        running=$(running_jobs) && [ -z "$running" ] && break
        sleep 0.1
    done
    if lead_flux module list 2>/dev/null |
        awk '{ n = split($NF, s, ","); for (i = 1; i <= n; i++) if (s[i] == "sched") found = 1 }
             END { exit !found }'; then
        say "instance restarted from its saved state in $statedir (its rc loaded the scheduler)"
    elif FLUX_URI="local://$runtime/broker/local-0" timeout 60 "$flux_bin" modprobe load sched >/dev/null; then
        say "instance restarted from its saved state in $statedir: $(lead_flux jobs --filter=pending --no-header --format='{id}' | wc -l) jobs pending"
    else
        say "could not load the scheduler after the restart; load it with: flux modprobe load sched"
    fi
    # counted in the kept KVS, for the metrics and fluxhop status (metrics.py)
    local restarts
    restarts=$(lead_flux kvs get "$lead_kvs_key.restarts" 2>/dev/null) || restarts=0
    lead_flux kvs put "$lead_kvs_key.restarts=$((restarts + 1))" \
        "$lead_kvs_key.last=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >/dev/null 2>&1 || true
}

run_lead() {
    run_snippet broker_pre
    local program=()
    if [ "$interactive" = 1 ] || [ "$#" = 0 ]; then
        broker_args+=(-Sbroker.rc2_none=1)
        say "interactive instance: connect with 'bash $config_dir/connect.sh' in this pod"
    elif [ "$launcher" = 1 ]; then
        program=("$@")
    else
        program=("$flux_bin" run ${flux_run_args[@]+"${flux_run_args[@]}"} "$@")
    fi
    if [ "${#program[@]}" -gt 0 ] && [ -n "${FLUXHOP_READY_FILE:-}" ]; then
        # The initial program starts once every broker has joined (quorum):
        # touch the ready file then, for whoever waits on the instance.
        # shellcheck disable=SC2016
        program=(/bin/sh -c ': >"$0" && exec "$@"' "$FLUXHOP_READY_FILE" "${program[@]}")
    fi
    local status attempt=0 began
    start_metrics
    while :; do
        status=0
        began=$SECONDS
        start_lead ${program[@]+"${program[@]}"} || status=$?
        # spec.leadState: a broker that failed restarts from the kept state
        if [ -z "$lead_state_dir" ] || [ "$status" = 0 ] || [ "$terminating" = 1 ]; then break; fi
        if [ $((SECONDS - began)) -ge 60 ]; then attempt=0; fi
        attempt=$((attempt + 1))
        wait_to_restart "$status" "$attempt" || break
    done
    stop_metrics
    say "instance finished with exit status $status"
    return "$status"
}

start_lead() {
    # One start of rank 0's broker: from the kept state when there is one.
    local status=0 resume_pid=
    broker_env=()
    if [ -n "$lead_state_dir" ] && [ -e "$statedir/content.sqlite" ]; then  # main's statedir
        say "restarting the instance from its saved state in $statedir"
        broker_env+=(FLUX_MODPROBE_DISABLE=sched)
        resume_lead &
        resume_pid=$!
    fi
    run_broker "$@" || status=$?
    if [ -n "$resume_pid" ]; then
        kill "$resume_pid" 2>/dev/null || true
        wait "$resume_pid" 2>/dev/null || true
    fi
    return "$status"
}

wait_to_restart() {
    # After the broker's exit status $1, restart number $2: wait the backoff
    # (1, 2, 4, then 8 s), or fail once there were more than max_restarts.
    local delay
    if [ "$2" -gt "$max_restarts" ]; then
        printf 'fluxhop: error: broker exited with status %s %s times; giving up\n' "$1" "$2" >&2
        return 1
    fi
    delay=$(($2 < 4 ? 1 << ($2 - 1) : 8))
    say "broker exited with status $1; restart $2 of $max_restarts in ${delay}s"
    sleep "$delay"
}

run_worker() {
    run_snippet worker_pre
    local attempt=0 status began
    while :; do
        status=0
        began=$SECONDS
        run_broker || status=$?
        if [ $((SECONDS - began)) -ge 60 ]; then
            attempt=0 # it ran a while: a restart now is a new event, not a crash loop
        fi
        if [ "$status" = 0 ]; then
            say "instance shut down; worker done"
            return 0
        fi
        if [ "$terminating" = 1 ]; then
            return "$status"
        fi
        attempt=$((attempt + 1))
        wait_to_restart "$status" "$attempt" || return "$status"
        wait_for_lead
    done
}

# Rank 0's statedir: spec.leadState's volume, kept across rank 0's pods (a
# directory of the broker's user's own: Flux refuses a statedir another user
# owns, and a new volume's root is root's). Its claim is mounted by a
# MutatingAdmissionPolicy (deploy/lead-state.yaml); not mounted, or not
# writable by this user, the instance still runs, with its state in the pod,
# and says so.
lead_statedir() {
    # sets statedir (main's)
    if [ -n "$lead_state_claim" ] && ! grep -qs " $lead_state_dir " /proc/self/mountinfo; then
        say "warning: claim $lead_state_claim is not mounted at $lead_state_dir (is the MutatingAdmissionPolicy fluxhop-lead-state of deploy/lead-state.yaml installed?): the instance's state goes with this pod"
    elif mkdir -p "$lead_state_dir/state" 2>/dev/null; then
        statedir="$lead_state_dir/state"
    else
        say "warning: cannot make $lead_state_dir/state as $(id -un) (for a non-root pod set securityContext.fsGroup): the instance's state goes with this pod"
    fi
}

wait_for_lead() {
    # spec.leadState: while rank 0's pod is being made again (the Job's
    # backoff: 10 s, then 20, 40...) its name does not resolve. A broker
    # started then is left to ZeroMQ's retries in the background, and joined
    # the new rank 0 30 s after it was up on the test cluster: start it once
    # the name resolves. Waiting costs no restart (10 min at most). Each
    # lookup is of the absolute name (the trailing dot: no search domains)
    # and gives up after 1 s. With the resolver's defaults a lookup whose
    # answers are lost takes 40 s (5 s, twice, for each of ndots:5's three
    # search domains and the name): workers on the test cluster now and then
    # joined 40 s after rank 0 was back.
    if [ -z "$lead_address" ] || ! command -v getent >/dev/null; then return 0; fi
    local deadline=$((SECONDS + 600))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if RES_OPTIONS="timeout:1 attempts:1" getent hosts "$lead_address." >/dev/null; then
            return 0
        fi
        if [ "$terminating" = 1 ]; then return 0; fi
        sleep 0.5
    done
}

main() {
    run_snippet init
    rank="${FLUXHOP_RANK:-${JOB_COMPLETION_INDEX:-}}"
    case "$rank" in
        '' | *[!0-9]*) die "no broker rank: JOB_COMPLETION_INDEX is not set (run this in an Indexed Job pod)" ;;
    esac
    if [ "$rank" -ge "$max_nodes" ]; then
        die "rank $rank is beyond the $max_nodes hosts in broker.toml; raise maxSize"
    fi
    local expected="$host_prefix$rank" actual
    if [ -n "${FLUXHOP_HOSTNAME:-}" ]; then
        actual="$FLUXHOP_HOSTNAME"
        broker_args+=("-Shostname=$actual")
    else
        actual=$(hostname)
    fi
    if [ "$actual" != "$expected" ]; then
        die "this pod's host name is '$actual' but rank $rank is '$expected' in broker.toml (brokers find their rank by short host name; do not set setHostnameAsFQDN)"
    fi

    mkdir -p "$runtime/broker" "$runtime/state"
    find_flux
    configure_fluxion
    install_cert
    write_resources
    local statedir="$runtime/state"
    if [ "$rank" = 0 ] && [ -n "$lead_state_dir" ]; then
        lead_statedir
    fi
    broker_args+=("--config-path=$broker_config" "-Srundir=$runtime/broker" "-Sstatedir=$statedir")
    write_node_env
    write_env
    run_snippet pre

    local status=0
    start_health
    if [ "$rank" = 0 ]; then
        run_lead "$@" || status=$?
    else
        run_worker || status=$?
    fi
    stop_health
    run_snippet post
    if [ "$terminating" = 1 ]; then
        # Stopped, not finished: a broker shuts down cleanly on SIGTERM and
        # exits 0, and a pod that exits 0 is a rank done - an evicted rank 0
        # would end an interactive MiniCluster as Succeeded, an evicted worker
        # would never come back. Exit with the signal: the Job replaces a pod
        # a disruption stopped (its podFailurePolicy), and fails on a deletion.
        status=$signal_status
    fi
    exit "$status"
}

main "$@"
