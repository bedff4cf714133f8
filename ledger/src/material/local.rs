//! Materials in a local data directory (`serve --materials local`, and the read-through
//! cache of [`super::state::StateStore`]): `DIR/materials/ab/<64 hex>`, written to a
//! temporary name, fsynced, renamed into place and the directory fsynced (STYLE §5), so a
//! crash leaves either no file or the complete one. A stored material's digest is its
//! name, so [`LocalDirStore::get`] verifies the bytes on every read.
//!
//! The inherent methods are synchronous (plain file I/O, as before the trait became
//! async); the [`MaterialStore`] impl delegates to them.
use super::{Fut, MaterialStore};
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::{Error, Result};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// The default store: a local directory.
#[derive(Clone, Debug)]
pub struct LocalDirStore {
    root: PathBuf,
}

fn io(what: String) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::transient(format!("{what}: {e}"))
}

impl LocalDirStore {
    /// Opens (creating if needed) the store under `data_dir/materials`.
    pub fn open(data_dir: &Path) -> Result<LocalDirStore> {
        let root = data_dir.join("materials");
        fs::create_dir_all(root.join("tmp")).map_err(io(format!("creating {}", root.display())))?;
        Ok(LocalDirStore { root })
    }

    /// The file a digest is stored in.
    pub fn path_of(&self, digest: &Digest) -> PathBuf {
        let hex = digest.to_hex();
        self.root.join(&hex[..2]).join(hex)
    }
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("fsync of directory {}", dir.display())))
}

impl LocalDirStore {
    /// Stores `bytes` durably under their blake3 digest (idempotent) and returns it.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest> {
        self.store(bytes, true)
    }

    /// Stores a copy of bytes held durably elsewhere (the state store's read-through
    /// cache): written to a temporary name and renamed into place like [`Self::put`], but
    /// nothing is fsynced. A crash can leave a cached file empty or cut; its reader finds
    /// the bytes do not hash to the name and reads the durable copy instead.
    pub fn put_cached(&self, bytes: &[u8]) -> Result<Digest> {
        self.store(bytes, false)
    }

    fn store(&self, bytes: &[u8], durable: bool) -> Result<Digest> {
        let digest = Digest::of(bytes);
        let path = self.path_of(&digest);
        if let Ok(Some(_)) = self.get(&digest) {
            return Ok(digest);
        }
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        let fresh_dir = !dir.exists();
        fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        if fresh_dir && durable {
            fsync_dir(&self.root)?;
        }
        let tmp = self.root.join("tmp").join(format!(
            "{}.{}.{}",
            digest.to_hex(),
            std::process::id(),
            rand_suffix()
        ));
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            if durable {
                f.sync_all()?;
            }
            Ok(())
        };
        write().map_err(io(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, &path).map_err(io(format!("renaming into {}", path.display())))?;
        if durable {
            fsync_dir(&dir)?;
        }
        Ok(digest)
    }

    /// The bytes stored under `digest`, verified; None if absent; `evidence_corrupt` if
    /// the file's bytes do not hash to its name.
    pub fn get(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(digest);
        match fs::read(&path) {
            Ok(b) if Digest::of(&b) == *digest => Ok(Some(b)),
            Ok(_) => Err(Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!(
                    "material {} at {}: bytes do not hash to their name (tampered or corrupt)",
                    digest,
                    path.display()
                ),
            )),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::transient(format!("reading {}: {e}", path.display()))),
        }
    }

    /// True if a file is stored under `digest` (not verified).
    pub fn contains(&self, digest: &Digest) -> Result<bool> {
        Ok(self.path_of(digest).exists())
    }

    /// Removes a material; absent is fine.
    pub fn remove(&self, digest: &Digest) -> Result<()> {
        match fs::remove_file(self.path_of(digest)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::transient(format!("removing material {digest}: {e}"))),
        }
    }
}

impl MaterialStore for LocalDirStore {
    fn put<'a>(&'a self, bytes: &'a [u8]) -> Fut<'a, Digest> {
        Box::pin(async move { LocalDirStore::put(self, bytes) })
    }
    fn get<'a>(&'a self, digest: &'a Digest) -> Fut<'a, Option<Vec<u8>>> {
        Box::pin(async move { LocalDirStore::get(self, digest) })
    }
    fn contains<'a>(&'a self, digest: &'a Digest) -> Fut<'a, bool> {
        Box::pin(async move { LocalDirStore::contains(self, digest) })
    }
    fn remove<'a>(&'a self, digest: &'a Digest) -> Fut<'a, ()> {
        Box::pin(async move { LocalDirStore::remove(self, digest) })
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(32)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn put_get_is_content_addressed_and_verified() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalDirStore::open(dir.path()).unwrap();
        let d = s.put(b"hello").unwrap();
        assert_eq!(d, Digest::of(b"hello"));
        assert_eq!(s.put(b"hello").unwrap(), d);
        assert_eq!(s.get(&d).unwrap().unwrap(), b"hello");
        fs::write(s.path_of(&d), b"hellO").unwrap();
        let e = s.get(&d).unwrap_err();
        assert_eq!(e.as_definite().unwrap().code, DefiniteCode::EvidenceCorrupt);
        s.remove(&d).unwrap();
        assert_eq!(s.get(&d).unwrap(), None);
        assert!(fs::read_dir(dir.path().join("materials/tmp"))
            .unwrap()
            .next()
            .is_none());
    }
}
