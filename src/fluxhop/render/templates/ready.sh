# --- fluxhop ready: the readiness probe of the Flux container ----------------
#
# Rank 0's pod is ready once its broker has been in the run state: the quorum
# (the MiniCluster's size) came online, so the instance is up and its initial
# program may start. That is remembered (a marker file): the kubelet asks for
# the pod's whole life, and after that first yes it asks Flux nothing, so a
# busy broker never makes a running instance look not ready. A worker is
# ready once its entrypoint has set up (env.sh written): it joins by itself,
# and rank 0's readiness is what says the instance is up.

set -uo pipefail
run_dir="${FLUXHOP_FLUX_ROOT:-$default_flux_root}/run"
env_file="$run_dir/env.sh"
[ -f "$env_file" ] || exit 1
[ "${FLUXHOP_RANK:-${JOB_COMPLETION_INDEX:-}}" = 0 ] || exit 0
[ -e "$run_dir/instance-up" ] && exit 0
flux_bin=""
# shellcheck disable=SC1090
. "$env_file"
# flux uptime: " HH:MM:SS STATE DURATION,  owner ..." from the local broker
uptime=$("$flux_bin" uptime 2>/dev/null) || exit 1
read -r _ state _ <<<"$uptime"
[ "$state" = run ] || exit 1
: >"$run_dir/instance-up"
