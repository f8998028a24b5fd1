#!/usr/bin/env bash
# The real parts the scale-out tests run: Debian's redis-server (with redis-cli) and haproxy.
# Installed when run as root and missing; otherwise the exact apt command is printed and the
# script stops. The packages' own services are kept from starting: the tests start their own
# instances on loopback ephemeral ports and stop them, and nothing may hold the well-known ports.
set -euo pipefail

APT_PACKAGES=(redis-server redis-tools haproxy)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "scaleout-deps: missing system packages. Run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "scaleout-deps: installing ${missing[*]}"
# policy-rc.d answering 101 tells the maintainer scripts not to start the services.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
