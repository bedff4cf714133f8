//! A three-node MariaDB Galera cluster on loopback ports (`../shared/notes/galera.md`).
//!
//! Each node is an ordinary harness [`Server`] (own directory, watchdog, SQL port) whose
//! config adds the wsrep settings: its own group-communication, IST and SST ports, state
//! transfer by `mariadb-backup` carried by `socat` (rsync SST fails when the servers run as
//! root: its daemon drops to `nobody`). The first node bootstraps the cluster with
//! `--wsrep-new-cluster` (on its first start only); the others join one after the other,
//! each waited for until it is `Synced` and the cluster has grown by one. A killed node
//! restarted later rejoins by state transfer like any joiner.

use crate::{bins, free_port, watchdog, Server, ServerOpts};
use std::path::Path;
use std::sync::Once;
use std::time::{Duration, Instant};

/// The Galera provider library Debian's `galera-4` package installs.
pub const GALERA_PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// How long a node may take to become `Synced` (a joiner's state transfer included).
const SYNC_TIMEOUT: Duration = Duration::from_secs(90);

/// The ports of one node besides its SQL port.
#[derive(Clone, Copy, Debug)]
struct NodePorts {
    gcomm: u16,
    ist: u16,
    sst: u16,
}

/// A running Galera cluster. Dropping it kills every node and removes their directories.
pub struct Cluster {
    nodes: Vec<Server>,
}

impl Cluster {
    /// Starts a cluster of three nodes and waits until all three are `Synced`; panics
    /// with the install command when Galera, `mariadb-backup` or `socat` is missing.
    pub fn start() -> Cluster {
        Cluster::start_nodes(3)
    }

    /// Starts a cluster of `n` nodes (n >= 1).
    pub fn start_nodes(n: usize) -> Cluster {
        require_galera();
        let mariadbd = bins::mariadbd(None);
        let install_db = bins::require("mariadb-install-db");
        bins::client();
        static SWEEP: Once = Once::new();
        SWEEP.call_once(watchdog::sweep_stale);
        let ports: Vec<NodePorts> = (0..n)
            .map(|_| NodePorts {
                gcomm: free_port(),
                ist: free_port(),
                sst: free_port(),
            })
            .collect();
        let mut cluster = Cluster { nodes: Vec::new() };
        for i in 0..n {
            let node = Server::create(node_opts(i, &ports), mariadbd.clone());
            node.install(&install_db);
            if i == 0 {
                node.set_start_args(vec!["--wsrep-new-cluster".to_string()]);
            }
            start_retrying(&node);
            node.set_start_args(Vec::new());
            cluster.nodes.push(node);
            cluster.wait_synced(i, i + 1);
        }
        cluster
    }

    /// Node `i` (0-based).
    pub fn node(&self, i: usize) -> &Server {
        &self.nodes[i]
    }

    /// The SQL ports of every node, in node order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(Server::port).collect()
    }

    /// `mysql://root@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/DB`: every node, in order.
    pub fn url_db(&self, db: &str) -> String {
        let hosts: Vec<String> = self
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("mysql://root@{}/{db}", hosts.join(","))
    }

    /// Whether node `i`'s `mariadbd` runs.
    pub fn is_up(&self, i: usize) -> bool {
        self.nodes[i].pid().is_some()
    }

    /// The nodes whose `mariadbd` runs.
    pub fn live(&self) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&i| self.is_up(i)).collect()
    }

    /// SIGKILLs node `i` (no goodbye to the group: the others evict it after their
    /// suspect timeout).
    pub fn kill9(&self, i: usize) {
        self.nodes[i].kill9();
    }

    /// Starts a stopped or killed node `i` again (it rejoins by state transfer) and waits
    /// until it is `Synced` in a cluster of every live node.
    pub fn restart(&self, i: usize) {
        let node = &self.nodes[i];
        if node.pid().is_some() {
            node.stop();
        }
        // After a SIGKILL grastate.dat names no position, which costs a full state
        // transfer (SST, ~40 s on two loaded cores); the position InnoDB recovers lets the
        // node ask for the missing write sets only (IST from a donor's gcache).
        let start = recovered_position(node)
            .map(|p| vec![format!("--wsrep-start-position={p}")])
            .unwrap_or_default();
        node.set_start_args(start);
        start_retrying(node);
        node.set_start_args(Vec::new());
        let size = self.live().len();
        self.wait_synced(i, size);
    }

    /// Waits until node `i` is `Synced`, ready, and sees a cluster of `size` nodes.
    pub fn wait_synced(&self, i: usize, size: usize) {
        let deadline = Instant::now() + SYNC_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            match self.status(i) {
                Ok(s) if s.synced() && s.size == size => return,
                Ok(s) => last = format!("{s:?}"),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "harness: Galera node {i} (port {}) not Synced in a cluster of {size} within \
             {SYNC_TIMEOUT:?}; last status: {last}\n--- tail of its logs:\n{}",
            self.nodes[i].port(),
            self.nodes[i].log_tail()
        );
    }

    /// Waits until every live node reports a cluster of exactly the live nodes (after a
    /// kill: the dead node has been evicted).
    pub fn wait_size(&self, size: usize) {
        for i in self.live() {
            self.wait_synced(i, size);
        }
    }

    /// `wsrep_cluster_size` and `wsrep_local_state_comment` of node `i`.
    pub fn status(&self, i: usize) -> Result<NodeStatus, String> {
        let out = self.nodes[i].try_sql(
            "SHOW GLOBAL STATUS WHERE Variable_name IN \
             ('wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_ready')",
        )?;
        NodeStatus::parse(&out)
    }
}

