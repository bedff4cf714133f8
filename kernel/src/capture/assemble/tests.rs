//! The assembler over recorded event bytes ([`super::fixtures`]): no server, exact outputs.
use super::fixtures::{events, load, Fixture};
use super::{Capturer, Emit, Restored};
use crate::capture::{CaptureSet, CaptureTable};
use crate::change::GroupEnd;
use crate::ids::{Digest, Generation, JobId};
use crate::log::{GroupChunk, RecordBody};
use crate::position::{BinlogPos, Gtid};
use crate::value::SqlValue;
use std::collections::BTreeSet;

const LINEAGE: Digest = Digest([9; 32]);

fn job() -> (JobId, Generation) {
    (JobId(1), Generation(1))
}

/// Replays fixture `name` through a capturer resuming at its start with `active` tables
/// and chunk bound `chunk`; returns everything it emitted and the capturer.
fn replay(name: &str, chunk: u32, active: bool) -> (Fixture, Vec<Emit>, Capturer) {
    let fx = load(name);
    let mut set = CaptureSet::default();
    for sealed in &fx.tables {
        set.add(CaptureTable {
            job: JobId(1),
            generation: Generation(1),
            sealed: sealed.clone(),
        });
    }
    let restart = GroupEnd {
        pos: BinlogPos::new(fx.start_file.clone(), fx.start_pos),
        gtid: fx.start_gtid.as_deref().and_then(Gtid::parse),
    };
    let mut state = Restored::default();
    if active {
        state.active = BTreeSet::from([job()]);
    }
    let mut cap = Capturer::new(
        LINEAGE,
        &fx.control_schema,
        set.shared(),
        chunk,
        restart,
        state,
    );
    let mut out = Vec::new();
    for ev in events(&fx) {
        cap.on_event(&ev).expect("a recorded event is accepted");
        out.extend(cap.take());
    }
    (fx, out, cap)
}

/// One line per emitted item, every field that the assembler decides on spelled out:
/// positions (file:pos within the fixture's one file), chunk numbers, GTIDs, bodies with
/// every change (table, event position, row index, op, both images), intent, pause,
/// statement and raw rows. Row values print as `1` / `'a'` / `NULL`.
fn render(e: &Emit) -> Vec<String> {
    match e {
        Emit::Release(r) => vec![format!(
            "release {} start {} gtid {} end {}",
            r.xid,
            r.start,
            gtid(&r.gtid),
            end(&Some(r.end.clone()))
        )],
        Emit::Record(entry) => {
            let r = &entry.record;
            let mut out = vec![format!(
                "record start {} chunk {} gtid {} end {} {}{}",
                r.start,
                r.chunk,
                gtid(&r.gtid),
                end(&r.end),
                kind(&r.body),
                entry
                    .releases
                    .as_ref()
                    .map(|x| format!(" releases {x}"))
                    .unwrap_or_default()
            )];
            if let Some(c) = chunk_of(&r.body) {
                out.extend(chunk_lines(c));
            }
            out
        }
    }
}

fn gtid(g: &Option<Gtid>) -> String {
    g.as_ref().map_or("-".into(), |g| g.to_string())
}

fn end(e: &Option<GroupEnd>) -> String {
    e.as_ref()
        .map_or("-".into(), |e| format!("{} ({})", e.pos, gtid(&e.gtid)))
}

fn kind(b: &RecordBody) -> String {
    match b {
        RecordBody::Chunk(_) => "chunk".into(),
        RecordBody::Held(h) => format!("held {}", h.xid),
        RecordBody::Dropped { xid } => format!("dropped {xid}"),
        RecordBody::Progress => "progress".into(),
        RecordBody::Switch(s) => format!("switch {}", s.to_pos),
    }
}

fn chunk_of(b: &RecordBody) -> Option<&GroupChunk> {
    match b {
        RecordBody::Chunk(c) => Some(c),
        RecordBody::Held(h) => Some(&h.chunk),
        _ => None,
    }
}

