//! `--prompt-cache`: this build cannot serialise a context's state, so an existing session file
//! is an error and a new one is never written (said once, instead of silently).

use common::{log_err, log_inf, log_wrn};

const F: &str = "llama_completion";

pub struct Session {
    path: String,
}

impl Session {
    /// The start-of-run messages of completion.cpp for the session file.
    pub fn open(path: &str) -> Result<Session, ()> {
        if !path.is_empty() {
            log_inf!("{F}: attempting to load saved session from '{path}'\n");
            match std::fs::metadata(path) {
                Err(_) => log_inf!("{F}: session file does not exist, will create.\n"),
                Ok(m) if m.len() == 0 => {
                    log_inf!("{F}: The session file is empty. A new session will be initialized.\n")
                }
                Ok(_) => {
                    log_err!("{F}: failed to load session file '{path}'\n");
                    return Err(());
                }
            }
        }
        Ok(Session {
            path: path.to_string(),
        })
    }

    /// Context shifting invalidates the cache (`path_session.clear()`).
    pub fn disable(&mut self) {
        self.path.clear();
    }

    pub fn finish(&mut self, _save_all: bool) {
        if !self.path.is_empty() {
            log_wrn!(
                "{F}: saving session files is not supported by this build; '{}' was not written\n",
                self.path
            );
        }
    }
}
