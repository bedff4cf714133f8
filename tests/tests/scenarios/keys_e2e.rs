//! Every key shape of issue 14 end to end through the real `backfill serve` program
//! (DESIGN §14, §5, §6, §11 I1): install with small windows (50 rows, pages of 10) under a
//! concurrent writer (inserts, updates, deletes, a delete and a reinsert of one key in one
//! transaction, key changes across windows, case-only and trailing-space-only key changes
//! under `utf8mb4_general_ci`), STREAMING, the writer stopped and the target caught up:
//! audit PASS and the independent comparison finds 0 missing, 0 extra, 0 differing; a
//! writer again while STREAMING, and 0/0/0 again once caught up. One test per group of
//! shapes that share code, each shape on its own task so that one failing shape names
//! itself and does not hide the others. Each test holds `in_process()` although its serve
//! is a child process: that serve's read views and page writes on the shared servers would
//! otherwise count in the admission bounds other tests of this binary sample.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::keyed::{each_shape, end_to_end_sized, shapes::*};

/// Integer keys (UNSIGNED up to 2^64-1, composite), a binary key with a 15-byte value and
/// MariaDB's INET6 and INET4 keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_integers_and_binary_converge_end_to_end() {
    let _serial = backfill_tests::in_process().await;
    each_shape(
        "int",
        &[
            SMALLINT_UNSIGNED,
            BIGINT_UNSIGNED,
            INT_INT,
            BINARY16,
            INET6,
            INET4,
        ],
    )
    .await;
}

/// Keys with character columns, weighed by the server (CHAR, VARCHAR, `_ci`, PAD SPACE),
/// a table whose only key is a NOT NULL UNIQUE (VARCHAR, INT), and key columns that
/// are neither first nor in table order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_strings_converge_end_to_end() {
    let _serial = backfill_tests::in_process().await;
    each_shape(
        "str",
        &[
            INT_CHAR4,
            CHAR3_CHAR30,
            CHAR3,
            VARCHAR255_GENERAL_CI,
            UNIQUE_VARCHAR_INT,
            REORDERED,
        ],
    )
    .await;
}

/// Keys with temporal columns (zero dates, negative TIME, TIMESTAMP(6)), ENUM (by index),
/// DECIMAL, YEAR and SET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_dates_and_enums_converge_end_to_end() {
    let _serial = backfill_tests::in_process().await;
    each_shape(
        "tmp",
        &[
            INT_VARCHAR50_DATE,
            INT_DATETIME_DATE_TIME,
            INT_ENUM,
            DECIMAL_TIMESTAMP_YEAR_SET,
        ],
    )
    .await;
}

/// The benchmark's key shape over 4 000 rows with pages of 700 and the default replay
/// batch, and a transaction that flips the case of about 1 300 keys (the same keys under
/// `_ci`, new bytes) while the windows run and again while STREAMING: more than 500
/// character values per page read and per replay batch, so weights are asked in several
/// round trips.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_a_larger_composite_character_key_converge_with_big_pages() {
    let _serial = backfill_tests::in_process().await;
    let seen = end_to_end_sized(
        "kbig",
        BIGINT_UNSIGNED_UUID,
        1500,
        700,
        &[],
        &[
            "UPDATE t SET u = IF(BINARY u = BINARY UPPER(u), LOWER(u), UPPER(u)), n = n + 1 \
           WHERE a = 0",
        ],
    )
    .await;
    eprintln!("key shape {}: PASS {seen:?}", BIGINT_UNSIGNED_UUID.name);
}
