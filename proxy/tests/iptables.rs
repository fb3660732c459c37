//! cairn-proxy in iptables mode (the system's iptables, nf_tables here): the end-to-end
//! scenario of `common`.

mod common;

#[test]
fn cluster_ips_node_ports_and_rejects_through_iptables() {
    common::scenario(common::Mode::Iptables);
}
