//! The oracle over hand-built binlog groups: a clean history passes, and each way of
//! applying a change twice, skipping one or writing without evidence is found.
use super::parse::RowChange;
use super::*;

fn s() -> Subject {
    Subject {
        sdb: "s".into(),
        tdb: "d".into(),
        table: "t".into(),
        ctl: "c".into(),
        key: vec![0],
        job: 7,
        generation: 1,
        applied: None,
    }
}

fn v(x: &str) -> Value {
    x.as_bytes().to_vec()
}

fn img(id: i64, k: i64) -> Image {
    vec![v(&id.to_string()), v(&k.to_string())]
}

fn row(table: &str, before: Option<Image>, after: Option<Image>) -> RowChange {
    RowChange {
        table: table.into(),
        before,
        after,
    }
}

fn group(pos: u64, rows: Vec<RowChange>) -> Group {
    Group {
        gtid: format!("0-1-{pos}"),
        end: Pos {
            file: "mysql-bin.000001".into(),
            pos,
        },
        rows,
    }
}

fn marker(pos: u64, kind: &str, window: &str, attempt: &str) -> Group {
    let a = vec![
        v("1"),
        v("7"),
        v("1"),
        v(&format!("'{kind}'")),
        v(window),
        v(attempt),
    ];
    group(pos, vec![row("`c`.`intents`", None, Some(a))])
}

const T: &str = "`s`.`t`";
const D: &str = "`d`.`t`";

/// The source: keys 1 and 2 inserted, B, key 1 updated, HIGH of window 1, key 2 deleted,
/// key 1 updated again.
fn source() -> Vec<Group> {
    vec![
        group(
            100,
            vec![row(T, None, Some(img(1, 0))), row(T, None, Some(img(2, 0)))],
        ),
        marker(200, "B", "NULL", "NULL"),
        group(300, vec![row(T, Some(img(1, 0)), Some(img(1, 1)))]),
        marker(400, "HIGH", "1", "1"),
        group(500, vec![row(T, Some(img(2, 0)), None)]),
        group(600, vec![row(T, Some(img(1, 1)), Some(img(1, 2)))]),
    ]
}

fn page(at: u64, rows: Vec<Image>) -> Group {
    let n = rows.len().to_string();
    let cred = vec![
        v("7"),
        v("1"),
        v("1"),
        v("0"),
        v("1"),
        v("x"),
        v(&n),
        v("1"),
    ];
    let mut r = vec![row("`d`.`_backfill_ledger_pages`", None, Some(cred))];
    r.extend(rows.into_iter().map(|i| row(D, None, Some(i))));
    group(at, r)
}

fn cur(pos: u64, done: u64) -> Image {
    let p = pos.to_string();
    vec![
        v("7"),
        v("1"),
        v("'mysql-bin.000001'"),
        v(&p),
        v("NULL"),
        v(&done.to_string()),
        v("x"),
        v("1"),
    ]
}

fn replay(at: u64, from: Option<(u64, u64)>, to: (u64, u64), rows: Vec<RowChange>) -> Group {
    let c = row(
        "`d`.`_backfill_ledger_cursor`",
        from.map(|(p, d)| cur(p, d)),
        Some(cur(to.0, to.1)),
    );
    let mut r = vec![c];
    r.extend(rows);
    group(at, r)
}

/// The target of a correct run: the page at HIGH (1 -> k=1, 2 -> k=0), then the replay
/// of (B, 300], then of (300, 600] (a no-op write of key 1's k=1 is not logged).
fn clean() -> Vec<Group> {
    vec![
        page(10, vec![img(1, 1), img(2, 0)]),
        replay(20, None, (300, 0), vec![]),
        replay(
            30,
            Some((300, 0)),
            (600, 0),
            vec![
                row(D, Some(img(2, 0)), None),
                row(D, Some(img(1, 1)), Some(img(1, 2))),
            ],
        ),
    ]
}

