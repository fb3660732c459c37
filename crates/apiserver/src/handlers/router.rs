//! Routing: fixed paths, discovery, streams, then the resource handlers; one 404.

use super::*;

/// The single entry point: every request lands here.
pub async fn handle(State(state): State<AppState>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = info_span!("request", %method, %path);
    async move {
        let resp = route(state, req).await;
        debug!(code = resp.status().as_u16(), "answered");
        resp
    }
    .instrument(span)
    .await
}

pub(super) async fn route(state: AppState, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let is_get = parts.method == Method::GET || parts.method == Method::HEAD;
    // Bodies are read before anything can fail: an answer sent over an unread body makes
    // the connection unusable for the client's next request.
    let body = if is_get {
        Ok(Bytes::new())
    } else {
        read_body(body).await
    };
    let path = parts.uri.path().trim_end_matches('/').to_string();
    if let Some(resp) = health::health(&state, &path, parts.uri.query()).await {
        return resp;
    }
    if let Some(resp) = fixed_path(&state, &path, is_get, &parts.headers) {
        return resp;
    }
    if let Some(resp) = reviews::self_subject_review(&parts.method, &path, &parts.extensions) {
        return resp;
    }
    if let Some(resp) = access_reviews::access_review(&path, &parts, &body) {
        return resp;
    }
    if parts.method == Method::POST {
        if let Some(sa) = tokens::match_token_request(&path) {
            return tokens::token_request(&state, sa, &parts, body)
                .unwrap_or_else(|s| status_response(&s));
        }
        if path == "/apis/authentication.k8s.io/v1/tokenreviews" {
            return tokens::token_review(&state, &parts, body)
                .unwrap_or_else(|s| status_response(&s));
        }
    }
    if is_get {
        if let Some(resp) = discovery_path(&state, &path) {
            return resp;
        }
        if let Some(resp) = crate::metrics_api::serve(&state, &path, parts.uri.query()) {
            return resp;
        }
    }
    let parts = match stream_path(&state, &path, is_get, parts, body).await {
        Ok(resp) => return resp,
        Err(unmatched) => unmatched,
    };
    let (parts, body) = parts;
    match request::parse_resource_path(&path, |g, v, p| state.find_resource(g, v, p)) {
        Ok(Some(rp)) => match resource(state, rp, parts, body).await {
            Ok(resp) => resp,
            Err(s) => status_response(&s),
        },
        Ok(None) => not_found(),
        Err(s) => status_response(&s),
    }
}

/// Upstream's answer for a path nothing serves.
pub(super) fn not_found() -> Response {
    status_response(&Status::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    ))
}

/// The server's Prometheus metrics, with each stored resource's object count.
fn metrics_response(state: &AppState) -> Response {
    let mut seen = std::collections::BTreeSet::new();
    let objects: Vec<(String, usize)> = state
        .resources()
        .into_iter()
        .map(|r| state.storage_of(r).key_prefix())
        .filter(|prefix| seen.insert(prefix.clone()))
        .map(|prefix| {
            let count = state.cache.count(&prefix);
            (crate::server_metrics::key_resource(&prefix), count)
        })
        .collect();
    match state.metrics.encode(&objects) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, crate::server_metrics::CONTENT_TYPE)],
            body,
        )
            .into_response(),
        Err(e) => status_response(&Status::internal(format!("encoding the metrics: {e}"))),
    }
}

/// The fixed paths: version, the discovery roots and the OpenAPI index.
fn fixed_path(state: &AppState, path: &str, is_get: bool, headers: &HeaderMap) -> Option<Response> {
    let accept = header_str(headers, header::ACCEPT);
    Some(match path {
        "/version" if is_get => json_value_response(&discovery::version()),
        "/metrics" if is_get => metrics_response(state),
        "/api" if is_get => match request::aggregated_discovery_version(accept) {
            Some(v) => aggregated_response(state, true, v),
            None => json_value_response(&discovery::api_versions(
                &state.settings.advertise_address.to_string(),
            )),
        },
        "/apis" if is_get => match request::aggregated_discovery_version(accept) {
            Some(v) => aggregated_response(state, false, v),
            None => json_value_response(&discovery::api_group_list(&discovery::discoverable(
                state.resources(),
            ))),
        },
        "/openapi/v3" if is_get => json_value_response(&crate::openapi::index(&state.custom.all())),
        // An empty protobuf document: enough for kubectl apply, which then validates nothing.
        "/openapi/v2" if is_get => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            Bytes::new(),
        )
            .into_response(),
        _ => return None,
    })
}

/// Discovery and OpenAPI documents per group and version (GET only).
fn discovery_path(state: &AppState, path: &str) -> Option<Response> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let doc = match parts.as_slice() {
        ["openapi", "v3", "apis", group, version] => {
            crate::openapi::group_version(&state.custom.all(), group, version)
        }
        ["openapi", "v3", "api", version] => {
            crate::openapi::group_version(&state.custom.all(), "", version)
        }
        ["api", version] => {
            discovery::api_resource_list(&discovery::discoverable(state.resources()), "", version)
        }
        ["apis", group] => {
            discovery::api_group_doc(&discovery::discoverable(state.resources()), group)
        }
        ["apis", group, version] => discovery::api_resource_list(
            &discovery::discoverable(state.resources()),
            group,
            version,
        ),
        _ => return None,
    };
    Some(doc.map_or_else(not_found, |d| json_value_response(&d)))
}

type Unmatched = (axum::http::request::Parts, Result<Bytes, Status>);

/// The streaming subresources (exec/attach/port-forward, the node and pod proxies, pod
/// logs); the request back when the path is none of them.
async fn stream_path(
    state: &AppState,
    path: &str,
    is_get: bool,
    parts: axum::http::request::Parts,
    body: Result<Bytes, Status>,
) -> Result<Response, Unmatched> {
    if let Some((ns, name, kind)) = crate::podstream::match_path(path) {
        return Ok(crate::podstream::pod_stream(state, ns, name, kind, parts)
            .await
            .unwrap_or_else(|s| status_response(&s)));
    }
    if let Some(target) = crate::proxy::match_path(path) {
        let body = match body {
            Ok(b) => b,
            Err(s) => return Ok(status_response(&s)),
        };
        return Ok(crate::proxy::proxy(state, target, &parts, body)
            .await
            .unwrap_or_else(|s| status_response(&s)));
    }
    if is_get {
        if let Some((ns, name)) = podlog::match_path(path) {
            return Ok(podlog::pod_log(state, ns, name, parts.uri.query())
                .await
                .unwrap_or_else(|s| status_response(&s)));
        }
    }
    Err((parts, body))
}

fn aggregated_response(state: &AppState, core: bool, version: &str) -> Response {
    match render::to_bytes(&discovery::aggregated(
        &discovery::discoverable(state.resources()),
        core,
        version,
    )) {
        Ok(b) => json_response(
            StatusCode::OK,
            b,
            &discovery::aggregated_content_type(version),
            &[],
        ),
        Err(s) => status_response(&s),
    }
}
