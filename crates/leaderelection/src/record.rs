//! What a Lease says about its holder, as client-go's `LeaderElectionRecord`.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// The holder, its term and the transitions so far. An empty holder: released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    pub holder: String,
    pub lease_duration_seconds: i32,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl LeaseRecord {
    /// The record a Lease's spec holds (a Lease without spec: released, never held).
    pub fn of_lease(lease: &Lease) -> LeaseRecord {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseRecord {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    /// The Lease spec holding this record.
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_record_round_trips_through_a_lease_spec() {
        let now = Timestamp::now();
        let record = LeaseRecord {
            holder: "a_1".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 3,
        };
        let lease = Lease {
            spec: Some(record.to_spec()),
            ..Default::default()
        };
        assert_eq!(LeaseRecord::of_lease(&lease), record);
        assert_eq!(LeaseRecord::of_lease(&Lease::default()).holder, "");
    }
}
