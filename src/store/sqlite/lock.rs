//! One server per SQLite file.
//!
//! Two processes serving one file both accept writes, but each pushes only what it
//! committed itself: an agent connected to one never hears what the other stored, and
//! `delivery_status` lies. So a server takes an exclusive lock on `<database>.lock`
//! beside the file for as long as it serves, and a second one is refused at start,
//! naming the process that holds it. The lock is the kernel's (`flock`), so it goes with
//! the process however that ends (a `kill -9` leaves nothing stale to clean up); the
//! file only carries the server's process id for the message. Several nodes belong on
//! PostgreSQL, where the database coordinates them. A reader of the whole file
//! (`migrate-db`) takes the lock shared: copies may run side by side, never beside a
//! server.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::store::StoreError;

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub(crate) struct ServingLock {
    _file: File,
}

/// Where the lock of `database` lives.
pub(crate) fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the lock of `database` for a server, or says who holds it.
pub(crate) fn take(database: &Path) -> Result<ServingLock, StoreError> {
    claim(database, true)
}

/// Takes the lock of `database` for a reader of the whole file, beside other readers.
pub(crate) fn take_shared(database: &Path) -> Result<ServingLock, StoreError> {
    claim(database, false)
}

fn claim(database: &Path, exclusive: bool) -> Result<ServingLock, StoreError> {
    let path = lock_path(database);
    let location = |source| StoreError::Location {
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(location)?;
    let taken = if exclusive {
        file.try_lock()
    } else {
        file.try_lock_shared()
    };
    match taken {
        Ok(()) => {
            if exclusive {
                file.set_len(0).map_err(location)?;
                file.rewind().map_err(location)?;
                writeln!(file, "{}", std::process::id()).map_err(location)?;
            }
            Ok(ServingLock { _file: file })
        }
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            // Best effort: the holder may be writing its id this very moment.
            let _ = file.read_to_string(&mut text);
            Err(StoreError::InUse {
                path: database.to_path_buf(),
                holder: describe(text.trim().parse().ok()),
            })
        }
        Err(TryLockError::Error(source)) => Err(location(source)),
    }
}

/// The holder as a person can find it: its process id and, where `/proc` tells, its
/// command line. The id in the file is the last server's: a process that is gone
/// (the holder is then a reader, which writes no id) is not named.
fn describe(pid: Option<u32>) -> String {
    let unknown = || "another process (a copy by `switchboard migrate-db`?)".to_owned();
    let Some(pid) = pid else {
        return unknown();
    };
    if pid == std::process::id() {
        return format!("this process (pid {pid})");
    }
    if !Path::new(&format!("/proc/{pid}")).exists() && Path::new("/proc/self").exists() {
        return unknown();
    }
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|raw| {
            let words: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            words.join(" ")
        })
        .filter(|c| !c.is_empty());
    match command {
        Some(command) => {
            let command: String = command.chars().take(200).collect();
            format!("process {pid} ({command})")
        }
        None => format!("process {pid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::take;
    use crate::store::StoreError;

    /// The lock is exclusive while held (also within one process: each take opens the
    /// file anew) and free again once dropped.
    #[test]
    fn a_second_taker_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("one.db");
        let first = take(&db).expect("first");
        match take(&db) {
            Err(StoreError::InUse { holder, .. }) => {
                assert!(holder.contains(&std::process::id().to_string()), "{holder}");
            }
            other => panic!("a second taker got {other:?}"),
        }
        drop(first);
        let reader = super::take_shared(&db).expect("free again");
        let beside = super::take_shared(&db).expect("readers side by side");
        assert!(take(&db).is_err(), "no server beside a reader");
        drop((reader, beside));
        take(&db).expect("free again");
    }
}
