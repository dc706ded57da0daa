#!/usr/bin/env bash
# Makes sure the real components the tests talk to are here: Debian's ClickHouse and librdkafka
# (for the Kafka mock cluster) and a running PostgreSQL on 127.0.0.1:5432. Installs what is
# missing when run as root (CI and the project's machines); otherwise says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=$(grep -v '^#' .ci/apt-packages | xargs)
missing=()
for package in $packages; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "the tests need these Debian packages: ${missing[*]} (sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v pg_ctlcluster >/dev/null; then
    version=$(ls /etc/postgresql | head -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
  pg_isready -q -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not answering on 127.0.0.1:5432" >&2; exit 1; }
fi
