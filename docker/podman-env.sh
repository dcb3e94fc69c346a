# Sourced by docker/build_base_image.sh and docker/build_image.sh (and usable by hand:
# `. docker/podman-env.sh`): points podman at the repository's containers.conf.
# shellcheck shell=bash
export CONTAINERS_CONF="${CONTAINERS_CONF:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/containers.conf}"
