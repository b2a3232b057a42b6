//! cjson, cmsgpack, bit and struct: behaviour and hostile input.

use super::eval_bytes;
use crate::rand48::Rand48;
use vireo_resp::Protocol;

/// RESP2 EVAL with no keys.
fn ev(body: &str) -> String {
    eval_bytes(body, &[], &[], Protocol::Resp2)
}

/// A bulk reply's text.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// cjson encoding rules.
#[test]
fn cjson_encode() {
    assert_eq!(ev("return cjson.encode({})"), bulk("{}"));
    assert_eq!(ev("return cjson.encode({1,2,3})"), bulk("[1,2,3]"));
    assert_eq!(ev("return cjson.encode({[1]=1,[3]=3})"), bulk("[1,null,3]"));
    assert_eq!(
        ev("return cjson.encode({a='x\"/\\n'})"),
        bulk("{\"a\":\"x\\\"\\/\\n\"}")
    );
    assert_eq!(ev("return cjson.encode(0.1)"), bulk("0.1"));
    assert_eq!(ev("return cjson.encode(1/3)"), bulk("0.33333333333333"));
    assert_eq!(ev("return cjson.encode({[1.5]=1})"), bulk("{\"1.5\":1}"));
    assert_eq!(ev("return cjson.encode(cjson.null)"), bulk("null"));
    assert_eq!(
        ev("return cjson.encode('\\1\\127')"),
        bulk("\"\\u0001\\u007f\"")
    );
    assert!(ev("return cjson.encode({[20]=1})")
        .contains("Cannot serialise table: excessively sparse array"));
    assert!(
        ev("return cjson.encode(0/0)").contains("Cannot serialise number: must not be NaN or Inf")
    );
    assert!(ev("return cjson.encode(function() end)")
        .contains("Cannot serialise function: type not supported"));
    assert!(ev("return cjson.encode({[true]=1})")
        .contains("Cannot serialise boolean: table key must be a number or string"));
    assert!(ev("local t = {} t[1] = t return cjson.encode(t)")
        .contains("Cannot serialise, excessive nesting (1001)"));
    assert_eq!(
        ev("cjson.encode_invalid_numbers(true) return cjson.encode({1/0, 0/0})"),
        bulk("[inf,nan]")
    );
    assert_eq!(
        ev("cjson.encode_sparse_array(true) return cjson.encode({[20]=1})"),
        bulk("{\"20\":1}")
    );
    assert_eq!(
        ev("cjson.encode_number_precision(3) return cjson.encode(3.14159)"),
        bulk("3.14")
    );
    assert!(ev("cjson.encode_number_precision(15)").contains(
        "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"
    ));
    assert!(
        ev("return cjson.encode()").contains("bad argument #1 to 'encode' (expected 1 argument)")
    );
}

/// cjson decoding, including the forms CJSON accepts beyond JSON.
#[test]
fn cjson_decode() {
    assert_eq!(ev("local t = cjson.decode('{\"a\":[1,2,{\"b\":null}]}') return {t.a[1], t.a[2], tostring(t.a[3].b == cjson.null)}"),
        "*3\r\n:1\r\n:2\r\n$4\r\ntrue\r\n");
    assert_eq!(
        ev("return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')"),
        bulk("é😀")
    );
    assert_eq!(
        ev("return {cjson.decode('0x10'), cjson.decode('+5'), cjson.decode('007')}"),
        "*3\r\n:16\r\n:5\r\n:7\r\n"
    );
    assert_eq!(ev("return cjson.decode('[1]\\0garbage')[1]"), ":1\r\n");
    let err = |json: &str| {
        ev(&format!(
            "local ok, e = pcall(cjson.decode, {json:?}) return e"
        ))
    };
    assert_eq!(
        err("{"),
        bulk("Expected object key string but found T_END at character 2")
    );
    assert_eq!(
        err("[1,]"),
        bulk("Expected value but found T_ARR_END at character 4")
    );
    assert_eq!(
        err("x"),
        bulk("Expected value but found invalid token at character 1")
    );
    assert_eq!(
        err("\"abc"),
        bulk("Expected value but found unexpected end of string at character 5")
    );
    assert_eq!(
        err("\"\\q\""),
        bulk("Expected value but found invalid escape code at character 2")
    );
    assert_eq!(
        err("\"\\ud800\""),
        bulk("Expected value but found invalid unicode escape code at character 2")
    );
    assert_eq!(
        err("[1] 2"),
        bulk("Expected the end but found T_NUMBER at character 5")
    );
    assert_eq!(
        err("{\"a\" 1}"),
        bulk("Expected colon but found T_NUMBER at character 6")
    );
    assert_eq!(
        err("-"),
        bulk("Expected value but found invalid number at character 1")
    );
    let deep = "[".repeat(1001);
    assert_eq!(
        err(&deep),
        bulk("Found too many nested data structures (1001) at character 1001")
    );
    assert_eq!(ev("return pcall(cjson.decode, 'a\\0b')"), "$-1\r\n");
}

