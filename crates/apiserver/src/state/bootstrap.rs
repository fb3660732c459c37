//! What a fresh cluster has: namespaces, the system PriorityClasses, the default
//! `local-path` StorageClass (as k3s ships one), the `kubernetes` Service, its Endpoints
//! and its EndpointSlice (which service proxies read).

use cairn_api::registry;
use cairn_api::status::Status;
use serde_json::{json, Value};

use super::{ApiState, WriteOptions};

impl ApiState {
    /// Creates what a fresh cluster has: the initial namespaces and the `kubernetes` Service.
    pub async fn bootstrap(&self) -> Result<(), Status> {
        let nsr = registry::find("", "v1", "namespaces")
            .ok_or_else(|| Status::internal("namespaces not registered"))?;
        let opts = WriteOptions {
            field_manager: Some("cairn-control".into()),
            ..Default::default()
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            if self.cache.get(&nsr.key(None, ns)).is_none() {
                let body = json!({"metadata": {"name": ns}});
                exists_is_fine(self.create(nsr, None, body, &opts).await)?;
            }
        }
        let pcr = registry::find("scheduling.k8s.io", "v1", "priorityclasses")
            .ok_or_else(|| Status::internal("priorityclasses not registered"))?;
        for (name, value, description) in cairn_api::scheduling_validation::SYSTEM_PRIORITY_CLASSES
        {
            if self.cache.get(&pcr.key(None, name)).is_none() {
                let body =
                    json!({"metadata": {"name": name}, "value": value, "description": description});
                exists_is_fine(self.create(pcr, None, body, &opts).await)?;
            }
        }
        if self.settings.local_path_storage_class {
            let scr = registry::find("storage.k8s.io", "v1", "storageclasses")
                .ok_or_else(|| Status::internal("storageclasses not registered"))?;
            if self.cache.get(&scr.key(None, "local-path")).is_none() {
                let body = json!({
                    "metadata": {"name": "local-path", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                    "provisioner": "cairn.io/local-path",
                    "reclaimPolicy": "Delete",
                    "volumeBindingMode": "WaitForFirstConsumer",
                    "allowVolumeExpansion": true,
                });
                exists_is_fine(self.create(scr, None, body, &opts).await)?;
            }
        }
        if self.settings.default_ingress_class {
            self.ensure_default_ingress_class(&opts).await?;
        }
        let svc = registry::find("", "v1", "services")
            .ok_or_else(|| Status::internal("services not registered"))?;
        if self
            .cache
            .get(&svc.key(Some("default"), "kubernetes"))
            .is_none()
        {
            let ip = self.first_service_ip().to_string();
            let body = json!({
                "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {
                    "clusterIP": ip,
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": self.settings.advertise_port}],
                    "sessionAffinity": "None",
                    "type": "ClusterIP",
                },
            });
            exists_is_fine(self.create(svc, Some("default"), body, &opts).await)?;
        }
        self.reconcile_kubernetes_endpoints().await?;
        if self.settings.cluster_dns_service {
            self.ensure_cluster_dns_service(&opts).await;
        }
        self.ensure_rbac_defaults(&opts).await?;
        self.ensure_api_defaults(&opts).await
    }

    /// The `cairn` IngressClass, the cluster's default (as k3s ships `traefik`): every
    /// node's cairn-proxy serves it.
    async fn ensure_default_ingress_class(&self, opts: &WriteOptions) -> Result<(), Status> {
        let icr = registry::find("networking.k8s.io", "v1", "ingressclasses")
            .ok_or_else(|| Status::internal("ingressclasses not registered"))?;
        if self.cache.get(&icr.key(None, "cairn")).is_some() {
            return Ok(());
        }
        let body = json!({
            "metadata": {"name": "cairn", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
            "spec": {"controller": "cairn.io/ingress"},
        });
        exists_is_fine(self.create(icr, None, body, opts).await)
    }

    /// The `kube-system/kube-dns` Service at the 10th address of the service range, as
    /// kubeadm places it. It has no selector: every node's agent serves cluster DNS on its
    /// own address and publishes itself in the Service's EndpointSlices, and
    /// `internalTrafficPolicy: Local` keeps each node's queries on that node. A taken
    /// address is logged, not fatal: the cluster still starts.
    async fn ensure_cluster_dns_service(&self, opts: &WriteOptions) {
        let Some(svc) = registry::find("", "v1", "services") else {
            return;
        };
        if self
            .cache
            .get(&svc.key(Some("kube-system"), "kube-dns"))
            .is_some()
        {
            return;
        }
        let first = u32::from(self.first_service_ip());
        let ip = std::net::Ipv4Addr::from(first.saturating_add(9)).to_string();
        let body = json!({
            "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "cairn-dns"}},
            "spec": {
                "clusterIP": ip,
                "internalTrafficPolicy": "Local",
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                ],
                "type": "ClusterIP",
            },
        });
        if let Err(e) = self.create(svc, Some("kube-system"), body, opts).await {
            tracing::warn!(cluster_ip = %ip, error = %e.message, "creating the kube-dns Service");
        }
    }

    /// Creates `default/kubernetes` of `resource` as `desired`, or brings the `fields` of
    /// the stored one to it.
    pub(super) async fn create_or_converge(
        &self,
        resource: &'static registry::ResourceInfo,
        desired: Value,
        fields: &[&str],
        opts: &WriteOptions,
    ) -> Result<(), Status> {
        let Some(o) = self.cache.get(&resource.key(Some("default"), "kubernetes")) else {
            return exists_is_fine(self.create(resource, Some("default"), desired, opts).await);
        };
        let cur: Value = serde_json::from_slice(&o.bytes).unwrap_or(Value::Null);
        if fields.iter().all(|f| cur.get(f) == desired.get(f)) {
            return Ok(());
        }
        self.guaranteed_update(resource, Some("default"), "kubernetes", None, opts, |c| {
            let mut n = c.clone();
            for f in fields {
                n[*f] = desired[*f].clone();
            }
            Ok(n)
        })
        .await?;
        Ok(())
    }
}

/// Another replica starting at the same time may have created it first.
fn exists_is_fine<T>(created: Result<T, Status>) -> Result<(), Status> {
    match created {
        Err(status) if status.code != 409 => Err(status),
        _ => Ok(()),
    }
}