fn row(r: &Option<Vec<SqlValue>>) -> String {
    let Some(r) = r else { return "-".into() };
    let vals: Vec<String> = r
        .iter()
        .map(|v| match v {
            SqlValue::Null => "NULL".into(),
            SqlValue::Int(i) => i.to_string(),
            SqlValue::Bytes(b) => format!("'{}'", String::from_utf8_lossy(b)),
            other => format!("{other:?}"),
        })
        .collect();
    format!("({})", vals.join(", "))
}

fn chunk_lines(c: &GroupChunk) -> Vec<String> {
    let mut out = Vec::new();
    for ch in &c.changes {
        let id = &ch.id;
        assert_eq!(id.lineage, LINEAGE, "changes carry the capturer's lineage");
        out.push(format!(
            "  {:?} {}.{} at {}:{} row {} {} -> {}",
            id.op,
            id.schema,
            id.table,
            id.file,
            id.event_pos,
            id.row,
            row(&ch.before),
            row(&ch.after)
        ));
    }
    for i in &c.intents {
        out.push(format!(
            "  intent {} job {} gen {} at {}{}",
            i.intent.kind.as_str(),
            i.intent.job.0,
            i.intent.generation.0,
            i.at,
            if i.obsolete { " obsolete" } else { "" }
        ));
    }
    for p in &c.pauses {
        out.push(format!(
            "  pause {}.{} job {} gen {} at {} {:?}: {}",
            p.schema, p.table, p.job.0, p.generation.0, p.at, p.error.code, p.error.message
        ));
    }
    for s in &c.statements {
        out.push(format!(
            "  statement at {} in {}: {}",
            s.at, s.default_schema, s.sql
        ));
    }
    for r in &c.raw {
        out.push(format!(
            "  raw {}.{} at {} type {} ({} data bytes, {} map bytes)",
            r.schema,
            r.table,
            r.event_pos,
            r.event_type,
            r.data.len(),
            r.table_map.len()
        ));
    }
    out
}

fn lines(out: &[Emit]) -> Vec<String> {
    out.iter().flat_map(render).collect()
}

fn assert_lines(out: &[Emit], want: &[&str]) {
    let got = lines(out);
    assert_eq!(got, want, "emitted:\n{}", got.join("\n"));
}

const F: &str = "mysql-bin.000001";

fn at(pos: u64) -> GroupEnd {
    GroupEnd {
        pos: BinlogPos::new(F, pos),
        gtid: None,
    }
}

#[test]
fn plain_group_is_one_record_with_every_change_in_binlog_order() {
    let (_, out, cap) = replay("plain", 100, true);
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:1689 chunk 0 gtid 0-1-7 end mysql-bin.000001:2256 (0-1-7) chunk",
            "  Insert fx.t at mysql-bin.000001:1857 row 0 - -> (1, 'a')",
            "  Insert fx.t at mysql-bin.000001:1857 row 1 - -> (2, 'b')",
            "  Update fx.t at mysql-bin.000001:2024 row 0 (1, 'a') -> (1, 'c')",
            "  Delete fx.t at mysql-bin.000001:2185 row 0 (2, 'b') -> -",
        ],
    );
    assert_eq!(cap.last_end().pos, at(2256).pos);
    assert_eq!(cap.last_end().gtid, Gtid::parse("0-1-7"));
    assert!(!cap.in_group());
    assert_eq!(cap.file(), F);
}

#[test]
fn a_transaction_over_two_tables_keeps_only_the_captured_one() {
    let (_, out, _) = replay("two_tables", 100, true);
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:2256 chunk 0 gtid 0-1-8 end mysql-bin.000001:2994 (0-1-8) chunk",
            "  Insert fx.t at mysql-bin.000001:2414 row 0 - -> (3, 'd')",
            "  Update fx.t at mysql-bin.000001:2747 row 0 (3, 'd') -> (3, 'e')",
        ],
    );
}

