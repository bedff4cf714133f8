//! The cases of the sort-key property: per type and collation, boundary values and seeded
//! random values, as SQL literals (inserted with sql_mode = '' so zero dates and the
//! invalid ENUM value '' are stored; the server stores what it stores, and the property is
//! checked on that).
use crate::Case;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const RANDOM: usize = 120;

pub fn cases(seed: u64) -> Vec<Case> {
    let mut r = StdRng::seed_from_u64(seed);
    let mut out = integers(&mut r);
    out.push(decimal(&mut r));
    out.extend(temporal(&mut r));
    out.extend(enum_set(&mut r));
    out.extend(binary(&mut r));
    for coll in [
        "utf8mb4_general_ci",
        "utf8mb4_unicode_ci",
        "utf8mb4_bin",
        "latin1_swedish_ci",
        "utf8mb4_nopad_bin",
    ] {
        for ty in ["VARCHAR", "CHAR"] {
            out.push(chars(&mut r, coll, ty));
        }
    }
    out
}

/// Boundaries, then random values, then some repeated (duplicates are allowed).
fn case(
    r: &mut StdRng,
    name: &str,
    column: &str,
    mut values: Vec<String>,
    gen: impl Fn(&mut StdRng) -> String,
) -> Case {
    for _ in 0..RANDOM {
        values.push(gen(r));
    }
    for _ in 0..RANDOM / 6 {
        let i = r.random_range(0..values.len());
        values.push(values[i].clone());
    }
    Case {
        name: name.into(),
        column: column.into(),
        values,
    }
}

fn integers(r: &mut StdRng) -> Vec<Case> {
    let mut out = Vec::new();
    for (ty, bits) in [
        ("TINYINT", 8u32),
        ("SMALLINT", 16),
        ("MEDIUMINT", 24),
        ("INT", 32),
        ("BIGINT", 64),
    ] {
        let (min, max) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
        let b = [min, min + 1, -1, 0, 1, max - 1, max]
            .map(|v| v.to_string())
            .to_vec();
        let name = format!("i_{}", ty.to_lowercase());
        out.push(case(r, &name, ty, b, move |r| {
            r.random_range(min..=max).to_string()
        }));
        let umax = (1u128 << bits) - 1;
        let b = [0, 1, umax / 2, umax / 2 + 1, umax - 1, umax]
            .map(|v| v.to_string())
            .to_vec();
        let name = format!("u_{}", ty.to_lowercase());
        out.push(case(r, &name, &format!("{ty} UNSIGNED"), b, move |r| {
            r.random_range(0..=umax).to_string()
        }));
    }
    out
}

fn quoted(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| format!("'{s}'")).collect()
}

fn decimal(r: &mut StdRng) -> Case {
    let b = quoted(&[
        "-9999999.999",
        "9999999.999",
        "0",
        "-0",
        "-0.000",
        "-0.001",
        "0.001",
        "1",
        "-1",
        "12.34",
        "-12.340",
        "0.5",
        "-0.5",
        "10",
        "-10",
    ]);
    case(r, "d_dec", "DECIMAL(10,3)", b, |r| {
        let sign = if r.random_bool(0.5) { "-" } else { "" };
        let width = r.random_range(0..=7);
        let int: u64 = r.random_range(0..10u64.pow(width));
        format!("'{sign}{int}.{:03}'", r.random_range(0..1000))
    })
}

fn temporal(r: &mut StdRng) -> Vec<Case> {
    let date = |r: &mut StdRng| {
        let zero = r.random_bool(0.1);
        let (m, d) = if zero {
            (r.random_range(0..=1), r.random_range(0..=1))
        } else {
            (r.random_range(1..=12), r.random_range(1..=28))
        };
        format!("{:04}-{m:02}-{d:02}", r.random_range(1000..=9999))
    };
    let clock = |r: &mut StdRng| {
        format!(
            "{:02}:{:02}:{:02}.{:06}",
            r.random_range(0..24),
            r.random_range(0..60),
            r.random_range(0..60),
            r.random_range(0..1_000_000)
        )
    };
    let b = quoted(&[
        "0000-00-00",
        "2024-00-00",
        "2024-02-00",
        "1000-01-01",
        "9999-12-31",
        "2024-02-29",
    ]);
    let dates = case(r, "t_date", "DATE", b, move |r| format!("'{}'", date(r)));
    let b = quoted(&[
        "0000-00-00 00:00:00",
        "1000-01-01 00:00:00",
        "9999-12-31 23:59:59.999999",
        "2024-02-29 23:59:59.5",
        "2024-02-29 23:59:59.499999",
        "2024-00-00 00:00:00",
    ]);
    let datetimes = case(r, "t_datetime", "DATETIME(6)", b, move |r| {
        format!("'{} {}'", date(r), clock(r))
    });
    let b = quoted(&[
        "0000-00-00 00:00:00",
        "1970-01-01 00:00:01",
        "2038-01-19 03:14:07.999999",
        "2024-03-01 01:02:03.456789",
        "2024-03-01 01:02:03",
    ]);
    let stamps = case(r, "t_timestamp", "TIMESTAMP(6)", b, |r| {
        format!(
            "FROM_UNIXTIME({}.{:06})",
            r.random_range(1..(1i64 << 31)),
            r.random_range(0..1_000_000)
        )
    });
    let b = quoted(&[
        "-838:59:59.999999",
        "838:59:59.999999",
        "00:00:00",
        "-00:00:00.000001",
        "00:00:00.000001",
        "24:00:00",
        "-25:00:00",
        "-00:00:00",
        "23:59:59.999999",
        "-12:00:01",
    ]);
    let times = case(r, "t_time", "TIME(6)", b, |r| {
        let sign = if r.random_bool(0.5) { "-" } else { "" };
        format!(
            "'{sign}{}:{:02}:{:02}.{:06}'",
            r.random_range(0..839),
            r.random_range(0..60),
            r.random_range(0..60),
            r.random_range(0..1_000_000)
        )
    });
    let b = ["0", "1901", "2155", "2000", "'0000'", "1999"]
        .map(String::from)
        .to_vec();
    let years = case(r, "t_year", "YEAR", b, |r| {
        if r.random_bool(0.05) {
            "0".into()
        } else {
            r.random_range(1901..=2155).to_string()
        }
    });
    vec![dates, datetimes, stamps, times, years]
}

