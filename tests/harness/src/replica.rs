//! A GTID replica of a harness server, for source failover tests (DESIGN §18): it logs
//! what it applies (`log_slave_updates`), so once promoted its binlog continues the
//! primary's GTID history.
use crate::{Server, ServerOpts};
use std::time::{Duration, Instant};

impl Server {
    /// Starts a new server replicating `primary` by GTID from the primary's first binlog
    /// (`MASTER_USE_GTID=slave_pos` with an empty slave position): start it before the
    /// primary's binlog is purged. `server_id` must differ from the primary's.
    pub fn start_replica_of(primary: &Server, server_id: u32) -> Server {
        let replica = Server::start(
            ServerOpts::source()
                .server_id(server_id)
                .config("log_slave_updates=ON"),
        );
        replica.sql(&format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1; START SLAVE",
            primary.port()
        ));
        replica
    }

    /// Waits (at most `timeout`) until this replica has applied everything `primary`'s
    /// binlog holds now; panics naming both positions otherwise.
    pub fn wait_replicated(&self, primary: &Server, timeout: Duration) {
        let want = primary.sql("SELECT @@GLOBAL.gtid_binlog_pos");
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.sql("SELECT @@GLOBAL.gtid_slave_pos");
            if got == want {
                return;
            }
            if Instant::now() >= deadline {
                let status = self.sql("SHOW SLAVE STATUS\\G");
                panic!(
                    "harness: replica at `{got}` did not reach `{want}` in {timeout:?}\n{status}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops replication and makes this server a primary (writable, no replica config).
    pub fn promote(&self) {
        self.sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF");
    }

    /// Stops replication only (a replica left behind).
    pub fn stop_replication(&self) {
        self.sql("STOP SLAVE");
    }
}
