//! RAW and FINAL pages: the persisted rows of a window (DESIGN §5 steps 3 and 7).
//!
//! A page names its own identity (job, generation, window, attempt, page number), so its
//! blake3 digest binds the rows to the place they belong: the same rows under another
//! window hash differently and can never satisfy another window's credential.
use kernel::codec::{self, DecodeError, Versioned};
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::value::Row;
use serde::{Deserialize, Serialize};

/// Where a page belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageKey {
    pub job: JobId,
    pub generation: Generation,
    pub window: WindowId,
    pub attempt: Attempt,
    pub page: PageNo,
}

/// Rows read from one read view, in primary-key order (RAW, step 3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawPage {
    pub key: PageKey,
    pub rows: Vec<Row>,
}

/// Rows of the window as of HIGH, sealed for apply (FINAL, step 7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinalPage {
    pub key: PageKey,
    pub rows: Vec<Row>,
}

impl Versioned for RawPage {
    const KIND: [u8; 4] = *b"RAWP";
    const VERSION: u16 = 1;
}

impl Versioned for FinalPage {
    const KIND: [u8; 4] = *b"FINP";
    const VERSION: u16 = 1;
}

/// A page as persisted: its bytes and their digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    pub bytes: Vec<u8>,
    pub digest: Digest,
}

/// A reference to a persisted page inside a manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageRef {
    pub page: PageNo,
    pub digest: Digest,
    pub rows: u32,
    pub bytes: u64,
}

/// Encodes and hashes a page.
pub fn seal<T: Versioned>(page: &T) -> Sealed {
    let bytes = codec::encode(page);
    Sealed {
        digest: Digest::of(&bytes),
        bytes,
    }
}

impl RawPage {
    /// Decodes RAW page bytes (every version this build has written).
    pub fn decode(bytes: &[u8]) -> Result<RawPage, DecodeError> {
        codec::decode(bytes)
    }

    /// The reference a manifest keeps for this page.
    pub fn page_ref_for(&self, sealed: &Sealed) -> PageRef {
        PageRef {
            page: self.key.page,
            digest: sealed.digest,
            rows: u32::try_from(self.rows.len()).unwrap_or(u32::MAX),
            bytes: sealed.bytes.len() as u64,
        }
    }
}

impl FinalPage {
    /// Decodes FINAL page bytes (every version this build has written).
    pub fn decode(bytes: &[u8]) -> Result<FinalPage, DecodeError> {
        codec::decode(bytes)
    }

    /// The reference a manifest keeps for this page.
    pub fn page_ref(&self, sealed: &Sealed) -> PageRef {
        PageRef {
            page: self.key.page,
            digest: sealed.digest,
            rows: u32::try_from(self.rows.len()).unwrap_or(u32::MAX),
            bytes: sealed.bytes.len() as u64,
        }
    }
}

/// The place and row count a RAW (`T = RawPage`) or FINAL (`T = FinalPage`) page names,
/// read from its front without decoding a row: a page's body is its [`PageKey`] and then
/// its rows as a sequence, whose first field is the row count (postcard: the key's fields,
/// then a varint length).
///
/// Why this is what the audit needs: the page's bytes were verified against its digest
/// (the bytes the sealer encoded), and the audit checks where the page says it belongs
/// and how many rows it holds against the manifest. Decoding every row of every page
/// again checked only that the encoder's own output decodes, which the apply of each
/// FINAL page (and a re-apply after a restart) does anyway; it cost the activation about a
/// core-second per million rows, beside its field check.
pub fn page_head<T: Versioned>(bytes: &[u8]) -> Result<(PageKey, u64), DecodeError> {
    let (version, body) = codec::split::<T>(bytes)?;
    codec::decode_prefix(&T::KIND, version, body)
}

/// Cuts a window's final rows (in the fold's order: as read, then the keys only changes
/// added) into FINAL pages of at most `page_rows` rows. A window always has at least one
/// page, possibly empty, so T holds evidence for every applied window.
pub fn cut_final_pages(
    job: JobId,
    generation: Generation,
    window: WindowId,
    attempt: Attempt,
    rows: Vec<Row>,
    page_rows: usize,
) -> Vec<FinalPage> {
    let page_rows = page_rows.max(1);
    let mut pages = Vec::new();
    let mut it = rows.into_iter().peekable();
    loop {
        let chunk: Vec<Row> = it.by_ref().take(page_rows).collect();
        let no = PageNo(u32::try_from(pages.len()).unwrap_or(u32::MAX));
        if chunk.is_empty() && !pages.is_empty() {
            break;
        }
        pages.push(FinalPage {
            key: PageKey {
                job,
                generation,
                window,
                attempt,
                page: no,
            },
            rows: chunk,
        });
        if it.peek().is_none() {
            break;
        }
    }
    pages
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::value::SqlValue;

    fn rows(n: i64) -> Vec<Row> {
        (1..=n).map(|i| vec![SqlValue::Int(i)]).collect()
    }

    #[test]
    fn cuts_pages_and_keeps_one_for_an_empty_window() {
        let cut = |n, size| {
            cut_final_pages(
                JobId(1),
                Generation(1),
                WindowId(0),
                Attempt(1),
                rows(n),
                size,
            )
        };
        assert_eq!(cut(0, 10).len(), 1);
        assert!(cut(0, 10)[0].rows.is_empty());
        assert_eq!(cut(10, 10).len(), 1);
        let p = cut(25, 10);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2].rows.len(), 5);
        assert_eq!(p[2].key.page, PageNo(2));
    }

    #[test]
    fn digest_binds_identity() {
        let a = FinalPage {
            key: PageKey {
                job: JobId(1),
                generation: Generation(1),
                window: WindowId(0),
                attempt: Attempt(1),
                page: PageNo(0),
            },
            rows: rows(2),
        };
        let mut b = a.clone();
        b.key.window = WindowId(1);
        assert_ne!(seal(&a).digest, seal(&b).digest);
        assert_eq!(FinalPage::decode(&seal(&a).bytes).unwrap(), a);
        assert!(RawPage::decode(&seal(&a).bytes).is_err());
    }

    #[test]
    fn the_head_names_the_place_and_row_count_of_the_whole_decode() {
        for n in [0, 1, 127, 128, 20_000] {
            let page = RawPage {
                key: PageKey {
                    job: JobId(u64::MAX),
                    generation: Generation(300),
                    window: WindowId(70_000),
                    attempt: Attempt(2),
                    page: PageNo(129),
                },
                rows: rows(n),
            };
            let bytes = seal(&page).bytes;
            assert_eq!(page_head::<RawPage>(&bytes).unwrap(), (page.key, n as u64));
            assert!(
                page_head::<FinalPage>(&bytes).is_err(),
                "a RAW page is no FINAL page"
            );
            assert!(
                page_head::<RawPage>(&bytes[..10]).is_err(),
                "cut before the count"
            );
        }
    }
}