impl Server {
    /// Extra arguments of this server's starts from now on (empty: none).
    fn set_start_args(&self, args: Vec<String>) {
        *self.once_args.lock().unwrap_or_else(|e| e.into_inner()) = args;
    }
}

/// A node's view of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStatus {
    pub size: usize,
    pub state: String,
    pub ready: bool,
}

impl NodeStatus {
    fn parse(out: &str) -> Result<NodeStatus, String> {
        let mut s = NodeStatus::default();
        for line in out.lines() {
            match line.split_once('\t') {
                Some(("wsrep_cluster_size", v)) => s.size = v.trim().parse().unwrap_or(0),
                Some(("wsrep_local_state_comment", v)) => s.state = v.trim().to_string(),
                Some(("wsrep_ready", v)) => s.ready = v.trim() == "ON",
                _ => {}
            }
        }
        if s.state.is_empty() {
            return Err(format!("no wsrep status in: {out}"));
        }
        Ok(s)
    }

    /// `Synced` and accepting queries.
    pub fn synced(&self) -> bool {
        self.ready && self.state == "Synced"
    }
}

/// Attempts at starting one node: a joiner was seen exiting at once with "failed to open
/// gcomm backend connection: Failed to set thread schedparams ... (No such process)" on
/// loaded machines, and starting it again works.
const START_ATTEMPTS: u32 = 3;

/// Starts a node, again after an early exit; the last attempt panics with its log tail.
fn start_retrying(node: &Server) {
    for attempt in 1..START_ATTEMPTS {
        match node.spawn_and_wait() {
            Ok(()) => return,
            Err(_) => {
                eprintln!(
                    "harness: Galera node on port {} did not start (attempt {attempt}); \
                     starting it again",
                    node.port()
                );
                node.kill_child();
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    node.start_or_panic();
}

/// `mariadbd --wsrep-recover` on a stopped node: the `UUID:SEQNO` its InnoDB recovered
/// to, if it says one.
fn recovered_position(node: &Server) -> Option<String> {
    let log = node.dir().join("recover.log");
    let _ = std::fs::remove_file(&log);
    std::process::Command::new(&node.mariadbd)
        .arg(format!("--defaults-file={}", node.cnf_path().display()))
        .arg("--wsrep-recover")
        .arg(format!("--log-error={}", log.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    let text = std::fs::read_to_string(&log).ok()?;
    let pos = text
        .lines()
        .rev()
        .find_map(|l| l.split("WSREP: Recovered position:").nth(1))?
        .trim()
        .to_string();
    (!pos.ends_with(":-1") && pos.contains(':')).then_some(pos)
}

/// The `[mariadbd]` lines of node `i` (0-based) of a cluster whose nodes use `ports`.
fn node_opts(i: usize, ports: &[NodePorts]) -> ServerOpts {
    let me = ports[i];
    let members: Vec<String> = ports
        .iter()
        .map(|p| format!("127.0.0.1:{}", p.gcomm))
        .collect();
    let id = 101 + u32::try_from(i).unwrap_or(0);
    [
        "innodb_autoinc_lock_mode=2".to_string(),
        "wsrep_on=ON".to_string(),
        format!("wsrep_provider={GALERA_PROVIDER}"),
        "wsrep_cluster_name=backfill_harness".to_string(),
        format!("wsrep_cluster_address=gcomm://{}", members.join(",")),
        "wsrep_node_address=127.0.0.1".to_string(),
        format!("wsrep_node_name=n{}", i + 1),
        format!(
            "wsrep_provider_options=base_port={};ist.recv_addr=127.0.0.1:{};gcache.size=32M",
            me.gcomm, me.ist
        ),
        format!("wsrep_sst_receive_address=127.0.0.1:{}", me.sst),
        "wsrep_sst_method=mariabackup".to_string(),
        "wsrep_sst_auth=root:".to_string(),
    ]
    .into_iter()
    .fold(ServerOpts::target().server_id(id), ServerOpts::config)
}

/// Panics with [`crate::GALERA_INSTALL_HINT`] when a piece of Galera is missing.
fn require_galera() {
    let mut missing = Vec::new();
    if !Path::new(GALERA_PROVIDER).exists() {
        missing.push(GALERA_PROVIDER.to_string());
    }
    for b in ["mariadb-backup", "socat"] {
        if bins::find(b).is_none() {
            missing.push(b.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "harness: a Galera cluster needs {} (not found). These tests never skip. Install \
         with: `{}` (or run scripts/ensure-mariadb)",
        missing.join(", "),
        crate::GALERA_INSTALL_HINT
    );
}
