//! Upstream's namespaced bootstrap Roles and RoleBindings (`namespace_policy.go`):
//! leader locking and the authentication ConfigMap reader in `kube-system`, the
//! bootstrap-token controllers in `kube-system` and `kube-public`.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, Subject};

use super::{events_rule, meta, named, role_ref, rule, service_account, user, READ};

const KUBE_SYSTEM: &str = "kube-system";
const KUBE_PUBLIC: &str = "kube-public";
const LEASE_VERBS: &[&str] = &["get", "list", "watch", "create", "update"];

fn role(namespace: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(name, Some(namespace), &[]),
        rules: Some(rules),
    }
}

pub(super) fn binding(
    namespace: &str,
    name: &str,
    role: &str,
    subjects: Vec<Subject>,
) -> RoleBinding {
    RoleBinding {
        metadata: meta(name, Some(namespace), &[]),
        role_ref: role_ref("Role", role),
        subjects: Some(subjects),
    }
}

fn leader_locking() -> Vec<PolicyRule> {
    vec![
        rule(LEASE_VERBS, &["coordination.k8s.io"], &["leases"]),
        rule(LEASE_VERBS, &["coordination.k8s.io"], &["leasecandidates"]),
    ]
}

pub fn roles() -> Vec<Role> {
    vec![
        role(
            KUBE_PUBLIC,
            "system:controller:bootstrap-signer",
            vec![
                rule(READ, &[""], &["configmaps"]),
                named(&["update"], &[""], &["configmaps"], &["cluster-info"]),
                events_rule(),
            ],
        ),
        role(
            KUBE_SYSTEM,
            "extension-apiserver-authentication-reader",
            vec![named(
                READ,
                &[""],
                &["configmaps"],
                &["extension-apiserver-authentication"],
            )],
        ),
        role(
            KUBE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            leader_locking(),
        ),
        role(
            KUBE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            leader_locking(),
        ),
        role(
            KUBE_SYSTEM,
            "system:controller:bootstrap-signer",
            vec![rule(READ, &[""], &["secrets"])],
        ),
        role(
            KUBE_SYSTEM,
            "system:controller:cloud-provider",
            vec![rule(
                &["create", "get", "list", "watch"],
                &[""],
                &["configmaps"],
            )],
        ),
        role(
            KUBE_SYSTEM,
            "system:controller:token-cleaner",
            vec![
                rule(&["delete", "get", "list", "watch"], &[""], &["secrets"]),
                events_rule(),
            ],
        ),
    ]
}

pub fn role_bindings() -> Vec<RoleBinding> {
    let cm = "system:kube-controller-manager";
    let sched = "system:kube-scheduler";
    vec![
        binding(
            KUBE_PUBLIC,
            "system:controller:bootstrap-signer",
            "system:controller:bootstrap-signer",
            vec![service_account(KUBE_SYSTEM, "bootstrap-signer")],
        ),
        binding(
            KUBE_SYSTEM,
            "system::extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            vec![user(cm), user(sched)],
        ),
        binding(
            KUBE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-controller-manager",
            vec![
                user(cm),
                service_account(KUBE_SYSTEM, "kube-controller-manager"),
                service_account(KUBE_SYSTEM, "leader-election-controller"),
            ],
        ),
        binding(
            KUBE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            "system::leader-locking-kube-scheduler",
            vec![user(sched), service_account(KUBE_SYSTEM, "kube-scheduler")],
        ),
        binding(
            KUBE_SYSTEM,
            "system:controller:bootstrap-signer",
            "system:controller:bootstrap-signer",
            vec![service_account(KUBE_SYSTEM, "bootstrap-signer")],
        ),
        binding(
            KUBE_SYSTEM,
            "system:controller:cloud-provider",
            "system:controller:cloud-provider",
            vec![service_account(KUBE_SYSTEM, "cloud-provider")],
        ),
        binding(
            KUBE_SYSTEM,
            "system:controller:token-cleaner",
            "system:controller:token-cleaner",
            vec![service_account(KUBE_SYSTEM, "token-cleaner")],
        ),
    ]
}
