# --- fluxhop flux-view init: copy a Flux install into the shared volume ------
#
# Runs in the view image (a Spack view of flux-core and flux-sched). The
# application container then finds Flux in $flux_root/view and, because the
# view's files are links into /opt/software, its targets in $flux_root/software.

set -euo pipefail
flux_root="${FLUXHOP_FLUX_ROOT:-$default_flux_root}"

if [ -n "${FLUXHOP_VIEW_SOURCE:-}" ]; then
    source_view="$FLUXHOP_VIEW_SOURCE"
elif [ -d /opt/views/._view ]; then
    source_view=$(find /opt/views/._view -mindepth 1 -maxdepth 1 -type d | head -n 1)
else
    source_view=/opt/view
fi
if [ -z "$source_view" ] || [ ! -x "$source_view/bin/flux" ]; then
    echo "fluxhop: error: no Flux install in this image (looked in /opt/views/._view and /opt/view); set flux.container.image to a flux-view image" >&2
    exit 1
fi
mkdir -p "$flux_root/view"
cp -a "$source_view/." "$flux_root/view/"
# Into the directory the application container mounts at /opt/software
# (subPath software): filled in place, never replaced, so that a mount of it
# made before this copy sees what it copied.
software="${FLUXHOP_VIEW_SOFTWARE:-/opt/software}"
mkdir -p "$flux_root/software"
if [ -d "$software" ]; then
    cp -a "$software/." "$flux_root/software/"
fi
echo "fluxhop: Flux view copied from $source_view"
