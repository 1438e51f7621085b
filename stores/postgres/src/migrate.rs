//! The numbered schema migrations of the PostgreSQL store and the one step
//! that applies them: under a transaction-scoped advisory lock (so that
//! workers opening one fresh database together migrate it once), recording
//! each applied number in `agentrt_schema_version`, refusing a database
//! whose version is newer than this code.

use tokio_postgres::Client;

use crate::errors::OpenError;

/// The numbered migrations, applied in order. Never edit a released one:
/// add the next number.
pub const MIGRATIONS: &[(i64, &str)] = &[(1, include_str!("../migrations/0001_init.sql"))];

/// The advisory lock key that serializes migrations ("agentrt" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_6765_6e74_7274;

/// The schema version this code writes and understands.
pub fn known_version() -> i64 {
    MIGRATIONS.last().map_or(0, |(n, _)| *n)
}

/// Bring the database to [`known_version`], or refuse it when newer.
/// Returns the version found before migrating.
pub async fn migrate(client: &mut Client, target: &str) -> Result<i64, OpenError> {
    let setup = |e: tokio_postgres::Error| OpenError::Setup {
        target: target.to_owned(),
        detail: crate::errors::describe_error(&e),
    };
    let tx = client.transaction().await.map_err(setup)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(setup)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS agentrt_schema_version (
             version    BIGINT      NOT NULL PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(setup)?;
    let found: i64 = tx
        .query_one(
            "SELECT coalesce(max(version), 0)::BIGINT FROM agentrt_schema_version",
            &[],
        )
        .await
        .map_err(setup)?
        .try_get(0)
        .map_err(setup)?;
    let known = known_version();
    if found > known {
        return Err(OpenError::TooNew {
            target: target.to_owned(),
            found,
            known,
        });
    }
    for (number, sql) in MIGRATIONS.iter().filter(|(n, _)| *n > found) {
        tx.batch_execute(sql).await.map_err(|e| OpenError::Setup {
            target: target.to_owned(),
            detail: format!(
                "migration {number} failed: {}",
                crate::errors::describe_error(&e)
            ),
        })?;
        tx.execute(
            "INSERT INTO agentrt_schema_version (version) VALUES ($1)",
            &[number],
        )
        .await
        .map_err(setup)?;
    }
    tx.commit().await.map_err(setup)?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (i, (number, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*number, i as i64 + 1);
            assert!(!sql.trim().is_empty());
        }
        assert_eq!(known_version(), MIGRATIONS.len() as i64);
    }
}