/// Random bytes and mutated JSON never panic cjson.decode.
#[test]
fn cjson_decode_random_never_panics() {
    let mut engine = crate::EvalEngine::new(64 << 20).unwrap();
    let mut host = super::FakeHost::default();
    let mut rng = Rand48::new(11);
    let alphabet = b"{}[]:,\"\\u0123456789abcdefEtrnl+-. \x00\xff";
    let mut inputs = Vec::new();
    for _ in 0..3000 {
        let len = (rng.next() % 24) as usize;
        inputs.push(
            (0..len)
                .map(|_| alphabet[(rng.next() as usize) % alphabet.len()])
                .collect::<Vec<u8>>(),
        );
    }
    let body = "local ok, v = pcall(cjson.decode, ARGV[1]) return type(v)";
    for input in inputs {
        let arg = std::str::from_utf8(&input)
            .map(str::to_owned)
            .unwrap_or_else(|_| String::from_utf8_lossy(&input).into_owned());
        let out = super::run_eval(&mut engine, &mut host, body, &[], &[&arg], Protocol::Resp2);
        assert!(out.starts_with('$'), "{out}");
    }
}

/// cmsgpack round trips and encodings.
#[test]
fn cmsgpack_pack_unpack() {
    let hex = |body: &str| {
        ev(&format!("local s = {body} local t = {{}} for i = 1, #s do t[i] = string.format('%02x', s:byte(i)) end return table.concat(t)"))
    };
    assert_eq!(
        hex("cmsgpack.pack(1, -1, 200, -200, 70000, 2^40, -2^40)"),
        bulk("01ffccc8d1ff38ce00011170cf0000010000000000d3ffffff0000000000")
    );
    assert_eq!(
        hex("cmsgpack.pack(0.5, 0.1)"),
        bulk("ca3f000000cb3fb999999999999a")
    );
    assert_eq!(
        hex("cmsgpack.pack({1,2}, {a=true}, 'ab', nil, false)"),
        bulk("92010281a161c3a26162c0c2")
    );
    assert_eq!(
        ev("return cmsgpack.unpack(cmsgpack.pack(-1099511627776))"),
        ":-1099511627776\r\n"
    );
    assert_eq!(
        ev("local t = cmsgpack.unpack(cmsgpack.pack({a={1,2,{b='c'}}})) return t.a[3].b"),
        bulk("c")
    );
    assert_eq!(
        ev("local s = cmsgpack.pack(1, 'x', 3) return {cmsgpack.unpack_one(s)}"),
        "*2\r\n:1\r\n:1\r\n"
    );
    assert_eq!(
        ev("local s = cmsgpack.pack(1, 'x', 3) return {cmsgpack.unpack_limit(s, 2, 1)}"),
        "*3\r\n:-1\r\n$1\r\nx\r\n:3\r\n"
    );
    assert_eq!(ev("local a = {} a[1] = a local t = cmsgpack.unpack(cmsgpack.pack(a)) local d = 0 while type(t) == 'table' do t = t[1] d = d + 1 end return d"), ":16\r\n");
    assert_eq!(
        ev("return cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')"),
        ":-1\r\n"
    );
    assert!(ev("return cmsgpack.unpack('\\205\\1')").contains("Missing bytes in input."));
    assert!(ev("return cmsgpack.unpack('\\193')").contains("Bad data format in input."));
    assert!(ev("return cmsgpack.pack()")
        .contains("bad argument #0 to 'pack' (MessagePack pack needs input.)"));
    assert!(ev("return cmsgpack.unpack_one('a', 5)")
        .contains("Start offset 5 greater than input length 1."));
    assert!(ev("return cmsgpack.unpack('\\221\\255\\255\\255\\255')")
        .contains("Missing bytes in input."));
}

