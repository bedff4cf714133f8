//! sqlx's `migrate!` embeds kernel/migrations at compile time but does not tell cargo to
//! rebuild when a migration is added; this does.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
