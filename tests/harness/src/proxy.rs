//! A plain TCP proxy in front of several servers: each new client connection goes to the
//! first backend of the list that accepts a TCP connection (as HAProxy in `first` mode or
//! a virtual IP would), and lives as long as both ends do. A backend that dies takes its
//! proxied connections with it (the client sees a lost connection), new connections go to
//! the next live backend. std threads only, like the rest of the harness.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the proxy tries one backend before the next.
const BACKEND_CONNECT: Duration = Duration::from_millis(300);

/// A running proxy on `127.0.0.1:port()`. Dropping it stops accepting and closes every
/// proxied connection.
pub struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    accepted: Arc<AtomicU64>,
    holds: Holds,
    acceptor: Option<JoinHandle<()>>,
}

/// The hold flag of each proxied connection's server-to-client direction.
type Holds = Arc<Mutex<Vec<Arc<AtomicBool>>>>;

impl Proxy {
    /// Listens on a free loopback port and forwards to `backends` (ports on 127.0.0.1),
    /// first live one first.
    pub fn start(backends: Vec<u16>) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|e| panic!("harness: proxy cannot bind 127.0.0.1:0: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicU64::new(0));
        let holds = Holds::default();
        let acceptor = {
            let (stop, open, accepted) = (stop.clone(), open.clone(), accepted.clone());
            let links = Links {
                open,
                accepted,
                holds: holds.clone(),
            };
            std::thread::spawn(move || accept_loop(&listener, &backends, &stop, &links))
        };
        Proxy {
            port,
            stop,
            open,
            accepted,
            holds,
            acceptor: Some(acceptor),
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://root@127.0.0.1:PORT/DB`
    pub fn url_db(&self, db: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{db}", self.port)
    }

    /// Holds back the servers' bytes on every connection proxied so far (`on`), or lets
    /// them flow again (nothing is lost: held bytes follow once released): answers lost on
    /// the way from a silent server. Connections proxied later are not held.
    pub fn hold_answers(&self, on: bool) {
        for h in self.holds.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            h.store(on, Ordering::SeqCst);
        }
    }

    /// Client connections accepted so far (forwarded or refused for want of a backend).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        for s in self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// What the acceptor shares with the proxy: its open sockets, its count, the hold.
struct Links {
    open: Arc<Mutex<Vec<TcpStream>>>,
    accepted: Arc<AtomicU64>,
    holds: Holds,
}

fn accept_loop(listener: &TcpListener, backends: &[u16], stop: &AtomicBool, links: &Links) {
    let (open, accepted) = (&links.open, &links.accepted);
    for client in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        accepted.fetch_add(1, Ordering::Relaxed);
        let Some(server) = first_live(backends) else {
            // No backend: the client sees the connection closed at once.
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let mut guard = open.lock().unwrap_or_else(|e| e.into_inner());
        guard.retain(|s| s.peer_addr().is_ok());
        for s in [&client, &server] {
            if let Ok(c) = s.try_clone() {
                guard.push(c);
            }
        }
        drop(guard);
        let hold = Arc::new(AtomicBool::new(false));
        links
            .holds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(hold.clone());
        splice(client, server, hold);
    }
}

fn first_live(backends: &[u16]) -> Option<TcpStream> {
    backends.iter().find_map(|p| {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, *p));
        TcpStream::connect_timeout(&addr, BACKEND_CONNECT).ok()
    })
}

/// Copies both ways on two threads (the server's bytes subject to `hold`); the end of
/// either direction closes both sockets.
fn splice(client: TcpStream, server: TcpStream, hold: Arc<AtomicBool>) {
    let never = Arc::new(AtomicBool::new(false));
    let pairs = [
        (client.try_clone(), server.try_clone(), never),
        (server.try_clone(), client.try_clone(), hold),
    ];
    for (from, to, hold) in pairs {
        if let (Ok(from), Ok(to)) = (from, to) {
            std::thread::spawn(move || copy(from, to, &hold));
        }
    }
}

fn copy(mut from: TcpStream, mut to: TcpStream, hold: &AtomicBool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                while hold.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
