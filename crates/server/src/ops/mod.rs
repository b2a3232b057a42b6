//! Operations: the measurements behind INFO, LATENCY and MEMORY, and the
//! periodic housekeeping (Redis's `serverCron`).

pub mod cron;
pub mod metrics;
