//! Two edges of keyed replay against a real MariaDB target, on the shapes and scenario of
//! [`crate::keyed_apply`]: a case-only key change under a case-insensitive collation
//! (one key to the server, so one upsert that must still write the new bytes), and a
//! key-partitioned replay killed after a part commit that converges when rerun with
//! another P. The target is compared by the server's HEX() of every column.
use crate::common::*;
use crate::keyed_apply::{
    self as ka, baseline, expected, groups, hex_bytes, hex_dump, model, shapes, spec, Del, Ins,
    Shape, Upd, I,
};
use harness::Server;
use kernel::codec;
use kernel::schema::{ColumnDef, ColumnKind};
use kernel::value::SqlValue;
use ledger::apply::{self, Applied, Limits};
use ledger::parts;

/// The source server's weight of `v` in a VARCHAR(8) utf8mb4_general_ci key column, asked
/// as DESIGN §14 says (`WEIGHT_STRING(v AS CHAR(n))`), here by the test itself.
fn weight(s: &Server, v: &str) -> Vec<u8> {
    let h = s.sql(&format!(
        "SELECT HEX(WEIGHT_STRING(CONVERT(0x{} USING utf8mb4) COLLATE utf8mb4_general_ci AS CHAR(8)))",
        hex_bytes(v.as_bytes())
    ));
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test]
async fn a_case_only_key_change_under_a_ci_collation_writes_the_new_bytes() {
    // 'a' -> 'A' and 'b' -> 'B ' are updates of ONE key under utf8mb4_general_ci (PAD
    // SPACE): one upsert each, which must still write the new bytes of the key column; a
    // delete by 'a ' removes the row 'A'.
    let s = shared_target();
    let vals = ["a", "A", "a ", "b", "B "];
    let sh = Shape {
        name: "varchar_ci",
        ddl: "CREATE TABLE t (k VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci
              NOT NULL PRIMARY KEY, v VARCHAR(32) NULL) ENGINE=InnoDB",
        columns: vec![
            ColumnDef {
                charset: Some("utf8mb4".into()),
                collation: Some("utf8mb4_general_ci".into()),
                generated: None,
                ..key_col("k", ColumnKind::Varchar, "varchar(8)", Some(8))
            },
            col("v", ColumnKind::Varchar),
        ],
        key: vec![0],
        key_name: "PRIMARY",
        key_of: |i| vec![SqlValue::Bytes(["a", "A", "a ", "b", "B "][i].into())],
        hex_of: |i| vec![hex_bytes(["a", "A", "a ", "b", "B "][i].as_bytes())],
        alias_2: None,
        select: "SELECT HEX(k), HEX(v) FROM t",
    };
    let spec = vec![
        vec![Upd(I(0), I(1), "case")],
        vec![Upd(I(3), I(4), "pad")],
        vec![Del(I(2))],
        vec![Ins(I(0), "again")],
    ];
    let want = {
        let mut w = vec![
            format!("{}\t{}", hex_bytes(b"a"), hex_bytes(b"again")),
            format!("{}\t{}", hex_bytes(b"B "), hex_bytes(b"pad")),
        ];
        w.sort();
        w
    };
    let g = groups(&sh, &spec);
    for (n, p) in [(0u64, 0usize), (1, 3)] {
        let job = 330 + n;
        let db = s.fresh_db("kc_ci");
        s.sql_in(&db, sh.ddl);
        let ctx = sh.ctx(&db, job);
        for v in vals {
            ctx.keyer
                .insert_weight(0, v.as_bytes().to_vec(), weight(s, v));
        }
        // The sort key is the server's equality: 'a', 'A' and 'a ' are one key.
        let sk = |i: usize| ctx.keyer.sort_key(&sh.row(&(sh.key_of)(i), "")).unwrap();
        assert_eq!((sk(0), sk(0)), (sk(1), sk(2)));
        assert_eq!(sk(3), sk(4));
        assert_ne!(sk(0), sk(3));
        let mut c = claimed(s, &db, &ctx).await;
        let rows = [0, 3]
            .iter()
            .map(|&i| sh.row(&(sh.key_of)(i), "base"))
            .collect();
        apply::apply_page(
            &mut c,
            &ctx,
            &codec::encode(&page(job, 0, 0, rows)),
            Limits::default(),
        )
        .await
        .unwrap();
        if p == 0 {
            apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
                .await
                .unwrap();
        } else {
            let mut cs = Vec::new();
            for _ in 0..p {
                cs.push(apply::connect(&opts(s, &db)).await.unwrap());
            }
            parts::apply_groups_parts(
                &mut cs,
                &ctx,
                None,
                &g,
                Limits {
                    txn_rows: 1,
                    ..Limits::default()
                },
            )
            .await
            .unwrap();
        }
        assert_eq!(hex_dump(s, &db, &sh), want, "P = {p}");
    }
}

/// In the child: the 3-part replay of shape `spec[2]` into `spec[0]` (job `spec[1]`) that
/// a fault point interrupts.
async fn keyed_child(spec: Vec<String>, port: u16) {
    let (db, job, n): (&str, u64, usize) =
        (&spec[0], spec[1].parse().unwrap(), spec[2].parse().unwrap());
    let sh = shapes().swap_remove(n);
    let g = groups(&sh, &ka::spec(sh.alias_2.is_some()));
    let ctx = sh.ctx(db, job);
    let mut cs = Vec::new();
    for _ in 0..3 {
        cs.push(apply::connect(&opts_at(port, db)).await.unwrap());
    }
    let limits = Limits {
        txn_rows: 4,
        ..Limits::default()
    };
    parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits)
        .await
        .unwrap();
}

#[tokio::test]
async fn killed_after_a_part_commit_composite_keys_converge_with_another_p() {
    as_child(keyed_child).await;
    let s = shared_target();
    for (n, sh) in shapes().into_iter().enumerate() {
        let spec = spec(sh.alias_2.is_some());
        let g = groups(&sh, &spec);
        let job = 340 + n as u64;
        let db = baseline(s, &sh, &format!("kk_{}", sh.name), job, Limits::default()).await;
        // Killed right after the first COMMIT of a part other than 0: main has nothing.
        run_child(
            &format!("{db},{job},{n}"),
            "ledger.parts.after_part_commit@1",
        );
        assert_eq!(
            s.sql_in(&db, "SELECT COUNT(*) FROM _backfill_ledger_cursor"),
            "0"
        );
        // At least the part that hit the fault point committed; the parts run at once, so
        // another may have committed before the process died (never main: checked above).
        let parts: u64 = s
            .sql_in(&db, "SELECT COUNT(*) FROM _backfill_ledger_cursor_parts")
            .parse()
            .unwrap();
        assert!((1..=2).contains(&parts), "{}: {parts} part rows", sh.name);
        // Restarted with P = 2 and one change per transaction.
        let ctx = sh.ctx(&db, job);
        let mut cs = Vec::new();
        for _ in 0..2 {
            cs.push(apply::connect(&opts(s, &db)).await.unwrap());
        }
        let limits = Limits {
            txn_rows: 1,
            ..Limits::default()
        };
        let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits)
            .await
            .unwrap();
        assert_eq!(r, Applied::Committed);
        assert_eq!(
            hex_dump(s, &db, &sh),
            expected(&sh, &model(&spec)),
            "{}",
            sh.name
        );
        let mut c = apply::connect(&opts(s, &db)).await.unwrap();
        assert_eq!(
            apply::resolve_groups(&mut c, &ctx, None, &g).await.unwrap(),
            apply::Resolution::Committed
        );
    }
}
