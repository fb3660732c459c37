pub mod cron_job;
pub mod job;