/// Random bytes never panic cmsgpack.unpack, and huge declared lengths do
/// not allocate.
#[test]
fn cmsgpack_unpack_random_never_panics() {
    let mut engine = crate::EvalEngine::new(64 << 20).unwrap();
    let mut host = super::FakeHost::default();
    let mut rng = Rand48::new(5);
    let body = "local s = '' for i = 1, #ARGV do s = s .. string.char(tonumber(ARGV[i])) end local ok, v = pcall(cmsgpack.unpack, s) return 1";
    for _ in 0..2000 {
        let len = (rng.next() % 16) as usize;
        let bytes: Vec<String> = (0..len).map(|_| (rng.next() % 256).to_string()).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        let out = super::run_eval(&mut engine, &mut host, body, &[], &refs, Protocol::Resp2);
        assert_eq!(out, ":1\r\n");
    }
}

/// LuaBitOp results.
#[test]
fn bit_ops() {
    assert_eq!(
        ev("return {bit.tobit(1), bit.band(1), bit.bxor(1,2), bit.bor(1,2,4,8,16,32,64,128)}"),
        "*4\r\n:1\r\n:1\r\n:3\r\n:255\r\n"
    );
    assert_eq!(ev("return {bit.tobit(2^32 + 5), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4)}"),
        "*5\r\n:5\r\n:-1\r\n:-2147483648\r\n:15\r\n:-16\r\n");
    assert_eq!(
        ev("return {bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678)}"),
        "*3\r\n:878082066\r\n:2014458966\r\n:2018915346\r\n"
    );
    assert_eq!(ev("return {bit.tohex(255), bit.tohex(255, -4), bit.tohex(255, 2), bit.tohex(255, -2147483648)}"),
        "*4\r\n$8\r\n000000ff\r\n$4\r\n00FF\r\n$2\r\nff\r\n$8\r\n000000FF\r\n");
    assert!(ev("return bit.band('x')")
        .contains("bad argument #1 to 'band' (number expected, got string)"));
    assert!(ev("return bit.tobit()")
        .contains("bad argument #1 to 'tobit' (number expected, got no value)"));
}

