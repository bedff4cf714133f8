//! Server weights of character key values (DESIGN §14): `WEIGHT_STRING(v AS CHAR(n))`
//! under the column's collation, n the declared length, asked of the source in batches.
//! Plain `WEIGHT_STRING(v)` ignores PAD SPACE (notes/mariadb.md); padding to the declared
//! length makes 'a' and 'a ' one key where the collation says so.
