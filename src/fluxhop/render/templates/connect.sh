# --- fluxhop connect: a shell (or a command) inside this pod's Flux broker ---
#
#   kubectl exec -it POD -c CONTAINER -- bash /etc/fluxhop/config/connect.sh [CMD...]

set -euo pipefail
env_file="${FLUXHOP_FLUX_ROOT:-$default_flux_root}/run/env.sh"
if [ ! -f "$env_file" ]; then
    echo "fluxhop: the broker has not started in this pod yet ($env_file is missing)" >&2
    exit 1
fi
flux_bin=""
# shellcheck disable=SC1090
. "$env_file"
if [ "$#" = 0 ]; then set -- bash; fi
# flux proxy joins its command's words with spaces and runs them with $SHELL -c:
# hand it each word single-quoted, so that the shell splits them back as given.
words=()
for word in "$@"; do words+=("'${word//\'/\'\\\'\'}'"); done
exec "$flux_bin" proxy "$FLUX_URI" "${words[*]}"
