//! The Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! PUBLISH, their shard forms (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH) and
//! PUBSUB's introspection. The registry and the fan-out to subscribers on
//! other workers are in [`crate::exec::pubsub`]; this file parses and
//! replies.

use vireo_resp::Args;

use super::shared::{reply_help, subcommand_syntax_error};
use super::{container, flags::*, key_range, spec, CommandSpec, Ctx, KeySpec};
use crate::exec::pubsub::{self, Kind, Local};

const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE;
const INTRO: u32 = PUBSUB | LOADING | STALE;

/// Shard channels are "keys" only for routing in a cluster (NOT_KEY key
/// specs): COMMAND reports them, but nothing is locked for them.
const fn channel_args(last: i32) -> KeySpec {
    KeySpec::Custom {
        first: 1,
        last,
        step: 1,
        find: no_keys,
    }
}

fn no_keys(_: Args<'_>) -> Vec<usize> {
    Vec::new()
}

fn first_arg(args: Args<'_>) -> Vec<usize> {
    key_range(args.len(), 1, 1, 1).collect()
}

fn every_arg(args: Args<'_>) -> Vec<usize> {
    key_range(args.len(), 1, -1, 1).collect()
}

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("subscribe", -2, SUB | SENTINEL, KeySpec::None, subscribe),
    spec(
        "unsubscribe",
        -1,
        SUB | SENTINEL,
        KeySpec::None,
        unsubscribe,
    ),
    spec("psubscribe", -2, SUB | SENTINEL, KeySpec::None, psubscribe),
    spec(
        "punsubscribe",
        -1,
        SUB | SENTINEL,
        KeySpec::None,
        punsubscribe,
    ),
    spec(
        "publish",
        3,
        INTRO | FAST | MAY_REPLICATE | SENTINEL,
        KeySpec::None,
        publish,
    ),
    spec("ssubscribe", -2, SUB, channel_args(-1), ssubscribe).with_getkeys(every_arg),
    spec("sunsubscribe", -1, SUB, channel_args(-1), sunsubscribe).with_getkeys(every_arg),
    spec(
        "spublish",
        3,
        INTRO | FAST | MAY_REPLICATE,
        channel_args(1),
        spublish,
    )
    .with_getkeys(first_arg),
    container(
        "pubsub",
        -2,
        0,
        &[
            spec("pubsub|channels", -2, INTRO, KeySpec::None, channels),
            spec("pubsub|numsub", -2, INTRO, KeySpec::None, numsub),
            spec("pubsub|numpat", 2, INTRO, KeySpec::None, numpat),
            spec(
                "pubsub|shardchannels",
                -2,
                INTRO,
                KeySpec::None,
                shardchannels,
            ),
            spec("pubsub|shardnumsub", -2, INTRO, KeySpec::None, shardnumsub),
            spec("pubsub|help", 2, LOADING | STALE, KeySpec::None, help),
        ],
    ),
];

/// The connection running the command, for the registry's replies.
fn local<'c>(ctx: &'c mut Ctx<'_>) -> Local<'c> {
    Local {
        session: ctx.session,
        out: ctx.out,
    }
}

/// SUBSCRIBE channel [channel ...]: one confirmation per channel.
fn subscribe(ctx: &mut Ctx<'_>, args: Args<'_>) {
    subscribe_each(ctx, args, Kind::Global);
}

/// SSUBSCRIBE shardchannel [shardchannel ...].
fn ssubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) {
    subscribe_each(ctx, args, Kind::Shard);
}

fn subscribe_each(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) {
    let server = ctx.server;
    let mut l = local(ctx);
    for channel in args.iter().skip(1) {
        pubsub::subscribe(server, &mut l, kind, channel);
    }
}

/// UNSUBSCRIBE [channel ...]: from the channels named, or from all.
fn unsubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) {
    unsubscribe_each(ctx, args, Kind::Global);
}

/// SUNSUBSCRIBE [shardchannel ...].
fn sunsubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) {
    unsubscribe_each(ctx, args, Kind::Shard);
}

fn unsubscribe_each(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) {
    let server = ctx.server;
    let mut l = local(ctx);
    if args.len() == 1 {
        return pubsub::unsubscribe_all(server, &mut l, kind);
    }
    for channel in args.iter().skip(1) {
        pubsub::unsubscribe(server, &mut l, kind, channel);
    }
}

/// PSUBSCRIBE pattern [pattern ...].
fn psubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let server = ctx.server;
    let mut l = local(ctx);
    for pattern in args.iter().skip(1) {
        pubsub::psubscribe(server, &mut l, pattern);
    }
}

/// PUNSUBSCRIBE [pattern ...].
fn punsubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let server = ctx.server;
    let mut l = local(ctx);
    if args.len() == 1 {
        return pubsub::punsubscribe_all(server, &mut l);
    }
    for pattern in args.iter().skip(1) {
        pubsub::punsubscribe(server, &mut l, pattern);
    }
}

/// PUBLISH channel message: the number of clients that received it.
fn publish(ctx: &mut Ctx<'_>, args: Args<'_>) {
    publish_kind(ctx, args, Kind::Global);
}

/// SPUBLISH shardchannel message.
fn spublish(ctx: &mut Ctx<'_>, args: Args<'_>) {
    publish_kind(ctx, args, Kind::Shard);
}

fn publish_kind(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) {
    let server = ctx.server;
    let mut l = local(ctx);
    let n = pubsub::publish(server, Some(&mut l), kind, args.get(1), args.get(2));
    ctx.out.int(n as i64);
    // Replicas' subscribers get the message too (not the AOF).
    ctx.propagate_to_replicas(&[args.get(0), args.get(1), args.get(2)]);
}

/// PUBSUB CHANNELS [pattern].
fn channels(ctx: &mut Ctx<'_>, args: Args<'_>) {
    list_channels(ctx, args, Kind::Global);
}

/// PUBSUB SHARDCHANNELS [pattern].
fn shardchannels(ctx: &mut Ctx<'_>, args: Args<'_>) {
    list_channels(ctx, args, Kind::Shard);
}

fn list_channels(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) {
    if args.len() > 3 {
        return subcommand_syntax_error(ctx, args);
    }
    let names = ctx.server.pubsub.channel_names(kind, args.try_get(2));
    ctx.out.array(names.len());
    for n in &names {
        ctx.out.bulk(n);
    }
}

/// PUBSUB NUMSUB [channel ...]: (channel, subscribers) pairs, patterns
/// not counted.
fn numsub(ctx: &mut Ctx<'_>, args: Args<'_>) {
    count_subscribers(ctx, args, Kind::Global);
}

/// PUBSUB SHARDNUMSUB [shardchannel ...].
fn shardnumsub(ctx: &mut Ctx<'_>, args: Args<'_>) {
    count_subscribers(ctx, args, Kind::Shard);
}

fn count_subscribers(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) {
    // A flat array in both protocols, as Redis replies.
    ctx.out.array((args.len() - 2) * 2);
    for channel in args.iter().skip(2) {
        ctx.out.bulk(channel);
        let n = ctx.server.pubsub.subscribers(kind, channel);
        ctx.out.int(n as i64);
    }
}

/// PUBSUB NUMPAT: distinct patterns subscribed to.
fn numpat(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    let n = ctx.server.pubsub.pattern_count();
    ctx.out.int(n as i64);
}

/// PUBSUB HELP.
fn help(ctx: &mut Ctx<'_>, _args: Args<'_>) {
    reply_help(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
}
