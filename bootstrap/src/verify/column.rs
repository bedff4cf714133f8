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
    /// The rest of the definition: compared, never used to read a value.
    pub attrs: Attributes,
}

/// What else `information_schema.COLUMNS` says of a column and a copy must keep: two
/// columns of equal type and collation still define different tables when one has a
/// default, `auto_increment`, `on update`, INVISIBLE or a generation expression the other
/// lacks (rows a writer inserts on the target would differ).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `CHARACTER_SET_NAME`.
    pub charset: Option<String>,
    /// `COLUMN_DEFAULT` as the server prints it (MariaDB: an SQL expression, `NULL` for a
    /// nullable column without one); None: no default.
    pub default: Option<String>,
    /// `EXTRA`, lowercase: `auto_increment`, `on update current_timestamp()`,
    /// `virtual generated`, `invisible`, ...; empty for none.
    pub extra: String,
    /// `GENERATION_EXPRESSION` of a generated column.
    pub generation: Option<String>,
}

impl Attributes {
    /// Every way `target` differs from `self` (the source), one plain sentence each,
    /// naming the column.
    pub fn differences(&self, column: &str, target: &Attributes) -> Vec<String> {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        let mut out = Vec::new();
        let mut say = |what: &str, s: String, t: String| {
            if s != t {
                out.push(format!(
                    "column `{column}`: {what} {s} on the source, {t} on the target"
                ));
            }
        };
        say(
            "character set",
            shown(&self.charset),
            shown(&target.charset),
        );
        say("default", shown(&self.default), shown(&target.default));
        let extra = |e: &str| match e {
            "" => "none".to_string(),
            e => format!("`{e}`"),
        };
        say("attributes", extra(&self.extra), extra(&target.extra));
        say(
            "generation expression",
            shown(&self.generation),
            shown(&target.generation),
        );
        out
    }
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
            attrs: Attributes::default(),
        }
    }

    /// The column with the rest of its definition.
    pub fn with_attrs(self, attrs: Attributes) -> Column {
        Column { attrs, ..self }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_attribute_difference_is_one_sentence() {
        let s = Attributes {
            charset: Some("utf8mb4".into()),
            default: Some("'x'".into()),
            extra: "on update current_timestamp()".into(),
            generation: None,
        };
        assert!(s.differences("c", &s.clone()).is_empty());
        let t = Attributes {
            charset: Some("latin1".into()),
            default: None,
            extra: String::new(),
            generation: Some("`a` + 1".into()),
        };
        assert_eq!(
            s.differences("c", &t),
            vec![
                "column `c`: character set utf8mb4 on the source, latin1 on the target",
                "column `c`: default 'x' on the source, none on the target",
                "column `c`: attributes `on update current_timestamp()` on the source, none \
                 on the target",
                "column `c`: generation expression none on the source, `a` + 1 on the target",
            ]
        );
    }
}
