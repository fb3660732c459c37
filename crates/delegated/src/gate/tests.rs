use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_pki::Authority;
use http::{HeaderMap, HeaderValue, Method};

use super::*;
use crate::review::ReviewError;

/// Knows one token ("view-token" → viewer) and lets `admin` do anything, `viewer`
/// read stats only; counts the reviews it answers.
#[derive(Default)]
struct FakeReviewer {
    token_reviews: AtomicUsize,
    access_reviews: AtomicUsize,
}

#[async_trait]
impl Reviewer for FakeReviewer {
    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        self.token_reviews.fetch_add(1, Ordering::SeqCst);
        Ok((token == "view-token").then(|| UserInfo::new("viewer", vec!["viewers".into()])))
    }

    async fn review_access(&self, user: &UserInfo, access: &Access) -> Result<bool, ReviewError> {
        self.access_reviews.fetch_add(1, Ordering::SeqCst);
        let stats = matches!(
            access,
            Access::Resource {
                subresource: "stats",
                ..
            }
        );
        Ok(user.username == "admin" || (user.username == "viewer" && stats))
    }
}

/// The agent's mapping, enough of it for these cases: `/stats/…` is `nodes/stats`,
/// everything else `nodes/proxy`.
fn node_access(method: &Method, path: &str) -> Access {
    Access::Resource {
        verb: crate::access::verb(method),
        resource: "nodes",
        subresource: if path.starts_with("/stats") {
            "stats"
        } else {
            "proxy"
        },
        name: "node-a".into(),
    }
}

fn gate() -> (Gate, Arc<FakeReviewer>) {
    let ca = Authority::generate("test-client-ca", Duration::from_secs(3600)).unwrap();
    let check = cairn_pki::tls::client_chain_verifier(ca.cert_pem()).unwrap();
    let reviewer = Arc::new(FakeReviewer::default());
    let gate = Gate::new(
        ClientCertAuthenticator::new(check),
        Arc::clone(&reviewer) as Arc<dyn Reviewer>,
    );
    (gate, reviewer)
}

fn with_token(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    h
}

fn admin_cert(not_after: i64) -> PeerCert {
    PeerCert::Valid {
        user: UserInfo::new("admin", vec![]),
        not_after,
    }
}

#[tokio::test]
async fn anonymous_and_bad_credentials_are_unauthorized() {
    let (gate, _) = gate();
    let none = HeaderMap::new();
    let get = Method::GET;
    let refused = gate
        .admit(&node_access(&get, "/pods"), &none, &PeerCert::Absent)
        .await;
    assert_eq!(refused.unwrap_err(), Refusal::Unauthorized);
    let (nope, view) = (with_token("nope"), with_token("view-token"));
    let wrong = gate
        .admit(&node_access(&get, "/pods"), &nope, &PeerCert::Absent)
        .await;
    assert_eq!(wrong.unwrap_err().status(), 401);
    let other_ca = PeerCert::Invalid("unknown issuer".into());
    let refused = gate
        .admit(&node_access(&get, "/pods"), &none, &other_ca)
        .await;
    assert_eq!(refused.unwrap_err(), Refusal::Unauthorized);
    let expired = gate
        .admit(&node_access(&get, "/pods"), &none, &admin_cert(1))
        .await;
    assert_eq!(expired.unwrap_err(), Refusal::Unauthorized);
    // A certificate that fails is not final: the bearer token is tried next.
    let stats = gate
        .admit(&node_access(&get, "/stats/summary"), &view, &other_ca)
        .await;
    assert_eq!(stats.unwrap().username, "viewer");
    let stats = gate
        .admit(&node_access(&get, "/stats/summary"), &view, &admin_cert(1))
        .await;
    assert_eq!(stats.unwrap().username, "viewer");
}

