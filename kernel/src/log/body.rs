//! How an L record's canonical LREC bytes are stored in `capture_log.body`: raw, or as
//! one zstd frame when that is smaller. A persisted format: the codec byte is stored with
//! each row and the body digest is always over the canonical (uncompressed) bytes, so the
//! choice never changes a record's identity.

/// Body codecs (`capture_log.body_codec`): the LREC bytes as they are, or one zstd frame.
pub(super) const CODEC_RAW: u8 = 0;
pub(super) const CODEC_ZSTD: u8 = 1;

/// Bodies smaller than this are stored raw (a frame would not pay for itself).
const COMPRESS_FROM: usize = 256;

/// How a record's LREC bytes are stored: compressed (zstd level 1: L bodies of row
/// images shrink several times, which is what the state store writes, logs and
/// replicates) when that is smaller.
pub(super) fn store_body(canonical: Vec<u8>) -> (u8, Vec<u8>) {
    if canonical.len() >= COMPRESS_FROM {
        if let Ok(z) = zstd::bulk::compress(&canonical, 1) {
            if z.len() < canonical.len() {
                return (CODEC_ZSTD, z);
            }
        }
    }
    (CODEC_RAW, canonical)
}

/// The LREC bytes of a stored body.
pub(super) fn load_body(codec: u8, stored: Vec<u8>) -> std::result::Result<Vec<u8>, String> {
    match codec {
        CODEC_RAW => Ok(stored),
        CODEC_ZSTD => zstd::stream::decode_all(&stored[..]).map_err(|e| format!("zstd body: {e}")),
        c => Err(format!("unknown body codec {c}")),
    }
}
