#!/usr/bin/env bash
# The suite's container lane: scripts/test.sh inside a container made from cairn-lab's
# offline node image (Debian 12 by debootstrap, `cairn-lab image ensure`) plus the suite's
# Debian packages, with the repository mounted at its own path (so the build is shared
# with the plain lane), ../shared read-only, and the host's Rust toolchain and kubectl
# builds mounted. The container gets what the lab's docker nodes get (every capability the
# engine can grant, no seccomp/AppArmor profile, /proc and /sys unmasked, a private cgroup
# namespace whose cgroups scripts/node-cgroups.sh remounts writable), so the suite's pods
# nest under the container's cgroup on cgroup v1 or v2. The one thing missing inside is a
# Docker engine: the docker-driver e2e tests (names containing `docker_nodes`) run in the
# plain lane only. The images this script made are removed at the end.
#   The container, by hand:  docker run --rm -it $(target/debug/cairn-lab image run-flags) \
#       --tmpfs /tmp:rw,exec,size=16g --tmpfs /run:rw,exec -v $PWD:$PWD -w $PWD \
#       cairn-lab-node:bookworm-3 sh -c 'sh scripts/node-cgroups.sh && bash'
#
# `--prepare` only builds the images (scripts/test.sh does that in the background while
# clippy runs) and leaves them for the run, which then finds them in Docker's cache;
# CAIRN_LAB_BUILT=1 says target/debug/cairn-lab is already built (no cargo: the
# background job must not wait for the build directory's lock).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
shared=$(cd .. && pwd)/shared
prepare_only=
[ "${1:-}" = --prepare ] && prepare_only=1
[ "$(id -u)" = 0 ] || { echo "test-in-container.sh: run me as root" >&2; exit 1; }
[ -n "${CAIRN_DEPS_INSTALLED:-}" ] || ./scripts/install-deps.sh
export CARGO_TERM_COLOR=never
[ -n "${CAIRN_LAB_BUILT:-}" ] || cargo build --locked -p cairn-lab --bins
lab=$repo/target/debug/cairn-lab

# The suite's packages, and a C toolchain for linking (the host's comes with the machine).
packages="$(./scripts/install-deps.sh --list) gcc libc6-dev"
node_image=cairn-lab-node:bookworm-3
# Whether the node image was there before this suite (a `--prepare` run records that it
# was not, so the run after it still removes the image at the end).
made_marker=$repo/target/container-lane-made-node-image
# What a `--prepare` run left for the run (scripts/test.sh removes it if the run never
# comes).
prepared=$repo/target/container-lane-images.txt
had_node_image=
if docker image inspect "$node_image" >/dev/null 2>&1; then
    [ -e "$made_marker" ] || had_node_image=1
elif [ -n "$prepare_only" ]; then
    touch "$made_marker"
fi
node_image=$("$lab" image ensure)
test_image=cairn-lab-test:$(echo "$node_image $packages" | sha256sum | cut -c1-12)
name=cairn-test-$$
cleanup() {
    docker rm -f "$name" >/dev/null 2>&1 || true
    docker rmi "$test_image" >/dev/null 2>&1 || true
    [ -n "$had_node_image" ] || docker rmi "$node_image" >/dev/null 2>&1 || true
    rm -f "$made_marker" "$prepared"
}
[ -n "$prepare_only" ] || trap cleanup EXIT

echo "test-in-container: image $test_image ($node_image + the suite's packages)"
docker build -q -t "$test_image" - >/dev/null <<DOCKERFILE
FROM $node_image
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null && rm -rf /var/lib/apt/lists/*
DOCKERFILE
if [ -n "$prepare_only" ]; then
    { echo "$test_image"; [ ! -e "$made_marker" ] || echo "$node_image"; } >"$prepared"
    exit 0
fi

cargo_home=${CARGO_HOME:-$HOME/.cargo}
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=$(dirname "$(command -v cargo)")
mounts=(-v "$repo:$repo" -v "$cargo_home:$cargo_home")
[ -d "$rustup_home" ] && mounts+=(-v "$rustup_home:$rustup_home")
[ -d "$shared" ] && mounts+=(-v "$shared:$shared:ro")
# kubectl and its 1.27-1.33 builds (control/tests use /usr/lib/google-cloud-sdk/bin/kubectl.1.N).
kubectl_path=$(readlink -f "$(command -v kubectl)")
if [[ "$kubectl_path" == /usr/lib/google-cloud-sdk/* ]]; then
    mounts+=(-v /usr/lib/google-cloud-sdk:/usr/lib/google-cloud-sdk:ro)
else
    mounts+=(-v "$kubectl_path:/usr/local/lib/kubectl:ro")
fi
mapfile -t flags < <("$lab" image run-flags)

echo "test-in-container: scripts/test.sh in $name"
docker run --rm --name "$name" "${flags[@]}" \
    --tmpfs /tmp:rw,exec,size=16g --tmpfs /run:rw,exec \
    "${mounts[@]}" -w "$repo" \
    -e CAIRN_IN_CONTAINER=1 -e HOME="$HOME" -e CARGO_TERM_COLOR=never \
    -e CARGO_HOME="$cargo_home" -e RUSTUP_HOME="$rustup_home" \
    -e PATH="$cargo_bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "$test_image" bash -c '
        set -e
        sh scripts/node-cgroups.sh
        k=/usr/lib/google-cloud-sdk/bin/kubectl; [ -e "$k" ] || k=/usr/local/lib/kubectl
        ln -sf "$k" /usr/local/bin/kubectl
        exec ./scripts/test.sh'
