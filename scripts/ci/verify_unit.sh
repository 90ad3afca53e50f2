#!/usr/bin/env bash
# Run by: `make test` and tests/install.rs; docs/OPERATIONS.md.
# Checks a systemd unit the way systemd will read it, on a machine where sealcheck is not
# installed:
#   1. `systemd-analyze verify` on a copy of the unit inside a throw-away root that holds
#      systemd's own units (so dependencies such as sysinit.target resolve) and a stand-in
#      executable at every absolute path the unit's Exec*= lines name (so "is not
#      executable" means a typo, not "not installed yet").
#   2. Any line verify prints fails the check: systemd reports unknown keys and values it
#      cannot parse as warnings and still exits 0.
#   3. `systemd-analyze security --offline=yes` exposure must be at most MAX_EXPOSURE.
#
# Usage: scripts/ci/verify_unit.sh [UNIT_FILE]   (default: systemd/sealcheck.service)
# Env:   MAX_EXPOSURE (default 4.0)
# Exit:  0 ok, 1 check failed, 77 systemd-analyze not available (skipped).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
unit_file="${1:-$here/systemd/sealcheck.service}"
max_exposure="${MAX_EXPOSURE:-4.0}"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "verify_unit: SKIPPED: systemd-analyze not found (install the systemd package)" >&2
    exit 77
fi
if [[ ! -f "$unit_file" ]]; then
    echo "verify_unit: $unit_file does not exist" >&2
    exit 1
fi

unit_name="$(basename "$unit_file")"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

# systemd's own units, wherever this distribution keeps them.
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system"
for dir in /usr/lib/systemd/system /lib/systemd/system; do
    if [[ -d "$dir" ]]; then
        cp -a "$dir" "$root/usr/lib/systemd/"
        break
    fi
done
cp "$unit_file" "$root/etc/systemd/system/$unit_name"

# A stand-in for each program the unit runs. Exec lines may carry prefixes (-@:+!) that
# systemd strips before the path.
stand_in="$(type -P true)"
while IFS= read -r program; do
    [[ -z "$program" ]] && continue
    mkdir -p "$root$(dirname "$program")"
    [[ -e "$root$program" ]] || cp "$stand_in" "$root$program"
done < <(sed -nE 's/^Exec[A-Za-z]*=[-@:+!]*(\/[^[:space:]]+).*/\1/p' "$unit_file" | sort -u)

status=0
verify_output="$(systemd-analyze verify --root="$root" "$unit_name" 2>&1)" || status=$?
if [[ $status -ne 0 || -n "$verify_output" ]]; then
    echo "verify_unit: systemd-analyze verify rejected $unit_file (exit $status):" >&2
    # Show paths as the operator knows them, not inside the temporary root.
    echo "${verify_output//$root/}" >&2
    exit 1
fi

security_output="$(COLUMNS=200 systemd-analyze security --no-pager --offline=yes "$unit_file" 2>&1)" || {
    echo "verify_unit: systemd-analyze security failed:" >&2
    echo "$security_output" >&2
    exit 1
}
exposure="$(sed -nE 's/.*Overall exposure level for [^:]*: ([0-9]+\.[0-9]+).*/\1/p' <<<"$security_output")"
if [[ -z "$exposure" ]]; then
    echo "verify_unit: could not read the exposure level from systemd-analyze security:" >&2
    echo "$security_output" >&2
    exit 1
fi
if ! awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }'; then
    echo "verify_unit: exposure $exposure is above the allowed $max_exposure for $unit_name" >&2
    grep '✗' <<<"$security_output" | sed 's/  */ /g' >&2 || true
    exit 1
fi

echo "verify_unit: $unit_name OK (systemd-analyze verify clean, exposure $exposure <= $max_exposure)"
