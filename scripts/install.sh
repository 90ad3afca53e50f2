#!/usr/bin/env bash
# Run by: `make install` / `make uninstall` (docs/OPERATIONS.md); tests/install.rs runs it into a staging root.
# Installs sealcheck as a systemd service, or removes exactly what an install added.
#
#   scripts/install.sh install      (make install)
#   scripts/install.sh uninstall    (make uninstall)
#
# Environment:
#   DESTDIR   staging root for packaging; empty = this machine (needs root)
#   PREFIX    default /usr/local: binary in $PREFIX/bin, models and the install manifest
#             in $PREFIX/share/sealcheck, docs in $PREFIX/share/doc/sealcheck
#   BINARY    default target/release/sealcheck (build it first: make build)
#   UNITDIR   default /etc/systemd/system (a package would use /lib/systemd/system)
#
# What goes where:
#   $PREFIX/bin/sealcheck                      the program
#   /etc/sealcheck/sealcheck.toml              config, only if none is there yet; otherwise
#                                              the new template lands next to it as .new
#   $UNITDIR/sealcheck.service                 the unit
#   /usr/lib/sysusers.d/sealcheck.conf         system user sealcheck, member of group video
#   $PREFIX/share/sealcheck/models/            the ONNX models
#   $PREFIX/share/doc/sealcheck/OPERATIONS.md  the operator's guide
#   $PREFIX/share/sealcheck/prometheus/sealcheck-alerts.yml
#                                              alerting rules for the plant's Prometheus
#   $PREFIX/share/sealcheck/install-manifest   every file and folder this script created,
#                                              with its SHA-256, so uninstall removes only
#                                              those, and only while unchanged
#
# On this machine (DESTDIR empty, root) it also creates the user (systemd-sysusers) and
# runs systemctl daemon-reload. It never enables or starts the service, and uninstall
# never removes /var/lib/sealcheck (results, saved images) or the user.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
action="${1:-}"
DESTDIR="${DESTDIR:-}"
PREFIX="${PREFIX:-/usr/local}"
BINARY="${BINARY:-$here/target/release/sealcheck}"
UNITDIR="${UNITDIR:-/etc/systemd/system}"

PREFIX="${PREFIX%/}"
DESTDIR="${DESTDIR%/}"
confdir=/etc/sealcheck
config=$confdir/sealcheck.toml
datadir=$PREFIX/share/sealcheck
modeldir=$datadir/models
docdir=$PREFIX/share/doc/sealcheck
sysusers=/usr/lib/sysusers.d/sealcheck.conf
unit=$UNITDIR/sealcheck.service
manifest=$datadir/install-manifest

# The paths the templates name, rewritten when PREFIX is not the default.
template_prefix=/usr/local

