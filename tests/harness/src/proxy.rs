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
    acceptor: Option<JoinHandle<()>>,
}

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
        let acceptor = {
            let (stop, open, accepted) = (stop.clone(), open.clone(), accepted.clone());
            std::thread::spawn(move || accept_loop(&listener, &backends, &stop, &open, &accepted))
        };
        Proxy {
            port,
            stop,
            open,
            accepted,
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

fn accept_loop(
    listener: &TcpListener,
    backends: &[u16],
    stop: &AtomicBool,
    open: &Mutex<Vec<TcpStream>>,
    accepted: &AtomicU64,
) {
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
        splice(client, server);
    }
}

fn first_live(backends: &[u16]) -> Option<TcpStream> {
    backends.iter().find_map(|p| {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, *p));
        TcpStream::connect_timeout(&addr, BACKEND_CONNECT).ok()
    })
}

/// Copies both ways on two threads; the end of either direction closes both sockets.
fn splice(client: TcpStream, server: TcpStream) {
    let pairs = [
        (client.try_clone(), server.try_clone()),
        (server.try_clone(), client.try_clone()),
    ];
    for pair in pairs {
        if let (Ok(from), Ok(to)) = pair {
            std::thread::spawn(move || copy(from, to));
        }
    }
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
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