#[test]
fn a_big_group_is_cut_into_chunks_of_the_stream_bound() {
    let (_, out, cap) = replay("big", 3, true);
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:2994 chunk 0 gtid 0-1-9 end - chunk",
            "  Insert fx.t at mysql-bin.000001:3186 row 0 - -> (10, 'a')",
            "  Insert fx.t at mysql-bin.000001:3186 row 1 - -> (11, 'b')",
            "  Insert fx.t at mysql-bin.000001:3186 row 2 - -> (12, 'c')",
            "record start mysql-bin.000001:2994 chunk 1 gtid 0-1-9 end - chunk",
            "  Insert fx.t at mysql-bin.000001:3186 row 3 - -> (13, 'd')",
            "  Insert fx.t at mysql-bin.000001:3386 row 0 - -> (14, 'e')",
            "  Insert fx.t at mysql-bin.000001:3386 row 1 - -> (15, 'f')",
            "record start mysql-bin.000001:2994 chunk 2 gtid 0-1-9 end mysql-bin.000001:3471 (0-1-9) chunk",
            "  Insert fx.t at mysql-bin.000001:3386 row 2 - -> (16, 'g')",
        ],
    );
    assert_eq!(cap.last_end().pos, at(3471).pos);
    // The same changes, with the same identities, as one chunk under a larger bound.
    let (_, whole, _) = replay("big", 100, true);
    let changes = |out: &[Emit]| -> Vec<crate::change::Change> {
        out.iter()
            .filter_map(|e| match e {
                Emit::Record(en) => chunk_of(&en.record.body).map(|c| c.changes.clone()),
                Emit::Release(_) => None,
            })
            .flatten()
            .collect()
    };
    assert_eq!(whole.len(), 1);
    assert_eq!(changes(&whole), changes(&out));
    assert_eq!(changes(&out).len(), 7);
}

#[test]
fn a_re_read_regenerates_identical_records() {
    let (_, first, _) = replay("big", 3, true);
    let (_, again, _) = replay("big", 3, true);
    assert_eq!(first, again);
    assert_eq!(first.len(), 3);
}

#[test]
fn a_multi_chunk_group_after_uncaptured_groups_is_preceded_by_progress() {
    // D must name the group's start before its first chunk is stored (module doc).
    let (_, out, _) = replay("progress", 1, true);
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:4861 chunk 0 gtid 0-1-15 end mysql-bin.000001:5113 (0-1-15) progress",
            "record start mysql-bin.000001:5113 chunk 0 gtid 0-1-16 end - chunk",
            "  Insert fx.t at mysql-bin.000001:5283 row 0 - -> (40, 'a')",
            "record start mysql-bin.000001:5113 chunk 1 gtid 0-1-16 end - chunk",
            "  Insert fx.t at mysql-bin.000001:5283 row 1 - -> (41, 'b')",
            "record start mysql-bin.000001:5113 chunk 2 gtid 0-1-16 end mysql-bin.000001:5361 (0-1-16) chunk",
        ],
    );
}

#[test]
fn groups_of_no_captured_table_only_move_progress_when_asked() {
    let (_, out, mut cap) = replay("two_tables", 100, false);
    assert!(out.is_empty(), "nothing is captured before B");
    assert_eq!(cap.last_end().pos, at(2994).pos);
    assert!(cap.progress());
    assert_eq!(cap.pending(), 1);
    assert_lines(
        &cap.take(),
        &["record start mysql-bin.000001:2256 chunk 0 gtid 0-1-8 end mysql-bin.000001:2994 (0-1-8) progress"],
    );
    assert!(!cap.progress(), "nothing new since the last record");
    assert_eq!(cap.pending(), 0);
}

