//! Which Ingresses are cairn's: IngressClasses naming cairn's controller, and whether
//! one of them is the cluster's default (then Ingresses naming no class are cairn's too).

use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressClass;

/// `spec.controller` of the classes cairn serves.
pub const CONTROLLER: &str = "cairn.io/ingress";
/// The annotation that makes an IngressClass the cluster's default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// Whether a class of cairn's controller carries the default-class annotation.
pub fn cairn_is_default(classes: &[Arc<IngressClass>]) -> bool {
    classes.iter().any(|c| {
        let ours = c.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(CONTROLLER);
        let annotations = c.metadata.annotations.as_ref();
        ours && annotations
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true")
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cairn_is_the_default_only_when_its_class_says_so() {
        let class = |controller: &str, default: &str| {
            Arc::new(
                serde_json::from_value::<IngressClass>(serde_json::json!({
                    "metadata": {"name": "c", "annotations": {DEFAULT_CLASS_ANNOTATION: default}},
                    "spec": {"controller": controller}
                }))
                .unwrap(),
            )
        };
        assert!(cairn_is_default(&[class(CONTROLLER, "true")]));
        assert!(!cairn_is_default(&[class(CONTROLLER, "false")]));
        assert!(!cairn_is_default(&[class("k8s.io/ingress-nginx", "true")]));
    }
}
