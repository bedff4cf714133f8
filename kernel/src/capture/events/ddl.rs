//! The objects a DDL statement changes, from a small tokenizer (comments and literals
//! dropped, executable comments kept). `None` means the statement is not understood, and
//! the caller then falls back to "names the table" (the safe side).

/// An object a DDL statement changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Table(String, String),
    /// Every table of a schema (DROP DATABASE).
    Schema(String),
}

/// A token of a statement: comments and string literals are dropped; the body of an
/// executable comment (`/*! ... */`, `/*M!nnnnn ... */`) is kept as code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    Word(String),
    Quoted(String),
    Punct(char),
}

pub(crate) fn tokens(sql: &str) -> Vec<Tok> {
    spanned(sql).into_iter().map(|(t, _)| t).collect()
}

/// Characters with their byte offsets.
struct Cursor<'a> {
    it: std::iter::Peekable<std::str::CharIndices<'a>>,
    len: usize,
}

impl Iterator for Cursor<'_> {
    type Item = char;
    fn next(&mut self) -> Option<char> {
        self.it.next().map(|(_, c)| c)
    }
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<&char> {
        self.it.peek().map(|(_, c)| c)
    }

    fn pos(&mut self) -> usize {
        self.it.peek().map_or(self.len, |(i, _)| *i)
    }
}

/// [`tokens`] with the byte range of each token in `sql` (a quoted name or a literal
/// with its quotes).
pub(crate) fn spanned(sql: &str) -> Vec<(Tok, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut chars = Cursor {
        it: sql.char_indices().peekable(),
        len: sql.len(),
    };
    loop {
        let start = chars.pos();
        let Some(c) = chars.next() else { break };
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let exec = chars.peek() == Some(&'!') || chars.peek() == Some(&'M');
                if exec {
                    // `/*!50100 code */` or `/*M!100100 code */`: keep the code.
                    while chars
                        .peek()
                        .is_some_and(|d| *d == 'M' || *d == '!' || d.is_ascii_digit())
                    {
                        chars.next();
                    }
                } else {
                    let mut prev = ' ';
                    for d in chars.by_ref() {
                        if prev == '*' && d == '/' {
                            break;
                        }
                        prev = d;
                    }
                }
            }
            '*' if chars.peek() == Some(&'/') => {
                chars.next(); // the end of an executable comment
            }
            '#' => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '`' => {
                let mut name = String::new();
                while let Some(d) = chars.next() {
                    if d == '`' {
                        if chars.peek() == Some(&'`') {
                            chars.next();
                            name.push('`');
                        } else {
                            break;
                        }
                    } else {
                        name.push(d);
                    }
                }
                let tok = Tok::Quoted(name);
                out.push((tok, start..chars.pos()));
            }
            '\'' | '"' => {
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        if chars.peek() == Some(&c) {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
                let tok = Tok::Punct('\'');
                out.push((tok, start..chars.pos()));
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut w = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '$' {
                        w.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                let tok = Tok::Word(w);
                out.push((tok, start..chars.pos()));
            }
            c if c.is_whitespace() => {}
            c => out.push((Tok::Punct(c), start..chars.pos())),
        }
    }
    out
}

struct Toks<'a> {
    t: &'a [Tok],
    i: usize,
    default: &'a str,
}

impl Toks<'_> {
    fn is(&self, k: &str) -> bool {
        matches!(self.t.get(self.i), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k))
    }

    fn eat(&mut self, k: &str) -> bool {
        let yes = self.is(k);
        if yes {
            self.i += 1;
        }
        yes
    }

    fn eat_all(&mut self, ks: &[&str]) {
        while ks.iter().any(|k| self.eat(k)) {}
    }

    fn punct(&mut self, c: char) -> bool {
        let yes = self.t.get(self.i) == Some(&Tok::Punct(c));
        if yes {
            self.i += 1;
        }
        yes
    }

    fn ident(&mut self) -> Option<String> {
        let s = match self.t.get(self.i)? {
            Tok::Word(w) | Tok::Quoted(w) => w.clone(),
            Tok::Punct(_) => return None,
        };
        self.i += 1;
        Some(s)
    }

    /// `name` or `schema.name`.
    fn name(&mut self) -> Option<Target> {
        let first = self.ident()?;
        if self.punct('.') {
            let second = self.ident()?;
            return Some(Target::Table(first, second));
        }
        Some(Target::Table(self.default.to_string(), first))
    }

    fn names(&mut self) -> Option<Vec<Target>> {
        let mut out = vec![self.name()?];
        while self.punct(',') {
            out.push(self.name()?);
        }
        Some(out)
    }

    fn if_exists(&mut self) {
        if self.is("IF") {
            self.i += 1;
            self.eat("NOT");
            self.eat("EXISTS");
        }
    }

    /// Skips to the first of `objects` before any `(` (attributes such as `DEFINER=...`,
    /// `ALGORITHM=...`, `OR REPLACE`); returns it upper-cased.
    fn object(&mut self, objects: &[&str]) -> Option<String> {
        while self.i < self.t.len() && self.i < 24 {
            if let Some(k) = objects.iter().find(|k| self.is(k)) {
                self.i += 1;
                return Some(k.to_string());
            }
            if self.t.get(self.i) == Some(&Tok::Punct('(')) {
                return None;
            }
            self.i += 1;
        }
        None
    }

    fn any(&self, k: &str) -> bool {
        self.t
            .iter()
            .any(|t| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case(k)))
    }
}