fn enum_set(r: &mut StdRng) -> Vec<Case> {
    let members = ["b", "a", "c", "dd"];
    let mut b = quoted(&["", "a", "b", "c", "dd", "x"]);
    b.extend(["0", "1", "2", "3", "4"].map(String::from));
    let en = case(r, "e_enum", "ENUM('b','a','c','dd')", b, move |r| {
        if r.random_bool(0.5) {
            format!("'{}'", members[r.random_range(0..4)])
        } else {
            r.random_range(0..=4).to_string()
        }
    });
    let names = ["x", "yy", "z", "w"];
    let mut b = quoted(&["", "x", "yy,z", "w,x", "x,yy,z,w"]);
    b.extend(["0", "15", "1", "8"].map(String::from));
    let set = case(r, "e_set", "SET('x','yy','z','w')", b, move |r| {
        let bits = r.random_range(0..16u32);
        if r.random_bool(0.5) {
            bits.to_string()
        } else {
            let list: Vec<&str> = (0..4)
                .filter(|i| bits & (1 << i) != 0)
                .map(|i| names[i])
                .collect();
            format!("'{}'", list.join(","))
        }
    });
    let wide: Vec<String> = (0..10).map(|i| format!("'m{i}'")).collect();
    let b = ["0", "1", "512", "1023", "'m0,m9'", "'m8'"]
        .map(String::from)
        .to_vec();
    let set10 = case(r, "e_set10", &format!("SET({})", wide.join(",")), b, |r| {
        r.random_range(0..1024).to_string()
    });
    vec![en, set, set10]
}

fn hex_lit(b: &[u8]) -> String {
    format!("X'{}'", hex::encode(b))
}

fn binary(r: &mut StdRng) -> Vec<Case> {
    let bytes = |r: &mut StdRng| -> Vec<u8> {
        let n = r.random_range(0..=16);
        (0..n)
            .map(|_| [0u8, 1, 0x61, 0x7f, 0x80, 0xff, r.random()][r.random_range(0..7)])
            .collect()
    };
    let mut fifteen = vec![0xABu8; 15];
    let b = vec![
        hex_lit(b""),
        hex_lit(&[0]),
        hex_lit(&[0; 16]),
        hex_lit(&fifteen),
        hex_lit(&{
            fifteen.push(0);
            fifteen.clone()
        }),
        hex_lit(&[0xff; 16]),
        hex_lit(b"a"),
        hex_lit(b"a\0"),
        hex_lit(b"a "),
        hex_lit(b"A"),
    ];
    let bin = case(r, "b_binary", "BINARY(16)", b.clone(), move |r| {
        hex_lit(&bytes(r))
    });
    let vbin = case(r, "b_varbinary", "VARBINARY(16)", b, move |r| {
        hex_lit(&bytes(r))
    });
    vec![bin, vbin]
}

/// Tokens of random strings; 'ß' weighs as two under unicode_ci, counted so no value
/// expands beyond the column's length (those are refused: see the refusal test).
const TOKENS: &[&str] = &[
    "a", "A", "á", "Á", "b", "B", "ß", "s", "e", "é", "E", " ", "\t", "\\", "'", "ä", "z", "\0",
    "😀", "😁",
];

fn chars(r: &mut StdRng, coll: &str, ty: &str) -> Case {
    let cs = coll.split('_').next().unwrap().to_string();
    let latin1 = cs == "latin1";
    let lit = move |s: &str| -> String {
        let bytes: Vec<u8> = if latin1 {
            s.chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap())
                .collect()
        } else {
            s.as_bytes().to_vec()
        };
        format!("_{cs} X'{}'", hex::encode(bytes))
    };
    let mut b = vec![
        "", " ", "a", "a ", "a  ", "A", "A ", "á", "Á", "\t", "a\t", "ß", "ss", "s", "a\0", "\0",
        "ab  ", "z", "e", "é", "ä",
    ];
    if !latin1 {
        b.extend(["😀", "😁", "😀 "]);
    }
    let boundaries: Vec<String> = b.iter().map(|s| lit(s)).collect();
    let name = format!("s_{coll}_{}", ty.to_lowercase());
    case(
        r,
        &name,
        &format!(
            "{ty}(8) CHARACTER SET {} COLLATE {coll}",
            coll.split('_').next().unwrap()
        ),
        boundaries,
        move |r| {
            let tokens: Vec<&str> = TOKENS
                .iter()
                .copied()
                .filter(|t| !latin1 || t.chars().all(|c| u32::from(c) < 256))
                .collect();
            let mut s = String::new();
            let mut weights = 0;
            let n = r.random_range(0..=8);
            while s.chars().count() < n {
                let t = tokens[r.random_range(0..tokens.len())];
                let w = if t == "ß" { 2 } else { 1 };
                if weights + w > 8 {
                    break;
                }
                weights += w;
                s.push_str(t);
            }
            lit(&s)
        },
    )
}
