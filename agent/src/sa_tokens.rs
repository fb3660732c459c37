//! ServiceAccount tokens for projected volumes, as the kubelet's token manager keeps them:
//! a TokenRequest bound to the pod (so the token dies with it), cached, and asked for
//! again once 80 % of its life has passed or it is a day old. The volumes phase asks on
//! every refresh (each minute) and when a token is due ([`IssuedToken::refresh_at`]), so
//! the file on disk is replaced before it expires.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::Api;
use parking_lot::Mutex;

const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// A token to ask for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenAsk {
    pub namespace: String,
    pub account: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub audience: Option<String>,
    pub expiration_seconds: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("requesting a token for serviceaccount {namespace}/{account}: {source}")]
    Request {
        namespace: String,
        account: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("the token for serviceaccount {namespace}/{account} came back empty")]
    Empty { namespace: String, account: String },
}

#[derive(Debug, Clone)]
struct Issued {
    token: String,
    issued_at: SystemTime,
    expires_at: SystemTime,
}

/// A token and when it is due for replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token: String,
    pub refresh_at: SystemTime,
}

/// Upstream's `requiresRefresh` as a time: 80 % into the token's life, or a day old.
fn refresh_at(issued: &Issued) -> SystemTime {
    let life = issued
        .expires_at
        .duration_since(issued.issued_at)
        .unwrap_or_default();
    issued.issued_at + life.mul_f64(0.8).min(MAX_AGE)
}

fn forget_pod(cache: &mut HashMap<TokenAsk, Issued>, pod_uid: &str) {
    cache.retain(|ask, _| ask.pod_uid != pod_uid);
}

fn needs_refresh(issued: &Issued, now: SystemTime) -> bool {
    now >= refresh_at(issued)
}

pub struct TokenManager {
    client: kube::Client,
    cache: Mutex<HashMap<TokenAsk, Issued>>,
}

impl TokenManager {
    pub fn new(client: kube::Client) -> TokenManager {
        TokenManager {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The cached token while it is fresh, else a new one.
    pub async fn token(&self, ask: &TokenAsk) -> Result<IssuedToken, TokenError> {
        let now = SystemTime::now();
        if let Some(issued) = self.cache.lock().get(ask) {
            if !needs_refresh(issued, now) {
                return Ok(IssuedToken {
                    token: issued.token.clone(),
                    refresh_at: refresh_at(issued),
                });
            }
        }
        let issued = self.request(ask).await?;
        let token = IssuedToken {
            token: issued.token.clone(),
            refresh_at: refresh_at(&issued),
        };
        let mut cache = self.cache.lock();
        cache.retain(|_, i| i.expires_at > now);
        cache.insert(ask.clone(), issued);
        Ok(token)
    }

    /// Drops the tokens of a pod that is gone (the kubelet's `DeleteServiceAccountToken`
    /// on pod cleanup): they are dead with it, and the cache would hold them until expiry.
    pub fn forget_pod(&self, pod_uid: &str) {
        forget_pod(&mut self.cache.lock(), pod_uid);
    }

    async fn request(&self, ask: &TokenAsk) -> Result<Issued, TokenError> {
        let body = TokenRequest {
            spec: TokenRequestSpec {
                audiences: ask.audience.iter().cloned().collect(),
                expiration_seconds: Some(ask.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(ask.pod_name.clone()),
                    uid: Some(ask.pod_uid.clone()),
                }),
            },
            ..Default::default()
        };
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &ask.namespace);
        let issued_at = SystemTime::now();
        let answer = accounts
            .create_token_request(&ask.account, &PostParams::default(), &body)
            .await
            .map_err(|e| TokenError::Request {
                namespace: ask.namespace.clone(),
                account: ask.account.clone(),
                source: Box::new(e),
            })?;
        let status = answer.status.filter(|s| !s.token.is_empty());
        let status = status.ok_or_else(|| TokenError::Empty {
            namespace: ask.namespace.clone(),
            account: ask.account.clone(),
        })?;
        let expires_at = SystemTime::from(status.expiration_timestamp.0);
        Ok(Issued {
            token: status.token,
            issued_at,
            expires_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_after_eighty_percent_or_a_day() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Issued {
            token: String::new(),
            issued_at: t0,
            expires_at: t0 + Duration::from_secs(3600),
        };
        assert!(!needs_refresh(&hour, t0));
        assert!(!needs_refresh(&hour, t0 + Duration::from_secs(2879)));
        assert!(needs_refresh(&hour, t0 + Duration::from_secs(2880)));
        let week = Issued {
            expires_at: t0 + Duration::from_secs(7 * 86400),
            ..hour
        };
        assert!(!needs_refresh(&week, t0 + Duration::from_secs(86399)));
        assert!(needs_refresh(&week, t0 + MAX_AGE));
    }

    #[test]
    fn a_gone_pods_tokens_leave_the_cache_and_others_stay() {
        let ask = |uid: &str, audience: Option<&str>| TokenAsk {
            namespace: "default".into(),
            account: "default".into(),
            pod_name: format!("pod-{uid}"),
            pod_uid: uid.into(),
            audience: audience.map(str::to_string),
            expiration_seconds: 3600,
        };
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let issued = Issued {
            token: "t".into(),
            issued_at: t0,
            expires_at: t0 + Duration::from_secs(3600),
        };
        let mut cache = HashMap::new();
        for a in [ask("a", None), ask("a", Some("vault")), ask("b", None)] {
            cache.insert(a, issued.clone());
        }
        forget_pod(&mut cache, "a");
        assert_eq!(cache.keys().collect::<Vec<_>>(), vec![&ask("b", None)]);
    }
}
