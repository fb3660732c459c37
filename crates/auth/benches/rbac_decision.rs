//! RBAC decision cost: the bootstrap policy plus 1,000 Roles, 1,000 RoleBindings,
//! 1,000 ClusterRoles and 1,000 ClusterRoleBindings over 100 namespaces and 1,000
//! users; 200,000 `authorize` calls, each timed alone. Goal: p99 ≤ 5 µs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Instant;

use cairn_auth::rbac::bootstrap;
use cairn_auth::{Attributes, RbacAuthorizer, UserInfo};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NAMESPACES: usize = 100;
const USERS: usize = 1_000;
const GROUPS: usize = 50;
const OBJECTS: usize = 1_000;
const CALLS: usize = 200_000;
const VERBS: [&str; 6] = ["get", "list", "watch", "create", "update", "delete"];
const RESOURCES: [(&str, &str); 8] = [
    ("", "pods"),
    ("", "configmaps"),
    ("", "secrets"),
    ("", "services"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
    ("example.com", "widgets"),
];

/// A small deterministic generator (no dependency for randomness).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

fn meta(ns: Option<String>, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: ns,
        ..ObjectMeta::default()
    }
}

fn rules(seed: usize) -> Vec<PolicyRule> {
    (0..5)
        .map(|k| {
            let (g, r) = RESOURCES[(seed + k) % (RESOURCES.len() - 1)];
            PolicyRule {
                verbs: VERBS[..1 + (seed + k) % 3]
                    .iter()
                    .map(|v| v.to_string())
                    .collect(),
                api_groups: Some(vec![g.into()]),
                resources: Some(vec![r.into()]),
                ..PolicyRule::default()
            }
        })
        .collect()
}

fn subject(kind: &str, name: String) -> Subject {
    Subject {
        kind: kind.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        name,
        namespace: None,
    }
}

fn role_ref(kind: &str, name: String) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name,
    }
}

fn user_name(i: usize) -> String {
    format!("user-{}", i % USERS)
}

fn group_name(i: usize) -> String {
    format!("group-{}", i % GROUPS)
}

fn build() -> RbacAuthorizer {
    let mut a = bootstrap::policy().aggregated().authorizer();
    for i in 0..OBJECTS {
        let ns = format!("ns-{}", i % NAMESPACES);
        a.upsert_role(Role {
            metadata: meta(Some(ns.clone()), format!("role-{i}")),
            rules: Some(rules(i)),
        });
        a.upsert_cluster_role(ClusterRole {
            metadata: meta(None, format!("cluster-role-{i}")),
            rules: Some(rules(i + 3)),
            aggregation_rule: None,
        });
        // Three users per RoleBinding (each user in three), every fifth one a
        // ClusterRole (`view`) instead of its Role.
        let (kind, role) = if i % 5 == 0 {
            ("ClusterRole", "view".to_string())
        } else {
            ("Role", format!("role-{i}"))
        };
        a.upsert_role_binding(RoleBinding {
            metadata: meta(Some(ns), format!("binding-{i}")),
            role_ref: role_ref(kind, role),
            subjects: Some(
                (0..3)
                    .map(|k| subject("User", user_name(i * 3 + k)))
                    .collect(),
            ),
        });
        // Two users per ClusterRoleBinding, every tenth also a group.
        let mut subjects = vec![
            subject("User", user_name(i)),
            subject("User", user_name(i + USERS / 2)),
        ];
        if i % 10 == 0 {
            subjects.push(subject("Group", group_name(i / 10)));
        }
        a.upsert_cluster_role_binding(ClusterRoleBinding {
            metadata: meta(None, format!("cluster-binding-{i}")),
            role_ref: role_ref("ClusterRole", format!("cluster-role-{i}")),
            subjects: Some(subjects),
        });
    }
    a
}

fn main() {
    let started = Instant::now();
    let a = build();
    let build_time = started.elapsed();

    let users: Vec<UserInfo> = (0..USERS)
        .map(|i| {
            UserInfo::new(user_name(i), vec![group_name(i), group_name(i + 7)]).authenticated()
        })
        .collect();
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("ns-{i}")).collect();
    let mut rng = Lcg(42);
    let mut times = Vec::with_capacity(CALLS);
    let mut allowed = 0usize;
    for _ in 0..CALLS {
        let u = &users[rng.next(USERS)];
        let ns = &namespaces[rng.next(NAMESPACES)];
        let (group, resource) = RESOURCES[rng.next(RESOURCES.len())];
        let attrs =
            Attributes::resource(u, VERBS[rng.next(VERBS.len())], group, resource).namespace(ns);
        let t = Instant::now();
        let d = black_box(a.authorize(black_box(&attrs)));
        times.push(t.elapsed().as_nanos() as u64);
        allowed += usize::from(d.is_allowed());
    }
    times.sort_unstable();
    let pct =
        |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)] as f64 / 1000.0;
    println!(
        "rbac_decision: {} Roles, {} RoleBindings, {} ClusterRoles, {} ClusterRoleBindings (+ bootstrap), {NAMESPACES} namespaces, {USERS} users",
        OBJECTS, OBJECTS, OBJECTS, OBJECTS
    );
    println!("  build: {:.1} ms", build_time.as_secs_f64() * 1000.0);
    println!(
        "  calls: {CALLS} ({:.1}% allowed)",
        allowed as f64 * 100.0 / CALLS as f64
    );
    println!("  p50: {:.2} µs", pct(0.50));
    println!("  p99: {:.2} µs (goal ≤ 5 µs)", pct(0.99));
    println!(
        "  max: {:.2} µs",
        *times.last().unwrap_or(&0) as f64 / 1000.0
    );
}
