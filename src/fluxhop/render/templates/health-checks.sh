# --- fluxhop health: the shipped checks (spec.health.checks[].command) ---
#
# Each is a bash function a check's command may call; it prints why it
# failed and returns non-zero, or returns 0. FLUXHOP_GPUS_PER_NODE is the
# number of GPUs R gives this node.

# fluxhop_gpus [COUNT]: nvidia-smi lists COUNT GPUs (default: R's).
fluxhop_gpus() {
    local want=${1:-$FLUXHOP_GPUS_PER_NODE} found
    found=$(nvidia-smi -L 2>&1) || { echo "nvidia-smi failed: ${found%%$'\n'*}"; return 1; }
    found=$(grep -c '^GPU ' <<<"$found")
    if [ "$found" -lt "$want" ]; then
        echo "$found of $want GPUs present"
        return 1
    fi
}

# fluxhop_disk_free PATH MIB: the file system of PATH has MIB MiB free.
fluxhop_disk_free() {
    local path=$1 want=$2 free
    # df -P's second line: filesystem, blocks, used, available (KiB), ...
    free=$(df -Pk -- "$path" 2>/dev/null | { read -r _ && read -r _ _ _ free _ && echo "$free"; })
    case "$free" in
        '' | *[!0-9]*) echo "cannot read the free space of $path"; return 1 ;;
    esac
    free=$((free / 1024))
    if [ "$free" -lt "$want" ]; then
        echo "$path has ${free} MiB free, below ${want} MiB"
        return 1
    fi
}

# fluxhop_writable PATH: a file can be written (and removed) in directory PATH.
fluxhop_writable() {
    local path=$1 probe
    probe=$(mktemp -p "$path" .fluxhop-health.XXXXXX 2>&1) || {
        echo "$path is not writable: ${probe%%$'\n'*}"
        return 1
    }
    rm -f -- "$probe"
}
