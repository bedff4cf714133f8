//! Who owns a job and who reads its stream (DESIGN §18), for `status`: the job's lease
//! (`ledger_lease`) and the stream's capture lease (`capture_streams`), each with its
//! owner name, token and whether it is still live by the state store's clock.
use kernel::ids::JobId;
use kernel::Result;
use sqlx::MySqlPool;

/// A lease as status shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub owner: String,
    pub token: u64,
    /// Milliseconds until it expires (negative: expired that long ago).
    pub expires_in_ms: i64,
}

impl Holder {
    pub fn live(&self) -> bool {
        self.expires_in_ms > 0
    }

    /// `serve@a (token 3, expires in 12 s)` / `... expired 4 s ago: free to take over`.
    pub fn text(&self) -> String {
        let s = self.expires_in_ms.abs() / 1000;
        if self.live() {
            format!(
                "{} (token {}, lease expires in {s} s)",
                self.owner, self.token
            )
        } else {
            format!(
                "{} (token {}, lease expired {s} s ago: the next serve takes it over)",
                self.owner, self.token
            )
        }
    }
}

fn q(e: sqlx::Error) -> kernel::Error {
    kernel::error::from_sqlx("reading a lease", &e)
}

type Row = (String, u64, i64);

fn holder(r: Option<Row>) -> Option<Holder> {
    r.filter(|(o, _, _)| !o.is_empty())
        .map(|(owner, token, us)| Holder {
            owner,
            token,
            expires_in_ms: us / 1000,
        })
}

/// The lease of `job`, if it ever ran.
pub async fn job_owner(pool: &MySqlPool, job: JobId) -> Result<Option<Holder>> {
    let r: Option<Row> = sqlx::query_as(
        "SELECT owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) \
         FROM ledger_lease WHERE job_id = ?",
    )
    .bind(job.0)
    .fetch_optional(pool)
    .await
    .map_err(q)?;
    Ok(holder(r))
}

/// The capture lease of `stream`, if a reader ever ran under one.
pub async fn stream_reader(pool: &MySqlPool, stream: &str) -> Result<Option<Holder>> {
    let r: Option<Row> = sqlx::query_as(
        "SELECT owner, token, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) \
         FROM capture_streams WHERE stream = ?",
    )
    .bind(stream)
    .fetch_optional(pool)
    .await
    .map_err(q)?;
    Ok(holder(r))
}
