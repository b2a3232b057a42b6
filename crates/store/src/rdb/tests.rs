//! Round trips through the encoder and the loader, hand-built files in the
//! legacy encodings, and damaged input.

use super::*;
use crate::hash::{Hash, HashLimits};
use crate::keyspace::Entry;
use crate::list::{End, List};
use crate::set::Set;
use crate::value::{StrValue, Value};
use crate::zset::{self, ZSet};

fn s(b: &[u8]) -> Value {
    Value::Str(StrValue::from_bytes(b))
}

fn list(items: impl IntoIterator<Item = Vec<u8>>) -> Value {
    let mut l = List::new(-2);
    for it in items {
        l.push(End::Right, &it);
    }
    Value::List(l)
}

fn hash(n: usize, vlen: usize) -> Value {
    let mut h = Hash::new();
    for i in 0..n {
        h.set(
            format!("f{i}").as_bytes(),
            &vec![b'v'; vlen],
            HashLimits::default(),
        );
    }
    Value::Hash(h)
}

fn set(members: impl IntoIterator<Item = Vec<u8>>) -> Value {
    let mut st = Set::new();
    for m in members {
        st.insert(&m, 512);
    }
    Value::Set(st)
}

fn zset(n: usize, mlen: usize) -> Value {
    let mut z = ZSet::default();
    for i in 0..n {
        let m = format!("{i:0mlen$}");
        z.insert(m.as_bytes(), i as f64 * 1.5 - 3.0, zset::Limits::default());
    }
    z.insert(b"inf", f64::INFINITY, zset::Limits::default());
    z.insert(b"neg", f64::NEG_INFINITY, zset::Limits::default());
    z.insert(b"negzero", -0.0, zset::Limits::default());
    z.insert(b"tiny", 1e-300, zset::Limits::default());
    Value::ZSet(z)
}

fn nums(n: i64) -> impl Iterator<Item = Vec<u8>> {
    (0..n).map(|i| (i * 7919 - 1_000_000_000_000).to_string().into_bytes())
}

/// Every type in each encoding Vireo has, with their expected encodings.
fn samples() -> Vec<(&'static str, Value, &'static str)> {
    let long = vec![b'x'; 1000];
    let text: Vec<u8> = b"some compressible text "
        .iter()
        .cycle()
        .take(200)
        .copied()
        .collect();
    vec![
        ("str-int", s(b"12345"), "int"),
        ("str-neg", s(b"-9223372036854775808"), "int"),
        ("str-small", s(b"hello"), "embstr"),
        ("str-empty", s(b""), "embstr"),
        ("str-long", s(&long), "raw"),
        ("str-text", s(&text), "raw"),
        ("str-lead0", s(b"0123"), "embstr"),
        (
            "list-small",
            list([b"a".to_vec(), b"12".to_vec(), b"".to_vec()]),
            "quicklist",
        ),
        (
            "list-big",
            list(
                (0..5000)
                    .map(|i| format!("element-{i}").into_bytes())
                    .chain(nums(100)),
            ),
            "quicklist",
        ),
        (
            "list-huge-elem",
            list([vec![b'y'; 20_000], b"z".to_vec()]),
            "quicklist",
        ),
        ("hash-small", hash(10, 5), "listpack"),
        ("hash-big", hash(600, 5), "hashtable"),
        ("hash-long", hash(3, 100), "hashtable"),
        ("set-ints", set(nums(50)), "intset"),
        (
            "set-small-ints",
            set((0..10).map(|i| i.to_string().into_bytes())),
            "intset",
        ),
        (
            "set-strs",
            set([b"a".to_vec(), b"b".to_vec(), b"7".to_vec()]),
            "hashtable",
        ),
        ("set-many-ints", set(nums(1000)), "hashtable"),
        ("zset-small", zset(10, 3), "listpack"),
        ("zset-big", zset(300, 3), "skiplist"),
        ("zset-long", zset(3, 100), "skiplist"),
    ]
}

