//! The cluster commands (Redis's `cluster.c`): CLUSTER and its
//! subcommands, ASKING, READONLY and READWRITE.
//!
//! Vireo runs as Redis does with `cluster-enabled no`: every one of these
//! commands exists in the table with Redis's arity, flags and ACL
//! categories (so COMMAND INFO/DOCS, ACL rules, arity errors and the
//! no-script refusal of CLUSTER RESET behave as Redis's), and every call
//! that gets past those checks answers that cluster support is disabled —
//! CLUSTER HELP, KEYSLOT and COUNTKEYSINSLOT included, as Redis 7.0 does.

use vireo_resp::Args;

use super::{container, flags::*, spec, CommandSpec, Ctx, KeySpec};

/// Flags of the subcommands that change the cluster's layout.
const LAYOUT: u32 = NO_ASYNC_LOADING | ADMIN | STALE;
/// Flags of the administrative subcommands that only read.
const ADMIN_READ: u32 = ADMIN | STALE;

/// A CLUSTER subcommand's table entry.
const fn sub(name: &'static str, arity: i32, flags: u32) -> CommandSpec {
    spec(name, arity, flags, KeySpec::None, disabled)
}

/// CLUSTER's subcommands, as Redis 7.0's command table has them.
const SUBS: &[CommandSpec] = &[
    sub("cluster|addslots", -3, LAYOUT),
    sub("cluster|addslotsrange", -4, LAYOUT),
    sub("cluster|bumpepoch", 2, LAYOUT),
    sub("cluster|count-failure-reports", 3, ADMIN_READ),
    sub("cluster|countkeysinslot", 3, STALE),
    sub("cluster|delslots", -3, LAYOUT),
    sub("cluster|delslotsrange", -4, LAYOUT),
    sub("cluster|failover", -2, LAYOUT),
    sub("cluster|flushslots", 2, LAYOUT),
    sub("cluster|forget", 3, LAYOUT),
    sub("cluster|getkeysinslot", 4, STALE),
    sub("cluster|help", 2, LOADING | STALE),
    sub("cluster|info", 2, STALE),
    sub("cluster|keyslot", 3, STALE),
    sub("cluster|links", 2, STALE),
    sub("cluster|meet", -4, LAYOUT),
    sub("cluster|myid", 2, STALE),
    sub("cluster|nodes", 2, STALE),
    sub("cluster|replicas", 3, ADMIN_READ),
    sub("cluster|replicate", 3, LAYOUT),
    sub("cluster|reset", -2, ADMIN_READ | NOSCRIPT),
    sub("cluster|saveconfig", 2, LAYOUT),
    sub("cluster|set-config-epoch", 3, LAYOUT),
    sub("cluster|setslot", -4, LAYOUT),
    sub("cluster|shards", 2, STALE),
    sub("cluster|slaves", 3, ADMIN_READ),
    sub("cluster|slots", 2, STALE),
];

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    container("cluster", -2, 0, SUBS),
    spec("asking", 1, FAST, KeySpec::None, disabled),
    spec(
        "readonly",
        1,
        FAST | LOADING | STALE,
        KeySpec::None,
        disabled,
    ),
    spec(
        "readwrite",
        1,
        FAST | LOADING | STALE,
        KeySpec::None,
        disabled,
    ),
];

/// What Redis answers to every cluster command when cluster support is
/// off (its `cluster-enabled no`, the only mode Vireo has).
pub const DISABLED: &str = "ERR This instance has cluster support disabled";

/// Every cluster command's handler: cluster support is disabled.
fn disabled(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    ctx.out.error(DISABLED);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_is_named_under_cluster_and_unique() {
        let mut names: Vec<&str> = SUBS.iter().map(|s| s.name).collect();
        assert!(names.iter().all(|n| n.starts_with("cluster|")));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        // Redis 7.0 has 27 CLUSTER subcommands.
        assert_eq!(n, 27);
    }

    #[test]
    fn only_reset_is_refused_in_scripts() {
        let noscript: Vec<&str> = SUBS
            .iter()
            .filter(|s| s.has(NOSCRIPT))
            .map(|s| s.name)
            .collect();
        assert_eq!(noscript, ["cluster|reset"]);
    }
}
