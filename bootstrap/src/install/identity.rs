//! Is the state store on the source server? (DESIGN §2: it may be anywhere else.)
//!
//! Two independent signals, either one refuses:
//! 1. The state store holds a random token (`state_identity`, written once). If the SOURCE
//!    connection can read the same token from the state schema, both URLs reach one server.
//!    A source user without SELECT on the state schema gets 1142/1044, and a different
//!    server has no such table (1146/1049): then the token says nothing.
//! 2. Server identity: MariaDB has no server_uuid, so `server_id` + `@@server_uid`;
//!    MySQL `@@server_uuid`. Equal identities mean the same server.
use super::checks::Refusal;
use kernel::error::{codes, from_mysql, from_sqlx, mysql_server_code};
use kernel::introspect::{deny_codes, ServerFacts};
use kernel::schema::quote_ident;
use kernel::Result;
use mysql_async::prelude::Queryable;
use sqlx::MySqlPool;
use std::collections::BTreeMap;

/// The state store's token, written once (INSERT IGNORE keeps the first writer's).
pub async fn state_token(pool: &MySqlPool) -> Result<String> {
    let fresh =
        kernel::ids::Nonce::random().to_string() + &kernel::ids::Nonce::random().to_string();
    sqlx::query("INSERT IGNORE INTO state_identity (singleton, token) VALUES (1, ?)")
        .bind(&fresh)
        .execute(pool)
        .await
        .map_err(|e| from_sqlx("writing the state store identity", &e))?;
    let token: String = sqlx::query_scalar("SELECT token FROM state_identity WHERE singleton = 1")
        .fetch_one(pool)
        .await
        .map_err(|e| from_sqlx("reading the state store identity", &e))?;
    Ok(token)
}

/// The state store server's facts, read through sqlx.
pub async fn state_server_facts(pool: &MySqlPool) -> Result<ServerFacts> {
    let sql = kernel::introspect::server_facts_sql();
    let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await
        .map_err(|e| from_sqlx("reading the state store's server variables", &e))?;
    let vars: BTreeMap<String, String> = rows
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    Ok(ServerFacts::from_vars(&vars))
}

/// What the source connection sees of the state store's token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSighting {
    /// The source returned this token.
    Seen(Option<String>),
    /// The source has no such schema/table, or may not read it.
    NotVisible,
}

/// Looks for the state token through the source connection.
pub async fn token_through_source(
    source: &mut mysql_async::Conn,
    state_db: &str,
) -> Result<TokenSighting> {
    let sql = format!(
        "SELECT token FROM {}.state_identity WHERE singleton = 1",
        quote_ident(state_db)
    );
    match source.query_first::<String, _>(sql).await {
        Ok(t) => Ok(TokenSighting::Seen(t)),
        Err(e) => match mysql_server_code(&e) {
            Some(codes::ER_NO_SUCH_TABLE | codes::ER_BAD_DB) => Ok(TokenSighting::NotVisible),
            Some(c) if deny_codes::is_denied(c) => Ok(TokenSighting::NotVisible),
            _ => Err(from_mysql(
                "looking for the state store through the source",
                &e,
            )),
        },
    }
}

/// The decision (pure).
pub fn check_state_not_on_source(
    state_url: &str,
    token: &str,
    sighting: &TokenSighting,
    source: &ServerFacts,
    state: &ServerFacts,
) -> Option<Refusal> {
    let same_token = matches!(sighting, TokenSighting::Seen(Some(t)) if t == token);
    let same_identity = source.flavor == state.flavor
        && source.server_uid.is_some()
        && source.identity() == state.identity();
    if !(same_token || same_identity) {
        return None;
    }
    let how = if same_token {
        format!("the source can read the state store's identity token {token}")
    } else {
        format!("both report server identity {}", source.identity())
    };
    Some(Refusal::new(
        format!("state store {}", kernel::redact::redact_url(state_url)),
        format!("is on the source server ({how})"),
        "put the state store on another server (by default the target server): \
         --state mysql://USER@TARGET_HOST:PORT/backfill_state",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(id: &str, uid: &str) -> ServerFacts {
        let vars: BTreeMap<String, String> = [
            ("version", "10.11.6-MariaDB"),
            ("server_id", id),
            ("server_uid", uid),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        ServerFacts::from_vars(&vars)
    }

    #[test]
    fn either_signal_refuses() {
        let (a, b) = (facts("1", "A"), facts("2", "B"));
        let unseen = TokenSighting::NotVisible;
        assert!(check_state_not_on_source("mysql://u:pw@h/s", "t", &unseen, &a, &b).is_none());
        let seen = TokenSighting::Seen(Some("t".into()));
        let r = check_state_not_on_source("mysql://u:pw@h/s", "t", &seen, &a, &b)
            .unwrap_or_else(|| panic!("refused"));
        assert!(r.to_string().contains("source server"));
        assert!(!r.to_string().contains("pw"), "password leaked: {r}");
        let other = TokenSighting::Seen(Some("other".into()));
        assert!(check_state_not_on_source("u", "t", &other, &a, &b).is_none());
        assert!(check_state_not_on_source("u", "t", &unseen, &a, &facts("1", "A")).is_some());
        // Same server_id but another uid: another server.
        assert!(check_state_not_on_source("u", "t", &unseen, &a, &facts("1", "Z")).is_none());
    }
}
