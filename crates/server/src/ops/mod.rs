//! Operations: the measurements behind INFO, LATENCY and MEMORY, the
//! periodic housekeeping (Redis's `serverCron`), and the log in Redis's
//! format.

pub mod cron;
pub mod log;
pub mod metrics;
