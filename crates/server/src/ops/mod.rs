//! Operations: the measurements behind INFO, LATENCY and MEMORY, the
//! periodic housekeeping (Redis's `serverCron`), the log in Redis's
//! format, and what writes to it when things go wrong: the crash report
//! and the software watchdog.

pub mod crash;
pub mod cron;
pub mod log;
pub mod metrics;
pub mod oom;
pub mod shutdown;
pub mod watchdog;
