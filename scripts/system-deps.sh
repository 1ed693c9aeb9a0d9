#!/usr/bin/env bash
# Installs what pip cannot: Java 17 for Spark, Debian's mariadb-server for the embedded source
# and chromium for the test that reads the Data Docs in a headless browser (and, asked with
# `maven`, Maven for make bench's Debezium peer). Uses apt-get as
# root, or through passwordless sudo; otherwise says what to install.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || missing+=(openjdk-17-jre-headless)
{ command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } || missing+=(mariadb-server)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || missing+=(chromium)
# make bench also builds its Debezium peer with Maven: `system-deps.sh maven`.
for extra in "$@"; do
  case "$extra" in
    maven) command -v mvn >/dev/null 2>&1 || missing+=(maven) ;;
    *) echo "ERROR: system-deps.sh knows no extra '$extra' (known: maven)" >&2; exit 2 ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "ERROR: missing system packages: ${missing[*]}; install them (sudo apt-get install -y ${missing[*]})" >&2
  exit 2
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ERROR: missing ${missing[*]} and no apt-get here: install Java 17, MariaDB 10.6+ and Chromium yourself" >&2
  exit 2
fi
echo "Installing ${missing[*]} from Debian's packages..."
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >/dev/null
# The package's own service is never used (the project runs its own instance); in containers
# without an init system its start-up simply fails, which is harmless here.
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
