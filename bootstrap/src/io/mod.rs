//! L0: connecting to the servers, connections per server, client deadlines, KILL and confirmed release.
pub mod bounded;
pub mod connect;
pub mod pool;
