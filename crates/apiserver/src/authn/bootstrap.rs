//! Bootstrap tokens (`<id>.<secret>`, 6 and 16 of `[a-z0-9]`): a token is good while the
//! Secret `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` holds
//! the same secret, allows authentication (`usage-bootstrap-authentication: "true"`) and
//! has not expired. The user is `system:bootstrap:<id>` in `system:bootstrappers` and the
//! Secret's `auth-extra-groups` (upstream's bootstrap token authenticator).

use cairn_auth::UserInfo;

use super::serviceaccount::ObjectLookup;
use super::Unauthorized;

pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
pub const GROUP: &str = "system:bootstrappers";

/// The `<id>` and `<secret>` of a token of the bootstrap shape.
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// Compares without stopping at the first difference (no timing hint to a guesser).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token's user; None when the token is not of the bootstrap shape or names no
/// usable Secret (other authenticators may know it).
pub fn authenticate(
    token: &str,
    objects: &dyn ObjectLookup,
    now: i64,
) -> Result<Option<UserInfo>, Unauthorized> {
    let Some((id, secret)) = parse_token(token) else {
        return Ok(None);
    };
    let name = format!("bootstrap-token-{id}");
    let Some(s) = objects.secret("kube-system", &name) else {
        return Ok(None);
    };
    let field = |k: &str| {
        s.data
            .get(k)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    if s.type_ != SECRET_TYPE || s.deleting || field("token-id").as_deref() != Some(id) {
        return Ok(None);
    }
    if field("usage-bootstrap-authentication").as_deref() != Some("true") {
        return Ok(None);
    }
    let expired = field("expiration")
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(&e).ok())
        .is_some_and(|e| e.timestamp() < now);
    if expired {
        return Err(Unauthorized(format!("bootstrap token {id} has expired")));
    }
    let stored = field("token-secret").unwrap_or_default();
    if !same(stored.as_bytes(), secret.as_bytes()) {
        return Err(Unauthorized(format!("bootstrap token {id}: wrong secret")));
    }
    let mut groups = vec![GROUP.to_string()];
    for g in field("auth-extra-groups").unwrap_or_default().split(',') {
        let g = g.trim();
        // Upstream accepts only extra groups under system:bootstrappers:.
        if g.starts_with("system:bootstrappers:") && !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    }
    Ok(Some(UserInfo::new(
        format!("system:bootstrap:{id}"),
        groups,
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::authn::serviceaccount::{LiveObject, SecretView};
    use std::collections::BTreeMap;

    struct One(Option<SecretView>);

    impl ObjectLookup for One {
        fn live(&self, _: &str, _: Option<&str>, _: &str) -> Option<LiveObject> {
            None
        }
        fn secret(&self, ns: &str, name: &str) -> Option<SecretView> {
            assert_eq!((ns, name), ("kube-system", "bootstrap-token-abcdef"));
            self.0.clone()
        }
    }

    fn secret(expiration: &str) -> SecretView {
        let data: BTreeMap<String, Vec<u8>> = [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-authentication", "true"),
            (
                "auth-extra-groups",
                "system:bootstrappers:cairn:nodes,system:masters",
            ),
            ("expiration", expiration),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
        SecretView {
            type_: SECRET_TYPE.into(),
            data,
            deleting: false,
        }
    }

    #[test]
    fn good_token_names_a_bootstrapper_and_only_bootstrapper_groups() {
        let objects = One(Some(secret("2100-01-01T00:00:00Z")));
        let u = authenticate("abcdef.0123456789abcdef", &objects, 0)
            .unwrap()
            .unwrap();
        assert_eq!(u.username, "system:bootstrap:abcdef");
        assert_eq!(
            u.groups,
            vec!["system:bootstrappers", "system:bootstrappers:cairn:nodes"]
        );
    }

    #[test]
    fn wrong_secret_and_expiry_fail_and_other_shapes_pass_on() {
        let objects = One(Some(secret("2000-01-01T00:00:00Z")));
        assert!(authenticate("abcdef.0123456789abcdef", &objects, 2_000_000_000).is_err());
        let objects = One(Some(secret("2100-01-01T00:00:00Z")));
        assert!(authenticate("abcdef.0000000000000000", &objects, 0).is_err());
        assert!(authenticate("ABCDEF.0123456789abcdef", &objects, 0)
            .unwrap()
            .is_none());
        assert!(authenticate("abcdef", &objects, 0).unwrap().is_none());
        assert!(authenticate("abcdef.0123456789abcdef", &One(None), 0)
            .unwrap()
            .is_none());
    }
}
