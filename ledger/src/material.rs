//! The material store (DESIGN §2): page and manifest bytes, content-addressed by blake3.
//!
//! [`MaterialStore`] is the small trait the protocol writes through; [`LocalDirStore`] is
//! the default, a local data directory: `DIR/materials/ab/<64 hex>`, written to a
//! temporary name, fsynced, renamed into place and the directory fsynced (STYLE §5), so a
//! crash leaves either no file or the complete one. A stored material's digest is its
//! name, so [`MaterialStore::get`] verifies the bytes on every read.
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::{Error, Result};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Where material bytes live. Implementations must be durable when `put` returns.
pub trait MaterialStore: Send + Sync {
    /// Stores `bytes` durably under their blake3 digest (idempotent) and returns it.
    fn put(&self, bytes: &[u8]) -> Result<Digest>;
    /// The bytes stored under `digest`, verified against it; None if absent. Bytes that do
    /// not hash to `digest` are a definite `evidence_corrupt` error.
    fn get(&self, digest: &Digest) -> Result<Option<Vec<u8>>>;
    /// True if something is stored under `digest` (not verified).
    fn contains(&self, digest: &Digest) -> Result<bool>;
    /// Removes a material (garbage of an abandoned attempt). Absent is fine.
    fn remove(&self, digest: &Digest) -> Result<()>;
}

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

impl MaterialStore for LocalDirStore {
    fn put(&self, bytes: &[u8]) -> Result<Digest> {
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
        if fresh_dir {
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
            f.sync_all()
        };
        write().map_err(io(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, &path).map_err(io(format!("renaming into {}", path.display())))?;
        fsync_dir(&dir)?;
        Ok(digest)
    }

    fn get(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
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

    fn contains(&self, digest: &Digest) -> Result<bool> {
        Ok(self.path_of(digest).exists())
    }

    fn remove(&self, digest: &Digest) -> Result<()> {
        match fs::remove_file(self.path_of(digest)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::transient(format!("removing material {digest}: {e}"))),
        }
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
