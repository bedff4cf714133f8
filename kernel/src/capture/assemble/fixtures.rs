//! Recorded binlog events for the assembler's unit tests (test-only).
//!
//! Each fixture in `kernel/src/capture/fixtures/` holds one scenario as a real MariaDB
//! sent it to a replica: the binlog stream requested at the group end before the
//! scenario (the fake ROTATE and the FORMAT_DESCRIPTION included) up to the end of its
//! last event, each event written back with its original bytes and checksum, plus the
//! start position and the sealed schemas of the tables the scenario captures. The unit
//! tests replay these bytes through [`super::Capturer`] with no server.
//!
//! Re-record (starts a throwaway MariaDB through `tests/harness`):
//! `BLESS=1 cargo test -p kernel --lib capture::assemble::fixtures` (without BLESS the same
//! test checks the committed fixtures against a fresh recording).
//! Positions and xids then change only if the server version writes other events, and
//! the exact values asserted in [`super::tests`] must be re-read from the new bytes.
use crate::codec::{self, Versioned};
use crate::schema::SealedSchema;
use mysql_common::binlog::consts::BinlogVersion;
use mysql_common::binlog::events::Event;
use mysql_common::binlog::EventStreamReader;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One recorded scenario (test-only format, kind `AFIX`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Fixture {
    /// Where the stream was requested: a group end before the scenario.
    pub(super) start_file: String,
    pub(super) start_pos: u64,
    pub(super) start_gtid: Option<String>,
    pub(super) control_schema: String,
    /// Sealed schemas of the captured tables (job 1, generation 1 and on).
    pub(super) tables: Vec<SealedSchema>,
    /// The events, one after another, as `Event::write` writes them.
    pub(super) events: Vec<u8>,
}

impl Versioned for Fixture {
    const KIND: [u8; 4] = *b"AFIX";
    const VERSION: u16 = 2;
}

/// AFIX version 1: the schemas in SCHM v1 form (one primary-key column).
#[derive(Deserialize)]
struct FixtureV1 {
    start_file: String,
    start_pos: u64,
    start_gtid: Option<String>,
    control_schema: String,
    tables: Vec<crate::schema::SealedSchemaV1>,
    events: Vec<u8>,
}

/// Decodes a fixture of every version written.
fn decode(bytes: &[u8]) -> Result<Fixture, codec::DecodeError> {
    let (version, body) = codec::split::<Fixture>(bytes)?;
    if version == 1 {
        let v1: FixtureV1 = codec::decode_body(&Fixture::KIND, 1, body)?;
        return Ok(Fixture {
            start_file: v1.start_file,
            start_pos: v1.start_pos,
            start_gtid: v1.start_gtid,
            control_schema: v1.control_schema,
            tables: v1.tables.into_iter().map(Into::into).collect(),
            events: v1.events,
        });
    }
    codec::decode_body(&Fixture::KIND, version, body)
}

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/capture/fixtures")
        .join(format!("{name}.bin"))
}

/// The fixture `name`. A missing or unreadable file fails the test: never a silent pass.
pub(super) fn load(name: &str) -> Fixture {
    let p = path(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| {
        panic!(
            "fixture {} missing ({e}); record it with BLESS=1 (see capture/assemble/fixtures.rs)",
            p.display()
        )
    });
    decode(&bytes).unwrap_or_else(|e| panic!("fixture {} does not decode: {e:?}", p.display()))
}

/// The fixture's events, parsed exactly as the reader's stream parses them.
pub(super) fn events(fx: &Fixture) -> Vec<Event> {
    let mut reader = EventStreamReader::new(BinlogVersion::Version4);
    let mut input = &fx.events[..];
    let mut out = Vec::new();
    loop {
        match reader.read(&mut input) {
            Ok(Some(ev)) => out.push(ev),
            Ok(None) => break,
            Err(e) => panic!("fixture event {} does not parse: {e}", out.len()),
        }
    }
    out
}

#[allow(clippy::unwrap_used)]
mod record {
    use super::{path, Fixture};
    use crate::codec;
    use crate::control::{self, Intent, IntentKind};
    use crate::ids::{Generation, JobId};
    use crate::schema::SealedSchema;
    use futures_util::StreamExt;
    use mysql_async::prelude::Queryable;
    use mysql_common::binlog::consts::BinlogVersion;

    /// What a scenario does on the source.
    enum Step {
        Sql(&'static str),
        Intent(u64, IntentKind),
    }
    use Step::{Intent as I, Sql as S};

