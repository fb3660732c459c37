//! A dummy link holding addresses the node must accept as its own without answering for
//! them on any wire (the service proxy's IPVS mode puts every service address on one, as
//! kube-proxy's `kube-ipvs0`).

use ipnetwork::IpNetwork;
use rtnetlink::LinkDummy;

use crate::{errno, req, Link, Netlink, NetlinkError, EEXIST};

impl Netlink {
    /// Returns the dummy link `name`, creating it if it does not exist.
    pub async fn ensure_dummy(&self, name: &str) -> Result<Link, NetlinkError> {
        if let Some(link) = self.link_by_name(name).await? {
            if link.kind.as_deref() != Some("dummy") {
                return Err(NetlinkError::WrongKind {
                    name: name.to_string(),
                    kind: link.kind.unwrap_or_else(|| "unknown link".into()),
                    want: "dummy",
                });
            }
            return Ok(link);
        }
        match self
            .handle
            .link()
            .add(LinkDummy::new(name).build())
            .execute()
            .await
        {
            Ok(()) => {}
            Err(e) if errno(&e) == Some(EEXIST) => {}
            Err(e) => return Err(req("create dummy link", name)(e)),
        }
        self.link_by_name(name)
            .await?
            .ok_or_else(|| NetlinkError::LinkNotFound(name.to_string()))
    }

    /// Every address of every link, with the link's name.
    pub async fn all_addresses(&self) -> Result<Vec<(String, IpNetwork)>, NetlinkError> {
        let mut out = Vec::new();
        for link in self.links().await? {
            for addr in self.addresses(link.index).await? {
                out.push((link.name.clone(), addr));
            }
        }
        Ok(out)
    }
}
