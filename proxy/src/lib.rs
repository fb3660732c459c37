//! cairn-proxy, the service proxy: watches Services and EndpointSlices, turns them into
//! the desired state of `cairn-serviceproxy`, and has a [`backend::ProxyBackend`] program
//! it — only what changed, with a periodic full sync that repairs drift. nftables is the
//! backend built so far; iptables and IPVS come behind the same trait.

pub mod backend;
pub mod cache;
pub mod conntrack;
pub mod follow;
pub mod health_check;
pub mod ingress;
pub mod metrics;
pub mod netpol;
pub mod sync_loop;
