//! L0: the only SQL on bootstrap's own tables in the state store: jobs, generations,
//! sealed schemas, range plans, persisted commands, serve processes, periodic verifies; and the two values
//! they hold that install produces (the range plan, a refusal).
pub mod commands;
pub mod field_checks;
pub mod jobs;
pub mod owners;
pub mod plan;
pub mod processes;
pub mod refusal;
pub mod repoint;
pub mod retention;
pub mod schema_versions;
pub mod verifies;
