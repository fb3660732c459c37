//! Upstream's `leader_election_master_status` gauge: 1 while this process leads `name`.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Lease {
    name: String,
}

pub struct LeaderMetrics {
    status: Family<Lease, Gauge>,
}

impl LeaderMetrics {
    pub fn get() -> &'static LeaderMetrics {
        static METRICS: OnceLock<LeaderMetrics> = OnceLock::new();
        METRICS.get_or_init(|| LeaderMetrics {
            status: Family::default(),
        })
    }

    pub fn install(registry: &mut Registry) {
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            Self::get().status.clone(),
        );
    }

    pub(crate) fn set(&self, name: &str, leading: bool) {
        self.status
            .get_or_create(&Lease {
                name: name.to_string(),
            })
            .set(i64::from(leading));
    }

    /// 1 while leading `name` (for tests).
    pub fn status(&self, name: &str) -> i64 {
        self.status
            .get_or_create(&Lease {
                name: name.to_string(),
            })
            .get()
    }
}
