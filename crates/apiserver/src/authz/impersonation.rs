//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): a request carrying
//! `Impersonate-*` headers runs as the user they name, once the requester is allowed
//! the `impersonate` verb on each of them (users, groups, serviceaccounts, uids,
//! `userextras/<key>`), as upstream's impersonation filter does.

use std::collections::BTreeMap;

use cairn_api::status::Status;
use cairn_auth::user::{ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED};
use cairn_auth::{Attributes, UserInfo};
use http::HeaderMap;

use super::{forbidden, Authorizer};

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";

fn values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// The user to act as, None without impersonation headers.
pub fn impersonated(
    requester: &UserInfo,
    headers: &HeaderMap,
    authorizer: &Authorizer,
) -> Result<Option<UserInfo>, Status> {
    let user = values(headers, USER).first().map(|u| u.to_string());
    let groups: Vec<String> = values(headers, GROUP)
        .iter()
        .map(|g| g.to_string())
        .collect();
    let uid = values(headers, UID).first().map(|u| u.to_string());
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_lowercase();
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
    }
    let Some(username) = user else {
        if !groups.is_empty() || uid.is_some() || !extra.is_empty() {
            return Err(Status::bad_request(
                "requested impersonation of groups, a uid or extra fields without impersonating a user",
            ));
        }
        return Ok(None);
    };
    check(
        authorizer,
        requester,
        &username,
        &groups,
        uid.as_deref(),
        &extra,
    )?;
    Ok(Some(acting_user(username, groups, uid, extra)))
}

fn allow(authorizer: &Authorizer, attrs: Attributes<'_>) -> Result<(), Status> {
    let decision = authorizer.decide(&attrs);
    if decision.is_allowed() {
        Ok(())
    } else {
        Err(forbidden(&attrs, &decision))
    }
}

fn check(
    authorizer: &Authorizer,
    requester: &UserInfo,
    username: &str,
    groups: &[String],
    uid: Option<&str>,
    extra: &BTreeMap<String, Vec<String>>,
) -> Result<(), Status> {
    let imp = |resource: &'static str| Attributes::resource(requester, "impersonate", "", resource);
    match service_account(username) {
        Some((ns, name)) => allow(authorizer, imp("serviceaccounts").namespace(ns).name(name))?,
        None => allow(authorizer, imp("users").name(username))?,
    }
    for g in groups {
        allow(authorizer, imp("groups").name(g))?;
    }
    if let Some(u) = uid {
        allow(authorizer, imp("uids").name(u))?;
    }
    for (key, vals) in extra {
        for v in vals {
            let attrs = Attributes::resource(
                requester,
                "impersonate",
                "authentication.k8s.io",
                "userextras",
            )
            .subresource(key)
            .name(v);
            allow(authorizer, attrs)?;
        }
    }
    Ok(())
}

fn service_account(username: &str) -> Option<(&str, &str)> {
    username
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')
}

/// The impersonated user with the groups upstream adds: a ServiceAccount's own groups
/// when none were asked for, and `system:authenticated` (`system:unauthenticated` for
/// `system:anonymous`).
fn acting_user(
    username: String,
    mut groups: Vec<String>,
    uid: Option<String>,
    extra: BTreeMap<String, Vec<String>>,
) -> UserInfo {
    if groups.is_empty() {
        if let Some((ns, _)) = service_account(&username) {
            groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
    }
    let implied = if username == ANONYMOUS {
        UNAUTHENTICATED
    } else {
        AUTHENTICATED
    };
    if !groups.iter().any(|g| g == implied) {
        groups.push(implied.to_string());
    }
    UserInfo {
        username,
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    }
}
