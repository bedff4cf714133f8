//! Benchmark of issue 14 (not a test): what the server's weights of character keys cost
//! replay (DESIGN §14). A writer of 2 000 changes/s on a table keyed by
//! `VARCHAR(36) utf8mb4_general_ci` brings at most 2 000 new key values a second; replay
//! asks the source for each value once per batch it is not cached in
//! (`kernel::key::weigh::weigh_values`, batches of `weigh::BATCH`). This measures, on a
//! throwaway server, the round trips and seconds of weighing one second's worth of such
//! values, cold (a fresh cache: every value asked) and warm (all cached: nothing asked),
//! over `RUNS` seconds of values.
//!
//! `cargo run --release -p kernel --example bench_weigh -- [VALUES_PER_SECOND] [RUNS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use harness::{Server, ServerOpts};
use kernel::key::{weigh, Encoding, KeyColumn, KeyDef, Keyer};
use std::time::Instant;

fn keyer() -> Keyer {
    Keyer::new(KeyDef {
        columns: vec![KeyColumn {
            index: 0,
            name: "uuid".into(),
            encoding: Encoding::Chars {
                charset: "utf8mb4".into(),
                collation: "utf8mb4_general_ci".into(),
                len: 36,
                fixed: false,
            },
        }],
    })
}

/// Distinct v4-looking UUID texts, `n` of them starting at `from`.
fn values(from: u64, n: u64) -> Vec<(usize, Vec<u8>)> {
    (from..from + n)
        .map(|i| {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let s = format!(
                "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                h >> 32,
                (h >> 16) & 0xFFFF,
                h & 0xFFF,
                (h >> 20) & 0xFFF,
                i
            );
            (0, s.into_bytes())
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numeric arguments"))
        .collect();
    let per_second = args.first().copied().unwrap_or(2_000);
    let runs = args.get(1).copied().unwrap_or(10);
    let src = Server::start(ServerOpts::source());
    let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(&src.url()).unwrap())
        .await
        .unwrap();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut trips = 0;
    for r in 0..runs {
        let k = keyer();
        let vals = values(r * per_second, per_second);
        let t = Instant::now();
        let asked = weigh::weigh_values(&mut conn, &k, &vals).await.unwrap();
        cold.push(t.elapsed().as_secs_f64());
        assert_eq!(asked as u64, per_second);
        trips = k.weigh_stats().round_trips;
        let t = Instant::now();
        assert_eq!(weigh::weigh_values(&mut conn, &k, &vals).await.unwrap(), 0);
        warm.push(t.elapsed().as_secs_f64());
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!("| values/s | round trips per second of values (cold) | cold s (mean / max) | warm s (mean) | share of one second |");
    println!("|---|---|---|---|---|");
    println!(
        "| {per_second} | {trips} (batches of {}, plus one PAD SPACE check) | {:.4} / {:.4} | {:.6} | {:.1}% |",
        weigh::BATCH,
        mean(&cold),
        max(&cold),
        mean(&warm),
        100.0 * mean(&cold)
    );
    conn.disconnect().await.unwrap();
}
