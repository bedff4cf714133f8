//! The chunk layouts of a material stored in the state store: version 1 (the bytes as
//! they are, pinned by `ledger/tests/fixtures/material_chunks_v1.txt`) and version 2 (one
//! zstd frame of the bytes, written whenever it is smaller; a stored frame is pinned by
//! `material_chunks_v2.txt`, which every build must keep reading).
//!
//! The stored bytes (the material, or its frame) are cut into `ceil(len / CHUNK_BYTES)`
//! chunks numbered from 0, each exactly [`CHUNK_BYTES`] long except the last (an empty
//! material has none). Its head row records the layout, the material's own size and the
//! chunk count. [`assemble`] accepts the chunks read back only if their numbers, count and
//! lengths are exactly these, the frame (layout 2) decodes to exactly `size` bytes and the
//! bytes hash to the digest, so a lost, extra, cut or altered chunk is a definite
//! `evidence_corrupt` error naming the material, never wrong bytes. Compression changes
//! only what the state store holds: the digest, the manifests and every reader see the
//! material's own bytes.
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::{Error, Result};

/// Layout 1: the material's bytes as they are.
pub const LAYOUT_V1: u16 = 1;
/// Layout 2: one zstd frame (level 1) of the material's bytes.
pub const LAYOUT_ZSTD: u16 = 2;
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

/// The head and the stored bytes of `bytes`: its zstd frame under layout 2 when that is
/// smaller (pages of rows usually are, several times), else the bytes under layout 1.
pub fn encode(bytes: &[u8]) -> (Head, std::borrow::Cow<'_, [u8]>) {
    match zstd::bulk::compress(bytes, 1) {
        Ok(frame) if frame.len() < bytes.len() => (
            Head {
                layout: LAYOUT_ZSTD,
                size: bytes.len() as u64,
                chunks: u32::try_from(frame.len().div_ceil(CHUNK_BYTES)).unwrap_or(u32::MAX),
            },
            std::borrow::Cow::Owned(frame),
        ),
        _ => (head_of(bytes), std::borrow::Cow::Borrowed(bytes)),
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
    if head.layout != LAYOUT_V1 && head.layout != LAYOUT_ZSTD {
        return Err(corrupt(
            digest,
            format!(
                "chunk layout {} is unknown to this build (it reads {LAYOUT_V1} and \
                 {LAYOUT_ZSTD}); upgrade backfill",
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
    let stored = joined(digest, head, read)?;
    let out = match head.layout {
        LAYOUT_ZSTD => unframe(digest, head, &stored)?,
        _ => stored,
    };
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

/// The frame of a layout 2 material decoded: at most one byte more than `head.size` is
/// produced (the caller's length check names the difference), and memory grows with the
/// output read, never with what a damaged head claims.
fn unframe(digest: &Digest, head: Head, frame: &[u8]) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let decoded = zstd::stream::read::Decoder::new(frame).and_then(|d| {
        let mut out = Vec::new();
        d.take(head.size.saturating_add(1)).read_to_end(&mut out)?;
        Ok(out)
    });
    decoded.map_err(|e| corrupt(digest, format!("its zstd frame does not decode: {e}")))
}

/// The stored bytes: the chunks checked against the head's count, numbering and lengths.
fn joined(digest: &Digest, head: Head, read: Vec<(u32, Vec<u8>)>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(read.len() * CHUNK_BYTES);
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

    fn stored_of(bytes: &[u8]) -> (Head, Vec<(u32, Vec<u8>)>) {
        let (head, frame) = encode(bytes);
        (head, stored(&frame))
    }

    #[test]
    fn compressible_materials_are_stored_as_a_frame_and_read_back_exactly() {
        let code = |r: Result<Vec<u8>>| r.unwrap_err().as_definite().unwrap().code;
        // Rows of a page repeat much of their text: a frame of a few chunks.
        let page: Vec<u8> = (0..3 * CHUNK_BYTES)
            .flat_map(|i| format!("row {i} customer-{:010}-abcdefghij;", i % 977).into_bytes())
            .take(3 * CHUNK_BYTES + 11)
            .collect();
        let d = Digest::of(&page);
        let (h, read) = stored_of(&page);
        assert_eq!((h.layout, h.size), (LAYOUT_ZSTD, page.len() as u64));
        assert!(h.chunks < 4, "{h:?}");
        assert_eq!(assemble(&d, h, read.clone()).unwrap(), page);
        // Damage to the frame, a wrong size, a lost chunk: corrupt, never other bytes.
        let mut flipped = read.clone();
        let mid = flipped[0].1.len() / 2;
        flipped[0].1[mid] ^= 0x40;
        assert_eq!(
            code(assemble(&d, h, flipped)),
            DefiniteCode::EvidenceCorrupt
        );
        let shorter = Head {
            size: h.size - 1,
            ..h
        };
        assert_eq!(
            code(assemble(&d, shorter, read.clone())),
            DefiniteCode::EvidenceCorrupt
        );
        let huge = Head {
            size: u64::MAX,
            ..h
        };
        assert_eq!(
            code(assemble(&d, huge, read.clone())),
            DefiniteCode::EvidenceCorrupt
        );
        let mut lost = read;
        lost.pop();
        assert_eq!(code(assemble(&d, h, lost)), DefiniteCode::EvidenceCorrupt);
        // Bytes a frame would not shrink stay as they are (layout 1).
        let noise: Vec<u8> = (0..128u32)
            .flat_map(|i| Digest::of(&i.to_le_bytes()).0)
            .collect();
        let (h, read) = stored_of(&noise);
        assert_eq!(h, head_of(&noise));
        assert_eq!(assemble(&Digest::of(&noise), h, read).unwrap(), noise);
        let (h, read) = stored_of(&[]);
        assert_eq!((h.layout, h.chunks), (LAYOUT_V1, 0));
        assert!(assemble(&Digest::of(&[]), h, read).unwrap().is_empty());
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
