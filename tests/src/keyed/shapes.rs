//! The key shapes of the end-to-end suites (issue 14's acceptance list and a few more).
use super::{q, Shape, SPACE};

/// Every shape of this module (`KEYS_SHAPES` may name only these).
pub const ALL: [Shape; 17] = [
    SMALLINT_UNSIGNED,
    BIGINT_UNSIGNED,
    INT_INT,
    INT_CHAR4,
    INT_VARCHAR50_DATE,
    CHAR3_CHAR30,
    INT_DATETIME_DATE_TIME,
    INT_ENUM,
    CHAR3,
    VARCHAR255_GENERAL_CI,
    BINARY16,
    INET6,
    INET4,
    BIGINT_UNSIGNED_UUID,
    REORDERED,
    DECIMAL_TIMESTAMP_YEAR_SET,
    UNIQUE_VARCHAR_INT,
];

pub const SMALLINT_UNSIGNED: Shape = Shape {
    name: "smallint_unsigned",
    columns: "id SMALLINT UNSIGNED NOT NULL",
    key_clause: "PRIMARY KEY (id)",
    key: &["id"],
    space: SPACE,
    lits: |i| vec![if i == SPACE - 1 { 65535 } else { i * 80 }.to_string()],
    case_col: None,
};

/// Keys from 0 to 2^64-1, half of them above 2^63.
pub const BIGINT_UNSIGNED: Shape = Shape {
    name: "bigint_unsigned",
    columns: "id BIGINT UNSIGNED NOT NULL",
    key_clause: "PRIMARY KEY (id)",
    key: &["id"],
    space: SPACE,
    lits: |i| {
        vec![if i == SPACE - 1 {
            u64::MAX
        } else {
            u64::from(i) * 23_000_000_000_000_000
        }
        .to_string()]
    },
    case_col: None,
};

pub const INT_INT: Shape = Shape {
    name: "int_int",
    columns: "a INT NOT NULL, b INT NOT NULL",
    key_clause: "PRIMARY KEY (a, b)",
    key: &["a", "b"],
    space: SPACE,
    lits: |i| {
        vec![
            (i as i64 % 10 - 5).to_string(),
            (i as i64 / 10 - 40).to_string(),
        ]
    },
    case_col: None,
};

pub const INT_CHAR4: Shape = Shape {
    name: "int_char4",
    columns: "a INT NOT NULL, b CHAR(4) NOT NULL",
    key_clause: "PRIMARY KEY (a, b)",
    key: &["a", "b"],
    space: SPACE,
    lits: |i| {
        let s = ["a", "Bb", "cC", "DdD", "e", "Ff", "gG", "HhH"][(i % 8) as usize];
        vec![(i / 16).to_string(), q(&format!("{s}{}", i % 16 / 8))]
    },
    case_col: Some(("b", false)),
};

pub const INT_VARCHAR50_DATE: Shape = Shape {
    name: "int_varchar50_date",
    columns: "a INT NOT NULL, b VARCHAR(50) NOT NULL, c DATE NOT NULL",
    key_clause: "PRIMARY KEY (a, b, c)",
    key: &["a", "b", "c"],
    space: SPACE,
    lits: |i| {
        let names = [
            "alpha", "Beta", "GAMMA", "délta", "ÉPSILON", "zeta ", "eta", "Théta", "iota", "",
        ];
        vec![
            (i / 20).to_string(),
            q(names[(i % 20 / 2) as usize]),
            q(&format!("2024-02-{}", 28 + i % 2)),
        ]
    },
    case_col: Some(("b", true)),
};

pub const CHAR3_CHAR30: Shape = Shape {
    name: "char3_char30",
    columns: "a CHAR(3) NOT NULL, b CHAR(30) NOT NULL",
    key_clause: "PRIMARY KEY (a, b)",
    key: &["a", "b"],
    space: SPACE,
    lits: |i| {
        let n = i / 10;
        let code = format!(
            "{}{}{}",
            if n % 2 == 0 { 'A' } else { 'b' },
            (b'a' + (n / 26) as u8) as char,
            (b'A' + (n % 26) as u8) as char
        );
        let city = [
            "Kabul",
            "Qandahar",
            "Herat",
            "Mazar-e-Sharif",
            "Amsterdam",
            "Rotterdam",
            "Haag",
            "Zürich",
            "Ålesund",
            "São Paulo",
        ][(i % 10) as usize];
        vec![q(&code), q(city)]
    },
    case_col: Some(("b", false)),
};

