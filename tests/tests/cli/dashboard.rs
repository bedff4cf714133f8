//! runbooks/dashboard.json names only metrics that `serve --metrics-addr` exports (issue
//! 39). Every PromQL expression of the dashboard (each panel target's `expr` and the
//! templating queries) is reduced to the metric names it selects, and each must be in a
//! scrape of the real `backfill serve` running a job.
//!
//! The scenario is chosen so that every family has samples: a job copied to STREAMING
//! (rows, windows, phase, paused), then a source change replayed (replay groups and lag
//! exist only once the table is replaying), under a read rate limit (throttle counters),
//! with serve's admission pools and connection pools in use. One family is an exception,
//! `backfill_log_events_total`: its samples exist only after a WARN or ERROR event, which
//! a clean run need not have, so for it the scrape must hold its `# TYPE` line (the family
//! is exported, with no sample yet).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::in_process;
use backfill_tests::scrape::{free_addr, scrape, value};
use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Families whose samples need an event a clean run does not have (see the module doc).
const EVENT_ONLY: &[&str] = &["backfill_log_events_total"];

/// Every PromQL expression of the dashboard: panel targets' `expr` (nested rows too) and
/// the templating queries.
fn expressions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::String(s)) if s.contains('(') => {
                        out.push(s.clone())
                    }
                    _ => expressions(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| expressions(x, out)),
        _ => {}
    }
}

/// Removes every `open ... close` span (not nested) from `s`.
fn strip(s: &str, open: char, close: char) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in s.chars() {
        match c {
            c if c == open && !inside => inside = true,
            c if c == close && inside => {
                inside = false;
                out.push(' ');
            }
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out
}

/// The metric names a PromQL expression selects: its identifiers once strings, label
/// matchers `{..}`, ranges `[..]`, Grafana variables, the label lists of `by`/`without`/
/// `on`/`ignoring`/`group_*` and function names (an identifier before `(`) are removed.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Grafana's `label_values(METRIC, LABEL)`: only its first argument is a metric.
    let expr = match expr.strip_prefix("label_values(") {
        Some(args) => args.split(',').next().unwrap_or(args),
        None => expr,
    };
    let mut s = strip(expr, '"', '"');
    s = strip(&s, '{', '}');
    s = strip(&s, '[', ']');
    let mut names = BTreeSet::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut skip_list = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '$' {
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if !(c.is_ascii_alphabetic() || c == '_' || c == ':')
            || (i > 0 && chars[i - 1].is_ascii_digit())
        {
            if c == ')' {
                skip_list = false;
            }
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let mut j = i;
        while j < chars.len() && chars[j] == ' ' {
            j += 1;
        }
        let call = j < chars.len() && chars[j] == '(';
        let lists = [
            "by",
            "without",
            "on",
            "ignoring",
            "group_left",
            "group_right",
        ];
        if lists.contains(&word.as_str()) {
            skip_list = call;
            continue;
        }
        // Operators, and the aggregations, which may come before their `by (..)`.
        let keywords = [
            "and",
            "or",
            "unless",
            "bool",
            "offset",
            "sum",
            "min",
            "max",
            "avg",
            "count",
            "group",
            "stddev",
            "stdvar",
            "topk",
            "bottomk",
            "quantile",
            "count_values",
        ];
        if call || skip_list || keywords.contains(&word.as_str()) {
            continue;
        }
        names.insert(word);
    }
    names
}

#[test]
fn the_extractor_finds_metrics_not_functions_labels_or_variables() {
    let got = metric_names(
        "sum by (job, phase) (rate(backfill_rows_applied_total{job=~\"$job\"}[$__rate_interval])) \
         / on (job) group_left backfill_windows_planned > 0 and up",
    );
    let want: BTreeSet<String> = [
        "backfill_rows_applied_total",
        "backfill_windows_planned",
        "up",
    ]
    .map(String::from)
    .into();
    assert_eq!(got, want);
    assert_eq!(
        metric_names("label_values(backfill_job_phase, job)"),
        ["backfill_job_phase".to_string()].into()
    );
}

/// The exported families of a scrape (`# TYPE` lines) and those with a sample line.
fn families(body: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let typed = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(String::from)
        .collect();
    let sampled = body
        .lines()
        .filter(|l| l.starts_with("backfill_"))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(String::from)
        .collect();
    (typed, sampled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_expression_names_an_exported_metric() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../runbooks/dashboard.json");
    let dash: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .expect("runbooks/dashboard.json is JSON");
    let mut exprs = Vec::new();
    expressions(&dash, &mut exprs);
    let wanted: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    assert!(
        exprs.len() >= 20 && wanted.len() >= 20,
        "{exprs:?} -> {wanted:?}"
    );

    let _serial = in_process().await;
    let c = backfill_tests::case::Case::new("dash", 6_000, 1_000, 500).await;
    let (state, job, addr) = (c.state_url(), c.job.0.to_string(), free_addr());
    let mut child = backfill_tests::command()
        .args(["serve", "--state", &state, "--data-dir"])
        .arg(c.data.path())
        .args(["--source", &c.source.url(), "--target", &c.target.url()])
        .args(["--metrics-addr", &addr, "--read-rows-per-sec", "3000"])
        .args(["--owner", &format!("dashboard-test-{}", std::process::id())])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let streaming = format!("backfill_job_phase{{job=\"{job}\",phase=\"STREAMING\"}} 1");
    let groups = format!("backfill_replay_groups_total{{job=\"{job}\"}}");
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut changed = false;
    let body = loop {
        assert!(
            Instant::now() < deadline,
            "no STREAMING scrape with replayed groups"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(body) = scrape(&addr) else { continue };
        if !body.contains(&streaming) {
            continue;
        }
        if !changed {
            c.source
                .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id <= 10");
            changed = true;
        }
        if value(&body, &groups).is_some_and(|g| g > 0.0) {
            break body;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();

    let (typed, sampled) = families(&body);
    let mut missing = Vec::new();
    for m in &wanted {
        let ok = if EVENT_ONLY.contains(&m.as_str()) {
            typed.contains(m)
        } else {
            sampled.contains(m)
        };
        if !ok {
            missing.push(m.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard names metrics the scrape does not have: {missing:?}\n{body}"
    );
}
