//! The chunk layout of a material stored in the state store, version 1 (pinned by the
//! golden fixture `ledger/tests/fixtures/material_chunks_v1.txt`).
//!
//! A material of `size` bytes is cut into `ceil(size / CHUNK_BYTES)` chunks numbered from
//! 0, each exactly [`CHUNK_BYTES`] long except the last (an empty material has none). Its
//! head row records the layout version, the size and the chunk count. [`assemble`]
//! accepts the chunks read back only if their numbers, count and lengths are exactly
//! these and the bytes hash to the digest, so a lost, extra, cut or altered chunk is a
//! definite `evidence_corrupt` error naming the material, never wrong bytes.
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::{Error, Result};

/// The layout version written in every head row.
pub const LAYOUT_V1: u16 = 1;
/// Bytes per chunk (512 KiB): one statement stays far below `max_allowed_packet` and a
/// Galera write set of [`CHUNKS_PER_TX`] chunks stays small.
pub const CHUNK_BYTES: usize = 512 * 1024;
/// Chunks written per state-store transaction.
pub const CHUNKS_PER_TX: usize = 4;

/// What the head row of a material says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub layout: u16,
    pub size: u64,
    pub chunks: u32,
}

/// The head of `bytes` under layout 1.
pub fn head_of(bytes: &[u8]) -> Head {
    Head {
        layout: LAYOUT_V1,
        size: bytes.len() as u64,
        chunks: u32::try_from(bytes.len().div_ceil(CHUNK_BYTES)).unwrap_or(u32::MAX),
    }
}

/// The chunks of `bytes` in order (chunk_no = index).
pub fn split(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.chunks(CHUNK_BYTES)
}

fn corrupt(digest: &Digest, what: String) -> Error {
    Error::definite(
        DefiniteCode::EvidenceCorrupt,
        format!(
            "material {digest} in the state store (material_blobs): {what}; the state store \
             was altered or damaged: restore it from a backup, or cancel and re-install the \
             table"
        ),
    )
}

/// Joins the chunks read back (`(chunk_no, bytes)` in chunk order) after checking them
/// against the head and the digest.
pub fn assemble(digest: &Digest, head: Head, read: Vec<(u32, Vec<u8>)>) -> Result<Vec<u8>> {
    if head.layout != LAYOUT_V1 {
        return Err(corrupt(
            digest,
            format!(
                "chunk layout {} is unknown to this build (it writes {LAYOUT_V1}); upgrade backfill",
                head.layout
            ),
        ));
    }
    if read.len() != head.chunks as usize {
        return Err(corrupt(
            digest,
            format!(
                "{} chunks stored, its head says {}",
                read.len(),
                head.chunks
            ),
        ));
    }
    let mut out = Vec::with_capacity(usize::try_from(head.size).unwrap_or(0));
    for (i, (no, bytes)) in read.into_iter().enumerate() {
        let last = i + 1 == head.chunks as usize;
        if no as usize != i {
            return Err(corrupt(
                digest,
                format!("chunk {i} is missing (found {no})"),
            ));
        }
        if !last && bytes.len() != CHUNK_BYTES || bytes.is_empty() || bytes.len() > CHUNK_BYTES {
            return Err(corrupt(
                digest,
                format!("chunk {no} has {} bytes", bytes.len()),
            ));
        }
        out.extend_from_slice(&bytes);
    }
    if out.len() as u64 != head.size {
        return Err(corrupt(
            digest,
            format!("{} bytes stored, its head says {}", out.len(), head.size),
        ));
    }
    if Digest::of(&out) != *digest {
        return Err(corrupt(digest, "bytes do not hash to the digest".into()));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stored(bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
        split(bytes)
            .enumerate()
            .map(|(i, c)| (i as u32, c.to_vec()))
            .collect()
    }

    #[test]
    fn round_trip_and_every_damage_is_corrupt() {
        for len in [
            0,
            1,
            CHUNK_BYTES - 1,
            CHUNK_BYTES,
            CHUNK_BYTES + 1,
            3 * CHUNK_BYTES + 7,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let d = Digest::of(&bytes);
            let h = head_of(&bytes);
            assert_eq!(h.chunks as usize, len.div_ceil(CHUNK_BYTES));
            assert_eq!(assemble(&d, h, stored(&bytes)).unwrap(), bytes);
            if len == 0 {
                continue;
            }
            let code = |r: Result<Vec<u8>>| r.unwrap_err().as_definite().unwrap().code;
            let mut flipped = stored(&bytes);
            flipped[0].1[0] ^= 1;
            assert_eq!(
                code(assemble(&d, h, flipped)),
                DefiniteCode::EvidenceCorrupt
            );
            let mut lost = stored(&bytes);
            lost.pop();
            assert_eq!(code(assemble(&d, h, lost)), DefiniteCode::EvidenceCorrupt);
            let mut cut = stored(&bytes);
            cut.last_mut().unwrap().1.pop();
            assert_eq!(code(assemble(&d, h, cut)), DefiniteCode::EvidenceCorrupt);
        }
    }
}