pub const INT_DATETIME_DATE_TIME: Shape = Shape {
    name: "int_datetime_date_time",
    columns: "a INT NOT NULL, b DATETIME NOT NULL, c DATE NOT NULL, d TIME NOT NULL",
    key_clause: "PRIMARY KEY (a, b, c, d)",
    key: &["a", "b", "c", "d"],
    space: SPACE,
    lits: |i| {
        let (b, c, d) = [
            ("0000-00-00 00:00:00", "0000-00-00", "00:00:00"),
            ("2024-02-29 23:59:59", "2024-00-00", "-838:59:59"),
            ("1000-01-01 00:00:00", "9999-12-31", "838:59:59"),
            ("2038-01-19 03:14:08", "1970-01-01", "-00:00:01"),
        ][(i % 4) as usize];
        vec![(i / 4).to_string(), q(b), q(c), q(d)]
    },
    case_col: None,
};

/// ENUM members whose index order is not their alphabetical order.
pub const INT_ENUM: Shape = Shape {
    name: "int_enum",
    columns: "a INT NOT NULL, e ENUM('small','MEDIUM','large','x-large') NOT NULL",
    key_clause: "PRIMARY KEY (a, e)",
    key: &["a", "e"],
    space: SPACE,
    lits: |i| {
        let e = ["small", "MEDIUM", "large", "x-large"][(i % 4) as usize];
        vec![(i / 4).to_string(), q(e)]
    },
    case_col: None,
};

pub const CHAR3: Shape = Shape {
    name: "char3",
    columns: "code CHAR(3) NOT NULL",
    key_clause: "PRIMARY KEY (code)",
    key: &["code"],
    space: SPACE,
    lits: |i| {
        let s = match i {
            0 => "a".to_string(),
            1 => "Ab".to_string(),
            _ => {
                let l = |x: u32| (b'a' + (x % 26) as u8) as char;
                let first = if i % 2 == 1 {
                    l(i / 676).to_ascii_uppercase()
                } else {
                    l(i / 676)
                };
                format!("{first}{}{}", l(i / 26), l(i))
            }
        };
        vec![q(&s)]
    },
    case_col: Some(("code", false)),
};

pub const VARCHAR255_GENERAL_CI: Shape = Shape {
    name: "varchar255_general_ci",
    columns: "name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
    key_clause: "PRIMARY KEY (name)",
    key: &["name"],
    space: SPACE,
    lits: |i| {
        let s = match i % 4 {
            0 => format!("key-{i}"),
            1 => format!("Ключ-{i}"),
            2 => format!("{} {i}", "x".repeat(200)),
            _ => format!("Ärger {i} "),
        };
        vec![q(&s)]
    },
    case_col: Some(("name", true)),
};

/// 16-byte keys; key 8 is a 15-byte value (stored padded with 0x00, logged without it).
pub const BINARY16: Shape = Shape {
    name: "binary16",
    columns: "id BINARY(16) NOT NULL",
    key_clause: "PRIMARY KEY (id)",
    key: &["id"],
    space: SPACE,
    lits: |i| {
        vec![if i == 8 {
            "X'0102030405060708090A0B0C0D0E0F'".to_string()
        } else {
            format!("UNHEX(MD5('{i}'))")
        }]
    },
    case_col: None,
};

/// MariaDB INET6 keys: IPv6, IPv4-mapped and `::`, ordered by their 16-byte form.
pub const INET6: Shape = Shape {
    name: "inet6",
    columns: "id INET6 NOT NULL",
    key_clause: "PRIMARY KEY (id)",
    key: &["id"],
    space: SPACE,
    lits: |i| {
        vec![match i % 3 {
            0 => format!("'{:x}::{:x}'", 0x8000 + i * 131 % 0x7fff, i),
            1 => format!("'::ffff:10.{}.{}.1'", i / 250, i % 250),
            _ if i == 2 => "'::'".to_string(),
            _ => format!("'fe80::{:x}'", i),
        }]
    },
    case_col: None,
};