const NO_TABLE: &[&str] = &[
    "DATABASE",
    "SCHEMA",
    "FUNCTION",
    "PROCEDURE",
    "EVENT",
    "USER",
    "ROLE",
    "SERVER",
    "PACKAGE",
];

/// The objects a DDL statement changes, or None for a shape not recognised here.
pub fn ddl_targets(sql: &str, default_schema: &str) -> Option<Vec<Target>> {
    let t = tokens(sql);
    let mut k = Toks {
        t: &t,
        i: 0,
        default: default_schema,
    };
    let verb = k.ident()?.to_ascii_uppercase();
    match verb.as_str() {
        "ALTER" => alter(&mut k),
        "CREATE" => create(&mut k),
        "DROP" => drop(&mut k),
        "TRUNCATE" => {
            k.eat("TABLE");
            Some(vec![k.name()?])
        }
        "GRANT" | "REVOKE" | "ANALYZE" | "OPTIMIZE" | "REPAIR" | "CHECKSUM" => Some(Vec::new()),
        _ => None,
    }
}

fn alter(k: &mut Toks<'_>) -> Option<Vec<Target>> {
    let objects = ["TABLE", "VIEW", "SEQUENCE"];
    let all: Vec<&str> = objects.iter().chain(NO_TABLE).copied().collect();
    match k.object(&all)?.as_str() {
        "TABLE" => {
            k.if_exists();
            let target = k.name()?;
            // EXCHANGE PARTITION ... WITH TABLE t and RENAME [TO] t change another table
            // too: any mention counts.
            if k.any("EXCHANGE") || k.any("RENAME") || k.any("CONVERT") {
                return None;
            }
            Some(vec![target])
        }
        "VIEW" | "SEQUENCE" => {
            k.if_exists();
            Some(vec![k.name()?])
        }
        _ => Some(Vec::new()),
    }
}

fn create(k: &mut Toks<'_>) -> Option<Vec<Target>> {
    let objects = ["TABLE", "INDEX", "VIEW", "SEQUENCE", "TRIGGER"];
    let all: Vec<&str> = objects.iter().chain(NO_TABLE).copied().collect();
    match k.object(&all)?.as_str() {
        // The new table only: LIKE t and AS SELECT ... FROM t read t, they do not change it.
        "TABLE" | "VIEW" | "SEQUENCE" => {
            k.if_exists();
            Some(vec![k.name()?])
        }
        "INDEX" => {
            k.if_exists();
            k.ident()?;
            k.eat("ON").then_some(())?;
            Some(vec![k.name()?])
        }
        "TRIGGER" => {
            k.if_exists();
            k.name()?;
            k.object(&["ON"])?;
            Some(vec![k.name()?])
        }
        _ => Some(Vec::new()),
    }
}

fn drop(k: &mut Toks<'_>) -> Option<Vec<Target>> {
    let objects = ["TABLE", "TABLES", "INDEX", "VIEW", "SEQUENCE"];
    let schema = ["DATABASE", "SCHEMA"];
    let all: Vec<&str> = objects
        .iter()
        .chain(&schema)
        .chain(NO_TABLE)
        .copied()
        .collect();
    match k.object(&all)?.as_str() {
        "TABLE" | "TABLES" | "VIEW" | "SEQUENCE" => {
            k.if_exists();
            k.eat_all(&["NOWAIT"]);
            k.names()
        }
        "INDEX" => {
            k.if_exists();
            k.ident()?;
            k.eat("ON").then_some(())?;
            Some(vec![k.name()?])
        }
        "DATABASE" | "SCHEMA" => {
            k.if_exists();
            Some(vec![Target::Schema(k.ident()?)])
        }
        _ => Some(Vec::new()),
    }
}