    /// The scenarios, in the order they run on one fresh server (the DDL last: it
    /// changes `t` after the sealed schema was read).
    fn scenarios() -> Vec<(&'static str, Vec<Step>)> {
        vec![
            (
                "plain",
                vec![
                    S("BEGIN"),
                    S("INSERT INTO fx.t VALUES (1, 'a'), (2, 'b')"),
                    S("UPDATE fx.t SET v = 'c' WHERE id = 1"),
                    S("DELETE FROM fx.t WHERE id = 2"),
                    S("COMMIT"),
                ],
            ),
            (
                "two_tables",
                vec![
                    S("BEGIN"),
                    S("INSERT INTO fx.t VALUES (3, 'd')"),
                    S("INSERT INTO fx.u VALUES (1, 'x'), (2, 'y')"),
                    S("UPDATE fx.t SET v = 'e' WHERE id = 3"),
                    S("UPDATE fx.u SET v = 'z' WHERE id = 1"),
                    S("COMMIT"),
                ],
            ),
            (
                "big",
                vec![
                    S("BEGIN"),
                    S("INSERT INTO fx.t VALUES (10, 'a'), (11, 'b'), (12, 'c'), (13, 'd')"),
                    S("INSERT INTO fx.t VALUES (14, 'e'), (15, 'f'), (16, 'g')"),
                    S("COMMIT"),
                ],
            ),
            (
                "xa",
                vec![
                    S("XA START 'fx1'"),
                    S("INSERT INTO fx.t VALUES (20, 'xa')"),
                    S("XA END 'fx1'"),
                    S("XA PREPARE 'fx1'"),
                    S("XA COMMIT 'fx1'"),
                ],
            ),
            (
                "intent",
                vec![
                    S("INSERT INTO fx.t VALUES (30, 'before B')"),
                    I(1, IntentKind::B),
                    S("INSERT INTO fx.t VALUES (31, 'after B')"),
                ],
            ),
            (
                "progress",
                vec![
                    S("INSERT INTO fx.u VALUES (40, 'not captured')"),
                    S("BEGIN"),
                    S("INSERT INTO fx.t VALUES (40, 'a'), (41, 'b')"),
                    S("COMMIT"),
                ],
            ),
            (
                "xa_rollback",
                vec![
                    S("XA START 'fx2'"),
                    S("INSERT INTO fx.t VALUES (50, 'rolled back')"),
                    S("XA END 'fx2'"),
                    S("XA PREPARE 'fx2'"),
                    S("XA ROLLBACK 'fx2'"),
                ],
            ),
            ("ddl", vec![S("ALTER TABLE fx.t ADD COLUMN w INT NULL")]),
        ]
    }

    async fn end(conn: &mut mysql_async::Conn) -> (String, u64, Option<String>) {
        let row: mysql_async::Row = conn
            .query_first("SHOW MASTER STATUS")
            .await
            .unwrap()
            .unwrap();
        let file: String = row.get(0).unwrap();
        let pos: u64 = row.get(1).unwrap();
        let gtid: Option<String> = conn
            .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file.as_str(), pos))
            .await
            .unwrap();
        (file, pos, gtid.filter(|g| !g.is_empty()))
    }

    /// The stream from `file`:`pos` up to the event ending at `upto`, re-serialized.
    async fn stream(url: &str, file: &str, pos: u64, upto: u64) -> Vec<u8> {
        let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(url).unwrap())
            .await
            .unwrap();
        conn.query_drop("SET @mariadb_slave_capability=4")
            .await
            .unwrap();
        let req = mysql_async::BinlogStreamRequest::new(4242)
            .with_filename(file.as_bytes())
            .with_pos(pos);
        let mut s = conn.get_binlog_stream(req).await.unwrap();
        let mut out = Vec::new();
        while let Some(ev) = s.next().await {
            let ev = ev.unwrap();
            ev.write(BinlogVersion::Version4, &mut out).unwrap();
            if u64::from(ev.header().log_pos()) >= upto {
                break;
            }
        }
        out
    }

    /// The event kinds of a fixture in order (positions and the B nonce differ between
    /// recordings; the kinds of events the server writes for a scenario do not).
    fn kinds(fx: &Fixture) -> Vec<u8> {
        super::events(fx)
            .iter()
            .map(|e| e.header().event_type_raw())
            .collect()
    }

    /// Runs every scenario on a fresh MariaDB and compares what its binlog holds with the
    /// committed fixture (same tables, same event kinds in the same order), so the
    /// assembler's tests stay tied to what the server really writes. With `BLESS=1` it
    /// writes the recordings as the new fixtures instead.
    #[tokio::test(flavor = "multi_thread")]
    async fn committed_fixtures_match_what_mariadb_writes_today() {
        let bless = std::env::var("BLESS").as_deref() == Ok("1");
        let src = harness::Server::start_private(harness::ServerOpts::source());
        src.sql("CREATE DATABASE fx");
        src.sql("CREATE DATABASE fx_ctl");
        for sql in control::create_statements("fx_ctl") {
            src.sql(&sql);
        }
        src.sql("CREATE TABLE fx.t (id INT PRIMARY KEY, v VARCHAR(20) NULL)");
        src.sql("CREATE TABLE fx.u (id INT PRIMARY KEY, v VARCHAR(20) NULL)");
        let url = src.url();
        let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
            .await
            .unwrap();
        let facts = crate::introspect::read_table(&mut conn, "fx", "t")
            .await
            .unwrap()
            .unwrap();
        let sealed: SealedSchema = crate::introspect::seal(&facts).unwrap();
        for (name, steps) in scenarios() {
            let (file, pos, gtid) = end(&mut conn).await;
            for step in steps {
                match step {
                    Step::Sql(sql) => conn.query_drop(sql).await.unwrap(),
                    Step::Intent(job, kind) => {
                        let i = Intent::new(JobId(job), Generation(1), kind, None, None);
                        control::write_intent(&mut conn, "fx_ctl", &i)
                            .await
                            .unwrap();
                    }
                }
            }
            let (end_file, upto, _) = end(&mut conn).await;
            assert_eq!(end_file, file, "a scenario stays in one binlog file");
            let fx = Fixture {
                start_file: file.clone(),
                start_pos: pos,
                start_gtid: gtid,
                control_schema: "fx_ctl".into(),
                tables: vec![sealed.clone()],
                events: stream(&url, &file, pos, upto).await,
            };
            if !bless {
                let committed = super::load(name);
                assert_eq!(committed.tables, fx.tables, "{name}: sealed tables");
                assert_eq!(
                    kinds(&committed),
                    kinds(&fx),
                    "{name}: event kinds (BLESS=1 re-records)"
                );
                continue;
            }
            let p = path(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, codec::encode(&fx)).unwrap();
            eprintln!("recorded {} ({} event bytes)", p.display(), fx.events.len());
        }
    }
}
