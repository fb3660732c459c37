//! cairn-proxy in nftables mode: the end-to-end scenario of `common`.

mod common;

#[test]
fn cluster_ips_node_ports_and_rejects_through_nftables() {
    common::scenario(common::Mode::Nftables);
}
