//! Whom a binding's subject names (upstream's `appliesToUser`): a `User` by name, a
//! `Group` by membership, a `ServiceAccount` as `system:serviceaccount:<ns>:<name>`,
//! its namespace defaulting to the RoleBinding's (never for a ClusterRoleBinding).

use k8s_openapi::api::rbac::v1::Subject;

use crate::gofmt::quote;
use crate::user::UserInfo;

pub const USER_KIND: &str = "User";
pub const GROUP_KIND: &str = "Group";
pub const SERVICE_ACCOUNT_KIND: &str = "ServiceAccount";
/// Prefix of a service account's user name.
pub const SERVICE_ACCOUNT_USER_PREFIX: &str = "system:serviceaccount:";

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USER_PREFIX}{namespace}:{name}")
}

/// The namespace a ServiceAccount subject means inside a binding of
/// `binding_namespace` ("" for a ClusterRoleBinding): its own, else the binding's;
/// `None` when neither is set, which matches nobody.
pub fn service_account_namespace<'a>(
    subject: &'a Subject,
    binding_namespace: &'a str,
) -> Option<&'a str> {
    let ns = subject
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(binding_namespace);
    (!ns.is_empty()).then_some(ns)
}

/// Whether `subject` of a binding in `binding_namespace` names `user`.
pub fn applies_to(user: &UserInfo, subject: &Subject, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        USER_KIND => user.username == subject.name,
        GROUP_KIND => user.in_group(&subject.name),
        SERVICE_ACCOUNT_KIND => match service_account_namespace(subject, binding_namespace) {
            Some(ns) => sa_matches(&user.username, ns, &subject.name),
            None => false,
        },
        _ => false,
    }
}

/// Compares without building the user name, as upstream's `MatchesUsername`.
fn sa_matches(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix(SERVICE_ACCOUNT_USER_PREFIX)
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

/// The first of `subjects` naming `user`, as upstream's `appliesTo`.
pub fn first_applying<'s>(
    user: &UserInfo,
    subjects: &'s [Subject],
    binding_namespace: &str,
) -> Option<&'s Subject> {
    subjects
        .iter()
        .find(|s| applies_to(user, s, binding_namespace))
}

/// `User "alice"`, `Group "g"`, `ServiceAccount "name/ns"` as upstream's reasons print it.
pub(crate) fn describe(subject: &Subject, binding_namespace: &str) -> String {
    if subject.kind == SERVICE_ACCOUNT_KIND {
        let ns = subject
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_namespace);
        return format!(
            "{} {}",
            subject.kind,
            quote(&format!("{}/{ns}", subject.name))
        );
    }
    format!("{} {}", subject.kind, quote(&subject.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(kind: &str, name: &str, ns: Option<&str>) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(Into::into),
            api_group: None,
        }
    }

    #[test]
    fn users_and_groups() {
        let u = UserInfo::new("alice", vec!["devs".into()]);
        assert!(applies_to(&u, &subject(USER_KIND, "alice", None), ""));
        assert!(!applies_to(&u, &subject(USER_KIND, "bob", None), ""));
        assert!(applies_to(&u, &subject(GROUP_KIND, "devs", None), ""));
        assert!(!applies_to(&u, &subject(GROUP_KIND, "alice", None), ""));
        assert!(!applies_to(&u, &subject("Robot", "alice", None), ""));
    }

    #[test]
    fn service_accounts_and_namespace_defaulting() {
        let sa = UserInfo::new(service_account_username("ns1", "builder"), vec![]);
        assert_eq!(sa.username, "system:serviceaccount:ns1:builder");
        assert!(applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", Some("ns1")),
            ""
        ));
        assert!(!applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", Some("ns2")),
            "ns1"
        ));
        // No namespace: the RoleBinding's own; in a ClusterRoleBinding nobody.
        assert!(applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", None),
            "ns1"
        ));
        assert!(applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", Some("")),
            "ns1"
        ));
        assert!(!applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", None),
            "ns2"
        ));
        assert!(!applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", None),
            ""
        ));
        // Prefix look-alikes do not match.
        assert!(!applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "build", Some("ns1")),
            ""
        ));
        assert!(!applies_to(
            &sa,
            &subject(SERVICE_ACCOUNT_KIND, "builder", Some("ns")),
            ""
        ));
        // A user named like the account is that account, as upstream.
        let plain = UserInfo::new("builder", vec![]);
        assert!(!applies_to(
            &plain,
            &subject(SERVICE_ACCOUNT_KIND, "builder", Some("ns1")),
            ""
        ));
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe(&subject(USER_KIND, "a", None), ""), r#"User "a""#);
        assert_eq!(
            describe(&subject(SERVICE_ACCOUNT_KIND, "sa", None), "ns1"),
            r#"ServiceAccount "sa/ns1""#
        );
    }
}
