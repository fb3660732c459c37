//! The `LeaderElection` Events on the Lease (client-go's `LeaseLock.RecordEvent`):
//! "<identity> became leader", "<identity> stopped leading".

use cairn_events::{EventType, Note, Recorder};
use k8s_openapi::api::coordination::v1::Lease;

use crate::elector::Elector;
use crate::lock::LeaseLock;

pub struct LeaderEvents {
    recorder: Recorder,
    lease: Lease,
}

impl LeaderEvents {
    pub fn new(recorder: Recorder, lease: Lease) -> LeaderEvents {
        LeaderEvents { recorder, lease }
    }

    fn record<L: LeaseLock>(&self, elector: &Elector<L>, what: &str) {
        let message = format!("{} {what}", elector.identity());
        let note = Note {
            kind: EventType::Normal,
            reason: "LeaderElection",
            message: &message,
            // Required beside the eventTime the recorder sets.
            action: "LeaderElection",
        };
        self.recorder
            .record(cairn_events::reference(&self.lease), &note);
    }

    pub(crate) fn became_leader<L: LeaseLock>(&self, elector: &Elector<L>) {
        self.record(elector, "became leader");
    }

    pub(crate) fn stopped_leading<L: LeaseLock>(&self, elector: &Elector<L>) {
        self.record(elector, "stopped leading");
    }
}
