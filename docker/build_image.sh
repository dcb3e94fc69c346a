#!/usr/bin/env bash
# Builds the image with podman where no registry is reachable: makes the base image first
# (docker/build_base_image.sh, cached), then `podman build --pull=never`.
#
# Usage: docker/build_image.sh [TAG]   (default localhost/gaigel-arena:latest)
# Environment: GAIGEL_PIP_CA  CA bundle for pip inside the build, passed as the build
#   secret pip_ca (default: the host's /etc/ssl/certs/ca-certificates.crt if present);
#   GAIGEL_CACHE_DIR, DEBIAN_MIRROR, FORCE as for build_base_image.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=docker/podman-env.sh
. "$here/podman-env.sh"
tag="${1:-localhost/gaigel-arena:latest}"

"$here/build_base_image.sh"

ca="${GAIGEL_PIP_CA-/etc/ssl/certs/ca-certificates.crt}"
secret=()
if [[ -n "$ca" && -s "$ca" ]]; then
  secret=(--secret "id=pip_ca,src=$ca")
fi
# --format docker keeps HEALTHCHECK (the OCI format has none); the host network lets pip
# reach the package index the way the host does.
podman build --pull=never --format docker --network host "${secret[@]}" \
  -f "$here/../Dockerfile" -t "$tag" "$here/.."