fn file_with(entries: &[(&[u8], Entry)], opts: &EncodeOptions) -> Vec<u8> {
    let mut out = Vec::new();
    write_header(&mut out);
    write_aux(&mut out, b"redis-ver", b"7.0.15");
    write_aux(&mut out, b"redis-bits", b"64");
    write_select_db(&mut out, 0);
    write_resize_db(&mut out, entries.len() as u64, 0);
    for (k, e) in entries {
        write_entry(&mut out, k, e, crate::clock::now_ms(), opts);
    }
    write_eof(&mut out);
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn load_all(bytes: &[u8]) -> Result<Vec<Item>, RdbError> {
    load_all_with(bytes, LoadOptions::default())
}

fn load_all_with(bytes: &[u8], opts: LoadOptions) -> Result<Vec<Item>, RdbError> {
    let mut l = Loader::with_options(bytes, opts)?;
    let mut items = Vec::new();
    while let Some(it) = l.next()? {
        items.push(it);
    }
    Ok(items)
}

fn entries_of(items: Vec<Item>) -> Vec<(usize, Vec<u8>, Entry)> {
    items
        .into_iter()
        .filter_map(|it| match it {
            Item::Entry { db, key, entry } => Some((db, key, entry)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_type_and_encoding_round_trips() {
    for compress in [false, true] {
        for expire in [None, Some(4_102_444_800_000u64)] {
            let opts = EncodeOptions {
                compress,
                ..Default::default()
            };
            let samples = samples();
            let entries: Vec<(&[u8], Entry)> = samples
                .iter()
                .map(|(k, v, _)| (k.as_bytes(), Entry::new(v.clone()).with_expire(expire)))
                .collect();
            let bytes = file_with(&entries, &opts);
            let items = load_all(&bytes).unwrap();
            assert!(
                matches!(&items[0], Item::Aux { key, value } if key == b"redis-ver" && value == b"7.0.15")
            );
            assert!(matches!(
                items[2],
                Item::ResizeDb {
                    db: 0,
                    keys: 20,
                    expires: 0
                }
            ));
            let got = entries_of(items);
            assert_eq!(got.len(), samples.len());
            for ((db, key, e), (name, v, enc)) in got.iter().zip(&samples) {
                assert_eq!(*db, 0);
                assert_eq!(key, name.as_bytes());
                assert_eq!(e.value(), v.as_ref(), "{name} compress={compress}");
                assert_eq!(e.value().encoding_name(), *enc, "{name}");
                assert_eq!(e.expire_at(), expire, "{name}");
            }
            // DUMP payloads too.
            for (name, v, enc) in &samples {
                let p = dump_payload(v.as_ref(), &opts);
                let back = restore_payload(&p, &LoadOptions::default()).unwrap();
                assert_eq!(&back, v, "{name}");
                assert_eq!(back.encoding_name(), *enc, "{name}");
            }
        }
    }
}

#[test]
fn compression_shrinks_compressible_strings_only() {
    let text: Vec<u8> = b"abcabcabc".iter().cycle().take(3000).copied().collect();
    let on = dump_payload(
        s(&text).as_ref(),
        &EncodeOptions {
            compress: true,
            ..Default::default()
        },
    );
    let off = dump_payload(s(&text).as_ref(), &EncodeOptions::default());
    assert!(on.len() < 200, "{}", on.len());
    assert!(off.len() > 3000);
    assert_eq!(on[1], 0xC3);
    // Short strings are never compressed.
    let short = dump_payload(
        s(b"aaaaaaaaaaaaaaaaaaaa").as_ref(),
        &EncodeOptions {
            compress: true,
            ..Default::default()
        },
    );
    assert_eq!(short[1], 20);
}

#[test]
fn string_encodings_follow_redis() {
    let enc = |v: &[u8]| {
        let mut out = Vec::new();
        encode_value(&mut out, s(v).as_ref(), &EncodeOptions::default());
        out
    };
    assert_eq!(enc(b"5"), vec![0, 0xC0, 5]);
    assert_eq!(enc(b"-300"), vec![0, 0xC1, 0xD4, 0xFE]);
    assert_eq!(enc(b"100000"), vec![0, 0xC2, 0xA0, 0x86, 0x01, 0x00]);
    assert_eq!(enc(b"abc"), vec![0, 3, b'a', b'b', b'c']);
    let mut big = vec![0, 0x80, 0, 0, 0x40, 0];
    big.extend(vec![b'q'; 0x4000]);
    assert_eq!(enc(&vec![b'q'; 0x4000]), big);
    // Beyond int32: decimal digits.
    assert_eq!(
        enc(b"10000000000"),
        [&[0u8, 11][..], b"10000000000"].concat()
    );
}

#[test]
fn idle_and_freq_round_trip() {
    let now = crate::clock::now_ms();
    let lru = EncodeOptions {
        lru_idle: true,
        lfu_freq: false,
        compress: false,
    };
    let e = Entry::new(s(b"v")).with_idle(1000, now);
    let bytes = file_with(&[(b"k", e)], &lru);
    let got = entries_of(load_all(&bytes).unwrap());
    let idle = got[0].2.idle_secs(crate::clock::now_ms());
    assert!((1000..1003).contains(&idle), "{idle}");
    let lfu = EncodeOptions {
        lru_idle: false,
        lfu_freq: true,
        compress: false,
    };
    let e = Entry::new(s(b"v")).with_freq(77, now);
    let bytes = file_with(&[(b"k", e)], &lfu);
    let opts = LoadOptions {
        lfu: true,
        ..LoadOptions::default()
    };
    let got = entries_of(load_all_with(&bytes, opts).unwrap());
    assert_eq!(got[0].2.lfu_freq(crate::clock::now_ms(), 0), 77);
    // A server under the other kind of policy ignores the file's figure:
    // the key counts as accessed when stored.
    let entry = entries_of(load_all(&bytes).unwrap()).remove(0).2;
    let ks = crate::keyspace::Keyspace::new(1, 1);
    let mut k = ks.lock_all();
    k.set_entry(0, b"k", entry);
    let idle = k
        .get_read_no_touch(0, b"k")
        .unwrap()
        .idle_secs(crate::clock::now_ms());
    assert!(idle < 3, "{idle}");
}

#[test]
fn databases_and_functions() {
    let mut out = Vec::new();
    write_header(&mut out);
    out.push(opcode::FUNCTION2);
    encode::write_string(
        &mut out,
        b"#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        false,
    );
    for db in [3usize, 15] {
        write_select_db(&mut out, db);
        write_entry(
            &mut out,
            b"k",
            &Entry::new(s(b"x")),
            0,
            &EncodeOptions::default(),
        );
    }
    write_eof(&mut out);
    out.extend_from_slice(&crc64(0, &out).to_le_bytes());
    let items = load_all(&out).unwrap();
    assert!(matches!(&items[0], Item::Function { code } if code.starts_with(b"#!lua")));
    let dbs: Vec<usize> = entries_of(items).iter().map(|e| e.0).collect();
    assert_eq!(dbs, vec![3, 15]);
    let mut bad = Vec::new();
    write_header(&mut bad);
    write_select_db(&mut bad, 16);
    let e = load_all(&bad).unwrap_err();
    assert!(e.to_string().contains("database 16"), "{e}");
}

/// A version-`v` file holding one key of raw type `ty` with payload `p`
/// (no checksum: versions below 5 have none).
fn raw_file(v: u32, ty: u8, key: &[u8], p: &[u8]) -> Vec<u8> {
    let mut out = format!("REDIS{v:04}").into_bytes();
    out.push(ty);
    encode::write_string(&mut out, key, false);
    out.extend_from_slice(p);
    out.push(opcode::EOF);
    if v >= 5 {
        out.extend_from_slice(&[0; 8]);
    }
    out
}

fn blob(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode::write_string(&mut out, b, false);
    out
}

fn only_value(bytes: &[u8]) -> Value {
    let mut got = entries_of(load_all(bytes).unwrap());
    assert_eq!(got.len(), 1);
    got.remove(0).2.into_value()
}

#[test]
fn legacy_encodings_load() {
    let zl = ziplist::build::ziplist;
    // LIST_ZIPLIST
    let v = only_value(&raw_file(
        6,
        rtype::LIST_ZIPLIST,
        b"l",
        &blob(&zl(&[b"a", b"-5", b"300"])),
    ));
    assert_eq!(v, list([b"a".to_vec(), b"-5".to_vec(), b"300".to_vec()]));
    // LIST_QUICKLIST of two ziplists, the second one empty (skipped).
    let mut p = vec![2];
    p.extend(blob(&zl(&[b"x", b"y"])));
    p.extend(blob(&zl(&[])));
    let v = only_value(&raw_file(9, rtype::LIST_QUICKLIST, b"q", &p));
    assert_eq!(v, list([b"x".to_vec(), b"y".to_vec()]));
    // LIST_QUICKLIST_2 with a plain node and a packed node.
    let mut lp = listpack::Builder::new();
    lp.push(b"p1");
    lp.push(b"77");
    let mut p = vec![2, 1];
    p.extend(blob(b"plain element"));
    p.push(2);
    p.extend(blob(&lp.finish()));
    let v = only_value(&raw_file(10, rtype::LIST_QUICKLIST_2, b"q2", &p));
    assert_eq!(
        v,
        list([b"plain element".to_vec(), b"p1".to_vec(), b"77".to_vec()])
    );
    // HASH_ZIPLIST and ZSET_ZIPLIST.
    let v = only_value(&raw_file(
        7,
        rtype::HASH_ZIPLIST,
        b"h",
        &blob(&zl(&[b"f", b"1", b"g", b"two"])),
    ));
    assert_eq!(v.encoding_name(), "listpack");
    let Value::Hash(h) = &v else { panic!() };
    assert_eq!(h.get(b"f"), Some(&b"1"[..]));
    assert_eq!(h.get(b"g"), Some(&b"two"[..]));
    let v = only_value(&raw_file(
        7,
        rtype::ZSET_ZIPLIST,
        b"z",
        &blob(&zl(&[b"a", b"1.5", b"b", b"-2"])),
    ));
    let Value::ZSet(z) = &v else { panic!() };
    assert_eq!(z.score(b"a"), Some(1.5));
    assert_eq!(z.score(b"b"), Some(-2.0));
    // HASH_ZIPMAP.
    let mut zm = vec![1, 3];
    zm.extend_from_slice(b"key");
    zm.extend_from_slice(&[5, 0]);
    zm.extend_from_slice(b"value");
    zm.push(0xFF);
    let v = only_value(&raw_file(3, rtype::HASH_ZIPMAP, b"m", &blob(&zm)));
    let Value::Hash(h) = &v else { panic!() };
    assert_eq!(h.get(b"key"), Some(&b"value"[..]));
    // SET_INTSET beyond set-max-intset-entries becomes a hashtable.
    let ints: Vec<i64> = (0..600).collect();
    let v = only_value(&raw_file(
        7,
        rtype::SET_INTSET,
        b"s",
        &blob(&intset::encode(&ints)),
    ));
    assert_eq!(v.encoding_name(), "hashtable");
    let Value::Set(st) = &v else { panic!() };
    assert_eq!(st.len(), 600);
    // ZSET with text scores, including the special bytes.
    let mut p = vec![3];
    for (m, sc) in [
        (&b"a"[..], &[3u8, b'2', b'.', b'5'][..]),
        (b"b", &[254]),
        (b"c", &[255]),
    ] {
        p.extend(blob(m));
        p.extend_from_slice(sc);
    }
    let v = only_value(&raw_file(2, rtype::ZSET, b"z", &p));
    let Value::ZSet(z) = &v else { panic!() };
    assert_eq!(z.score(b"a"), Some(2.5));
    assert_eq!(z.score(b"b"), Some(f64::INFINITY));
    assert_eq!(z.score(b"c"), Some(f64::NEG_INFINITY));
    // Plain LIST (1) and old EXPIRETIME in seconds.
    let mut f = b"REDIS0001".to_vec();
    f.push(opcode::EXPIRETIME);
    f.extend_from_slice(&2_000_000_000i32.to_le_bytes());
    f.push(rtype::LIST);
    f.extend(blob(b"l"));
    f.push(2);
    f.extend(blob(b"a"));
    f.extend(blob(b"b"));
    f.push(opcode::EOF);
    let got = entries_of(load_all(&f).unwrap());
    assert_eq!(got[0].2.expire_at(), Some(2_000_000_000_000));
    assert_eq!(
        got[0].2.value(),
        list([b"a".to_vec(), b"b".to_vec()]).as_ref()
    );
}

#[test]
fn empty_values_are_skipped_in_files_and_refused_in_payloads() {
    let f = raw_file(10, rtype::SET, b"empty", &[0]);
    let mut l = Loader::new(&f[..]).unwrap();
    assert!(l.next().unwrap().is_none());
    assert_eq!(l.empty_keys_skipped(), 1);
    let mut p = vec![rtype::HASH, 0];
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    p.extend_from_slice(&crc64(0, &p).to_le_bytes());
    assert!(matches!(
        restore_payload(&p, &LoadOptions::default()),
        Err(PayloadError::BadData(_))
    ));
}

#[test]
fn skipped_empty_keys_are_named_up_to_ten() {
    let mut f = b"REDIS0010".to_vec();
    for i in 0..12 {
        f.push(rtype::SET);
        encode::write_string(&mut f, format!("e{i}").as_bytes(), false);
        f.push(0);
    }
    f.push(opcode::EOF);
    f.extend_from_slice(&[0; 8]);
    let mut l = Loader::new(&f[..]).unwrap();
    assert!(l.next().unwrap().is_none());
    assert_eq!(l.empty_keys_skipped(), 12);
    let names: Vec<&[u8]> = l.empty_key_names().iter().map(Vec::as_slice).collect();
    assert_eq!(names.len(), 10);
    assert_eq!((names[0], names[9]), (&b"e0"[..], &b"e9"[..]));
}

/// A DUMP payload of type `ty` around `body`.
fn payload_of(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![ty];
    p.extend_from_slice(body);
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    p.extend_from_slice(&crc64(0, &p).to_le_bytes());
    p
}

/// The reason a payload was refused.
fn refusal(p: &[u8], opts: &LoadOptions) -> String {
    match restore_payload(p, opts) {
        Err(PayloadError::BadData(e)) => e.kind.to_string(),
        other => panic!("not refused as bad data: {other:?}"),
    }
}

#[test]
fn refusals_are_worded_as_redis_words_them() {
    let strict = LoadOptions::default();
    // A zipmap without entries.
    let p = payload_of(rtype::HASH_ZIPMAP, &blob(&[0, 0xFF]));
    assert!(refusal(&p, &strict).starts_with("Zipmap integrity check failed."));
    // A quicklist node holding nothing (Redis's "encoded_len is 0").
    let p = payload_of(rtype::LIST_QUICKLIST_2, &[1, 1, 0]);
    assert_eq!(refusal(&p, &strict), "an empty quicklist node");
    let p = payload_of(rtype::LIST_QUICKLIST_2, &[1, 7, 0]);
    assert!(refusal(&p, &strict).starts_with("Quicklist integrity check failed."));
    // Duplicates in a packed hash fail its integrity check.
    let lp = {
        let mut b = listpack::Builder::new();
        for item in [&b"a"[..], b"1", b"a", b"2"] {
            b.push(item);
        }
        b.finish()
    };
    let p = payload_of(rtype::HASH_LISTPACK, &blob(&lp));
    assert!(refusal(&p, &strict).starts_with("Hash listpack integrity check failed."));
    // A plain hash's duplicates.
    let mut body = vec![2];
    for item in [&b"a"[..], b"1", b"a", b"2"] {
        body.extend(blob(item));
    }
    let p = payload_of(rtype::HASH, &body);
    assert_eq!(refusal(&p, &strict), "Duplicate hash fields detected");
}

/// A hash listpack of `pairs` whose last entry's backlen is damaged: the
/// frame (size, terminator) stays sound, as Redis's shallow check wants.
fn hash_listpack_damaged_at_the_end(pairs: usize) -> Vec<u8> {
    let mut b = listpack::Builder::new();
    for i in 0..pairs {
        b.push(format!("f{i}").as_bytes());
        b.push(format!("v{i}").as_bytes());
    }
    let mut lp = b.finish();
    let at = lp.len() - 2;
    lp[at] += 1;
    lp
}

#[test]
fn salvage_keeps_the_sound_pairs_of_a_damaged_listpack() {
    let p = payload_of(
        rtype::HASH_LISTPACK,
        &blob(&hash_listpack_damaged_at_the_end(3)),
    );
    let strict = LoadOptions::default();
    assert!(refusal(&p, &strict).contains("listpack entry has a wrong backlen"));
    let salvage = LoadOptions {
        salvage: true,
        ..LoadOptions::default()
    };
    // The last value is lost, so its field goes too: two pairs remain.
    let Ok(Value::Hash(h)) = restore_payload(&p, &salvage) else {
        panic!("salvaged");
    };
    assert_eq!(h.len(), 2);
    // A damaged frame is refused even so (Redis checks the header).
    let mut lp = hash_listpack_damaged_at_the_end(3);
    lp[0] ^= 1;
    let p = payload_of(rtype::HASH_LISTPACK, &blob(&lp));
    assert!(refusal(&p, &salvage).contains("listpack header says"));
    // Nothing sound left: an empty value, refused.
    let p = payload_of(
        rtype::HASH_LISTPACK,
        &blob(&hash_listpack_damaged_at_the_end(1)),
    );
    assert_eq!(refusal(&p, &salvage), "empty value");
}

/// Redis's own fuzzer in a seeded loop: DUMP payloads with one or two
/// bytes replaced (checksum not checked, as the fuzzer runs with DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION), restored with and without salvage.
/// Nothing may panic, and whatever is accepted must be a sound value: it
/// dumps and restores under the strict check to itself.
#[test]
fn corrupted_payloads_are_refused_or_sound() {
    let values: Vec<Value> = samples()
        .into_iter()
        .filter(|(k, _, _)| !k.ends_with("big") && !k.starts_with("set-many"))
        .map(|(_, v, _)| v)
        .collect();
    let mut rng = fastrand::Rng::with_seed(0xc0_22_u64);
    let mut accepted = 0;
    for round in 0..20_000 {
        let value = &values[round % values.len()];
        let compress = rng.bool();
        let mut p = dump_payload(
            value.as_ref(),
            &EncodeOptions {
                compress,
                ..Default::default()
            },
        );
        for _ in 0..if rng.u8(0..10) == 0 { 2 } else { 1 } {
            let at = rng.usize(0..p.len());
            p[at] = rng.u8(..);
        }
        for salvage in [false, true] {
            let opts = LoadOptions {
                skip_payload_checksum: true,
                salvage,
                ..LoadOptions::default()
            };
            if let Ok(v) = restore_payload(&p, &opts) {
                accepted += 1;
                let again = dump_payload(v.as_ref(), &EncodeOptions::default());
                assert_eq!(
                    restore_payload(&again, &LoadOptions::default()).as_ref(),
                    Ok(&v)
                );
            }
        }
    }
    // Many replaced bytes land in values and lengths that stay valid.
    assert!(accepted > 1000, "{accepted}");
}

#[test]
fn errors_name_what_where_and_which_key() {
    let f = raw_file(10, 22, b"foo", b"");
    let e = load_all(&f).unwrap_err();
    assert_eq!(e.key.as_deref(), Some(&b"foo"[..]));
    assert_eq!(
        e.to_string(),
        "unknown RDB type 22 for key 'foo' at offset 14"
    );
    // A stream cut short names its key too.
    let e = load_all(&raw_file(10, rtype::STREAM_LISTPACKS_2, b"x", b"")).unwrap_err();
    assert_eq!(e.key.as_deref(), Some(&b"x"[..]), "{e}");
    assert!(e.to_string().contains("for key 'x'"), "{e}");
    let e = load_all(b"REDIS0010\xfe").unwrap_err();
    assert_eq!(e.to_string(), "unexpected end of file at offset 10");
    assert_eq!(
        load_all(b"REDIS0011").unwrap_err().kind,
        ErrorKind::UnsupportedVersion(11)
    );
    assert_eq!(
        load_all(b"REDIS0000").unwrap_err().kind,
        ErrorKind::UnsupportedVersion(0)
    );
    assert_eq!(
        load_all(b"RADIS0010").unwrap_err().kind,
        ErrorKind::BadMagic
    );
    assert_eq!(load_all(b"RED").unwrap_err().kind, ErrorKind::BadMagic);
    // Checksums: a flipped byte is caught, a zero checksum skips the check.
    let mut good = file_with(
        &[(b"k", Entry::new(s(b"value")))],
        &EncodeOptions::default(),
    );
    assert!(load_all(&good).is_ok());
    let n = good.len();
    good[n - 12] ^= 1;
    assert!(matches!(
        load_all(&good).unwrap_err().kind,
        ErrorKind::ChecksumMismatch { .. }
    ));
    good[n - 8..].fill(0);
    assert!(load_all(&good).is_ok());
    // A huge declared length fails at the end of data, not in an allocation.
    let mut f = b"REDIS0010".to_vec();
    f.push(rtype::STRING);
    f.extend_from_slice(&[0x81, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(load_all(&f).unwrap_err().kind, ErrorKind::UnexpectedEof);
    let mut f = b"REDIS0010".to_vec();
    f.push(rtype::STRING);
    f.extend(blob(b"k"));
    f.extend_from_slice(&[0xC3, 2, 0x81, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert!(matches!(
        load_all(&f).unwrap_err().kind,
        ErrorKind::Corrupt(_)
    ));
    // Duplicates.
    let mut p = vec![2];
    p.extend(blob(b"a"));
    p.extend(blob(b"a"));
    let e = load_all(&raw_file(10, rtype::SET, b"s", &p)).unwrap_err();
    assert!(
        e.to_string().contains("Duplicate set members detected"),
        "{e}"
    );
    let e = load_all(&raw_file(
        10,
        rtype::HASH_ZIPLIST,
        b"h",
        &blob(&ziplist::build::ziplist(&[b"f", b"1", b"f", b"2"])),
    ))
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Hash ziplist integrity check failed. (duplicate hash fields)"),
        "{e}"
    );
    let e = load_all(&raw_file(
        10,
        rtype::ZSET_ZIPLIST,
        b"z",
        &blob(&ziplist::build::ziplist(&[b"f", b"1", b"f", b"2"])),
    ))
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Zset ziplist integrity check failed. (Duplicate zset fields detected)"),
        "{e}"
    );
    let e = load_all(&raw_file(
        10,
        rtype::ZSET_ZIPLIST,
        b"z",
        &blob(&ziplist::build::ziplist(&[b"f", b"nan"])),
    ))
    .unwrap_err();
    assert!(e.to_string().contains("score"), "{e}");
}

#[test]
fn payload_version_and_checksum() {
    let opts = LoadOptions::default();
    let mut p = dump_payload(s(b"hello").as_ref(), &EncodeOptions::default());
    assert_eq!(restore_payload(&p, &opts).unwrap(), s(b"hello"));
    let n = p.len();
    p[n - 1] ^= 0xFF;
    assert_eq!(
        restore_payload(&p, &opts),
        Err(PayloadError::VersionOrChecksum)
    );
    // Version 11 with a valid checksum is refused; older versions are fine.
    for (v, ok) in [(11u16, false), (9, true), (1, true)] {
        let mut p = vec![0, 1, b'x'];
        p.extend_from_slice(&v.to_le_bytes());
        p.extend_from_slice(&crc64(0, &p).to_le_bytes());
        assert_eq!(restore_payload(&p, &opts).is_ok(), ok, "version {v}");
    }
    assert_eq!(
        restore_payload(b"short", &opts),
        Err(PayloadError::VersionOrChecksum)
    );
    let mut p = vec![99];
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    p.extend_from_slice(&crc64(0, &p).to_le_bytes());
    assert!(matches!(
        restore_payload(&p, &opts),
        Err(PayloadError::BadData(_))
    ));
}

#[test]
fn damaged_files_never_panic() {
    let samples = samples();
    let entries: Vec<(&[u8], Entry)> = samples
        .iter()
        .filter(|(k, _, _)| {
            !k.ends_with("big") && !k.ends_with("huge-elem") && !k.starts_with("set-many")
        })
        .map(|(k, v, _)| (k.as_bytes(), Entry::new(v.clone())))
        .collect();
    let good = file_with(
        &entries,
        &EncodeOptions {
            compress: true,
            ..Default::default()
        },
    );
    let mut rng = fastrand::Rng::with_seed(42);
    for _ in 0..3000 {
        let mut bad = good.clone();
        for _ in 0..rng.usize(1..4) {
            let i = rng.usize(9..bad.len());
            bad[i] = rng.u8(..);
        }
        if rng.bool() {
            bad.truncate(rng.usize(9..bad.len()));
        }
        let _ = load_all(&bad);
        let cut = rng.usize(0..bad.len());
        let _ = restore_payload(&bad[cut..], &LoadOptions::default());
    }
}

#[test]
fn module_aux_is_skipped_and_named() {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = b"Vireo-mod".iter().fold(0u64, |id, c| {
        id << 6 | CHARSET.iter().position(|x| x == c).unwrap() as u64
    });
    let mut f = b"REDIS0010".to_vec();
    f.push(opcode::MODULE_AUX);
    encode::write_len(&mut f, id << 10 | 3);
    encode::write_len(&mut f, 2);
    encode::write_len(&mut f, 0);
    encode::write_len(&mut f, 2); // UINT
    encode::write_len(&mut f, 99);
    encode::write_len(&mut f, 5); // STRING
    encode::write_string(&mut f, b"payload", false);
    encode::write_len(&mut f, 4); // DOUBLE
    f.extend_from_slice(&1.5f64.to_le_bytes());
    encode::write_len(&mut f, 3); // FLOAT
    f.extend_from_slice(&1.5f32.to_le_bytes());
    encode::write_len(&mut f, 0); // module EOF
    write_entry(
        &mut f,
        b"after",
        &Entry::new(s(b"v")),
        0,
        &EncodeOptions::default(),
    );
    f.push(opcode::EOF);
    f.extend_from_slice(&[0; 8]);
    let items = load_all(&f).unwrap();
    assert!(matches!(&items[0], Item::ModuleAux { module } if module == "Vireo-mod"));
    assert_eq!(entries_of(items).len(), 1);
    let mut bad = f.clone();
    bad[9 + 1 + 9] = 3; // 'when' opcode
    assert!(load_all(&bad).is_err());
    let e = load_all(b"REDIS0010\xf6").unwrap_err();
    assert!(e.to_string().contains("pre-release function format"), "{e}");
}

#[test]
fn function_payloads_round_trip_and_refuse_damage() {
    let long = b"#!lua name=long\nredis.register_function('f', function() return 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' end)".to_vec();
    let libs: [&[u8]; 2] = [
        b"#!lua name=a\nredis.register_function('a', function() return 1 end)",
        &long,
    ];
    for compress in [false, true] {
        let opts = EncodeOptions {
            compress,
            ..Default::default()
        };
        let payload = dump_functions(libs, &opts);
        assert_eq!(
            restore_functions(&payload).unwrap(),
            libs.map(<[u8]>::to_vec)
        );
        let mut bad = payload.clone();
        bad[3] ^= 1;
        assert_eq!(
            restore_functions(&bad),
            Err(FunctionsPayloadError::VersionOrChecksum)
        );
    }
    assert_eq!(
        restore_functions(&dump_functions([], &EncodeOptions::default())),
        Ok(vec![])
    );
    assert_eq!(
        restore_functions(b"short"),
        Err(FunctionsPayloadError::VersionOrChecksum)
    );
    // A key's payload is not a function.
    let value = crate::value::Value::Str(crate::value::StrValue::from_vec(b"x".to_vec()));
    let key_payload = dump_payload(value.as_ref(), &EncodeOptions::default());
    assert_eq!(
        restore_functions(&key_payload),
        Err(FunctionsPayloadError::NotAFunction)
    );
}

#[test]
fn function_payload_random_bytes_never_panic() {
    let mut rng = fastrand::Rng::with_seed(11);
    let good = dump_functions([&b"#!lua name=a\nx"[..]], &EncodeOptions::default());
    for _ in 0..20_000 {
        let mut body: Vec<u8> = if rng.bool() {
            good[..good.len() - 10].to_vec()
        } else {
            (0..rng.usize(..40)).map(|_| rng.u8(..)).collect()
        };
        if !body.is_empty() && rng.bool() {
            let i = rng.usize(..body.len());
            body[i] = rng.u8(..);
        }
        body.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64(0, &body);
        body.extend_from_slice(&crc.to_le_bytes());
        let _ = restore_functions(&body);
    }
}

/// A module type for the tests: its payload is its bytes, and payloads
/// starting with `!` are refused.
#[derive(Debug)]
struct Blob(Vec<u8>);

const BLOB_ID: u64 = match crate::module::module_id(b"test-blob", 3) {
    Some(id) => id,
    None => 0,
};

impl crate::module::ModuleType for Blob {
    fn type_name(&self) -> &'static str {
        "test-blob"
    }
    fn module_id(&self) -> u64 {
        BLOB_ID
    }
    fn heap_bytes(&self) -> usize {
        self.0.len()
    }
    fn serialize(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn duplicate(&self) -> Result<crate::module::ModuleValue, String> {
        Ok(module_blob(&self.0))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any_arc(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

fn module_blob(b: &[u8]) -> crate::module::ModuleValue {
    crate::module::ModuleValue::new(std::sync::Arc::new(Blob(b.to_vec())))
}

fn decode_blob(b: &[u8]) -> Result<crate::module::ModuleValue, String> {
    if b.starts_with(b"!") {
        return Err("refused".into());
    }
    Ok(module_blob(b))
}

fn blob_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Module(m) => m.0.as_any().downcast_ref::<Blob>().unwrap().0.clone(),
        other => panic!("not a module value: {other:?}"),
    }
}

#[test]
fn module_values_round_trip_through_dump_and_are_refused_without_their_module() {
    let opts = EncodeOptions::default();
    let load = LoadOptions::default();
    let unknown_id = crate::module::module_id(b"nomodule1", 1).unwrap();
    #[derive(Debug)]
    struct Unknown;
    impl crate::module::ModuleType for Unknown {
        fn type_name(&self) -> &'static str {
            "nomodule1"
        }
        fn module_id(&self) -> u64 {
            crate::module::module_id(b"nomodule1", 1).unwrap()
        }
        fn heap_bytes(&self) -> usize {
            0
        }
        fn serialize(&self) -> Vec<u8> {
            Vec::new()
        }
        fn duplicate(&self) -> Result<crate::module::ModuleValue, String> {
            Err("no".into())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn into_any_arc(
            self: std::sync::Arc<Self>,
        ) -> std::sync::Arc<dyn std::any::Any + Send + Sync> {
            self
        }
    }
    crate::module::register(BLOB_ID, decode_blob);
    let v = Value::Module(module_blob(b"payload bytes"));
    let dumped = dump_payload(v.as_ref(), &opts);
    let back = restore_payload(&dumped, &load).unwrap();
    assert_eq!(blob_bytes(&back), b"payload bytes");
    // A copy is deep: a different value with the same content.
    let copy = v.clone();
    assert_ne!(copy, v);
    assert_eq!(blob_bytes(&copy), b"payload bytes");
    // The decoder's refusal and an unknown module are errors, not panics.
    let refused = dump_payload(Value::Module(module_blob(b"!bad")).as_ref(), &opts);
    assert!(matches!(
        restore_payload(&refused, &load),
        Err(PayloadError::BadData(_))
    ));
    let orphan = dump_payload(
        Value::Module(crate::module::ModuleValue::new(std::sync::Arc::new(
            Unknown,
        )))
        .as_ref(),
        &opts,
    );
    let err = restore_payload(&orphan, &load).unwrap_err();
    assert!(format!("{err:?}").contains("nomodule1"), "{err:?}");
    assert_eq!(crate::module::module_name(unknown_id), "nomodule1");
    // Every truncation of a module payload fails cleanly.
    let body = &dumped[..dumped.len() - 10];
    for n in 0..body.len() {
        let mut cut = body[..n].to_vec();
        cut.extend_from_slice(&dumped[dumped.len() - 10..]);
        let _ = restore_payload(
            &cut,
            &LoadOptions {
                skip_payload_checksum: true,
                ..load
            },
        );
    }
}
