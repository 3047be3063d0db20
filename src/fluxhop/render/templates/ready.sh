# --- fluxhop ready: the readiness probe of the Flux container ----------------
#
# Rank 0's pod is ready once its broker is in the run state: the quorum (the
# MiniCluster's size) is online, so the instance is up and its initial
# program may start; it is not ready again once the instance shuts down. A
# worker is ready once its broker has started: it joins by itself, and rank
# 0's readiness is what says the instance is up. The kubelet asks every few
# seconds, so rank 0 asks its own broker one question and workers ask none.

set -uo pipefail
env_file="${FLUXHOP_FLUX_ROOT:-$default_flux_root}/run/env.sh"
[ -f "$env_file" ] || exit 1
[ "${FLUXHOP_RANK:-${JOB_COMPLETION_INDEX:-}}" = 0 ] || exit 0
flux_bin=""
# shellcheck disable=SC1090
. "$env_file"
# flux uptime: " HH:MM:SS STATE DURATION,  owner ..." from the local broker
uptime=$("$flux_bin" uptime 2>/dev/null) || exit 1
read -r _ state _ <<<"$uptime"
[ "$state" = run ]