say() { printf '%s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

live_system() { [[ -z "$DESTDIR" ]]; }
# sd_booted(3): systemd is the init system here (not a container or chroot without it).
systemd_running() { [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; }
is_root() { [[ "$(id -u)" == 0 ]]; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# --- the manifest: TYPE<TAB>SHA256<TAB>PATH, PATH without DESTDIR, in install order ---
declare -a entry_order=()
declare -A entry_type=() entry_sha=()

record() { # record TYPE SHA PATH
    local type=$1 sum=$2 path=$3
    if [[ -z "${entry_type[$path]+set}" ]]; then
        entry_order+=("$path")
    fi
    entry_type[$path]=$type
    entry_sha[$path]=$sum
}

load_manifest() {
    [[ -f "$DESTDIR$manifest" ]] || return 0
    local type sum path
    while IFS=$'\t' read -r type sum path; do
        [[ -z "$path" || "$type" == \#* ]] && continue
        record "$type" "$sum" "$path"
    done <"$DESTDIR$manifest"
}

write_manifest() {
    local tmp="$DESTDIR$manifest.tmp" path
    {
        printf '# sealcheck install manifest: TYPE SHA256 PATH (PATH without DESTDIR)\n'
        for path in "${entry_order[@]}"; do
            printf '%s\t%s\t%s\n' "${entry_type[$path]}" "${entry_sha[$path]}" "$path"
        done
    } >"$tmp"
    chmod 0644 "$tmp"
    mv "$tmp" "$DESTDIR$manifest"
}

# Creates a folder and each missing parent, recording the ones this run created.
ensure_dir() {
    local path=$1 missing=() p
    p=$path
    while [[ -n "$p" && "$p" != / && ! -d "$DESTDIR$p" ]]; do
        missing=("$p" "${missing[@]}")
        p=$(dirname "$p")
    done
    for p in "${missing[@]}"; do
        mkdir -m 0755 "$DESTDIR$p"
        record dir - "$p"
    done
}

# install_file MODE SOURCE DEST [TYPE]
install_file() {
    local mode=$1 src=$2 dest=$3 type=${4:-file}
    ensure_dir "$(dirname "$dest")"
    install -m "$mode" "$src" "$DESTDIR$dest"
    record "$type" "$(sha "$DESTDIR$dest")" "$dest"
    say "installed $dest"
}

# Copies a template with the default prefix replaced by PREFIX.
render() { # render SOURCE OUTPUT
    sed -e "s|$template_prefix/bin/sealcheck|$PREFIX/bin/sealcheck|g" \
        -e "s|$template_prefix/share/sealcheck|$PREFIX/share/sealcheck|g" \
        -e "s|$template_prefix/share/doc/sealcheck|$PREFIX/share/doc/sealcheck|g" \
        "$1" >"$2"
}

do_install() {
    [[ -f "$BINARY" && -x "$BINARY" ]] ||
        die "no program at $BINARY: build it first (make build), or point BINARY at it"
    for f in config/sealcheck.toml systemd/sealcheck.service docs/OPERATIONS.md \
        prometheus/sealcheck-alerts.yml; do
        [[ -f "$here/$f" ]] || die "$here/$f is missing from the source tree"
    done
    if live_system && ! is_root; then
        die "installing on this machine needs root: sudo make install (or set DESTDIR to stage it)"
    fi

    # Global, so the EXIT trap still sees it after this function returns.
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT

    if ! live_system; then mkdir -p "$DESTDIR"; fi
    load_manifest

    # The user first, so the config can be made readable to its group.
    printf '%s\n' \
        '# sealcheck service account (scripts/install.sh). The service runs as this user;' \
        '# group video opens cameras and Jetson GPU nodes.' \
        'u sealcheck - "sealcheck seal inspection" /var/lib/sealcheck /usr/sbin/nologin' \
        'm sealcheck video' >"$work/sysusers.conf"
    install_file 0644 "$work/sysusers.conf" "$sysusers"
    if live_system; then
        systemd-sysusers "$sysusers"
        say "created system user sealcheck (group video)"
    fi

    install_file 0755 "$BINARY" "$PREFIX/bin/sealcheck"

    render "$here/systemd/sealcheck.service" "$work/sealcheck.service"
    install_file 0644 "$work/sealcheck.service" "$unit"

    install_file 0644 "$here/docs/OPERATIONS.md" "$docdir/OPERATIONS.md"
    install_file 0644 "$here/prometheus/sealcheck-alerts.yml" \
        "$datadir/prometheus/sealcheck-alerts.yml"

    local models=0 model
    if [[ -d "$here/models" ]]; then
        for model in "$here"/models/*.onnx; do
            [[ -f "$model" ]] || continue
            install_file 0644 "$model" "$modeldir/$(basename "$model")"
            models=$((models + 1))
        done
    fi
    if [[ $models == 0 ]]; then
        say "WARNING: no models/*.onnx in the source tree: put your models in $modeldir" \
            "(or point [models.*] path in $config at them) before starting the service"
    fi

    # The config: never overwrite an operator's file.
    render "$here/config/sealcheck.toml" "$work/sealcheck.toml"
    local config_mode=0644 config_group=""
    if live_system && getent group sealcheck >/dev/null; then
        # Readable by the service, not by every user: an RTSP URL may hold a password.
        config_mode=0640
        config_group=sealcheck
    fi
    if [[ ! -e "$DESTDIR$config" ]]; then
        install_file "$config_mode" "$work/sealcheck.toml" "$config" config
        if [[ -n "$config_group" ]]; then chgrp "$config_group" "$DESTDIR$config"; fi
    elif cmp -s "$work/sealcheck.toml" "$DESTDIR$config"; then
        say "kept $config (same as the new template)"
    else
        install_file "$config_mode" "$work/sealcheck.toml" "$config.new" config
        if [[ -n "$config_group" ]]; then chgrp "$config_group" "$DESTDIR$config.new"; fi
        say "kept your $config; the new template is $config.new" \
            "(compare: diff $config $config.new)"
    fi

    ensure_dir "$datadir"
    write_manifest
    say "manifest: $manifest"

    if live_system && systemd_running; then
        systemctl daemon-reload
        say "systemd reloaded. Next: edit $config, check it with" \
            "'sealcheck check-config $config', then: systemctl enable --now sealcheck"
    elif live_system; then
        say "systemd is not running here: run 'systemctl daemon-reload' on the target system"
    else
        say "staged under $DESTDIR (no user created, systemd not reloaded)"
    fi
}

do_uninstall() {
    if live_system && ! is_root; then
        die "uninstalling from this machine needs root: sudo make uninstall"
    fi
    [[ -f "$DESTDIR$manifest" ]] ||
        die "no install manifest at $DESTDIR$manifest: nothing installed with this PREFIX/DESTDIR"
    load_manifest

    if live_system && systemd_running; then
        if systemctl is-enabled --quiet sealcheck.service 2>/dev/null ||
            systemctl is-active --quiet sealcheck.service 2>/dev/null; then
            systemctl disable --now sealcheck.service
            say "stopped and disabled sealcheck.service"
        fi
    fi

    local i path type kept=0
    # Files first (newest first), then folders, deepest first.
    for ((i = ${#entry_order[@]} - 1; i >= 0; i--)); do
        path=${entry_order[$i]}
        type=${entry_type[$path]}
        [[ "$type" == dir ]] && continue
        if [[ ! -e "$DESTDIR$path" ]]; then
            continue
        fi
        if [[ "$(sha "$DESTDIR$path")" == "${entry_sha[$path]}" ]]; then
            rm -f "$DESTDIR$path"
            say "removed $path"
        elif [[ "$type" == config ]]; then
            say "kept $path: it was changed after install (your settings)"
            kept=$((kept + 1))
        else
            say "kept $path: it was changed after install (not the file install.sh put there)"
            kept=$((kept + 1))
        fi
    done
    rm -f "$DESTDIR$manifest"

    local dirs
    dirs=$(for path in "${entry_order[@]}"; do
        if [[ "${entry_type[$path]}" == dir ]]; then printf '%s\n' "$path"; fi
    done | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-)
    while IFS= read -r path; do
        [[ -z "$path" ]] && continue
        if rmdir "$DESTDIR$path" 2>/dev/null; then
            say "removed $path/"
        fi
    done <<<"$dirs"

    if live_system && systemd_running; then
        systemctl daemon-reload
    fi
    if [[ $kept -gt 0 ]]; then
        say "$kept changed file(s) kept."
    fi
    say "sealcheck uninstalled. Kept on purpose: /var/lib/sealcheck (results, saved images)" \
        "and the user sealcheck (remove with: userdel sealcheck)."
}

case "$action" in
install) do_install ;;
uninstall) do_uninstall ;;
*)
    echo "usage: $0 install|uninstall   (env: DESTDIR, PREFIX, BINARY, UNITDIR)" >&2
    exit 2
    ;;
esac
