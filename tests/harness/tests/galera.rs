//! Tests of the harness's Galera cluster and TCP proxy, against real MariaDB nodes. One
//! cluster for the whole file (forming one costs ~30 s on two cores); the steps run in
//! order inside one test because they kill and restart its nodes.

use harness::{Cluster, Proxy};
use std::time::Instant;

#[test]
fn a_three_node_cluster_forms_replicates_and_survives_a_kill() {
    let t0 = Instant::now();
    let c = Cluster::start();
    eprintln!("cluster of 3 Synced in {:?}", t0.elapsed());
    for i in 0..3 {
        let s = c.status(i).expect("status");
        assert!(s.synced(), "node {i}: {s:?}");
        assert_eq!(s.size, 3, "node {i}");
    }
    let db = c.node(0).fresh_db("galera");
    c.node(0).sql_in(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO t VALUES (1, 'one')",
    );
    let read = format!("SET SESSION wsrep_sync_wait = 7; SELECT v FROM `{db}`.t WHERE id = 1");
    assert_eq!(
        c.node(2).sql(&read),
        "one",
        "a row written on node 1 read on node 3"
    );

    let proxy = Proxy::start(c.ports());
    let via = |sql: &str| {
        let out = std::process::Command::new("mariadb")
            .args(["--no-defaults", "-h127.0.0.1", "-uroot", "-N", "-B"])
            .arg(format!("-P{}", proxy.port()))
            .arg("-e")
            .arg(sql)
            .output()
            .expect("mariadb client");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        via("SELECT @@wsrep_node_name"),
        "n1",
        "the proxy prefers node 1"
    );

    let t1 = Instant::now();
    c.kill9(0);
    assert!(!c.is_up(0));
    assert_eq!(
        via("SELECT @@wsrep_node_name"),
        "n2",
        "then the first live node"
    );
    c.node(1).sql_in(&db, "INSERT INTO t VALUES (2, 'two')");
    c.wait_size(2);
    eprintln!(
        "node 1 killed: the two others formed a cluster of 2 in {:?}",
        t1.elapsed()
    );
    assert_eq!(c.node(2).sql(&read.replace("id = 1", "id = 2")), "two");
    assert_eq!(c.live(), vec![1, 2]);

    let t2 = Instant::now();
    c.restart(0);
    eprintln!("node 1 rejoined Synced in {:?}", t2.elapsed());
    assert_eq!(c.status(0).expect("status").size, 3);
    assert_eq!(
        c.node(0).sql(
            &read
                .replace("WHERE id = 1", "ORDER BY id")
                .replace("v FROM", "GROUP_CONCAT(v ORDER BY id) FROM")
        ),
        "one,two",
        "the rejoined node holds what was written while it was down"
    );
    assert!(proxy.accepted() >= 2);
    assert!(c
        .url_db("x")
        .contains(&format!(",127.0.0.1:{}/x", c.node(2).port())));
}
