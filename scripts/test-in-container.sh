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
#       cairn-lab-node:bookworm-1 sh -c 'sh scripts/node-cgroups.sh && bash'
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
shared=$(cd .. && pwd)/shared
[ "$(id -u)" = 0 ] || { echo "test-in-container.sh: run me as root" >&2; exit 1; }
./scripts/install-deps.sh
export CARGO_TERM_COLOR=never
cargo build --locked -p cairn-lab --bins
lab=$repo/target/debug/cairn-lab

# The suite's packages, and a C toolchain for linking (the host's comes with the machine).
packages="$(./scripts/install-deps.sh --list) gcc libc6-dev"
node_image=cairn-lab-node:bookworm-1
had_node_image=
docker image inspect "$node_image" >/dev/null 2>&1 && had_node_image=1
node_image=$("$lab" image ensure)
test_image=cairn-lab-test:$(echo "$node_image $packages" | sha256sum | cut -c1-12)
name=cairn-test-$$
cleanup() {
    docker rm -f "$name" >/dev/null 2>&1 || true
    docker rmi "$test_image" >/dev/null 2>&1 || true
    [ -n "$had_node_image" ] || docker rmi "$node_image" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "test-in-container: image $test_image ($node_image + the suite's packages)"
docker build -q -t "$test_image" - >/dev/null <<DOCKERFILE
FROM $node_image
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null && rm -rf /var/lib/apt/lists/*
DOCKERFILE

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
