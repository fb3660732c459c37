//! The check every gated request to a component's port passes (the kubelet's
//! `InstallAuthFilter`): authenticate (the connection's client certificate against the
//! client CA, else a bearer token through a TokenReview; nothing else: anonymous requests
//! are refused), then authorize what it asks ([`Access`]: the agent's `nodes/<subresource>`,
//! a component's `/metrics`) through a SubjectAccessReview.
//! Answers are cached as the kubelet caches them (tokens 2 minutes; decisions 5 minutes
//! when allowed, 30 seconds when not), so a stream of requests costs one review.
//! Rejected tokens are cached apart from accepted ones, and only while there is room:
//! anyone can send made-up tokens, and they must not push out real users' answers.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_auth::x509::{ClientCertAuthenticator, PeerCert};
use cairn_auth::UserInfo;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tracing::{debug, warn};

use crate::access::Access;
use crate::review::Reviewer;

const TOKEN_TTL: Duration = Duration::from_secs(120);
const ALLOWED_TTL: Duration = Duration::from_secs(300);
const DENIED_TTL: Duration = Duration::from_secs(30);
/// Entries a cache holds before it drops the expired ones (and, if still full, the one
/// closest to expiry).
const CACHE_LIMIT: usize = 4096;

/// Why a request is refused, with the kubelet's status and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Unauthorized,
    Forbidden(String),
    /// The review could not be made (the API server unreachable).
    AuthorizationError(String),
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Unauthorized => 401,
            Refusal::Forbidden(_) => 403,
            Refusal::AuthorizationError(_) => 500,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::Unauthorized => "Unauthorized".into(),
            Refusal::Forbidden(m) | Refusal::AuthorizationError(m) => m.clone(),
        }
    }
}

struct TtlCache<K, V>(Mutex<HashMap<K, (V, Instant)>>);

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        TtlCache(Mutex::new(HashMap::new()))
    }

    fn get(&self, key: &K) -> Option<V> {
        let map = self.0.lock();
        map.get(key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(v, _)| v.clone())
    }

    fn put(&self, key: K, value: V, ttl: Duration) {
        let mut map = self.0.lock();
        if still_full(&mut map) {
            // One eviction per insert keeps a burst of new users from flushing
            // every other user's answer.
            let soonest = map.iter().min_by_key(|(_, (_, until))| *until);
            if let Some(key) = soonest.map(|(k, _)| k.clone()) {
                map.remove(&key);
            }
        }
        map.insert(key, (value, Instant::now() + ttl));
    }

    /// Caches the answer only if there is room once the expired ones are gone: for
    /// answers anyone can make the agent produce (rejected tokens).
    fn put_if_room(&self, key: K, value: V, ttl: Duration) {
        let mut map = self.0.lock();
        if !still_full(&mut map) {
            map.insert(key, (value, Instant::now() + ttl));
        }
    }
}

/// Whether a full cache is still full once its expired answers are dropped.
fn still_full<K, V>(map: &mut HashMap<K, (V, Instant)>) -> bool {
    if map.len() < CACHE_LIMIT {
        return false;
    }
    let now = Instant::now();
    map.retain(|_, (_, until)| *until > now);
    map.len() >= CACHE_LIMIT
}

/// Everything a SubjectAccessReview is asked about: two users differing only in uid or
/// extra (a scoped token, an impersonated identity) get their own answers.
type DecisionKey = (UserInfo, Access);

pub struct Gate {
    pub x509: ClientCertAuthenticator,
    reviewer: Arc<dyn Reviewer>,
    tokens: TtlCache<[u8; 32], UserInfo>,
    rejected_tokens: TtlCache<[u8; 32], ()>,
    decisions: TtlCache<DecisionKey, bool>,
}

fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl Gate {
    pub fn new(x509: ClientCertAuthenticator, reviewer: Arc<dyn Reviewer>) -> Gate {
        Gate {
            x509,
            reviewer,
            tokens: TtlCache::new(),
            rejected_tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// The user of a request; a 401 without valid credentials.
    async fn authenticate(
        &self,
        headers: &http::HeaderMap,
        peer: &PeerCert,
    ) -> Result<UserInfo, Refusal> {
        // A certificate that does not verify is not the end: as upstream's union
        // authenticator, the bearer token is tried next.
        if let PeerCert::Valid { user, not_after } = peer {
            if *not_after > cairn_pki::inspect::now() {
                return Ok(user.clone());
            }
        }
        let token = bearer(headers).ok_or(Refusal::Unauthorized)?;
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(user) = self.tokens.get(&key) {
            return Ok(user);
        }
        if self.rejected_tokens.get(&key).is_some() {
            return Err(Refusal::Unauthorized);
        }
        match self.reviewer.review_token(token).await {
            Ok(Some(user)) => {
                self.tokens.put(key, user.clone(), TOKEN_TTL);
                Ok(user)
            }
            Ok(None) => {
                self.rejected_tokens.put_if_room(key, (), TOKEN_TTL);
                Err(Refusal::Unauthorized)
            }
            Err(e) => {
                warn!(error = %e, "reviewing a bearer token");
                Err(Refusal::Unauthorized)
            }
        }
    }

    async fn authorize(&self, user: &UserInfo, access: &Access) -> Result<(), Refusal> {
        let key = (user.clone(), access.clone());
        let allowed = match self.decisions.get(&key) {
            Some(allowed) => allowed,
            None => match self.reviewer.review_access(user, access).await {
                Ok(allowed) => {
                    let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
                    self.decisions.put(key, allowed, ttl);
                    allowed
                }
                Err(e) => {
                    warn!(error = %e, "reviewing access to a component's port");
                    return Err(Refusal::AuthorizationError(access.review_failed(user)));
                }
            },
        };
        if allowed {
            Ok(())
        } else {
            debug!(user = %user.username, ?access, "forbidden");
            Err(Refusal::Forbidden(access.forbidden(user)))
        }
    }

    /// Whether a request asking `access` may go on, and as whom.
    pub async fn admit(
        &self,
        access: &Access,
        headers: &http::HeaderMap,
        peer: &PeerCert,
    ) -> Result<UserInfo, Refusal> {
        let user = self.authenticate(headers, peer).await?;
        self.authorize(&user, access).await?;
        Ok(user)
    }
}

#[cfg(test)]
mod tests;
