//! Jobs installed by a build whose read views returned strings re-encoded as utf8mb4.
//!
//! Why this is safe: such a build sealed pages holding a latin1 (cp1251, gbk, ucs2...)
//! column's text as utf8mb4 bytes, and wrote them through a utf8mb4 session, which the
//! server converted back: exact. This build writes a page's bytes as the column's own
//! (SET NAMES binary), so an old page applied now would store other bytes, silently. A job
//! recorded with `page_text = 'utf8mb4'` (migration 0073) is therefore decided here before
//! any window runs: before the windows (INSTALLED, CAPTURING) it has sealed no page, and it
//! is marked `stored` so every page it seals is read by this build; inside the windows it
//! may hold old pages not yet applied, and it pauses with `precondition`, naming the
//! columns and the fix (cancel and re-add); past the windows every page is applied already
//! (by the old build, exactly) and it goes on. A table whose character columns are all
//! utf8mb4, utf8mb3 or ascii (the same bytes either way) is never paused.
use crate::store::jobs;
use crate::table::ctx::JobCtx;
use kernel::error::{Definite, DefiniteCode};
use kernel::schema::SealedSchema;
use kernel::Result;
use ledger::record::Phase;

/// Charsets whose stored bytes are their utf8mb4 form.
const SAME_AS_UTF8MB4: &[&str] = &["utf8mb4", "utf8mb3", "utf8", "ascii"];

/// Decides an old job before its windows run: `Some` is the pause to record.
pub async fn check(ctx: &JobCtx, phase: Phase) -> Result<Option<Definite>> {
    if jobs::page_text(&ctx.pool, ctx.id()).await? == jobs::PAGE_TEXT_STORED {
        return Ok(None);
    }
    match phase {
        Phase::Installed | Phase::Capturing => {
            jobs::mark_page_text_stored(&ctx.pool, ctx.id()).await?;
            Ok(None)
        }
        Phase::Windows => Ok(decide(&ctx.schema)),
        _ => Ok(None),
    }
}

/// The pause of a job inside its windows whose pages may hold re-encoded text (pure).
pub fn decide(schema: &SealedSchema) -> Option<Definite> {
    let cols = reencoded_columns(schema);
    (!cols.is_empty()).then(|| Definite {
        code: DefiniteCode::Precondition,
        message: format!(
            "{}: installed by an older backfill whose pages hold the text of {} re-encoded \
             as utf8mb4; this build writes a page's bytes as the column's own charset, so \
             those pages would store other bytes; fix: cancel the job and re-add the table \
             into a new empty target (runbooks/upgrade.md), or finish it with the older \
             build",
            schema.qualified(),
            cols.join(", ")
        ),
    })
}

/// Character columns whose charset stores other bytes than utf8mb4, as `name (charset)`.
fn reencoded_columns(schema: &SealedSchema) -> Vec<String> {
    schema
        .columns
        .iter()
        .filter_map(|c| {
            let cs = c.charset.as_deref()?;
            (!SAME_AS_UTF8MB4.contains(&cs) && cs != "binary")
                .then(|| format!("{} ({cs})", kernel::schema::quote_ident(&c.name)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::schema::{ColumnDef, ColumnKind};

    fn schema(charsets: &[Option<&str>]) -> SealedSchema {
        let mut columns = vec![ColumnDef::plain("id", ColumnKind::BigInt, "bigint")];
        for (i, cs) in charsets.iter().enumerate() {
            let mut c = ColumnDef::plain(&format!("c{i}"), ColumnKind::Varchar, "varchar(9)");
            c.charset = cs.map(String::from);
            columns.push(c);
        }
        SealedSchema {
            database: "d".into(),
            table: "t".into(),
            columns,
            key: vec![0],
            key_name: kernel::schema::PRIMARY.into(),
        }
    }

    #[test]
    fn only_text_of_other_charsets_than_utf8mb4_pauses_an_old_job() {
        assert_eq!(
            decide(&schema(&[Some("utf8mb4"), Some("ascii"), None])),
            None
        );
        assert_eq!(decide(&schema(&[Some("utf8mb3"), Some("binary")])), None);
        let d = decide(&schema(&[Some("utf8mb4"), Some("latin1"), Some("ucs2")])).unwrap();
        assert_eq!(d.code, DefiniteCode::Precondition);
        assert!(
            d.message.contains("`c1` (latin1), `c2` (ucs2)"),
            "{}",
            d.message
        );
        assert!(d.message.contains("re-add"), "{}", d.message);
    }
}
