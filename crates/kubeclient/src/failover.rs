//! Fail-over between control replicas, as k3s's agent-side load balancer does it: the
//! client knows every API server (the one it was given, and those the `kubernetes`
//! EndpointSlice lists, learned as they change) and each new connection goes to the one
//! that answered last, or the next one that answers. Requests and watches on a server that
//! died end with their connections; their retries connect elsewhere.
//!
//! Each server is dialled under its own address, so its serving certificate is verified
//! for that address (every replica's certificate names the address it advertises).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::StreamExt;
use http::uri::Authority;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher;
use tower::ServiceExt;
use tracing::{debug, info};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The API servers a client may connect to.
#[derive(Debug)]
pub struct Servers {
    given: Authority,
    state: Mutex<Known>,
}

#[derive(Debug)]
struct Known {
    all: Vec<Authority>,
    preferred: Authority,
}

impl Servers {
    /// Only `given` until others are learned.
    pub fn new(given: Authority) -> Arc<Servers> {
        Arc::new(Servers {
            state: Mutex::new(Known {
                all: vec![given.clone()],
                preferred: given.clone(),
            }),
            given,
        })
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        // A panic elsewhere while holding it leaves a list that is still valid.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The servers to try, the one that answered last first.
    pub fn in_order(&self) -> Vec<Authority> {
        let known = self.known();
        let mut order = vec![known.preferred.clone()];
        order.extend(known.all.iter().filter(|a| **a != known.preferred).cloned());
        order
    }

    fn prefer(&self, server: &Authority) {
        let mut known = self.known();
        if known.preferred != *server {
            info!(from = %known.preferred, to = %server, "API server fail-over");
            known.preferred = server.clone();
        }
    }

    /// The given server and `learned` ones (the given one is always kept: it may be a
    /// name or a load balancer in front of them).
    pub fn learn(&self, learned: impl IntoIterator<Item = Authority>) {
        let mut all = vec![self.given.clone()];
        for server in learned {
            if !all.contains(&server) {
                all.push(server);
            }
        }
        let mut known = self.known();
        if known.all != all {
            debug!(servers = ?all, "API servers");
            if !all.contains(&known.preferred) {
                known.preferred = self.given.clone();
            }
            known.all = all;
        }
    }
}

/// A connector that dials the servers in `Servers`' order until one answers.
#[derive(Clone)]
pub struct FailoverConnector<C> {
    pub inner: C,
    pub servers: Arc<Servers>,
}

fn at(uri: &http::Uri, server: &Authority) -> Result<http::Uri, BoxError> {
    let mut parts = uri.clone().into_parts();
    parts.authority = Some(server.clone());
    Ok(http::Uri::from_parts(parts)?)
}

impl<C> tower::Service<http::Uri> for FailoverConnector<C>
where
    C: tower::Service<http::Uri> + Clone + Send + 'static,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is checked per dial, on the clone that makes it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let inner = self.inner.clone();
        let servers = Arc::clone(&self.servers);
        Box::pin(async move {
            let mut failed: Option<BoxError> = None;
            for server in servers.in_order() {
                let target = at(&uri, &server)?;
                match inner.clone().oneshot(target).await {
                    Ok(connection) => {
                        servers.prefer(&server);
                        return Ok(connection);
                    }
                    Err(e) => {
                        let e = e.into();
                        debug!(%server, error = %e, "API server did not answer");
                        failed = Some(e);
                    }
                }
            }
            Err(failed.unwrap_or_else(|| "no API server known".into()))
        })
    }
}

/// The servers a `kubernetes` EndpointSlice lists (its `https` port).
pub fn servers_of(slice: &EndpointSlice) -> Vec<Authority> {
    let Some(port) = slice
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("https"))
        .and_then(|p| p.port)
    else {
        return Vec::new();
    };
    slice
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.iter())
        .filter_map(|ip| format!("{ip}:{port}").parse().ok())
        .collect()
}

/// Follows the `kubernetes` EndpointSlice into `servers` until the client is dropped.
pub async fn learn(client: kube::Client, servers: Arc<Servers>) {
    let api: kube::Api<EndpointSlice> = kube::Api::namespaced(client, "default");
    let config = watcher::Config::default().labels("kubernetes.io/service-name=kubernetes");
    let mut slices = std::pin::pin!(watcher::watcher(api, config).boxed());
    while let Some(event) = slices.next().await {
        match event {
            Ok(watcher::Event::Apply(slice) | watcher::Event::InitApply(slice)) => {
                servers.learn(servers_of(&slice));
            }
            Ok(_) => {}
            Err(e) => {
                debug!(error = %e, "watching the kubernetes EndpointSlice");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn a(s: &str) -> Authority {
        s.parse().unwrap()
    }

    #[test]
    fn the_last_server_that_answered_goes_first_and_the_given_one_is_kept() {
        let servers = Servers::new(a("lb:6443"));
        servers.learn([a("10.0.0.1:6443"), a("10.0.0.2:6443")]);
        assert_eq!(
            servers.in_order(),
            [a("lb:6443"), a("10.0.0.1:6443"), a("10.0.0.2:6443")]
        );
        servers.prefer(&a("10.0.0.2:6443"));
        assert_eq!(
            servers.in_order(),
            [a("10.0.0.2:6443"), a("lb:6443"), a("10.0.0.1:6443")]
        );
        // 10.0.0.2 left the cluster: back to the given one.
        servers.learn([a("10.0.0.1:6443")]);
        assert_eq!(servers.in_order(), [a("lb:6443"), a("10.0.0.1:6443")]);
    }

    #[test]
    fn a_slice_names_its_addresses_at_its_https_port() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kubernetes"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
        }))
        .unwrap();
        assert_eq!(servers_of(&slice), [a("10.0.0.1:6443"), a("10.0.0.2:6443")]);
    }
}
