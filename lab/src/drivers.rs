//! The node driver a lab's plan asks for (`--driver`).

use crate::docker::DockerDriver;
use crate::driver::NodeDriver;
use crate::netns::NetnsDriver;
use crate::plan::{DriverKind, LabPlan};

pub fn for_plan(plan: &LabPlan) -> Box<dyn NodeDriver> {
    match plan.options.driver {
        DriverKind::Netns => Box::new(NetnsDriver),
        DriverKind::Docker => Box::new(DockerDriver),
    }
}
