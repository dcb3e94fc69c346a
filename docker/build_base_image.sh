#!/usr/bin/env bash
# Makes the Dockerfile's base image locally, for machines that reach no image registry:
# a Debian bookworm rootfs from debootstrap (the mirror this machine's apt uses) with
# Debian's Python 3.11 and venv, imported into podman and tagged as the Dockerfile's
# FROM image (python:3.11-slim-bookworm), so that `podman build --pull=never` works.
#
# Idempotent: does nothing when podman already has the image; otherwise imports the
# cached rootfs tarball, or makes it first (about 1-3 minutes). Needs root, podman and
# debootstrap.
#
# Environment:
#   GAIGEL_BASE_IMAGE   image to tag (default: the FROM of ./Dockerfile's first stage)
#   GAIGEL_CACHE_DIR    where the rootfs tarball is kept (default /var/cache/gaigel-container)
#   DEBIAN_MIRROR       Debian mirror (default: read from /etc/apt/sources.list*)
#   FORCE=1             make the tarball and the image again
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=docker/podman-env.sh
. "$here/podman-env.sh"

suite=bookworm
packages=python3,python3-venv,ca-certificates
dockerfile="$here/../Dockerfile"
if [[ -z "${GAIGEL_BASE_IMAGE:-}" ]]; then
  GAIGEL_BASE_IMAGE="$(awk 'toupper($1) == "ARG" && $2 ~ /^PYTHON_IMAGE=/ { sub(/^PYTHON_IMAGE=/, "", $2); print $2; exit }' "$dockerfile")"
fi
image="${GAIGEL_BASE_IMAGE:?cannot tell the base image from the Dockerfile}"
# A short name is stored the way `FROM` resolves it.
case "$image" in
  */*) full="$image" ;;
  *) full="docker.io/library/$image" ;;
esac
cache="${GAIGEL_CACHE_DIR:-/var/cache/gaigel-container}"
log() { printf 'build_base_image: %s\n' "$*" >&2; }

if [[ "${FORCE:-0}" != 1 ]] && podman image exists "$full"; then
  log "$full exists"
  exit 0
fi

# The Debian mirror that apt uses here (deb822 .sources first, then one-line lists).
mirror="${DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    mirror="$(awk -v s="$suite" '
      /^[[:space:]]*$/ { if (u != "" && ok) { print u; exit } u = ""; ok = 0; next }
      /^URIs:/ { u = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) ok = 1 }
      END { if (u != "" && ok) print u }' "$f" | head -n1)"
    [[ -n "$mirror" ]] && break
  done
fi
if [[ -z "$mirror" ]]; then
  mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
    | awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i + 1) == s) { print $i; exit } }')"
fi
[[ -n "$mirror" ]] || { log "no Debian $suite mirror in /etc/apt/sources.list*; set DEBIAN_MIRROR"; exit 1; }

# One build at a time per cache directory (tests may run side by side).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && podman image exists "$full"; then
  log "$full exists"
  exit 0
fi

key="$(printf '%s %s %s' "$suite" "$packages" "$mirror" | sha256sum | cut -c1-12)"
tarball="$cache/rootfs-$suite-python-$key.tar"

if [[ "${FORCE:-0}" == 1 || ! -s "$tarball" ]]; then
  command -v debootstrap >/dev/null || { log "debootstrap is not installed"; exit 1; }
  log "debootstrap $suite from $mirror (packages $packages)"
  root="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$root" "$tarball.part"' EXIT
  debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
  # Slim it like the official images: no package lists, caches, docs or logs.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log \
    "$root"/var/log/apt/* "$root"/debootstrap
  printf 'deb %s %s main\n' "$mirror" "$suite" >"$root/etc/apt/sources.list"
  : >"$root/etc/resolv.conf"
  # The official image has `python` as well as `python3`.
  ln -sf python3 "$root/usr/bin/python"
  tar --numeric-owner --xattrs -C "$root" -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
  rm -rf "$root"
  trap - EXIT
fi

log "importing $tarball as $full"
podman import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  "$tarball" "$full" >/dev/null
log "done: $(podman image inspect --format '{{.Id}} {{.Size}}' "$full")"
