//! One compared column as `information_schema.COLUMNS` describes it: the vocabulary the
//! comparator's key, SQL and read modules share (its own module, below all three).
use kernel::introspect::normalize_column_type;
use kernel::schema::ColumnKind;

/// One column as `information_schema.COLUMNS` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// `DATA_TYPE`, lowercase.
    pub data_type: String,
    /// `COLUMN_TYPE`, lowercase, integer display width removed (MySQL 8 prints none).
    pub column_type: String,
    pub nullable: bool,
    pub collation: Option<String>,
}

impl Column {
    /// Builds a column from the raw `information_schema` fields.
    pub fn new(
        name: String,
        data_type: &str,
        column_type: &str,
        nullable: bool,
        collation: Option<String>,
    ) -> Column {
        let data_type = data_type.to_ascii_lowercase();
        let column_type = match ColumnKind::classify(&data_type) {
            Some(kind) => normalize_column_type(kind, column_type),
            None => column_type.to_ascii_lowercase(),
        };
        Column {
            name,
            data_type,
            column_type,
            nullable,
            collation,
        }
    }

    pub(super) fn kind(&self) -> Option<ColumnKind> {
        ColumnKind::classify(&self.data_type)
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "{}{}{}",
            self.column_type,
            if self.nullable { " NULL" } else { " NOT NULL" },
            self.collation
                .as_deref()
                .map(|c| format!(" COLLATE {c}"))
                .unwrap_or_default()
        )
    }
}