#[test]
fn xa_prepare_is_held_and_xa_commit_releases_it_unchanged() {
    let (_, out, cap) = replay("xa", 100, true);
    let xid = "X'667831',X'',1";
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:3471 chunk 0 gtid 0-1-10 end mysql-bin.000001:3801 (0-1-10) held X'667831',X'',1",
            "  Insert fx.t at mysql-bin.000001:3636 row 0 - -> (20, 'xa')",
            "release X'667831',X'',1 start mysql-bin.000001:3801 gtid 0-1-11 end mysql-bin.000001:3934 (0-1-11)",
        ],
    );
    assert!(cap.state.held.is_empty(), "the commit ended the hold");
    // What the reader appends for the release: the held chunk, unchanged, as the last
    // chunk of the commit's group, carrying the hold's release.
    let (Emit::Record(held), Emit::Release(rel)) = (&out[0], &out[1]) else {
        panic!("a held record, then a release");
    };
    let RecordBody::Held(h) = &held.record.body else {
        panic!("held body");
    };
    assert_eq!(h.xid, xid);
    let entry = rel.record(h.clone(), 0, true);
    assert_eq!(entry.releases.as_deref(), Some(xid));
    assert_lines(
        &[Emit::Record(entry)],
        &[
            "record start mysql-bin.000001:3801 chunk 0 gtid 0-1-11 end mysql-bin.000001:3934 (0-1-11) chunk releases X'667831',X'',1",
            "  Insert fx.t at mysql-bin.000001:3636 row 0 - -> (20, 'xa')",
        ],
    );
}

#[test]
fn xa_rollback_drops_the_held_group() {
    let (_, out, cap) = replay("xa_rollback", 100, true);
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:5361 chunk 0 gtid 0-1-17 end mysql-bin.000001:5709 (0-1-17) held X'667832',X'',1",
            "  Insert fx.t at mysql-bin.000001:5535 row 0 - -> (50, 'rolled back')",
            "record start mysql-bin.000001:5709 chunk 0 gtid 0-1-18 end mysql-bin.000001:5844 (0-1-18) dropped X'667832',X'',1",
        ],
    );
    assert!(cap.state.held.is_empty());
}

#[test]
fn a_b_intent_in_the_control_table_starts_capture_at_its_position() {
    let (_, out, cap) = replay("intent", 100, false);
    // The insert of 30 comes before B: not captured, no record.
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:4178 chunk 0 gtid 0-1-13 end mysql-bin.000001:4619 (0-1-13) chunk",
            "  intent B job 1 gen 1 at mysql-bin.000001:4513",
            "record start mysql-bin.000001:4619 chunk 0 gtid 0-1-14 end mysql-bin.000001:4861 (0-1-14) chunk",
            "  Insert fx.t at mysql-bin.000001:4784 row 0 - -> (31, 'after B')",
        ],
    );
    assert_eq!(cap.state.active, BTreeSet::from([job()]));
    assert!(cap.state.cancelled.is_empty());
}

#[test]
fn a_ddl_on_a_captured_table_pauses_it_at_the_statement() {
    let (_, out, cap) = replay("ddl", 100, true);
    assert_lines(
        &out,
        &[
            "record start mysql-bin.000001:5844 chunk 0 gtid 0-1-19 end mysql-bin.000001:5996 (0-1-19) chunk",
            "  pause fx.t job 1 gen 1 at mysql-bin.000001:5886 SchemaChanged: table `fx`.`t` (g1) paused at binlog mysql-bin.000001:5886: a DDL statement: the sealed schema no longer describes the table (`ALTER TABLE fx.t ADD COLUMN w INT NULL`); compatible (ADD COLUMN `w`)",
            "  statement at mysql-bin.000001:5886 in : ALTER TABLE fx.t ADD COLUMN w INT NULL",
        ],
    );
    assert_eq!(cap.state.paused, BTreeSet::from([job()]));
}

#[test]
#[should_panic(expected = "fixture")]
fn a_missing_fixture_fails_the_test() {
    load("no_such_fixture");
}