#[test]
fn a_correct_history_is_exactly_once() {
    let r = judge(&source(), &clean(), &s());
    r.assert_exactly_once();
    assert_eq!((r.source_changes, r.pages, r.cursor_txns), (3, 1, 2), "{r}");
}

#[test]
fn a_change_applied_again_after_a_restart_is_a_duplicate() {
    let mut t = clean();
    // The cursor went back to 300 and (300, 600] ran a second time.
    t.push(replay(40, Some((300, 0)), (600, 0), vec![]));
    let r = judge(&source(), &t, &s());
    assert!(r.duplicates == 2 && r.wrong == 1, "{r}");
}

#[test]
fn an_older_image_written_over_a_newer_one_is_found() {
    let mut t = clean();
    // A re-run of the first batch's image outside any cursor range: key 1 back to k=1.
    t.push(replay(40, Some((600, 0)), (600, 0), vec![]));
    t.push(group(50, vec![row(D, Some(img(1, 2)), Some(img(1, 1)))]));
    let r = judge(&source(), &t, &s());
    assert!(r.wrong >= 2, "{r}");
}

#[test]
fn a_skipped_change_is_found() {
    let mut t = clean();
    // The delete of key 2 never reached the target, though the cursor passed it.
    t[2] = replay(
        30,
        Some((300, 0)),
        (600, 0),
        vec![row(D, Some(img(1, 1)), Some(img(1, 2)))],
    );
    let r = judge(&source(), &t, &s());
    assert_eq!(r.wrong, 1, "{r}");
    assert!(r.examples[0].contains("key (2)"), "{r}");
    // And a cursor that jumps past a change: covered by no transaction.
    let mut t = clean();
    t[2] = replay(
        30,
        Some((500, 0)),
        (600, 0),
        vec![row(D, Some(img(1, 1)), Some(img(1, 2)))],
    );
    let r = judge(&source(), &t, &s());
    assert!(r.skipped == 1, "{r}");
}

#[test]
fn a_page_not_at_high_and_an_unevidenced_write_are_found() {
    let mut t = clean();
    t[0] = page(10, vec![img(1, 0), img(2, 0)]);
    t.push(group(60, vec![row(D, None, Some(img(9, 9)))]));
    let r = judge(&source(), &t, &s());
    assert!(
        r.examples
            .iter()
            .any(|e| e.contains("not the source's row at HIGH")),
        "{r}"
    );
    assert!(
        r.examples.iter().any(|e| e.contains("without T evidence")),
        "{r}"
    );
}

#[test]
fn a_sub_cursor_counts_changes_inside_a_group() {
    // One source group of three changes, applied as 2 + 1.
    let src = vec![
        marker(200, "B", "NULL", "NULL"),
        marker(250, "HIGH", "1", "1"),
        group(
            300,
            vec![
                row(T, None, Some(img(1, 0))),
                row(T, None, Some(img(2, 0))),
                row(T, None, Some(img(3, 0))),
            ],
        ),
    ];
    let d = |i| row(D, None, Some(img(i, 0)));
    let t = vec![
        page(5, vec![]),
        replay(10, None, (300, 2), vec![d(1), d(2)]),
        replay(20, Some((300, 2)), (300, 0), vec![d(3)]),
    ];
    let r = judge(&src, &t, &s());
    assert!(
        r.wrong == 0 && r.duplicates == 0 && r.skipped == 0 && r.unreached == 0,
        "{r}"
    );
    // Applying the first chunk's rows again in the second is found.
    let t = vec![
        page(5, vec![]),
        replay(10, None, (300, 2), vec![d(1), d(2)]),
        replay(
            20,
            Some((300, 2)),
            (300, 0),
            vec![row(D, Some(img(1, 0)), None), d(1), d(3)],
        ),
    ];
    let r = judge(&src, &t, &s());
    assert!(r.wrong >= 1, "{r}");
}

fn logged(mut g: Group, ops: &[(i64, &str)]) -> Group {
    for (k, op) in ops {
        let a = vec![v(&k.to_string()), v(&format!("'{op}'"))];
        g.rows.push(row("`d`.`log`", None, Some(a)));
    }
    g
}