/// MariaDB INET4 keys over the whole range, 0.0.0.0 and 255.255.255.255 included.
pub const INET4: Shape = Shape {
    name: "inet4",
    columns: "id INET4 NOT NULL",
    key_clause: "PRIMARY KEY (id)",
    key: &["id"],
    space: SPACE,
    lits: |i| {
        vec![if i == SPACE - 1 {
            "'255.255.255.255'".to_string()
        } else {
            let n = u64::from(i) * 4_294_967_295 / u64::from(SPACE);
            format!(
                "'{}.{}.{}.{}'",
                n >> 24,
                (n >> 16) & 255,
                (n >> 8) & 255,
                n & 255
            )
        }]
    },
    case_col: None,
};

/// The benchmark's key, (BIGINT UNSIGNED, VARCHAR(36) utf8mb4_general_ci), over 8 000
/// keys: pages, replay batches and weight look-ups of more than 500 values.
pub const BIGINT_UNSIGNED_UUID: Shape = Shape {
    name: "bigint_unsigned_uuid",
    columns: "a BIGINT UNSIGNED NOT NULL, \
              u VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
    key_clause: "PRIMARY KEY (a, u)",
    key: &["a", "u"],
    space: 8_000,
    lits: |i| {
        let a = u64::from(i % 3) * 9_000_000_000_000_000_000;
        let h = format!(
            "{:032x}",
            u128::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
        );
        let u = format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        );
        let u = if i % 5 == 0 { u.to_uppercase() } else { u };
        vec![a.to_string(), q(&u)]
    },
    case_col: Some(("u", false)),
};

/// Key columns after non-key columns and in another order than in the table:
/// PRIMARY KEY (a, b) over columns (x, st, en, b, a); `st` and `en` are a non-key SET
/// and ENUM that every change's row image carries.
pub const REORDERED: Shape = Shape {
    name: "reordered",
    columns: "x INT NULL, st SET('a','B','c') NULL DEFAULT 'B,c', \
              en ENUM('Lo','HI') NULL DEFAULT 'HI', b VARCHAR(10) NOT NULL, a INT NOT NULL",
    key_clause: "PRIMARY KEY (a, b)",
    key: &["a", "b"],
    space: SPACE,
    lits: |i| {
        let b = ["p", "Q", "r ", "S"][(i % 4) as usize];
        vec![(i as i64 / 4 - 50).to_string(), q(b)]
    },
    case_col: Some(("b", true)),
};

/// The other key types of DESIGN §14: DECIMAL (negative, fractions), TIMESTAMP(6)
/// (zero, fractions, both ends of its range), YEAR and SET.
pub const DECIMAL_TIMESTAMP_YEAR_SET: Shape = Shape {
    name: "decimal_timestamp_year_set",
    columns: "d DECIMAL(10,3) NOT NULL, ts TIMESTAMP(6) NOT NULL, y YEAR NOT NULL, \
              s SET('x','Y','z') NOT NULL",
    key_clause: "PRIMARY KEY (d, ts, y, s)",
    key: &["d", "ts", "y", "s"],
    space: SPACE,
    lits: |i| {
        let m = (i as i64 / 4 - 100) * 125;
        let d = format!(
            "{}{}.{:03}",
            if m < 0 { "-" } else { "" },
            m.abs() / 1000,
            m.abs() % 1000
        );
        let ts = [
            "1970-01-01 00:00:01.000000",
            "2038-01-19 03:14:07.999999",
            "0000-00-00 00:00:00",
            "2024-02-29 12:00:00.5",
        ][(i % 4) as usize];
        let s = ["", "x", "Y,z", "x,Y,z"][(i % 4) as usize];
        vec![d, q(ts), (1901 + i % 5).to_string(), q(s)]
    },
    case_col: None,
};

/// No primary key: the only key is a NOT NULL UNIQUE (VARCHAR, INT).
pub const UNIQUE_VARCHAR_INT: Shape = Shape {
    name: "unique_varchar_int",
    columns: "name VARCHAR(40) NOT NULL, num INT NOT NULL",
    key_clause: "UNIQUE KEY uk (name, num)",
    key: &["name", "num"],
    space: SPACE,
    lits: |i| {
        let s = ["Ann", "bob", "CÉCILE", "dave "][(i % 4) as usize];
        vec![q(s), (i as i64 / 4 - 100).to_string()]
    },
    case_col: Some(("name", true)),
};
