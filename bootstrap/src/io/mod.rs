//! L0: connecting to the servers, client deadlines, KILL and confirmed release.
pub mod bounded;
pub mod connect;