#[test]
fn with_a_trigger_log_a_re_application_that_changed_nothing_is_a_duplicate() {
    let s = Subject {
        applied: Some("log".into()),
        ..s()
    };
    let mut t = clean();
    t[0] = logged(t[0].clone(), &[(1, "I"), (2, "I")]);
    // (B, 300]: key 1 upserted to k=1, which the page already holds: no row event, a log row.
    t[1] = logged(t[1].clone(), &[(1, "U")]);
    t[2] = logged(t[2].clone(), &[(2, "D"), (1, "U")]);
    judge(&source(), &t, &s).assert_exactly_once();
    // The second batch also re-applies key 1 of the first batch: the same image, nothing
    // changed in the table, yet the log shows key 1 applied twice.
    t[2] = logged(t[2].clone(), &[(1, "U")]);
    let r = judge(&source(), &t, &s);
    assert!(r.duplicates >= 1, "{r}");
    // A key of the range that was never applied is found too.
    let mut t = clean();
    t[0] = logged(t[0].clone(), &[(1, "I"), (2, "I")]);
    t[2] = logged(t[2].clone(), &[(2, "D"), (1, "U")]);
    let r = judge(&source(), &t, &s);
    assert!(
        r.examples.iter().any(|e| e.contains("never applied")),
        "{r}"
    );
}

#[test]
fn a_key_matched_by_collation_not_bytes_counts_only_in_the_touched_check() {
    // The target held 'GG' (an older image replayed over the baseline); the range's change
    // deletes 'gg', which the target's DELETE matched as 'GG' under `_ci`.
    let k = |s: &str| vec![v(&format!("'{s}'"))];
    assert_eq!(fold_case(&k("GG  ")), fold_case(&k("gg")));
    assert_ne!(fold_case(&k("gh")), fold_case(&k("gg")));
    let s = Subject {
        key: vec![0],
        ..s()
    };
    let img = |key: &str, x: &str| vec![v(&format!("'{key}'")), v(x)];
    let src = vec![
        group(100, vec![row(T, None, Some(img("GG", "0")))]),
        marker(200, "B", "NULL", "NULL"),
        marker(250, "HIGH", "1", "1"),
        group(
            300,
            vec![row(T, Some(img("GG", "0")), Some(img("gg", "1")))],
        ),
        group(400, vec![row(T, Some(img("gg", "1")), None)]),
    ];
    let t = vec![
        page(5, vec![img("GG", "0")]),
        replay(10, None, (400, 0), vec![row(D, Some(img("GG", "0")), None)]),
    ];
    let r = judge(&src, &t, &s);
    assert!(r.wrong == 0 && r.duplicates == 0 && r.unreached == 0, "{r}");
}

/// A part cursor row of part `part` of 2 at `pos`.
fn part_cur(part: u64, pos: u64) -> Image {
    let mut c = cur(pos, 0);
    c.splice(2..2, [v(&part.to_string()), v("2")]);
    c
}

