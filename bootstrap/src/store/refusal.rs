//! A refused precondition (DESIGN §9): the object, what is wrong, and the fix. Given by
//! install's checks and by the jobs store (a live job or a claimed target in the way).
use std::fmt;

/// One failed precondition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What is wrong, naming the object (server variable, table, column, privilege).
    pub object: String,
    pub problem: String,
    pub fix: String,
}

impl Refusal {
    /// A refusal about `object`.
    pub fn new(
        object: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Refusal {
            object: object.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; fix: {}", self.object, self.problem, self.fix)
    }
}