/// struct pack/unpack/size.
#[test]
fn struct_lib() {
    assert_eq!(
        ev("return {struct.unpack('>i2<H', struct.pack('>i2<H', -2, 513))}"),
        "*3\r\n:-2\r\n:513\r\n:5\r\n"
    );
    assert_eq!(ev("return struct.size('!4bi')"), ":8\r\n");
    assert_eq!(ev("return struct.size('bd')"), ":9\r\n");
    assert_eq!(
        ev("return {struct.unpack('s', 'ab\\0c')}"),
        "*2\r\n$2\r\nab\r\n:4\r\n"
    );
    assert_eq!(
        ev("return {struct.unpack('bc0', '\\2xyz')}"),
        "*2\r\n$2\r\nxy\r\n:4\r\n"
    );
    assert_eq!(
        ev("return {struct.unpack('>i16', string.rep('\\255', 16))}"),
        "*2\r\n:-1\r\n:17\r\n"
    );
    assert_eq!(
        ev("return {struct.unpack('>i9', '\\128\\0\\0\\0\\0\\0\\0\\0\\1')}"),
        "*2\r\n:1\r\n:10\r\n"
    );
    assert_eq!(
        ev("return struct.pack('>i12', -2)"),
        "$12\r\n\0\0\0\0\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}\r\n"
    );
    assert_eq!(
        ev("return {struct.unpack('d', struct.pack('d', 1.5))}"),
        "*2\r\n:1\r\n:9\r\n"
    );
    assert!(ev("return struct.unpack('i4', 'ab')")
        .contains("bad argument #2 to 'unpack' (data string too short)"));
    assert!(ev("return struct.pack('q', 1)")
        .contains("bad argument #1 to 'pack' (invalid format option 'q')"));
    assert!(
        ev("return struct.pack('i33', 1)").contains("integral size 33 is larger than limit of 32")
    );
    assert!(ev("return struct.pack('!3i', 1)").contains("alignment 3 is not a power of 2"));
    assert!(ev("return struct.size('s')")
        .contains("bad argument #1 to 'size' (option 's' has no fixed size)"));
    assert!(ev("return struct.unpack('c0', 'abc')").contains("format 'c0' needs a previous size"));
    assert!(ev("return struct.unpack('s', 'abc')").contains("unfinished string in data"));
    assert!(ev("return struct.pack('c5', 'ab')")
        .contains("bad argument #3 to 'pack' (string too short)"));
    assert!(ev("return struct.unpack('i', 'abcd', 0)").contains("offset must be 1 or greater"));
    assert!(ev("return struct.pack('i99999999999', 1)").contains("integral size overflow"));
}

/// Random formats and data never panic struct.unpack/pack/size.
#[test]
fn struct_random_never_panics() {
    let mut engine = crate::EvalEngine::new(64 << 20).unwrap();
    let mut host = super::FakeHost::default();
    let mut rng = Rand48::new(9);
    let alphabet = b"<>!=xbBhHlLTiIfdcs0123456789 q";
    let body = "pcall(struct.unpack, ARGV[1], ARGV[2], tonumber(ARGV[3])) pcall(struct.size, ARGV[1]) pcall(struct.pack, ARGV[1], 1, 2, 'abc', 4) return 1";
    for _ in 0..3000 {
        let fmt: String = (0..(rng.next() % 8))
            .map(|_| alphabet[(rng.next() as usize) % alphabet.len()] as char)
            .collect();
        let data: String = (0..(rng.next() % 12))
            .map(|_| (b'a' + (rng.next() % 26) as u8) as char)
            .collect();
        let pos = ((rng.next() % 20) as i64 - 5).to_string();
        let out = super::run_eval(
            &mut engine,
            &mut host,
            body,
            &[],
            &[&fmt, &data, &pos],
            Protocol::Resp2,
        );
        assert_eq!(out, ":1\r\n", "{fmt:?} {data:?} {pos}");
    }
}

/// Numbers within `f64::EPSILON` of an integer keep their value (upstream
/// mlua read `1e-20` as 0; see vendor/mlua/VIREO.md): cjson and cmsgpack
/// encode them as Redis does, and a table keyed by one can be packed.
#[test]
fn tiny_numbers_keep_their_value() {
    assert_eq!(ev("return cjson.encode({1e-20})"), bulk("[1e-20]"));
    // float 64 (0xcb) followed by 1e-20's IEEE bytes, as Redis packs it.
    assert_eq!(
        ev("local s = cmsgpack.pack(1e-20) return {#s, s:byte(1)}"),
        "*2\r\n:9\r\n:203\r\n"
    );
    assert_eq!(
        ev("local t = cmsgpack.unpack(cmsgpack.pack({[1e-20] = 82})) \
            for k, v in pairs(t) do return {tostring(k), v} end"),
        "*2\r\n$5\r\n1e-20\r\n:82\r\n"
    );
    assert_eq!(ev("return tostring(-0.0 + 1e-300)"), bulk("1e-300"));
}
