//! A request on a port a Gateway listener serves: its listener (the most specific
//! hostname), its HTTPRoute match, and what that rule does: a redirect, a 500 (a rule
//! with no backend, or a draw of a backendRef that does not resolve, as upstream asks),
//! or a backend with the rule's header filters. A request no route claims is left to the
//! Ingress routes when the port serves both.

use std::sync::Arc;

use cairn_ingress::gateway::dispatch::{listener_for, weighted};
use cairn_ingress::gateway::filters::redirect_location;
use cairn_ingress::gateway::route::Filter;
use cairn_ingress::gateway::{Action, Protocol, Request as RouteRequest};
use cairn_ingress::host::request_host;
use http::header::{HeaderValue, LOCATION};
use http::{Request, StatusCode};

use crate::body::{plain, ProxyBody};
use crate::connection::Connection;
use crate::snapshot::{service_ref, Backend, Snapshot};

pub enum Decision {
    /// Send to this backend, after the rule's filters.
    Forward {
        backend: Arc<Backend>,
        filters: Arc<[Filter]>,
    },
    /// The proxy answers itself.
    Respond(http::Response<ProxyBody>),
    /// No Gateway route claims the request.
    NotClaimed,
}

/// What a request for `authority` on `conn`'s port gets.
pub fn decide<B>(
    snapshot: &Snapshot,
    request: &Request<B>,
    conn: &Connection,
    authority: &str,
) -> Decision {
    // Most ports serve no Gateway listener: no lower-cased host to make per request.
    if !snapshot.gateways.iter().any(|l| l.port == conn.local_port) {
        return Decision::NotClaimed;
    }
    let host = request_host(authority);
    let host = host.as_str();
    let protocol = match conn.scheme {
        "https" => Protocol::Https,
        _ => Protocol::Http,
    };
    let Some(listener) = listener_for(&snapshot.gateways, conn.local_port, protocol, host) else {
        return Decision::NotClaimed;
    };
    let headers = request.headers();
    let header = |name: &str| {
        let value = headers.get(name)?;
        value.to_str().ok().map(str::to_string)
    };
    let uri = request.uri();
    let query = RouteRequest {
        host,
        method: request.method().as_str(),
        path: uri.path(),
        query: uri.query(),
        header: &header,
    };
    let Some((action, prefix)) = listener.table.route_match(&query) else {
        return Decision::NotClaimed;
    };
    match action {
        Action::Error500 => Decision::Respond(plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the matched HTTPRoute rule has no backend",
        )),
        Action::Redirect(redirect) => {
            let target = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
            let (status, location) = redirect_location(
                redirect,
                conn.scheme,
                host,
                target,
                Some(prefix),
                listener.port,
            );
            Decision::Respond(redirect_response(status, &location))
        }
        Action::Forward { backends, filters } => {
            let Some(chosen) = weighted(backends, snapshot.draw()) else {
                return Decision::Respond(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "no backend has weight",
                ));
            };
            if let Some(reason) = chosen.unresolved {
                let why = format!("backendRef {}: {reason}", chosen.name);
                return Decision::Respond(plain(StatusCode::INTERNAL_SERVER_ERROR, &why));
            }
            match snapshot.service_backend(&service_ref(chosen)) {
                Some(Ok(backend)) => Decision::Forward {
                    backend: backend.clone(),
                    filters: filters.clone(),
                },
                Some(Err(why)) => {
                    Decision::Respond(plain(StatusCode::SERVICE_UNAVAILABLE, &why.to_string()))
                }
                None => Decision::Respond(plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the backend is not known yet",
                )),
            }
        }
    }
}

fn redirect_response(status: u16, location: &str) -> http::Response<ProxyBody> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::FOUND);
    let mut response = plain(code, &format!("redirecting to {location}"));
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}
