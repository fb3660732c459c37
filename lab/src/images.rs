//! The lab's images, built offline from Debian's busybox-static and pushed to the lab
//! registry, which every node uses as its docker.io mirror: `busybox`, and `httpd`
//! serving "It works!" on port 80 as Docker Hub's image does (so the seed's literal
//! `--image=httpd` works without internet).

use crate::args;
use crate::cmd::run;
use crate::driver::{NodeDriver, Place};
use crate::error::{LabError, Result};
use crate::plan::LabPlan;

/// The image builder, embedded so the lab binary needs no checkout beside it.
const BUILDER: &str = include_str!("../../scripts/busybox-image.py");

/// (repository, variant) of every image the lab provides.
pub const IMAGES: [(&str, &str); 2] = [
    ("library/busybox:latest", "busybox"),
    ("library/httpd:latest", "httpd"),
];

pub fn push_all(plan: &LabPlan, driver: &dyn NodeDriver) -> Result<()> {
    let script = plan.run_dir.join("busybox-image.py");
    std::fs::write(&script, BUILDER).map_err(|e| LabError::io(&script, e))?;
    for (reference, variant) in IMAGES {
        run(driver.command(
            plan,
            Place::Switch,
            args![
                "python3",
                script.display(),
                "push",
                format!("http://{}", plan.registry()),
                reference,
                "--variant",
                variant
            ],
        ))?;
    }
    Ok(())
}
