//! The one place the end-to-end suites name `bootstrap`'s module paths: every test and
//! helper reaches bootstrap as `bf::module::Item`. When bootstrap's modules move (layers:
//! `io/`, `table/`, `supervisor/`, ...), re-export the old names here
//! (`pub use bootstrap::table::window;`) or rename them once, instead of editing every suite.
pub use bootstrap::*;