#[test]
fn under_key_partitions_each_change_and_key_is_applied_by_exactly_one_transaction() {
    let s = Subject {
        applied: Some("log".into()),
        ..s()
    };
    // (B, 300] on the main cursor alone; (300, 600] split: part 1 deletes key 2 (its
    // partition), then part 0 (the main cursor, committed last) moves key 1 to k=2.
    let parts = |part1_also_key_1: bool| {
        let mut p1_rows = vec![row(D, Some(img(2, 0)), None)];
        let mut p1_log = vec![(2, "D")];
        if part1_also_key_1 {
            p1_rows.push(row(D, Some(img(1, 1)), Some(img(1, 2))));
            p1_log.push((1, "U"));
        }
        let mut p1 = group(25, p1_rows);
        p1.rows.insert(
            0,
            row(
                "`d`.`_backfill_ledger_cursor_parts`",
                None,
                Some(part_cur(1, 600)),
            ),
        );
        let main_rows = if part1_also_key_1 {
            vec![]
        } else {
            vec![row(D, Some(img(1, 1)), Some(img(1, 2)))]
        };
        vec![
            logged(page(10, vec![img(1, 1), img(2, 0)]), &[(1, "I"), (2, "I")]),
            logged(replay(20, None, (300, 0), vec![]), &[(1, "U")]),
            logged(p1, &p1_log),
            logged(replay(30, Some((300, 0)), (600, 0), main_rows), &[(1, "U")]),
        ]
    };
    let r = judge(&source(), &parts(false), &s);
    r.assert_exactly_once();
    assert_eq!((r.part_txns, r.keys_twice), (1, 0), "{r}");
    // Part 1 also applied key 1 of the range, and part 0 applied it again (no row event:
    // the image was there; the log shows it): one change, one key, two transactions.
    let r = judge(&source(), &parts(true), &s);
    assert!(r.keys_twice >= 1, "{r}");
}

/// Keys 1 and 2, B, HIGH of window 1; then key 2 to k=1 (300), key 1 to k=1 (500), key 2
/// to k=2 (600). Key 2 is in partition 1.
fn source_two_partitions() -> Vec<Group> {
    vec![
        group(
            100,
            vec![row(T, None, Some(img(1, 0))), row(T, None, Some(img(2, 0)))],
        ),
        marker(200, "B", "NULL", "NULL"),
        marker(250, "HIGH", "1", "1"),
        group(300, vec![row(T, Some(img(2, 0)), Some(img(2, 1)))]),
        group(500, vec![row(T, Some(img(1, 0)), Some(img(1, 1)))]),
        group(600, vec![row(T, Some(img(2, 1)), Some(img(2, 2)))]),
    ]
}

/// Part 1 committed key 2 through 600 with `key2` as its row, then serve was killed
/// before the main cursor moved; the restart's main transactions reach 500 (key 1, part 1
/// `Ahead`) and 600 (nothing left to write). `main_also_key2`: the main transaction to 500
/// writes key 2 as well.
fn part_ahead_of_main(key2: i64, main_also_key2: bool) -> Vec<Group> {
    let mut p1 = group(25, vec![row(D, Some(img(2, 0)), Some(img(2, key2)))]);
    p1.rows.insert(
        0,
        row(
            "`d`.`_backfill_ledger_cursor_parts`",
            None,
            Some(part_cur(1, 600)),
        ),
    );
    let mut to_500 = vec![row(D, Some(img(1, 0)), Some(img(1, 1)))];
    if main_also_key2 {
        to_500.push(row(D, Some(img(2, key2)), Some(img(2, 1))));
        to_500.push(row(D, Some(img(2, 1)), Some(img(2, key2))));
    }
    vec![
        page(10, vec![img(1, 0), img(2, 0)]),
        p1,
        replay(30, None, (500, 0), to_500),
        replay(40, Some((500, 0)), (600, 0), vec![]),
    ]
}

#[test]
fn a_partition_ahead_of_the_main_cursor_after_a_kill_shows_its_own_later_state() {
    // Measured in `scripts/chaos` (a random SIGKILL with 2 apply streams): 133 keys of
    // part 1 "one step ahead of the source" at main's next cursor, a clean final compare.
    let r = judge(
        &source_two_partitions(),
        &part_ahead_of_main(2, false),
        &s(),
    );
    r.assert_exactly_once();
    assert_eq!((r.part_txns, r.wrong), (1, 0), "{r}");
    // The part's row is not the source's at the part's point: still a finding.
    let r = judge(
        &source_two_partitions(),
        &part_ahead_of_main(5, false),
        &s(),
    );
    assert!(r.wrong >= 1, "{r}");
    // The main transaction wrote key 2 itself: checked exactly, a finding.
    let r = judge(&source_two_partitions(), &part_ahead_of_main(2, true), &s());
    assert!(r.wrong >= 1 || r.duplicates >= 1, "{r}");
}
