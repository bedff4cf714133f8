//! Secrets never reach logs or status output: URLs are shown with their password replaced.
//!
//! Every place that prints a connection URL or an error text that may echo one goes
//! through [`redact_url`] or [`redact_text`].

/// `mysql://user:secret@host:3306/db` -> `mysql://user:***@host:3306/db`.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let Some(at) = rest.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    match userinfo.find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &userinfo[..colon],
            &rest[at..]
        ),
        None => url.to_string(),
    }
}

/// Redacts every URL-looking token inside a free text (error messages).
pub fn redact_text(text: &str) -> String {
    text.split(' ')
        .map(redact_token)
        .collect::<Vec<_>>()
        .join(" ")
}

fn redact_token(token: &str) -> String {
    match token.find("://") {
        Some(start) => {
            let prefix_start = token[..start]
                .rfind(|c: char| !c.is_ascii_alphanumeric() && c != '+')
                .map_or(0, |i| i + 1);
            format!(
                "{}{}",
                &token[..prefix_start],
                redact_url(&token[prefix_start..])
            )
        }
        None => token.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_replaced() {
        assert_eq!(
            redact_url("mysql://u:p%40ss@127.0.0.1:3306/db"),
            "mysql://u:***@127.0.0.1:3306/db"
        );
        assert_eq!(redact_url("mysql://u@h/db"), "mysql://u@h/db");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(
            redact_text("cannot connect to 'mysql://a:b@h:1/x': refused"),
            "cannot connect to 'mysql://a:***@h:1/x': refused"
        );
    }
}
