//! A child process for the harness's own tests: starts a private server, prints where it
//! lives, and (with HARNESS_CHILD_ABORT set) aborts, so the tests can check that the
//! watchdog removes the server and its directory when the owning process dies.
use harness::{Server, ServerOpts};

fn main() {
    let server = Server::start_private(ServerOpts::source());
    println!(
        "DIR={}\nPID={}",
        server.dir().display(),
        server.pid().expect("pid")
    );
    if std::env::var_os("HARNESS_CHILD_ABORT").is_some() {
        std::process::abort();
    }
}
