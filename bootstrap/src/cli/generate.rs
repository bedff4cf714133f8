//! `backfill completions SHELL` and `backfill man [COMMAND]`: generated from the clap
//! definitions of [`Cli`] at run time, so they name exactly the subcommands and flags the
//! program parses (nothing to keep in step by hand).
use crate::cli::{Cli, CompletionsArgs, ManArgs};
use clap::CommandFactory;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};

/// The completion script for `a.shell`.
pub fn completions(a: CompletionsArgs) -> Result<String> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "backfill", &mut out);
    text(out)
}

/// The manual page (roff) of `backfill`, or of one of its subcommands.
pub fn man(a: ManArgs) -> Result<String> {
    let mut cmd = Cli::command();
    cmd.build();
    let page = match a.command.as_deref() {
        None => cmd,
        Some(name) => {
            let names: Vec<String> = cmd
                .get_subcommands()
                .map(|s| s.get_name().to_string())
                .collect();
            let Some(sub) = cmd.find_subcommand(name) else {
                return Err(Error::definite(
                    DefiniteCode::Usage,
                    format!(
                        "`backfill man {name}`: no such command; one of {}",
                        names.join(", ")
                    ),
                ));
            };
            sub.clone()
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| Error::transient(format!("cannot render the manual page: {e}")))?;
    text(out)
}

fn text(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes)
        .map_err(|e| Error::transient(format!("generated text is not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bash_script_and_the_man_page_name_every_subcommand() {
        let bash = completions(CompletionsArgs {
            shell: clap_complete::Shell::Bash,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let page = man(ManArgs { command: None }).unwrap_or_else(|e| panic!("{e}"));
        for sub in Cli::command().get_subcommands() {
            assert!(bash.contains(sub.get_name()), "{}", sub.get_name());
            // roff writes a `-` as `\-`.
            let roff = sub.get_name().replace('-', "\\-");
            assert!(page.contains(&roff), "{roff} in\n{page}");
        }
        let serve = man(ManArgs {
            command: Some("serve".into()),
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            serve.contains("backfill\\-serve") && serve.contains("metrics\\-addr"),
            "{serve}"
        );
        assert!(man(ManArgs {
            command: Some("nope".into())
        })
        .is_err());
    }
}