#[tokio::test]
async fn decisions_are_cached_per_whole_user() {
    let (gate, reviewer) = gate();
    let far = cairn_pki::inspect::now() + 3600;
    let none = HeaderMap::new();
    let mut admin = admin_cert(far);
    for uid in ["", "", "a", "a", "b"] {
        if let PeerCert::Valid { user, .. } = &mut admin {
            user.uid = uid.into();
        }
        gate.admit(&node_access(&Method::GET, "/pods"), &none, &admin)
            .await
            .unwrap();
    }
    assert_eq!(reviewer.access_reviews.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn users_get_what_their_review_allows_and_reviews_are_cached() {
    let (gate, reviewer) = gate();
    let far = cairn_pki::inspect::now() + 3600;
    let none = HeaderMap::new();
    let exec = Method::POST;
    let user = gate
        .admit(&node_access(&exec, "/exec/ns/p/c"), &none, &admin_cert(far))
        .await
        .unwrap();
    assert_eq!(user.username, "admin");
    let view = with_token("view-token");
    let stats = gate
        .admit(
            &node_access(&Method::GET, "/stats/summary"),
            &view,
            &PeerCert::Absent,
        )
        .await;
    assert_eq!(stats.unwrap().username, "viewer");
    for _ in 0..3 {
        let refused = gate
            .admit(
                &node_access(&exec, "/exec/ns/p/c"),
                &view,
                &PeerCert::Absent,
            )
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            Refusal::Forbidden(
                "Forbidden (user=viewer, verb=create, resource=nodes, subresource(s)=[proxy])"
                    .into()
            )
        );
        assert_eq!(refused.status(), 403);
    }
    assert_eq!(reviewer.token_reviews.load(Ordering::SeqCst), 1);
    assert_eq!(reviewer.access_reviews.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_flood_of_made_up_tokens_leaves_real_users_cached() {
    let (gate, reviewer) = gate();
    let get = Method::GET;
    let view = with_token("view-token");
    let stats = gate
        .admit(
            &node_access(&get, "/stats/summary"),
            &view,
            &PeerCert::Absent,
        )
        .await;
    assert_eq!(stats.unwrap().username, "viewer");
    for i in 0..CACHE_LIMIT + 100 {
        let made_up = with_token(&format!("made-up-{i}"));
        let refused = gate
            .admit(
                &node_access(&get, "/stats/summary"),
                &made_up,
                &PeerCert::Absent,
            )
            .await;
        assert_eq!(refused.unwrap_err(), Refusal::Unauthorized);
    }
    let reviews = reviewer.token_reviews.load(Ordering::SeqCst);
    assert_eq!(reviews, 1 + CACHE_LIMIT + 100);
    let stats = gate
        .admit(
            &node_access(&get, "/stats/summary"),
            &view,
            &PeerCert::Absent,
        )
        .await;
    assert_eq!(stats.unwrap().username, "viewer");
    let again = gate
        .admit(
            &node_access(&get, "/pods"),
            &with_token("made-up-0"),
            &PeerCert::Absent,
        )
        .await;
    assert_eq!(again.unwrap_err(), Refusal::Unauthorized);
    assert_eq!(
        reviewer.token_reviews.load(Ordering::SeqCst),
        reviews,
        "the real user and a rejected token cached while there was room cost no review"
    );
}

#[tokio::test]
async fn paths_are_refused_in_the_api_servers_words() {
    let (gate, reviewer) = gate();
    let metrics = Access::NonResource {
        verb: "get",
        path: "/metrics".into(),
    };
    let view = with_token("view-token");
    let refused = gate.admit(&metrics, &view, &PeerCert::Absent).await;
    assert_eq!(
        refused.unwrap_err(),
        Refusal::Forbidden("forbidden: User \"viewer\" cannot get path \"/metrics\"".into())
    );
    let far = cairn_pki::inspect::now() + 3600;
    let admin = gate
        .admit(&metrics, &HeaderMap::new(), &admin_cert(far))
        .await;
    assert_eq!(admin.unwrap().username, "admin");
    assert_eq!(reviewer.access_reviews.load(Ordering::SeqCst), 2);
}
