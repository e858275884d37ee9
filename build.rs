//! `sqlx::migrate!` embeds the migrations at compile time, but on stable Rust cargo does
//! not know it read them: a new migration file would not rebuild the crate, and a stale
//! binary would run without it. This tells cargo.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
